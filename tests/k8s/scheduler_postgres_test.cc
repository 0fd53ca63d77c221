// `tessera k8s scheduler --store postgresql://...`: the real scheduler against the in-process fake API
// server with its state in a real PostgreSQL server (testing/postgres_server.h). Placements land in the
// database under the database's lease; a second scheduler on the same database, once the first stopped,
// takes the lease at a higher epoch, adopts the bound pods (same nodes, no job written twice) and places
// more.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "k8s/api/kubeconfig.h"
#include "k8s/fake_apiserver.h"
#include "k8s/scheduler.h"
#include "store/postgres_store.h"
#include "testing/postgres_server.h"

namespace tessera {
namespace {

using json = nlohmann::json;

json PgSchedNode(const std::string& name) {
  json alloc = {{"cpu", "255500m"}, {"memory", "2112998564Ki"}, {"pods", "110"}, {"nvidia.com/gpu", "8"}};
  return {{"metadata",
           {{"name", name},
            {"labels",
             {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"},
              {"nvidia.com/gpu.count", "8"},
              {"nvidia.com/mig.capable", "true"},
              {"nvidia.com/mig.strategy", "mixed"},
              {"nvidia.com/mig.config", "all-disabled"},
              {"nvidia.com/mig.config.state", "success"},
              {"tessera.io/leaf", "leaf-a"}}}}},
          {"spec", json::object()},
          {"status",
           {{"allocatable", alloc},
            {"capacity", alloc},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

json PgSchedPod(const std::string& name, int gpus) {
  return {{"metadata", {{"name", name}, {"namespace", "ml"}, {"labels", json::object()}}},
          {"spec",
           {{"schedulerName", "tessera"},
            {"priorityClassName", "tessera-serving"},
            {"containers",
             {{{"name", "main"},
               {"image", "trainer"},
               {"resources",
                {{"requests", {{"nvidia.com/gpu", std::to_string(gpus)}, {"cpu", "4"}, {"memory", "16Gi"}}},
                 {"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}}}}}};
}

class SchedulerPostgres : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::PostgresServer& pg = testing::PostgresServer::Shared();
    ASSERT_TRUE(pg.error().empty()) << pg.error();
    uri_ = pg.NewDatabase();
    ASSERT_FALSE(uri_.empty()) << pg.error();
    dir_ = std::filesystem::temp_directory_path() / ("tessera-k8s-pg-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    api_.Create("priorityclasses", {{"metadata", {{"name", "tessera-serving"}}}, {"value", 500}});
    for (int i = 0; i < 3; ++i) api_.Create("nodes", PgSchedNode("g" + std::to_string(i)));
  }
  void TearDown() override {
    for (const std::string& o : api_.Overcommits()) ADD_FAILURE() << "overcommitted: " << o;
    if (scheduler_) scheduler_->Stop();
    scheduler_.reset();
    std::filesystem::remove_all(dir_);
  }
  void StartAs(const std::string& identity) {
    const std::string kubeconfig = (dir_ / "kubeconfig").string();
    api_.WriteKubeconfig(kubeconfig);
    auto kube = LoadKubeconfig(kubeconfig, "");
    ASSERT_TRUE(kube.ok()) << kube.error();
    SchedulerOptions o;
    o.store = uri_;
    o.identity = identity;
    auto s = K8sScheduler::Start(*kube, o);
    ASSERT_TRUE(s.ok()) << s.error();
    scheduler_ = std::move(s).value();
  }
  bool Eventually(const std::function<bool()>& done) {
    for (int i = 0; i < 600 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return done();
  }
  std::string NodeOf(const std::string& pod) {
    auto p = api_.Get("pods", "ml", pod);
    return p && (*p)["spec"].contains("nodeName") ? (*p)["spec"]["nodeName"].get<std::string>() : "";
  }
  // The database's jobs: id -> (state, number of tasks placed), read by a store of its own.
  std::map<int64_t, std::pair<std::string, size_t>> StoredJobs() {
    std::map<int64_t, std::pair<std::string, size_t>> out;
    auto store = OpenPostgresStore(uri_);
    EXPECT_TRUE(store.ok()) << store.error();
    if (!store.ok()) return out;
    auto state = (*store)->Load();
    EXPECT_TRUE(state.ok()) << state.error();
    if (state.ok())
      for (const JobRow& j : state->jobs) out[j.id] = {j.state, j.placements.size()};
    (*store)->Close();
    return out;
  }
  int64_t Epoch() {
    auto lease = LeaderLease::Open(uri_, "probe", "");
    EXPECT_TRUE(lease.ok()) << lease.error();
    if (!lease.ok()) return -1;
    auto s = (*lease)->Read();
    return s.ok() ? s->epoch : -1;
  }

  std::string uri_;
  std::filesystem::path dir_;
  testing::FakeApiServer api_;
  std::unique_ptr<K8sScheduler> scheduler_;
};

TEST_F(SchedulerPostgres, PlacementsLiveInTheDatabaseAndTheNextLeaderAdoptsThem) {
  StartAs("pg-a");
  api_.Create("pods", PgSchedPod("big", 8));
  api_.Create("pods", PgSchedPod("small", 4));
  ASSERT_TRUE(Eventually([&] { return !NodeOf("big").empty() && !NodeOf("small").empty(); }));
  const std::string big = NodeOf("big"), small = NodeOf("small");
  auto running = [](const std::map<int64_t, std::pair<std::string, size_t>>& jobs) {
    int n = 0;
    for (const auto& [id, j] : jobs) n += j.first == "Running" && j.second > 0;
    return n;
  };
  std::map<int64_t, std::pair<std::string, size_t>> first;
  ASSERT_TRUE(Eventually([&] { return running(first = StoredJobs()) == 2; }))
      << first.size() << " jobs stored";
  EXPECT_EQ(first.size(), 2u);
  const int64_t epoch = Epoch();
  EXPECT_GE(epoch, 1);

  scheduler_->Stop();
  scheduler_.reset();
  StartAs("pg-b");
  EXPECT_GT(Epoch(), epoch);
  api_.Create("pods", PgSchedPod("late", 8));
  ASSERT_TRUE(Eventually([&] { return !NodeOf("late").empty(); }));
  EXPECT_EQ(NodeOf("big"), big);
  EXPECT_EQ(NodeOf("small"), small);
  EXPECT_NE(NodeOf("late"), big);
  std::map<int64_t, std::pair<std::string, size_t>> second;
  ASSERT_TRUE(Eventually([&] { return running(second = StoredJobs()) == 3; }))
      << second.size() << " jobs stored";
  EXPECT_EQ(second.size(), 3u) << "a bound pod's job was written again";
  for (const auto& [id, j] : first) EXPECT_EQ(second.count(id), 1u) << "job " << id << " is gone";
}

}  // namespace
}  // namespace tessera
