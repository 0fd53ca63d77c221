// Parity: the service replaying a shipped scenario (replay/replay.h) writes the same decisions as the
// simulator's run of it (sim/simulator.h), line for line; and scenarios the service does not model are
// refused with a message.
#include "replay/replay.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "sim/multi_tenant.h"
#include "store/store.h"
#include "testing/paths.h"

namespace tessera {
namespace {

Scenario Shipped(const std::string& name, int64_t horizon_s) {
  auto s = LoadScenario(std::string(::tessera::testing::SourceDir()) + "/examples/scenarios/" + name, Catalog::Default());
  EXPECT_TRUE(s.ok()) << s.error();
  Scenario sc = std::move(s).value();
  sc.sim.horizon_s = horizon_s;
  sc.sim.warmup_s = 0;
  sc.seeds = {1};
  sc.policies = {"tessera"};
  return sc;
}

std::vector<std::string> Simulated(Scenario sc) {
  sc.sim.record_decisions = true;
  if (sc.IsMultiTenant()) {
    std::vector<std::string> lines;
    auto r = RunMultiTenantScenario(sc, {"tessera"}, Catalog::Default(), &lines);
    EXPECT_TRUE(r.ok()) << r.error();
    return lines;
  }
  auto out = RunScenario(sc, {"tessera"}, Catalog::Default());
  EXPECT_TRUE(out.ok()) << out.error();
  return out.ok() ? out->variants[0].runs[0][0].decisions : std::vector<std::string>{};
}

std::vector<std::string> Replayed(Scenario sc, const std::string& name) {
  auto replay = Replay::Prepare(std::move(sc), name, 1, Catalog::Default());
  EXPECT_TRUE(replay.ok()) << replay.error();
  if (!replay.ok()) return {};
  const auto dir = std::filesystem::temp_directory_path() / ("tessera-replay-" + std::to_string(getpid()) + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ServiceConfig cfg = (*replay)->Config();
  cfg.catalog = &Catalog::Default();
  auto store = OpenSqliteStore((dir / "r.db").string());
  EXPECT_TRUE(store.ok());
  auto svc = Service::Start(std::move(cfg), std::move(store).value(), (*replay)->clock(), (*replay)->backend());
  EXPECT_TRUE(svc.ok()) << svc.error();
  EXPECT_TRUE((*svc)->BootstrapAdmin().ok());
  std::vector<std::string> lines;
  const Status st = (*replay)->Run(**svc, [&](const std::string& l) { lines.push_back(l); });
  EXPECT_TRUE(st.ok()) << st.message();
  (*svc)->Stop();
  std::filesystem::remove_all(dir);
  return lines;
}

void ExpectSame(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "line " << i + 1;
}

int Count(const std::vector<std::string>& lines, const std::string& needle) {
  int n = 0;
  for (const std::string& l : lines) n += l.find(needle) != std::string::npos;
  return n;
}

TEST(Replay, MixedScenarioMakesTheSimulatorsDecisions) {
  const Scenario sc = Shipped("mixed-inference-training.yaml", 3 * 3600);
  const auto sim = Simulated(sc);
  ASSERT_GT(sim.size(), 100u);
  EXPECT_GT(Count(sim, "\"mig\":\""), 0);  // MIG placements are part of what is compared
  ExpectSame(sim, Replayed(sc, "mixed"));
}

TEST(Replay, MultiTenantScenarioMakesTheSimulatorsDecisions) {
  const Scenario sc = Shipped("multi-tenant.yaml", 2 * 3600);
  const auto sim = Simulated(sc);
  ASSERT_GT(sim.size(), 100u);
  EXPECT_GT(Count(sim, "\"event\":\"preempt\""), 0);
  ExpectSame(sim, Replayed(sc, "multi-tenant"));
}

// A trace with cancellations (cancel_s, seconds after arrival): a running gang, a MIG replica, a job that
// waits, one cancelled as it arrives and one whose cancel comes after it ended, on 2 H100 nodes and a MIG
// A100 node with a production job that preempts training. Both drivers cancel at the same instants.
Scenario WithCancellations(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "cluster.yaml")
      << "name: cancels\n"
         "defaults: {cpu: 128, memory_gib: 1024, spine: spine-0, tier: reserved, interconnect: nvswitch}\n"
         "nodes:\n"
         "  - {name: h100, count: 2, gpu: h100-80gb, gpus: 8, leaf: leaf-0}\n"
         "  - {name: a100-mig, count: 1, gpu: a100-80gb, gpus: 4, leaf: leaf-0, mig: {enabled: true, config: "
         "all-balanced}}\n";
  std::ofstream trace(dir / "trace.jsonl");
  trace << R"({"format": "tessera-trace", "version": 1})" << "\n";
  int id = 0;
  auto job = [&](nlohmann::json extra) {
    nlohmann::json j = {{"id", id++}, {"submit_s", 0}, {"class", "training"}, {"team", "research"},
                        {"priority", 400}, {"tasks", 1}, {"gpus_per_task", 1}, {"compute_milli", 900},
                        {"memory_mib", 40000}, {"cpu_milli", 4000}, {"host_memory_mib", 32768},
                        {"duration_s", 3600}, {"gpu_kinds", {"h100-80gb"}}};
    j.update(extra);
    trace << j.dump() << "\n";
  };
  job({{"tasks", 2}, {"gpus_per_task", 4}, {"duration_s", 5400}, {"checkpointable", true}, {"cancel_s", 2400}});
  job({{"gpus_per_task", 8}, {"duration_s", 5400}, {"checkpointable", true}});
  for (int i = 0; i < 4; ++i)  // MIG replicas; two are cancelled while they run
    job({{"submit_s", 60 + 10 * i}, {"team", "serving"}, {"priority", 800}, {"gpus_per_task", 0},
         {"compute_milli", 100}, {"memory_mib", 8000}, {"duration_s", 4000}, {"gpu_kinds", {"a100-80gb"}},
         {"class", "inference"}, {"cancel_s", i % 2 == 0 ? 600 + 100 * i : 9000}});
  job({{"submit_s", 900}, {"team", "prod"}, {"priority", 1000}, {"latency_sensitive", true}, {"gpus_per_task", 8},
       {"compute_milli", 600}, {"memory_mib", 60000}, {"duration_s", 1800}, {"class", "inference"}});
  job({{"submit_s", 1000}, {"gpus_per_task", 8}, {"duration_s", 1200}, {"cancel_s", 300}});  // waits, cancelled
  job({{"submit_s", 1200}, {"gpus_per_task", 2}, {"duration_s", 1200}, {"cancel_s", 0}});   // on arrival
  trace.close();
  const std::string text = "name: cancels\ncluster: " + (dir / "cluster.yaml").string() + "\ntrace: " +
                           (dir / "trace.jsonl").string() +
                           "\nseeds: 1\nfirst_seed: 1\nthreads: 1\npolicies: [tessera]\nhorizon_h: 0\n";
  auto sc = ParseScenario(text, "cancels.yaml", dir.string(), Catalog::Default());
  EXPECT_TRUE(sc.ok()) << sc.error();
  return sc.ok() ? std::move(sc).value() : Scenario{};
}

TEST(Replay, CancellationsInTheTraceMakeTheSameDecisions) {
  const auto dir = std::filesystem::temp_directory_path() / ("tessera-cancels-" + std::to_string(getpid()));
  const Scenario sc = WithCancellations(dir);
  ASSERT_FALSE(sc.trace_jobs.empty());
  const auto sim = Simulated(sc);
  std::filesystem::remove_all(dir);
  // The gang (job 0), replicas 2 and 4, the waiting job 7 and job 8 on arrival; replica 3's and 5's cancels
  // come after they ended.
  EXPECT_EQ(Count(sim, "\"event\":\"cancel\""), 5) << ::testing::PrintToString(sim);
  EXPECT_GT(Count(sim, "\"event\":\"preempt\""), 0);
  EXPECT_GT(Count(sim, "\"mig\":\""), 0);
  EXPECT_EQ(Count(sim, "\"job\":\"8\""), 1) << "cancelled as it arrived, never started";
  ExpectSame(sim, Replayed(sc, "cancels"));
}

TEST(Replay, RefusesWhatTheServiceDoesNotModel) {
  auto tiers = Replay::Prepare(std::string(::tessera::testing::SourceDir()) + "/examples/scenarios/spot-training.yaml", 0,
                               Catalog::Default());
  ASSERT_FALSE(tiers.ok());
  EXPECT_NE(tiers.error().find("tiers"), std::string::npos) << tiers.error();
  // The opportunistic tier is the simulator's (sim/harvest.h): a scenario whose tessera harvests is refused,
  // the shipped one (its tessera-harvest variant aside) is not.
  Scenario harvesting = Shipped("mixed-inference-training.yaml", 3600);
  EXPECT_TRUE(Replay::Prepare(harvesting, "mixed", 0, Catalog::Default()).ok());
  harvesting.sim.harvest.enabled = true;
  auto refused = Replay::Prepare(harvesting, "mixed", 0, Catalog::Default());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("opportunistic tier"), std::string::npos) << refused.error();
}

// Users' time limits are estimates (the shipped scenarios draw them, 1-4x the duration): the replay submits
// each job's limit as time_limit_s, so the service plans with the same limits and learns the same scale.
TEST(Replay, TimeLimitsAreSubmittedAsTheUsersEstimates) {
  Scenario sc = Shipped("mixed-inference-training.yaml", 3600);
  ASSERT_LT(sc.sim.time_limit_factor_min, sc.sim.time_limit_factor_max);
  SimOptions o = sc.sim;
  o.time_limit_seed = 1;
  const std::vector<TraceJob> jobs = JobsFor(sc, sc.variants.front(), 1);
  int over = 0;
  for (size_t i = 0; i < jobs.size() && i < 200; ++i) {
    const int64_t limit = SimTimeLimit(jobs[i], i, o);
    ASSERT_GE(limit, jobs[i].duration_s);
    ASSERT_LE(limit, 4 * jobs[i].duration_s + 1);
    over += limit > jobs[i].duration_s * 2;
  }
  EXPECT_GT(over, 20) << "most limits over-estimate";
}

}  // namespace
}  // namespace tessera
