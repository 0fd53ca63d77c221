#include "model/cluster.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace tessera {
namespace {

std::string ReadExample(const std::string& rel) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/" + rel);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ClusterYaml, ShipsA32NodeHgxH100ClusterOverFourLeaves) {
  auto c = LoadClusterYaml(ReadExample("examples/clusters/hgx-h100-32.yaml"), "hgx", Catalog::Default());
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->nodes.size(), 32u);
  EXPECT_EQ(c->TotalGpus(), 256);
  EXPECT_EQ(c->leaf_names.size(), 4u);
  EXPECT_EQ(c->nodes[0].interconnect, Interconnect::kNvSwitch);
  EXPECT_EQ(Catalog::Default().kind(c->nodes[0].kind).id, "h100-80gb");
  EXPECT_EQ(c->nodes[9].leaf, 1);
  EXPECT_EQ(c->nodes[0].labels.at("nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
}

TEST(ClusterYaml, ShipsAMixedClusterWithPcieInferenceNodes) {
  auto c = LoadClusterYaml(ReadExample("examples/clusters/mixed-a100-h100-l40s.yaml"), "mixed", Catalog::Default());
  ASSERT_TRUE(c.ok()) << c.error();
  int l40s = 0;
  for (const Node& n : c->nodes)
    if (Catalog::Default().kind(n.kind).id == "l40s-48gb") {
      ++l40s;
      EXPECT_EQ(n.interconnect, Interconnect::kPcie);
      EXPECT_EQ(n.tier, Tier::kOnDemand);
    }
  EXPECT_EQ(l40s, 8);
}

struct BadCase {
  const char* yaml;
  const char* expect;  // substring of the error
};

TEST(ClusterYaml, BadInputNamesTheFieldAndTheProblem) {
  const BadCase cases[] = {
      {"nodes: 3", "field 'nodes': expected a list"},
      {"nodes: [{name: a, gpu: h100-80gb, gpus: 8, tier: cheap}]", "field 'tier': 'cheap' is not one of"},
      {"nodes: [{name: a, gpu: nope, gpus: 8}]", "field 'gpu': unknown GPU kind 'nope'"},
      {"nodes: [{name: a, gpu: h100-80gb, gpus: many}]", "field 'gpus': expected a integer value, got 'many'"},
      {"nodes: [{name: a, gpus: 8}]", "a node with GPUs needs a GPU kind"},
      {"nodes: [{name: a, gpu: l40s-48gb, gpus: 4, mig: {enabled: true}}]", "is not MIG-capable"},
      {"nodes: [{name: a, gpu: h100-80gb, gpus: 8, colour: red}]", "unknown field 'colour'"},
      {"nodes: [{gpu: h100-80gb, gpus: 8}]", "field 'name': required"},
      {"nodes: [{name: a, gpu: h100-80gb, gpus: 8}, {name: a, gpu: h100-80gb, gpus: 8}]", "duplicate node name 'a'"},
      {"nodes: [{name: a, gpu: h100-80gb, gpus: 8, interconnect: wifi}]", "field 'interconnect'"},
      {"nodes: [{name: a, gpu: h100-80gb, gpus: 8, cpu: -1}]", "field 'cpu'"},
      {"nodes: [{name: a\n", "YAML syntax error"},
  };
  for (const BadCase& bc : cases) {
    auto c = LoadClusterYaml(bc.yaml, "bad.yaml", Catalog::Default());
    ASSERT_FALSE(c.ok()) << bc.yaml;
    EXPECT_NE(c.error().find(bc.expect), std::string::npos) << "got: " << c.error();
    EXPECT_EQ(c.error().rfind("bad.yaml", 0), 0u) << "errors start with the source: " << c.error();
  }
}

}  // namespace
}  // namespace tessera
