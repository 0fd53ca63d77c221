// The API client's connection pool and rate limit, and the Event recorder, against the fake API server.
#include "k8s/api/api_client.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "k8s/api/events.h"
#include "k8s/api/kubeconfig.h"
#include "k8s/fake_apiserver.h"

namespace tessera {
namespace {

using json = nlohmann::json;
using testing::FakeApiServer;

class ApiClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tessera-api-client-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    const std::string path = (dir_ / "kubeconfig").string();
    fake_.WriteKubeconfig(path, "ml");
    auto k = LoadKubeconfig(path);
    ASSERT_TRUE(k.ok()) << k.error();
    api_ = std::make_unique<ApiClient>(*k);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  size_t Events() const { return fake_.List("events").size(); }

  FakeApiServer fake_;
  std::filesystem::path dir_;
  std::unique_ptr<ApiClient> api_;
};

TEST_F(ApiClientTest, RequestsOneAfterAnotherShareOneConnection) {
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(api_->Get("/api/v1/nodes").ok()) << i;
  EXPECT_EQ(api_->connections_opened(), 1);
}

TEST_F(ApiClientTest, ConcurrentRequestsUseAtMostThePoolsConnections) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) ok += api_->Get("/api/v1/pods").ok();
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 160);
  EXPECT_GE(api_->connections_opened(), 1);
  EXPECT_LE(api_->connections_opened(), ApiClient::kMaxConnections);
}

TEST_F(ApiClientTest, RateLimitSpacesRequestsAfterTheBurst) {
  api_->set_rate_limit(20, 2);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(api_->Get("/api/v1/nodes").ok());
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(took, 0.2) << "2 at once, then 5 at 20/s: at least 0.25 s";
}

// Events go out off the caller's path; beyond the queue's bound they are dropped and counted.
TEST_F(ApiClientTest, EventRecorderQueuesDropsBeyondItsBoundAndPostsTheRest) {
  fake_.HoldWrites("/events", 0.6);
  EventRecorder rec(api_.get(), "tessera", /*qps=*/1000, /*burst=*/100, /*max_queued=*/3);
  const json pod = {{"kind", "Pod"}, {"metadata", {{"name", "p"}, {"namespace", "ml"}, {"uid", "u"}}}};
  const auto start = std::chrono::steady_clock::now();
  rec.Record(pod, "Normal", "Scheduled", "first");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the first one is being posted (held)
  for (int i = 0; i < 9; ++i) rec.Record(pod, "Normal", "Scheduled", "more");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.9)
      << "Record never waits for the API server";
  EXPECT_EQ(rec.dropped(), 6);
  rec.Flush();
  EXPECT_EQ(rec.posted(), 4);
  EXPECT_EQ(Events(), 4u);
}

TEST_F(ApiClientTest, EventRecorderKeepsItsRate) {
  EventRecorder rec(api_.get(), "tessera", /*qps=*/20, /*burst=*/1);
  const json pod = {{"kind", "Pod"}, {"metadata", {{"name", "p"}, {"namespace", "ml"}, {"uid", "u"}}}};
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) rec.Record(pod, "Warning", "FailedScheduling", "no node");
  rec.Flush();
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.15);
  EXPECT_EQ(Events(), 5u);
}

}  // namespace
}  // namespace tessera
