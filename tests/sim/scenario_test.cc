// Scenario files: parsing errors, the static-mig cluster, a small two-policy smoke run, and the
// utilisation sanity anchors (training only ~0.9; only light inference on whole GPUs < 0.25).
#include "sim/scenario.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "sim/metrics.h"

namespace tessera {
namespace {

std::string TempDir() {
  auto d = std::filesystem::temp_directory_path() / ("tessera-sim-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  std::ofstream(d / "c.yaml") << "name: c16\ndefaults: {gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch}\n"
                                 "nodes:\n  - {name: h, count: 2, gpu: h100-80gb, leaf: leaf-0}\n"
                                 "  - {name: a, count: 2, gpu: a100-80gb, leaf: leaf-1}\n";
  return d.string();
}

const char* kBase =
    "name: smoke\ncluster: c.yaml\nseeds: 2\nthreads: 2\npolicies: [tessera, k8s-default]\n"
    "horizon_h: 72\nwarmup_h: 12\narrivals: {process: backlog, depth: 16}\n";

Result<Scenario> Parse(const std::string& text) {
  return ParseScenario(text, "s.yaml", TempDir(), Catalog::Default());
}

TEST(ScenarioTest, BadInput) {
  struct Case {
    std::string text, expect;
  } cases[] = {
      {"name: x\n", "field 'cluster': required"},
      {"name: x\ncluster: nope.yaml\nworkload: {}\nhorizon_h: 1\n", "field 'cluster': cannot open"},
      {std::string(kBase) + "colour: red\nworkload: {}\n", "unknown field 'colour'"},
      {std::string(kBase), "exactly one of 'workload', 'trace', 'dlrm'"},
      {std::string(kBase) + "workload: {inference_share: 2}\n", "field 'inference_share'"},
      {std::string(kBase) + "workload: {traffic: heavy}\n", "field 'traffic'"},
      {std::string(kBase) + "workload: {light_compute: [0.3, 0.1]}\n", "field 'light_compute'"},
      {"name: x\ncluster: c.yaml\npolicies: [magic]\nworkload: {}\nhorizon_h: 1\n", "unknown policy 'magic'"},
      {std::string(kBase) + "workload: {}\nsweep: {traffic: [sunny]}\n", "field 'traffic'"},
      {std::string(kBase) + "workload: {}\ngang_backfill: [magic]\n", "field 'gang_backfill': unknown policy 'magic'"},
      {std::string(kBase) + "workload: {}\ntime_limit_factor: [0.5, 2]\n", "field 'time_limit_factor'"},
      {std::string(kBase) + "workload: {}\ntime_limit_factor: [3, 2]\n", "field 'time_limit_factor'"},
  };
  for (const Case& c : cases) {
    auto r = Parse(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().find(c.expect), std::string::npos) << r.error() << " / expected " << c.expect;
  }
}

TEST(ScenarioTest, StaticMigClusterSpreadsShare) {
  auto s = Parse(std::string(kBase) + "workload: {}\n");
  ASSERT_TRUE(s.ok()) << s.error();
  StaticMigSetup m;
  m.share = 0.5;
  Cluster c = ClusterForPolicy(s->cluster, Catalog::Default(), "static-mig", m);
  int mig = 0;
  for (const Node& n : c.nodes) mig += n.mig_enabled;
  EXPECT_EQ(mig, 2);
  EXPECT_TRUE(c.nodes[1].mig_enabled && c.nodes[3].mig_enabled);
  Cluster same = ClusterForPolicy(s->cluster, Catalog::Default(), "tessera", m);
  for (const Node& n : same.nodes) EXPECT_FALSE(n.mig_enabled);
}

TEST(ScenarioTest, SmokeTwoPolicies) {
  auto s = Parse(std::string(kBase) + "workload: {inference_share: 0.5, traffic: light}\n");
  ASSERT_TRUE(s.ok()) << s.error();
  auto out = RunScenario(*s, s->policies, Catalog::Default());
  ASSERT_TRUE(out.ok()) << out.error();
  const nlohmann::json j = OutcomeJson(*out, false);
  ASSERT_EQ(j["results"].size(), 2u);
  for (const auto& p : j["results"]) {
    EXPECT_GT(p["gpu_utilization"]["mean"].get<double>(), 0.0);
    EXPECT_LE(p["gpu_utilization"]["mean"].get<double>(), p["gpu_allocation"]["mean"].get<double>() + 1e-9);
    EXPECT_TRUE(p["effective_training_throughput"].is_number());
    EXPECT_TRUE(p["by_class"].contains("inference"));
    EXPECT_TRUE(p["by_class"].contains("training"));
  }
  // MIG-aware packing of light inference beats whole GPUs on real utilisation.
  EXPECT_GT(j["results"][0]["gpu_utilization"]["mean"].get<double>(),
            j["results"][1]["gpu_utilization"]["mean"].get<double>());
  EXPECT_EQ(j["results"][0]["oom_events"]["mean"].get<double>(), 0.0);
}

// Conservative gang backfill keeps large training from piling up in the backlog: the served mix stays near
// the demanded one, and more 8-GPU gangs are served than with the greedy cycle.
TEST(ScenarioTest, GangBackfillKeepsTheServedMix) {
  const std::string w =
      "workload: {inference_share: 0.5, traffic: mixed, training_gpus: {1: 0.5, 8: 0.5}}\n";
  auto greedy = Parse(std::string(kBase) + w);
  auto backfill = Parse(std::string(kBase) + w + "gang_backfill: [tessera]\n");
  ASSERT_TRUE(greedy.ok()) << greedy.error();
  ASSERT_TRUE(backfill.ok()) << backfill.error();
  EXPECT_EQ(backfill->gang_backfill_policies, std::vector<std::string>{"tessera"});
  auto g = RunScenario(*greedy, {"tessera"}, Catalog::Default());
  auto b = RunScenario(*backfill, {"tessera"}, Catalog::Default());
  ASSERT_TRUE(g.ok() && b.ok());
  for (size_t k = 0; k < b->seeds.size(); ++k) {
    const RunResult& rg = g->variants[0].runs[0][k];
    const RunResult& rb = b->variants[0].runs[0][k];
    EXPECT_LT(MixDeviation(rb), MixDeviation(rg) / 2) << k;
    EXPECT_GE(rb.gpu_utilization, rg.gpu_utilization) << k;
    EXPECT_EQ(rb.oom_events, 0);
    EXPECT_EQ(rb.apply_conflicts, 0);
  }
  // Over-estimated time limits (1-3x) change decisions but keep every placement valid.
  auto loose = Parse(std::string(kBase) + w + "gang_backfill: [tessera]\ntime_limit_factor: [1, 3]\n");
  ASSERT_TRUE(loose.ok()) << loose.error();
  EXPECT_EQ(loose->sim.time_limit_factor_max, 3.0);
  auto l = RunScenario(*loose, {"tessera"}, Catalog::Default());
  ASSERT_TRUE(l.ok());
  bool differs = false;
  for (size_t k = 0; k < l->seeds.size(); ++k) {
    const RunResult& rl = l->variants[0].runs[0][k];
    EXPECT_EQ(rl.oom_events, 0);
    EXPECT_EQ(rl.apply_conflicts, 0);
    differs = differs || rl.gpu_utilization != b->variants[0].runs[0][k].gpu_utilization;
  }
  EXPECT_TRUE(differs) << "the cycle sees the looser limits";
}

TEST(ScenarioTest, SanityAnchors) {
  // No inference: every policy near 0.9 (training uses 0.85-0.95 of a GPU; saturated cluster).
  auto s = Parse(std::string(kBase) + "workload: {inference_share: 0.0}\n");
  ASSERT_TRUE(s.ok()) << s.error();
  auto out = RunScenario(*s, {"tessera", "k8s-default"}, Catalog::Default());
  ASSERT_TRUE(out.ok()) << out.error();
  for (const auto& runs : out->variants[0].runs)
    for (const RunResult& r : runs) {
      EXPECT_GT(r.gpu_utilization, 0.8) << r.policy;
      EXPECT_LT(r.gpu_utilization, 0.95) << r.policy;
    }
  // Only light inference on whole GPUs: below 0.25.
  s = Parse(std::string(kBase) + "workload: {inference_share: 1.0, traffic: light}\n");
  ASSERT_TRUE(s.ok()) << s.error();
  out = RunScenario(*s, {"k8s-default"}, Catalog::Default());
  ASSERT_TRUE(out.ok()) << out.error();
  for (const RunResult& r : out->variants[0].runs[0]) EXPECT_LT(r.gpu_utilization, 0.25);
}

}  // namespace
}  // namespace tessera
