// Scenario files: parsing errors, the static-mig cluster, a small two-policy smoke run, and the
// utilisation sanity anchors (training only ~0.9; only light inference on whole GPUs < 0.25).
#include "sim/scenario.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "sim/metrics.h"
#include "sim/report.h"
#include "testing/paths.h"

namespace tessera {
namespace {

std::string ScenarioTempDir() {
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

Result<Scenario> ParseScenarioText(const std::string& text) {
  return ParseScenario(text, "s.yaml", ScenarioTempDir(), Catalog::Default());
}

// Every error names the file, the line and the field path. kBase has 8 lines, so additions start at line 9.
TEST(ScenarioTest, BadInputNamesFileLineAndField) {
  const std::string b = kBase;
  struct Case {
    std::string text, expect;
  } cases[] = {
      {"name: x\n", "s.yaml:1: cluster: required"},
      {"name: x\ncluster: nope.yaml\nworkload: {}\nhorizon_h: 1\n", "s.yaml:2: cluster: cannot open"},
      {"name: x\ncluster: [c.yaml]\n", "s.yaml:2: cluster: expected text, got a list"},
      {b + "colour: red\nworkload: {}\n", "s.yaml:9: colour: unknown field"},
      {b, "exactly one of 'workload', 'trace', 'dlrm'"},
      {b + "workload: {inference_share: 2}\n", "s.yaml:9: workload.inference_share: expected a number in [0, 1]"},
      {b + "workload: {traffic: heavy}\n", "s.yaml:9: workload.traffic: expected one of light, mixed, busy"},
      {b + "workload: {light_compute: [0.3, 0.1]}\n", "s.yaml:9: workload.light_compute: high 0.1 is below low 0.3"},
      {b + "workload:\n  precisions: {fp7: 1}\n", "s.yaml:10: workload.precisions: unknown name 'fp7'"},
      {b + "workload:\n  training_gpus: {x: 1}\n", "s.yaml:10: workload.training_gpus: expected an integer"},
      {b + "workload:\n  models: [{name: m, layers: 1e30}]\n", "s.yaml:10: workload.models[0].layers: expected an integer"},
      {b + "workload:\n  inference_duration: {short_p: .nan}\n",
       "s.yaml:10: workload.inference_duration.short_p: expected a number"},
      {"name: x\ncluster: c.yaml\npolicies: [magic]\nworkload: {}\nhorizon_h: 1\n",
       "s.yaml:3: policies: unknown policy 'magic'"},
      {b + "workload: {}\nsweep: {traffic: [sunny]}\n", "s.yaml:10: sweep.traffic"},
      {b + "workload: {}\ngang_backfill: [magic]\n", "s.yaml:10: gang_backfill: unknown policy 'magic'"},
      {b + "workload: {}\ngang_backfill: [tessera]\n", "s.yaml:10: gang_backfill: gives only the listed policies"},
      {b + "workload: {}\nasymmetric_cycle: true\n", "s.yaml:10: asymmetric_cycle: needs 'gang_backfill"},
      {b + "workload: {}\ncycle: fast\n", "s.yaml:10: cycle: expected one of backfill, greedy"},
      {b + "workload: {}\npolicy_variants: {tessera: {policy: bestfit}}\n", "s.yaml:10: policy_variants: 'tessera' is a registered"},
      {b + "workload: {}\npolicy_variants: {v: {policy: magic}}\n", "s.yaml:10: policy_variants.v.policy: unknown policy 'magic'"},
      {b + "workload: {}\npolicy_variants: {v: {policy: tessera, off: [speed]}}\n",
       "s.yaml:10: policy_variants.v.off: unknown feature 'speed'"},
      {b + "workload: {}\npolicy_variants: {v: {policy: fgd, off: [topology]}}\n",
       "s.yaml:10: policy_variants.v.off: 'fgd' has no features"},
      {b + "workload: {}\npolicy_variants: {v: {policy: tessera, static_mig: {share: 0.5}}}\n",
       "s.yaml:10: policy_variants.v.static_mig: only for policy static-mig"},
      {b + "workload: {}\npolicy_variants: {v: {policy: static-mig, static_mig: {share: 2}}}\n",
       "s.yaml:10: policy_variants.v.static_mig.share: expected a number in [0, 1]"},
      {b + "workload: {}\ntime_limit_factor: [0.05, 2]\n", "s.yaml:10: time_limit_factor[0]: expected a number in [0.1, 1000]"},
      {b + "workload: {}\ntime_limit_factor: [3, 2]\n", "s.yaml:10: time_limit_factor: expected [min, max]"},
      {"name: x\ncluster: c.yaml\nseeds: 9223372036854775808\nworkload: {}\nhorizon_h: 1\n",
       "s.yaml:3: seeds: expected an integer in [1, 1000]"},
      {"name: x\ncluster: c.yaml\nthreads: {a: 1}\nworkload: {}\nhorizon_h: 1\n", "s.yaml:3: threads: expected an integer"},
      {"name: x\ncluster: c.yaml\nhorizon_h: 1e30\nworkload: {}\n", "s.yaml:3: horizon_h: expected a number in [0, 100000]"},
      {"name: x\ncluster: c.yaml\nhorizon_h: .inf\nworkload: {}\n", "s.yaml:3: horizon_h: expected a number"},
      {"name: x\ncluster: c.yaml\nworkload: {}\n", "horizon_h: required (> 0) with a generator"},
      {"name: x\ncluster: c.yaml\nhorizon_h: 2\nwarmup_h: 3\nworkload: {}\n", "s.yaml:4: warmup_h: must be below horizon_h"},
      {b + "workload: {}\narrivals_typo: 1\n", "s.yaml:10: arrivals_typo: unknown field"},
      {"name: x\ncluster: c.yaml\nhorizon_h: 1\nworkload: {}\narrivals: {depth: 0x7fffffff}\n",
       "s.yaml:5: arrivals.depth: expected an integer in [1, 100000]"},
      {"name: x\ncluster: c.yaml\nhorizon_h: 1\nworkload: {}\narrivals: {load: 9223372036854775808}\n",
       "s.yaml:5: arrivals.load: expected a number in [0.001, 100]"},
      {"name: x\ncluster: c.yaml\nhorizon_h: 1\nworkload: {}\nfabric: {overlap: [x, [y]]}\n",
       "s.yaml:5: fabric.overlap: expected a number in [0, 1], got a list"},
      {"name: x\ncluster: c.yaml\nhorizon_h: 1\nworkload: {}\nmig: {k: v}\n", "s.yaml:5: mig.k: unknown field"},
      {"name: x\ncluster: c.yaml\ntrace: nope.jsonl\n", "s.yaml:3: trace: cannot open"},
      {"name: x\ncluster: c.yaml\ndlrm: {file: nope.csv}\n", "s.yaml:3: dlrm.file: cannot open"},
      {"name: x\ncluster: c.yaml\ndlrm: {compute: 2, file: a}\n", "s.yaml:3: dlrm.compute: expected a number"},
      {"cluster: c.yaml\nworkload: &a [*a]\nhorizon_h: 1\n", "s.yaml:2: workload: expected a map, got a list"},
      {"cluster: c.yaml\n\x01\xff: [\n", "s.yaml:"},
      {"- a\n- b\n", "s.yaml:1: expected a map, got a list"},
      {b + "workload: {overload: 0}\n", "s.yaml:9: workload.overload: expected a number in [0.01, 100]"},
      {b + "workload: {production_share: 1.5}\n", "s.yaml:9: workload.production_share: expected a number in [0, 1]"},
      {b + "workload: {light_fraction: -1}\n", "s.yaml:9: workload.light_fraction: expected a number in [0, 1]"},
      {b + "workload: {traffic: light, light_fraction: 0.5}\n", "s.yaml:9: workload.light_fraction: give either"},
      {b + "workload: {checkpointable: maybe}\n", "s.yaml:9: workload.checkpointable"},
      {b + "workload: {}\nsharing: {mode: vgpu}\n", "s.yaml:10: sharing.mode: expected one of time-slicing, mps"},
      {b + "workload: {}\nsharing: {production_slo: 0.5}\n", "s.yaml:10: sharing.production_slo: expected a number"},
      {b + "workload: {}\nsharing: {colour: red}\n", "s.yaml:10: sharing.colour: unknown field"},
      {b + "workload: {}\nqueue_weights: {inference: 0}\n",
       "s.yaml:10: queue_weights.inference: expected an integer in [1, 1000000]"},
      {b + "workload: {}\nqueue_weights: [7, 3]\n", "s.yaml:10: queue_weights: expected a map"},
      {"name: x\ncluster: c.yaml\nhorizon_h: 1\nworkload: {}\narrivals: {warm_start: true}\n",
       "s.yaml:5: arrivals.warm_start: needs process: poisson"},
  };
  for (const Case& c : cases) {
    auto r = ParseScenarioText(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().find(c.expect), std::string::npos) << r.error() << " / expected " << c.expect;
    EXPECT_EQ(r.error().rfind("s.yaml", 0), 0u) << r.error();
  }
}

// A cluster file's price_per_gpu_hour in a scenario without `tiers:` is not used: a warning names the file
// and the field (a tiered scenario refuses it: spot_tiers_test).
TEST(ScenarioTest, IgnoredClusterPriceIsAWarningNamingFileAndField) {
  auto plain = ParseScenarioText(std::string(kBase) + "workload: {}\n");
  ASSERT_TRUE(plain.ok()) << plain.error();
  EXPECT_TRUE(plain->warnings.empty());
  const std::string dir = ScenarioTempDir();
  std::ofstream(std::filesystem::path(dir) / "priced.yaml")
      << "name: p\ndefaults: {gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch}\n"
         "nodes:\n  - {name: h, count: 2, gpu: h100-80gb, leaf: leaf-0, price_per_gpu_hour: 4.9}\n";
  std::string text = kBase;
  text.replace(text.find("c.yaml"), 6, "priced.yaml");
  auto priced = ParseScenario(text + "workload: {}\n", "s.yaml", dir, Catalog::Default());
  ASSERT_TRUE(priced.ok()) << priced.error();
  ASSERT_EQ(priced->warnings.size(), 1u);
  EXPECT_NE(priced->warnings[0].find("priced.yaml: price_per_gpu_hour"), std::string::npos) << priced->warnings[0];
  EXPECT_NE(priced->warnings[0].find("is ignored"), std::string::npos);
}

TEST(ScenarioTest, StaticMigClusterSpreadsShare) {
  auto s = ParseScenarioText(std::string(kBase) + "workload: {}\n");
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
  auto s = ParseScenarioText(std::string(kBase) + "workload: {inference_share: 0.5, traffic: light}\n");
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

// Every shipped scenario parses; the seed regime opens on a running fleet with open arrivals and the teams'
// weights its comments state.
TEST(ScenarioTest, ShippedScenariosParse) {
  const std::filesystem::path dir = std::filesystem::path(::tessera::testing::SourceDir()) / "examples" / "scenarios";
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".yaml") continue;
    ++files;
    auto s = LoadScenario(e.path().string(), Catalog::Default());
    EXPECT_TRUE(s.ok()) << e.path() << ": " << s.error();
  }
  EXPECT_GE(files, 8);
  auto seed = LoadScenario((dir / "seed-regime.yaml").string(), Catalog::Default());
  ASSERT_TRUE(seed.ok()) << seed.error();
  EXPECT_EQ(seed->sim.warmup_s, 0);
  EXPECT_EQ(seed->sim.queue_weights, (std::map<std::string, int>{{"inference", 7}, {"training", 3}}));
  EXPECT_EQ(seed->sim.arrivals, "trace");  // poisson streams arrive at their submit times
}

// Open arrivals from a warm start that overload whole-GPU scheduling: each team's queue weight sets its part
// of the contended GPUs (here k8s-default's, whose every replica takes a whole GPU). A weight for a team the
// stream does not have is an error, not a silent no-op.
TEST(ScenarioTest, QueueWeightsShareContendedCapacity) {
  const std::string base =
      "name: w\ncluster: c.yaml\nseeds: 2\npolicies: [k8s-default]\nhorizon_h: 168\n"
      "arrivals: {process: poisson, load: 3, warm_start: true}\n"
      "workload: {inference_share: 0.5, traffic: light, training_gpus: {1: 1}}\n";
  auto even = ParseScenarioText(base);
  auto weighted = ParseScenarioText(base + "queue_weights: {inference: 4, training: 1}\n");
  auto typo = ParseScenarioText(base + "queue_weights: {inferense: 4}\n");
  ASSERT_TRUE(even.ok() && weighted.ok() && typo.ok());
  EXPECT_EQ(weighted->sim.queue_weights.at("inference"), 4);
  auto e = RunScenario(*even, even->policies, Catalog::Default());
  auto w = RunScenario(*weighted, weighted->policies, Catalog::Default());
  ASSERT_TRUE(e.ok() && w.ok());
  const auto inference_part = [](const ScenarioOutcome& o) {
    const nlohmann::json j = OutcomeJson(o, false)["results"][0];
    return j["by_class"]["inference"]["gpu_allocation"]["mean"].get<double>() /
           j["gpu_allocation"]["mean"].get<double>();
  };
  // Equal weights: about half each; 4:1 moves inference well towards 0.8 (measured 0.48 and 0.71).
  EXPECT_NEAR(inference_part(*e), 0.5, 0.1);
  EXPECT_GT(inference_part(*w), inference_part(*e) + 0.15);
  auto t = RunScenario(*typo, typo->policies, Catalog::Default());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().find("queue_weights names team 'inferense'"), std::string::npos) << t.error();
}

// Conservative gang backfill keeps large training from piling up in the backlog: the served mix stays near
// the demanded one, and more 8-GPU gangs are served than with the greedy cycle.
TEST(ScenarioTest, GangBackfillKeepsTheServedMix) {
  // Replicas keep one slice each here (an SLO of 1 admits no second sharer) and those above 40 GB a whole
  // GPU: on this 32-GPU cluster with half the training in 8-GPU gangs, packed replicas start so fast that the
  // served mix drifts with or without backfill (docs/sharing.md, "Open questions"); this test measures
  // backfill alone.
  const std::string w =
      "workload: {inference_share: 0.5, traffic: mixed, training_gpus: {1: 0.5, 8: 0.5}, max_sub_gpu_mib: 40192}\n"
      "sharing: {standard_slo: 1}\n";
  auto greedy = ParseScenarioText(std::string(kBase) + w + "cycle: greedy\n");
  // The default: every policy on the backfill cycle.
  auto backfill = ParseScenarioText(std::string(kBase) + w);
  ASSERT_TRUE(greedy.ok()) << greedy.error();
  ASSERT_TRUE(backfill.ok()) << backfill.error();
  EXPECT_TRUE(CycleFor(*backfill, "tessera").gang_backfill);
  EXPECT_FALSE(CycleFor(*greedy, "tessera").gang_backfill);
  // `cycle: backfill` names what it switches; `full`, its older name, still reads the same.
  for (const char* name : {"backfill", "full"}) {
    auto named = ParseScenarioText(std::string(kBase) + w + "cycle: " + name + "\n");
    ASSERT_TRUE(named.ok()) << named.error();
    EXPECT_TRUE(CycleFor(*named, "tessera").gang_backfill) << name;
  }
  EXPECT_FALSE(ParseScenarioText(std::string(kBase) + w + "cycle: fast\n").ok());
  // Reservations without backfill into them: the cycle says so (the greedy cycle has neither).
  auto alone = ParseScenarioText(std::string(kBase) + w + "backfill_into_reservations: false\n");
  ASSERT_TRUE(alone.ok()) << alone.error();
  EXPECT_TRUE(CycleFor(*alone, "tessera").gang_backfill);
  EXPECT_FALSE(CycleFor(*alone, "tessera").backfill_into_reservations);
  EXPECT_TRUE(CycleFor(*backfill, "tessera").backfill_into_reservations);
  EXPECT_FALSE(CycleFor(*greedy, "tessera").backfill_into_reservations);
  EXPECT_FALSE(ParseScenarioText(std::string(kBase) + w + "backfill_into_reservations: sometimes\n").ok());
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
  auto loose = ParseScenarioText(std::string(kBase) + w + "time_limit_factor: [1, 3]\n");
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

// Every policy gets the same cycle unless an asymmetric run is asked for, and each result says which.
TEST(ScenarioTest, SameCycleUnlessAskedFor) {
  const std::string w = "workload: {inference_share: 0.5, traffic: mixed}\nseeds: [1]\nhorizon_h: 24\n";
  const std::string base = "name: c\ncluster: c.yaml\nthreads: 2\npolicies: [tessera, k8s-default]\n";
  for (const char* cycle : {"", "cycle: greedy\n"}) {
    auto s = ParseScenarioText(base + w + cycle);
    ASSERT_TRUE(s.ok()) << s.error();
    auto out = RunScenario(*s, s->policies, Catalog::Default());
    ASSERT_TRUE(out.ok()) << out.error();
    const nlohmann::json j = OutcomeJson(*out, false);
    EXPECT_TRUE(j["same_cycle"].get<bool>());
    EXPECT_EQ(j["results"][0]["cycle"], j["results"][1]["cycle"]);
    EXPECT_EQ(j["results"][0]["cycle"]["gang_backfill"].get<bool>(), std::string(cycle).empty());
  }
  auto a = ParseScenarioText(base + w + "asymmetric_cycle: true\ngang_backfill: [tessera]\n");
  ASSERT_TRUE(a.ok()) << a.error();
  auto out = RunScenario(*a, a->policies, Catalog::Default());
  ASSERT_TRUE(out.ok()) << out.error();
  const nlohmann::json j = OutcomeJson(*out, false);
  EXPECT_FALSE(j["same_cycle"].get<bool>());
  EXPECT_TRUE(j["results"][0]["cycle"]["gang_backfill"].get<bool>());
  EXPECT_FALSE(j["results"][1]["cycle"]["gang_backfill"].get<bool>());
  EXPECT_NE(TextSummary(*out, false).find("ASYMMETRIC"), std::string::npos);
}

// Policy variants: a static layout of its own, and tessera with features off; with all four of the features
// bestfit lacks turned off, tessera is bestfit (the ablation's anchor).
TEST(ScenarioTest, PolicyVariants) {
  auto s = ParseScenarioText(
      std::string(kBase) +
      "workload: {inference_share: 0.5, traffic: mixed}\npolicy_variants:\n"
      "  smig-half: {policy: static-mig, static_mig: {share: 0.5, layout: all-balanced}}\n"
      "  smig-all: {policy: static-mig, static_mig: {share: 1.0, layout: all-balanced}}\n"
      "  t-as-bestfit: {policy: tessera, off: [topology, separate_classes, frag_aware, scorer,"
      " share_instances, harvest]}\n"
      "  t-no-topology: {policy: tessera, off: [topology]}\n");
  ASSERT_TRUE(s.ok()) << s.error();
  auto mig_nodes = [&](const std::string& p) {
    int n = 0;
    for (const Node& node : ClusterForScenarioPolicy(*s, Catalog::Default(), p).nodes) n += node.mig_enabled;
    return n;
  };
  EXPECT_EQ(mig_nodes("smig-half"), 2);
  EXPECT_EQ(mig_nodes("smig-all"), 4);
  EXPECT_EQ(mig_nodes("t-as-bestfit"), 0);
  auto out =
      RunScenario(*s, {"bestfit", "t-as-bestfit", "t-no-topology", "smig-all", "smig-half"}, Catalog::Default());
  ASSERT_TRUE(out.ok()) << out.error();
  const VariantOutcome& v = out->variants[0];
  for (size_t k = 0; k < s->seeds.size(); ++k) {
    EXPECT_EQ(v.runs[1][k].policy, "t-as-bestfit");
    EXPECT_EQ(v.runs[3][k].policy, "smig-all");
    EXPECT_EQ(v.runs[0][k].gpu_utilization, v.runs[1][k].gpu_utilization) << k;
    EXPECT_EQ(v.runs[0][k].gpu_allocation, v.runs[1][k].gpu_allocation) << k;
  }
  const bool all_better = SpreadOf({v.runs[3][0].gpu_utilization, v.runs[3][1].gpu_utilization}).mean >
                          SpreadOf({v.runs[4][0].gpu_utilization, v.runs[4][1].gpu_utilization}).mean;
  EXPECT_NE(TextSummary(*out, false).find(all_better ? "smig-all*" : "smig-half*"), std::string::npos)
      << TextSummary(*out, false);
}

TEST(ScenarioTest, SanityAnchors) {
  // No inference: every policy near 0.9 (training uses 0.85-0.95 of a GPU; saturated cluster).
  auto s = ParseScenarioText(std::string(kBase) + "workload: {inference_share: 0.0}\n");
  ASSERT_TRUE(s.ok()) << s.error();
  auto out = RunScenario(*s, {"tessera", "k8s-default"}, Catalog::Default());
  ASSERT_TRUE(out.ok()) << out.error();
  for (const auto& runs : out->variants[0].runs)
    for (const RunResult& r : runs) {
      EXPECT_GT(r.gpu_utilization, 0.8) << r.policy;
      EXPECT_LT(r.gpu_utilization, 0.95) << r.policy;
    }
  // Only light inference on whole GPUs: below 0.25.
  s = ParseScenarioText(std::string(kBase) + "workload: {inference_share: 1.0, traffic: light}\n");
  ASSERT_TRUE(s.ok()) << s.error();
  out = RunScenario(*s, {"k8s-default"}, Catalog::Default());
  ASSERT_TRUE(out.ok()) << out.error();
  for (const RunResult& r : out->variants[0].runs[0]) EXPECT_LT(r.gpu_utilization, 0.25);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// The opportunistic tier (sim/harvest.h) is a simulator option of tessera's: off unless a tessera variant
// says `harvest: true` or the scenario `harvest: {enabled: true}` (then tessera and its variants), never for
// a baseline or a variant with `off: [harvest]`.
TEST(ScenarioTest, HarvestingIsAnOptionOfTesserasAndVariants) {
  const std::string variants =
      "policy_variants:\n  tessera-no-harvest: {policy: tessera, off: [harvest]}\n"
      "  tessera-harvest: {policy: tessera, harvest: true}\n"
      "  tessera-no-sharing: {policy: tessera, off: [share_instances]}\n";
  auto s = ParseScenarioText(std::string(kBase) + variants + "workload: {}\n");
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_FALSE(HarvestsFor(*s, "tessera"));
  EXPECT_TRUE(HarvestsFor(*s, "tessera-harvest"));
  EXPECT_FALSE(HarvestsFor(*s, "tessera-no-sharing"));
  EXPECT_FALSE(HarvestsFor(*s, "bestfit"));
  auto p = MakeScenarioPolicy(*s, "tessera-no-harvest");  // the engine never sees `harvest`
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ((*p)->name(), "tessera-no-harvest");
  auto on = ParseScenarioText(std::string(kBase) + variants + "harvest: {enabled: true, grace_s: 10}\n" +
                              "workload: {}\n");
  ASSERT_TRUE(on.ok()) << on.error();
  EXPECT_TRUE(HarvestsFor(*on, "tessera"));
  EXPECT_TRUE(HarvestsFor(*on, "tessera-no-sharing"));
  EXPECT_FALSE(HarvestsFor(*on, "tessera-no-harvest"));
  EXPECT_FALSE(HarvestsFor(*on, "bestfit"));
  EXPECT_FALSE(HarvestsFor(*on, "k8s-mps"));
  EXPECT_EQ(on->sim.harvest.grace_s, 10);
  auto bad = ParseScenarioText(std::string(kBase) + "harvest: {slo_margin: 2}\nworkload: {}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("harvest.slo_margin"), std::string::npos) << bad.error();
  auto base = ParseScenarioText(std::string(kBase) +
                                "policy_variants:\n  x: {policy: bestfit, harvest: true}\nworkload: {}\n");
  ASSERT_FALSE(base.ok());
  EXPECT_NE(base.error().find("only for policy tessera"), std::string::npos) << base.error();
}

}  // namespace
}  // namespace tessera
