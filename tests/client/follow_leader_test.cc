// ApiClient against replicas: a write sent to a follower (503, Tessera-Leader) goes to the leader, and later
// calls stay there; a 503 without a leader is retried after Retry-After; any other 503 is the answer.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "client/api_client.h"

namespace tessera::client {
namespace {

// A loopback HTTP server on a free port, serving until destroyed.
class LoopbackServer {
 public:
  explicit LoopbackServer(const std::function<void(httplib::Server&)>& routes) {
    routes(server_);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~LoopbackServer() {
    server_.stop();
    thread_.join();
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(FollowLeaderTest, AWriteToAFollowerGoesToTheLeaderAndStaysThere) {
  std::atomic<int> leader_calls{0}, follower_calls{0};
  LoopbackServer leader([&](httplib::Server& s) {
    s.Post("/api/v1/jobs", [&](const httplib::Request& req, httplib::Response& res) {
      ++leader_calls;
      EXPECT_EQ(req.get_header_value("Idempotency-Key"), "k1");
      res.status = 201;
      res.set_content(R"({"id": "7"})", "application/json");
    });
    s.Get(R"(/api/v1/jobs/7)", [&](const httplib::Request&, httplib::Response& res) {
      ++leader_calls;
      res.set_content(R"({"id": "7"})", "application/json");
    });
  });
  LoopbackServer follower([&](httplib::Server& s) {
    s.Post("/api/v1/jobs", [&](const httplib::Request&, httplib::Response& res) {
      ++follower_calls;
      res.status = 503;
      res.set_header("Retry-After", "1");
      res.set_header("Tessera-Leader", leader.Url());
      res.set_content(R"({"error": {"code": "Unavailable", "message": "not the leader"}})",
                      "application/json");
    });
  });
  ApiClient c({follower.Url(), "tok"});
  ApiResponse r = c.SubmitJob({{"name", "a"}}, "k1");
  ASSERT_EQ(r.kind, ApiResponse::Kind::kOk) << r.error;
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.body.value("id", ""), "7");
  EXPECT_EQ(follower_calls.load(), 1);
  EXPECT_EQ(leader_calls.load(), 1);
  r = c.GetJob("7");  // later calls go to the leader directly
  EXPECT_EQ(r.kind, ApiResponse::Kind::kOk);
  EXPECT_EQ(follower_calls.load(), 1);
  EXPECT_EQ(leader_calls.load(), 2);
}

TEST(FollowLeaderTest, NoLeaderYetIsRetriedAndOther503sAreTheAnswer) {
  std::atomic<int> calls{0};
  LoopbackServer replica([&](httplib::Server& s) {
    s.Post("/api/v1/jobs", [&](const httplib::Request&, httplib::Response& res) {
      if (++calls < 3) {  // an election under way: no leader known
        res.status = 503;
        res.set_header("Retry-After", "1");
        return res.set_content(R"({"error": {"code": "Unavailable", "message": "no leader yet"}})",
                               "application/json");
      }
      res.status = 201;
      res.set_content(R"({"id": "1"})", "application/json");
    });
    s.Get("/api/v1/queue", [&](const httplib::Request&, httplib::Response& res) {
      ++calls;
      res.status = 503;  // unavailable for another reason: answered as it is
      res.set_content(R"({"error": {"code": "Unavailable", "message": "store down"}})", "application/json");
    });
  });
  ApiClient c({replica.Url(), "tok"});
  ApiResponse r = c.SubmitJob({{"name", "a"}}, "");
  EXPECT_EQ(r.kind, ApiResponse::Kind::kOk) << r.error;
  EXPECT_EQ(calls.load(), 3);
  r = c.Queue();
  EXPECT_EQ(r.kind, ApiResponse::Kind::kRefused);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(calls.load(), 4);
}

}  // namespace
}  // namespace tessera::client
