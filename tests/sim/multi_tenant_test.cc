#include "sim/multi_tenant.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace tessera {
namespace {

TEST(MultiTenant, JainIndexBounds) {
  EXPECT_DOUBLE_EQ(JainIndex({1, 1, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(JainIndex({1, 0, 0, 0}), 0.25);  // one team takes all: 1/n
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

// The shipped scenario with one seed: the figures the issue asks for are reported, production inference
// and guaranteed work wait within their targets, and borrowing raises utilisation.
// NOTE: with a 4 h horizon (1 h warm-up) guarantee_wait_p99_s measured about 1,000 s: the target holds on
// the shipped 12 h run, not on every window (see docs/evaluation.md).
TEST(MultiTenant, ShippedScenarioOneSeedMeetsItsTargets) {
  const std::string src = TESSERA_SOURCE_DIR;
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
  auto out = RunMultiTenantScenario(path, {"tessera"}, Catalog::Default());
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
