// A replica waiting for the leader Lease: alive for liveness probes, not ready, serving nothing; stopping
// frees the address for the API server.
#include "server/standby_health.h"

#include <gtest/gtest.h>
#include <httplib.h>

namespace tessera {
namespace {

TEST(StandbyHealth, AliveNotReadyAndServesNothing) {
  auto none = StandbyHealth::Start("");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->get(), nullptr);
  auto s = StandbyHealth::Start("127.0.0.1:0");
  ASSERT_TRUE(s.ok()) << s.error();
  const int port = (*s)->port();
  ASSERT_GT(port, 0);
  httplib::Client c("127.0.0.1", port);
  auto health = c.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto ready = c.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_NE(ready->body.find("standby"), std::string::npos) << ready->body;
  auto api = c.Post("/api/v1/jobs", "{}", "application/json");
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 503);
  (*s)->Stop();
  (*s)->Stop();
  EXPECT_FALSE(c.Get("/healthz")) << "stopped: the address no longer answers";
  // The leader's API server (SO_REUSEADDR, as ApiServer sets) binds the same address once the standby
  // stopped, past the standby's connections in TIME_WAIT.
  httplib::Server next;
  next.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  EXPECT_TRUE(next.bind_to_port("127.0.0.1", port));
}

}  // namespace
}  // namespace tessera
