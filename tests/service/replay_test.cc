// Parity: the service replaying a shipped scenario (service/replay.h) writes the same decisions as the
// simulator's run of it (sim/simulator.h), line for line; and scenarios the service does not model are
// refused with a message.
#include "service/replay.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

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
