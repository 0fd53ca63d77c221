// Two `tessera serve --store` processes on one real PostgreSQL database (tests/testing/postgres_server.h):
// one leads, the follower serves reads and answers writes 503 naming the leader; after kill -9 of the
// leader the follower takes over within the lease plus 2 s with every acknowledged job, its idempotency
// key and its placement; the restarted old leader follows.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "testing/postgres_server.h"
#include "testing/serve_process.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using testing::ServeProcess;

constexpr int kLease = 2;

std::string Unquoted(const std::string& s) {
  return s.size() >= 2 && s[0] == '"' ? s.substr(1, s.size() - 2) : s;
}

class ReplicaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera-replica-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    for (const char* d : {"a", "b", "c"}) fs::create_directories(dir_ / d);
    uri_ = testing::PostgresServer::Shared().NewDatabase();
    ASSERT_FALSE(uri_.empty()) << "PostgreSQL: " << testing::PostgresServer::Shared().error();
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<std::string> Args() const {
    return {"--store",
            uri_,
            "--lease-seconds",
            std::to_string(kLease),
            "--admin-token-file",
            (dir_ / "admin-token").string()};
  }
  std::string Admin() const {
    std::ifstream f(dir_ / "admin-token");
    std::string t;
    f >> t;
    return t;
  }
  static nlohmann::json Leader(const ServeProcess& s, const std::string& token) {
    auto r = s.Get("/api/v1/leader", token);
    nlohmann::json j =
        r && r->status == 200 ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
    return j.is_object() ? j : nlohmann::json::object();
  }
  // Waits up to `seconds` for `s` to answer /readyz 200; the seconds it took, or -1.
  static double WaitLeading(const ServeProcess& s, double seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (took > seconds) return -1;
      auto r = s.Get("/readyz", "");
      if (r && r->status == 200) return took;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  fs::path dir_;
  std::string uri_;
};

TEST_F(ReplicaTest, FollowerRedirectsWritesAndTakesOverAfterKill9) {
  ServeProcess a(dir_ / "a", Args());
  ASSERT_TRUE(a.Start());
  ASSERT_GE(WaitLeading(a, 20), 0) << "the only replica never led";
  ServeProcess b(dir_ / "b", Args());
  ASSERT_TRUE(b.Start());
  const std::string admin = Admin();
  ASSERT_FALSE(admin.empty());
  EXPECT_EQ(b.Get("/readyz", "")->status, 503);
  EXPECT_EQ(b.Get("/api/v1/leader", "")->status, 401);
  nlohmann::json lb = Leader(b, admin);
  EXPECT_EQ(lb.value("role", ""), "follower");
  EXPECT_EQ(lb.value("leader", ""), a.Url());
  EXPECT_EQ(lb.value("self", ""), b.Url());
  nlohmann::json la = Leader(a, admin);
  EXPECT_EQ(la.value("role", ""), "leader");
  const int64_t epoch = la.value("epoch", 0);
  EXPECT_GE(epoch, 1);

  ASSERT_EQ(a.Post("/api/v1/teams", {{"name", "vision"}, {"guaranteed_gpus", 16}}, admin)->status, 201);
  const nlohmann::json job = {{"name", "long"},   {"class", "training"}, {"gpus_per_worker", 2},
                              {"memory_gib", 40}, {"duration_s", 36000}, {"team", "vision"}};
  auto sent = b.Post("/api/v1/jobs", job, admin, "key-1");  // to the follower: not taken
  ASSERT_TRUE(sent);
  EXPECT_EQ(sent->status, 503);
  EXPECT_EQ(sent->get_header_value("Retry-After"), "1");
  EXPECT_EQ(sent->get_header_value("Tessera-Leader"), a.Url());
  EXPECT_TRUE(nlohmann::json::parse(sent->body, nullptr, false)["error"].contains("message"));
  auto created = a.Post("/api/v1/jobs", job, admin, "key-1");
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 201) << created->body;
  const std::string id = nlohmann::json::parse(created->body)["id"].dump();  // as the API writes it
  // The follower reads it from the database (its view lags by up to a second), once it runs.
  nlohmann::json seen = nlohmann::json::object();
  for (int i = 0; i < 60 && seen.value("state", "") != "Running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto r = b.Get("/api/v1/jobs/" + Unquoted(id), admin);
    if (r && r->status == 200) seen = nlohmann::json::parse(r->body);
  }
  ASSERT_EQ(seen.value("state", ""), "Running") << seen.dump();

  a.Kill();  // SIGKILL: no release of the lease
  const double took = WaitLeading(b, kLease + 2);
  EXPECT_GE(took, 0) << "no takeover within the lease + 2 s";
  nlohmann::json now = Leader(b, admin);
  EXPECT_EQ(now.value("role", ""), "leader");
  EXPECT_GT(now.value("epoch", 0), epoch);
  auto again = b.Post("/api/v1/jobs", job, admin, "key-1");  // the key names the same job
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200) << again->body;
  EXPECT_EQ(nlohmann::json::parse(again->body)["id"].dump(), id);
  auto after = nlohmann::json::parse(b.Get("/api/v1/jobs/" + Unquoted(id), admin)->body);
  EXPECT_EQ(after.value("state", ""), "Running");
  EXPECT_EQ(after["started_at"], seen["started_at"]);
  EXPECT_EQ(after["placements"], seen["placements"]);

  ServeProcess c(dir_ / "c", Args());  // the old leader back: it follows
  ASSERT_TRUE(c.Start());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(c.Get("/readyz", "")->status, 503);
  EXPECT_EQ(Leader(c, admin).value("leader", ""), b.Url());
  EXPECT_EQ(Leader(b, admin).value("role", ""), "leader");
}

// SIGTERM of the leader lets its lease go at once: the follower leads well before the lease would run out.
TEST_F(ReplicaTest, ACleanShutdownHandsOverAtOnce) {
  std::vector<std::string> args = Args();
  args[3] = "30";  // --lease-seconds
  ServeProcess a(dir_ / "a", args);
  ASSERT_TRUE(a.Start());
  ASSERT_GE(WaitLeading(a, 20), 0);
  ServeProcess b(dir_ / "b", args);
  ASSERT_TRUE(b.Start());
  EXPECT_EQ(b.Get("/readyz", "")->status, 503);
  EXPECT_EQ(a.Stop(SIGTERM), 0);
  EXPECT_GE(WaitLeading(b, 5), 0) << "the follower waited for the lease to run out";
}

}  // namespace
}  // namespace tessera
