#include "sim/multi_tenant.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <nlohmann/json.hpp>

#include "sim/scenario.h"
#include "testing/paths.h"

namespace tessera {
namespace {

TEST(MultiTenant, JainIndexBounds) {
  EXPECT_DOUBLE_EQ(JainIndex({1, 1, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(JainIndex({1, 0, 0, 0}), 0.25);    // one team takes all: 1/n
  EXPECT_NEAR(JainIndex({1, 2}), 9.0 / 10.0, 1e-12);  // (1+2)^2 / (2 * (1+4))
  EXPECT_DOUBLE_EQ(JainIndex({}), 1.0);
}

TEST(MultiTenant, NearestRankPercentile) {
  EXPECT_DOUBLE_EQ(NearestRankPercentile({}, 99), 0.0);
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_DOUBLE_EQ(NearestRankPercentile(v, 99), 99.0);
  EXPECT_DOUBLE_EQ(NearestRankPercentile(v, 50), 50.0);
  EXPECT_DOUBLE_EQ(NearestRankPercentile({7}, 99), 7.0);
}

// Every error names the file, the line and the field path.
TEST(MultiTenant, BadInputNamesFileLineAndField) {
  const auto dir = std::filesystem::temp_directory_path() / "tessera_mt_bad_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "c.yaml")
      << "nodes:\n  - {name: h, count: 2, gpu: h100-80gb, gpus: 8, cpu: 192, memory_gib: 2048}\n";
  const std::string head =
      "cluster: c.yaml\nhorizon_h: 24\ntenancy: {teams: [{name: a, guaranteed_gpus: 8}]}\n";  // 3 lines
  const std::string mix = "    mix: [{class: training, gpus: 8}]\n";
  struct Case {
    std::string text, expect;
  } cases[] = {
      {"teams_workload: []\n", "m.yaml:1: cluster: required"},
      {head, "m.yaml:1: teams_workload: required"},
      {head + "teams_workload: {a: 1}\n", "m.yaml:4: teams_workload: expected a list, got a map"},
      {head + "teams_workload:\n  - team: nobody\n" + mix,
       "m.yaml:5: teams_workload[0].team: no leaf queue 'nobody'"},
      {head + "teams_workload:\n  - team: a\n    rate_per_h: 1e30\n" + mix,
       "m.yaml:6: teams_workload[0].rate_per_h: expected a number in [1e-06, 10000]"},
      {head + "teams_workload:\n  - team: a\n    rate_per_h: [x, [y]]\n" + mix,
       "m.yaml:6: teams_workload[0].rate_per_h: expected a number"},
      {head + "teams_workload:\n  - team: a\n    burst: {factor: .nan}\n" + mix,
       "m.yaml:6: teams_workload[0].burst.factor: expected a number"},
      {head + "teams_workload:\n  - team: a\n    mix: [{class: magic}]\n",
       "m.yaml:6: teams_workload[0].mix[0].class: unknown priority class 'magic'"},
      {head + "teams_workload:\n  - team: a\n    mix: [{gpus: 9223372036854775808}]\n",
       "m.yaml:6: teams_workload[0].mix[0].gpus: expected an integer in [0, 8]"},
      {head + "teams_workload:\n  - team: a\n    mix: [{tasks: [4, 2]}]\n",
       "m.yaml:6: teams_workload[0].mix[0].tasks: high 2 is below low 4"},
      {head + "teams_workload:\n  - team: a\n    mix: [{tasks: 1.5}]\n",
       "m.yaml:6: teams_workload[0].mix[0].tasks: expected whole numbers"},
      {head + "teams_workload:\n  - team: a\n    mix: []\n",
       "m.yaml:6: teams_workload[0].mix: expected a non-empty list"},
      {head + "teams_workload:\n  - team: a\n" + mix + "seeds: 0x7fffffff\n",
       "m.yaml:7: seeds: expected an integer in [1, 1000]"},
      {"cluster: c.yaml\n# no horizon_h above\ntenancy: {teams: [{name: a}]}\nteams_workload:\n  - team: "
       "a\n" +
           mix + "horizon_h: .inf\n",
       "m.yaml:7: horizon_h: expected a number"},
      {head + "teams_workload:\n  - team: a\n" + mix + "colour: red\n", "m.yaml:7: colour: unknown field"},
      {"cluster: c.yaml\ntenancy:\n  teams: [{name: a, weight: -5}]\nteams_workload: []\n",
       "m.yaml:3: tenancy.teams[0].weight: expected an integer in [0, 1000000]"},
      {"cluster: c.yaml\ntenancy: [1]\nteams_workload: []\n",
       "m.yaml:2: tenancy: expected a map, got a list"},
      {"cluster: c.yaml\ntenancy: {teams: [{name: a}]}\nteams_workload: []\n",
       "m.yaml:1: horizon_h: required"},
      {"cluster: c.yaml\nhorizon_h: 1\nteams_workload: []\n",
       "m.yaml:1: tenancy: required with 'teams_workload'"},
      {"cluster: c.yaml\nhorizon_h: 1\ntenancy: {teams: [{name: a}]}\n",
       "m.yaml:1: teams_workload: required"},
      {"cluster: c.yaml\ntrace: t.jsonl\ntenancy: {teams: [{name: a}]}\n",
       "m.yaml:3: tenancy: only used with 'teams_workload'"},
      {head + "teams_workload: []\nsweep: {traffic: [busy]}\n",
       "m.yaml:5: sweep: needs a 'workload' generator"},
      {head + "teams_workload: []\ncycle: greedy\n", "m.yaml:5: cycle: not used with 'teams_workload'"},
      {head + "teams_workload: []\ncycle_every_s: 0\n",
       "m.yaml:5: cycle_every_s: expected an integer in [1, 86400]"},
      {"cluster: nope.yaml\ntenancy: {teams: [{name: a}]}\nteams_workload: []\n",
       "m.yaml:1: cluster: cannot open "},
      {"cluster: c.yaml\nteams_workload: [\n", "m.yaml:3: YAML syntax error"},
  };
  for (const Case& c : cases) {
    auto s = ParseScenario(c.text, "m.yaml", dir.string(), Catalog::Default());
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_NE(s.error().find(c.expect), std::string::npos) << c.text << "\n got: " << s.error();
  }
}

// The scenario reader reads the multi-tenant format: tenancy, streams, run settings shared with every
// scenario.
TEST(MultiTenant, ScenarioReaderReadsTenancyAndStreams) {
  const auto dir = std::filesystem::temp_directory_path() / "tessera_mt_parse_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "c.yaml")
      << "nodes:\n  - {name: h, count: 2, gpu: h100-80gb, gpus: 8, cpu: 192, memory_gib: 2048}\n";
  const std::string text =
      "cluster: c.yaml\nseeds: 2\nfirst_seed: 5\npolicies: [tessera]\nhorizon_h: 3\ncycle_every_s: 20\n"
      "tenancy: {teams: [{name: a, guaranteed_gpus: 8}, {name: b}]}\n"
      "teams_workload:\n  - team: b\n    rate_per_h: 4\n    burst: {factor: 2, on_h: 1, period_h: 6}\n"
      "    mix: [{class: training, gpus: 8, tasks: [1, 2], duration_min: [10, 20]}]\n";
  auto s = ParseScenario(text, "m.yaml", dir.string(), Catalog::Default());
  ASSERT_TRUE(s.ok()) << s.error();
  ASSERT_TRUE(s->IsMultiTenant());
  EXPECT_EQ(s->seeds, (std::vector<uint64_t>{5, 6}));
  EXPECT_EQ(s->sim.horizon_s, 3 * 3600);
  EXPECT_EQ(s->cycle_every_s, 20);
  ASSERT_EQ(s->team_streams.size(), 1u);
  const TeamStream& b = s->team_streams[0];
  EXPECT_EQ(b.queue, "b");
  EXPECT_DOUBLE_EQ(b.rate_per_h, 4);
  EXPECT_DOUBLE_EQ(b.burst_factor, 2);
  ASSERT_EQ(b.mix.size(), 1u);
  EXPECT_EQ(b.mix[0].tasks_lo, 1);
  EXPECT_EQ(b.mix[0].tasks_hi, 2);
  // Jobs are drawn within the horizon, in submit order, from team b only; JobsFor draws the same.
  ASSERT_EQ(s->variants.size(), 1u);
  const std::vector<TraceJob> jobs = GenerateTeamJobs(s->team_streams, s->sim.horizon_s, 5);
  EXPECT_EQ(JobsFor(*s, s->variants.front(), 5).size(), jobs.size());
  ASSERT_FALSE(jobs.empty());
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(jobs[i].team, "b");
    EXPECT_LT(jobs[i].submit_s, 3 * 3600);
    EXPECT_EQ(jobs[i].id, static_cast<int64_t>(i + 1));
    if (i > 0) {
      EXPECT_LE(jobs[i - 1].submit_s, jobs[i].submit_s);
    }
  }
  std::filesystem::remove_all(dir);
}

// The shipped scenario with one seed: the figures the issue asks for are reported, production inference
// and guaranteed work wait within their targets, and borrowing raises utilisation.
// NOTE: with a 4 h horizon (1 h warm-up) guarantee_wait_p99_s measured about 1,000 s: the target holds on
// the shipped 12 h run, not on every window (see docs/evaluation.md).
TEST(MultiTenant, ShippedScenarioOneSeedMeetsItsTargets) {
  const std::string src = ::tessera::testing::SourceDir();
  std::ifstream in(src + "/examples/scenarios/multi-tenant.yaml");
  ASSERT_TRUE(in) << "missing examples/scenarios/multi-tenant.yaml";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  text = std::regex_replace(text, std::regex("\nseeds: *[0-9]+"), "\nseeds: 1");
  const auto dir = std::filesystem::temp_directory_path() / "tessera_mt_test";
  std::filesystem::create_directories(dir);
  // Cluster paths are relative to the scenario file.
  const std::string clusters = std::filesystem::relative(src + "/examples/clusters", dir).string();
  text = std::regex_replace(text, std::regex("\ncluster: *\\.\\./clusters/"), "\ncluster: " + clusters + "/");
  const std::string path = (dir / "mt.yaml").string();
  std::ofstream(path) << text;
  auto scenario = LoadScenario(path, Catalog::Default());
  ASSERT_TRUE(scenario.ok()) << scenario.error();
  ASSERT_TRUE(scenario->IsMultiTenant());
  EXPECT_FALSE(RunScenario(*scenario, {"tessera"}, Catalog::Default()).ok());  // the other runner refuses it
  auto out = RunMultiTenantScenario(*scenario, {"tessera"}, Catalog::Default());
  ASSERT_TRUE(out.ok()) << (out.ok() ? "" : out.error());
  const nlohmann::json& j = *out;
  const nlohmann::json* pol = nullptr;
  for (const auto& p : j["policies"])
    if (p["policy"] == "tessera") pol = &p;
  ASSERT_NE(pol, nullptr) << j.dump().substr(0, 300);
  for (const char* key : {"production_inference_wait_p99_s", "guarantee_wait_p99_s", "jain_fairness",
                          "gpu_utilization", "gpu_utilization_no_borrowing", "preemptions", "lost_gpu_hours"})
    ASSERT_TRUE(pol->contains(key)) << key;
  EXPECT_LE((*pol)["production_inference_wait_p99_s"]["mean"].get<double>(), 5.0);
  EXPECT_LE((*pol)["guarantee_wait_p99_s"]["mean"].get<double>(), 60.0);
  const double jain = (*pol)["jain_fairness"]["mean"].get<double>();
  EXPECT_GT(jain, 0.25);
  EXPECT_LE(jain, 1.0);
  EXPECT_GT((*pol)["gpu_utilization"]["mean"].get<double>(),
            (*pol)["gpu_utilization_no_borrowing"]["mean"].get<double>());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera
