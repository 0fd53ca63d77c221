// Nodes with GPU Feature Discovery labels become the cluster Tessera places on; other schedulers' pods
// count as used capacity.
#include "k8s/cluster_view.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tessera {
namespace {

using json = nlohmann::json;

json GpuNode(const std::string& name, const std::string& leaf, const std::string& product, const std::string& gpus,
             const std::string& mig_config = "all-disabled") {
  return {{"metadata",
           {{"name", name},
            {"labels",
             {{"nvidia.com/gpu.product", product}, {"nvidia.com/gpu.count", "8"}, {"tessera.io/leaf", leaf},
              {"tessera.io/spine", "spine-0"}, {"nvidia.com/mig.config", mig_config}}}}},
          {"status", {{"allocatable", {{"cpu", "223500m"}, {"memory", "2112998564Ki"}, {"nvidia.com/gpu", gpus}}}}}};
}

json BoundPod(const std::string& node, const std::string& gpus, const std::string& phase = "Running") {
  return {{"metadata", {{"name", "p"}, {"namespace", "x"}}},
          {"spec",
           {{"nodeName", node},
            {"containers", {{{"name", "c"}, {"resources", {{"requests", {{"nvidia.com/gpu", gpus}, {"cpu", "16"}}}}}}}}}},
          {"status", {{"phase", phase}}}};
}

NodeModel Model(const json& n) {
  auto m = ReadNodeModel(n, Catalog::Default(), "tessera.io/leaf", "tessera.io/spine");
  EXPECT_TRUE(m.ok()) << m.error();
  return *m;
}

TEST(ClusterView, ForeignPodsTakeCapacity) {
  const json a = BoundPod("n1", "2"), done = BoundPod("n1", "4", "Succeeded"), elsewhere = BoundPod("n2", "1");
  const auto used = UsageByNode({&a, &done, &elsewhere});
  ASSERT_TRUE(used.count("n1"));
  EXPECT_EQ(used.at("n1").gpus, 2);  // a finished pod no longer counts
  EXPECT_EQ(used.at("n1").cpu_milli, 16000);
  auto spec = NodeSpecFor(Model(GpuNode("n1", "leaf-b", "NVIDIA-H100-80GB-HBM3", "8")), used.at("n1"),
                          Catalog::Default());
  ASSERT_TRUE(spec.ok()) << spec.error();
  EXPECT_EQ((*spec)["gpus"], 6);
  EXPECT_EQ((*spec)["cpu_milli"], 223500 - 16000);
  EXPECT_EQ((*spec)["leaf"], "leaf-b");
  EXPECT_FALSE(spec->contains("mig"));
}

TEST(ClusterView, MigNodesKeepTheirLayout) {
  auto spec = NodeSpecFor(Model(GpuNode("a", "leaf-c", "NVIDIA-A100-SXM4-80GB", "0", "all-1g.10gb")), {},
                          Catalog::Default());
  ASSERT_TRUE(spec.ok()) << spec.error();
  EXPECT_EQ((*spec)["gpus"], 8);
  EXPECT_EQ((*spec)["mig"]["config"], "all-1g.10gb");
  std::vector<std::string> skipped;
  const Cluster c = ClusterFromSpecs({*spec}, Catalog::Default(), &skipped);
  ASSERT_EQ(c.nodes.size(), 1u);
  EXPECT_TRUE(c.nodes[0].mig_enabled);
  EXPECT_EQ(c.leaf_names, std::vector<std::string>{"leaf-c"});
  EXPECT_TRUE(skipped.empty());
}

TEST(ClusterView, UnknownProductsAndBadSpecsAreSkippedWithAReason) {
  auto spec = NodeSpecFor(Model(GpuNode("x", "l", "NVIDIA-Mystery-GPU", "8")), {}, Catalog::Default());
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().find("NVIDIA-Mystery-GPU"), std::string::npos);
  std::vector<std::string> skipped;
  const Cluster c = ClusterFromSpecs({json{{"name", "bad"}, {"gpus", "eight"}}}, Catalog::Default(), &skipped);
  EXPECT_TRUE(c.nodes.empty());
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(c.leaf_names, std::vector<std::string>{"leaf-0"});
}

}  // namespace
}  // namespace tessera
