#include "model/cluster.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include "testing/paths.h"

namespace tessera {
namespace {

std::string ReadExample(const std::string& rel) {
  std::ifstream in(std::string(::tessera::testing::SourceDir()) + "/" + rel);
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

// Every error names the file, the line and the field path.
TEST(ClusterYaml, BadInputNamesFileLineAndField) {
  const BadCase cases[] = {
      {"nodes: 3", "bad.yaml:1: nodes: expected a list, got \"3\""},
      {"name: x\n", "bad.yaml:1: nodes: required"},
      {"nodes: [{name: a, gpu: h100-80gb, gpus: 8, tier: cheap}]", "bad.yaml:1: nodes[0].tier: 'cheap' is not one of"},
      {"nodes: [{name: a, gpu: nope, gpus: 8}]", "bad.yaml:1: nodes[0].gpu: unknown GPU kind 'nope'"},
      {"nodes:\n  - name: a\n    gpu: h100-80gb\n    gpus: three\n",
       "bad.yaml:4: nodes[0].gpus: expected an integer in [0, 64], got \"three\""},
      {"nodes:\n  - name: a\n    gpu: h100-80gb\n    gpus: 65\n", "bad.yaml:4: nodes[0].gpus: expected an integer in [0, 64]"},
      {"nodes:\n  - name: a\n    gpus: 8\n    cpu: 1e30\n", "bad.yaml:4: nodes[0].cpu: expected a number in [0, 1000000], got \"1e30\""},
      {"nodes:\n  - name: a\n    cpu: .nan\n", "bad.yaml:3: nodes[0].cpu: expected a number"},
      {"nodes:\n  - name: a\n    memory_gib: .inf\n", "bad.yaml:3: nodes[0].memory_gib: expected a number"},
      {"nodes:\n  - name: a\n    memory_mib: 9223372036854775808\n", "bad.yaml:3: nodes[0].memory_mib: expected an integer"},
      {"nodes:\n  - name: a\n    count: 0x7fffffff\n", "bad.yaml:3: nodes[0].count: expected an integer in [1, 100000]"},
      {"nodes: [{name: a, gpus: 8}]", "bad.yaml:1: nodes[0].gpu: a node with GPUs needs a GPU kind"},
      {"nodes: [{name: a, gpu: l40s-48gb, gpus: 4, mig: {enabled: true}}]", "nodes[0].mig: GPU kind 'l40s-48gb' is not MIG-capable"},
      {"nodes: [{name: a, gpu: h100-80gb, gpus: 8, mig: {enabled: maybe}}]", "bad.yaml:1: nodes[0].mig.enabled: expected true or false"},
      {"nodes: [{name: a, gpu: h100-80gb, gpus: 8, mig: [1]}]", "bad.yaml:1: nodes[0].mig: expected a map, got a list"},
      {"nodes:\n  - name: a\n    colour: red\n", "bad.yaml:3: nodes[0].colour: unknown field"},
      {"nodes: [{gpu: h100-80gb, gpus: 8}]", "bad.yaml:1: nodes[0].name: required"},
      {"nodes: [{name: [a], gpus: 8}]", "bad.yaml:1: nodes[0].name: expected text, got a list"},
      {"nodes: [{name: a, gpu: h100-80gb, gpus: 8}, {name: a, gpu: h100-80gb, gpus: 8}]",
       "nodes[1].name: duplicate node name 'a'"},
      {"nodes: [{name: a, gpu: h100-80gb, gpus: 8, interconnect: wifi}]",
       "bad.yaml:1: nodes[0].interconnect: expected one of nvswitch, nvlink-pairs, pcie, got \"wifi\""},
      {"nodes: [{name: a, gpu: h100-80gb, gpus: 8, cpu: -1}]", "bad.yaml:1: nodes[0].cpu: expected a number in [0,"},
      {"nodes: [{name: a, labels: {zone: [a]}}]", "bad.yaml:1: nodes[0].labels.zone: expected text, got a list"},
      {"nodes: [{name: a, labels: [a, b]}]", "bad.yaml:1: nodes[0].labels: expected a map, got a list"},
      {"defaults: {gpus: {k: v}}\nnodes: [{name: a}]", "bad.yaml:1: defaults.gpus: expected an integer"},
      {"spine_oversubscription: 0.5\nnodes: []", "bad.yaml:1: spine_oversubscription: expected a number in [1,"},
      {"nodes: &a [*a]", "bad.yaml:1: nodes[0]: expected a map, got a list"},
      {"nodes: [{name: a\n", "bad.yaml:2: YAML syntax error"},
      {"\x01\x02\xff\xfe", "bad.yaml"},
      {"", "bad.yaml"},
  };
  for (const BadCase& bc : cases) {
    auto c = LoadClusterYaml(bc.yaml, "bad.yaml", Catalog::Default());
    ASSERT_FALSE(c.ok()) << bc.yaml;
    EXPECT_NE(c.error().find(bc.expect), std::string::npos) << bc.yaml << "\n got: " << c.error();
    EXPECT_EQ(c.error().rfind("bad.yaml", 0), 0u) << "errors start with the source: " << c.error();
  }
}

// One parser for every layer (cluster files, price books, ledgers): the printed spelling reads back, and the
// aliases each file format has used are accepted.
TEST(Tier, SpellingsReadBack) {
  for (Tier t : {Tier::kReserved, Tier::kOnDemand, Tier::kSpot, Tier::kOwned}) EXPECT_EQ(*ParseTier(TierName(t)), t);
  EXPECT_EQ(*ParseTier("ondemand"), Tier::kOnDemand);
  EXPECT_EQ(*ParseTier("on_demand"), Tier::kOnDemand);
  EXPECT_EQ(*ParseTier("preemptible"), Tier::kSpot);
  Result<Tier> bad = ParseTier("Spot");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("'Spot' is not one of reserved, on-demand, spot, owned"), std::string::npos)
      << bad.error();
}

// A node entry may give each GPU's MIG layout (what the Kubernetes scheduler reads from a node's config);
// each is checked against the placement rules, and there must be one per GPU.
TEST(ClusterYaml, PerGpuMigLayoutsAreReadAndChecked) {
  Cluster c;
  const std::string ok =
      R"({"name": "a", "gpu": "a100-80gb", "gpus": 2, "mig": {"enabled": true, "config": "site-mix",
          "layouts": ["3g.40gb@4,4g.40gb@0", "disabled"]}})";
  auto n = ParseClusterNode(ok, "node", Catalog::Default(), &c);
  ASSERT_TRUE(n.ok()) << n.error();
  ASSERT_EQ(n->mig_layouts.size(), 2u);
  const GpuKind& a100 = Catalog::Default().kind(n->kind);
  EXPECT_EQ(FormatGpuMigLayout(a100, n->mig_layouts[0]), "4g.40gb@0,3g.40gb@4");  // in start order
  EXPECT_FALSE(n->mig_layouts[1].enabled);
  EXPECT_EQ(n->mig_config, "site-mix");
  // 4g.40gb may only start at slice 0.
  auto bad_start = ParseClusterNode(R"({"name": "b", "gpu": "a100-80gb", "gpus": 1,
      "mig": {"enabled": true, "layouts": ["4g.40gb@4"]}})", "node", Catalog::Default(), &c);
  ASSERT_FALSE(bad_start.ok());
  EXPECT_NE(bad_start.error().find("may not start at memory slice 4"), std::string::npos) << bad_start.error();
  auto overlap = ParseClusterNode(R"({"name": "c", "gpu": "a100-80gb", "gpus": 1,
      "mig": {"enabled": true, "layouts": ["3g.40gb@0,2g.20gb@2"]}})", "node", Catalog::Default(), &c);
  ASSERT_FALSE(overlap.ok());
  EXPECT_NE(overlap.error().find("overlap"), std::string::npos) << overlap.error();
  auto short_list = ParseClusterNode(R"({"name": "d", "gpu": "a100-80gb", "gpus": 2,
      "mig": {"enabled": true, "layouts": ["7g.80gb@0"]}})", "node", Catalog::Default(), &c);
  ASSERT_FALSE(short_list.ok());
  EXPECT_NE(short_list.error().find("1 per-GPU layouts for 2 GPUs"), std::string::npos) << short_list.error();
}

}  // namespace
}  // namespace tessera
