// A MIG node's layout from its nvidia.com/mig.config: configs of the GPU Operator's ConfigMap (per-GPU
// `devices` lists, `device-filter`), Tessera's names, else what GFD and the device plugin advertise; layouts
// that NVIDIA's placement rules forbid are refused with the reason.
#include "k8s/mig/mig_node_layout.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "k8s/cluster_view.h"

namespace tessera {
namespace {

using json = nlohmann::json;

// A site's ConfigMap: a per-GPU config, one per GPU model by device-filter, one the A100-80GB cannot hold,
// one in compute-instance form, one a GPU of which no spec matches, and one that does not read.
constexpr const char* kSiteConfigs = R"(version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  half-and-half:
    - devices: [0, 1, 2, 3]
      mig-enabled: true
      mig-devices: {"4g.40gb": 1, "3g.40gb": 1}
    - devices: [4, 5, 6, 7]
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
  per-model:
    - device-filter: ["0x20B010DE", "0x20B110DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"1g.5gb": 7}
    - device-filter: "0x20b210de"
      devices: all
      mig-enabled: true
      mig-devices: {"2g.20gb": 3}
  too-many:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 2, "2g.20gb": 1}
  compute-instances:
    - devices: all
      mig-enabled: true
      mig-devices: {"1c.3g.40gb": 3}
  first-four:
    - devices: [0, 1, 2, 3]
      mig-enabled: false
  broken:
    - devices: seven
      mig-enabled: true
)";

const GpuKind& KindNamed(const std::string& id) {
  return Catalog::Default().kind(Catalog::Default().Find(id));
}

std::vector<MigConfigSource> SiteSources() {
  std::vector<std::string> skipped;
  auto configs = ReadMigPartedConfigs(kSiteConfigs, &skipped);
  EXPECT_TRUE(configs.ok()) << configs.error();
  EXPECT_EQ(skipped.size(), 1u);
  return {{"gpu-operator/site-mig-config", configs.ok() ? *configs : std::vector<MigPartedConfig>{}}};
}

const MigPartedConfig& SiteConfig(const std::vector<MigConfigSource>& sources, const std::string& name) {
  for (const MigPartedConfig& c : sources[0].configs)
    if (c.name == name) return c;
  static const MigPartedConfig kMissing;
  ADD_FAILURE() << "no config " << name;
  return kMissing;
}

std::string LayoutText(const GpuKind& kind, const std::vector<GpuMigLayout>& gpus, size_t i) {
  return i < gpus.size() ? FormatGpuMigLayout(kind, gpus[i]) : "(none)";
}

// An A100-80GB node of 8 GPUs with GFD's MIG labels and the device plugin's allocatable (mixed strategy).
NodeModel GfdA100Node(const std::string& config, const std::map<std::string, int64_t>& allocatable,
                      const std::map<std::string, int64_t>& labels) {
  NodeModel n;
  n.name = "a100-gfd";
  n.product = "NVIDIA-A100-SXM4-80GB";
  n.kind = Catalog::Default().Find(n.product);
  n.gpu_count = 8;
  n.mig_config = config;
  n.allocatable_milli = {{"cpu", 255500}, {"memory", int64_t{1} << 50}};
  for (const auto& [r, count] : allocatable) n.allocatable_milli[r] = count * 1000;
  n.gfd_mig_counts = labels;
  return n;
}

TEST(MigNodeLayout, ReadsEverySpecAndSkipsWhatDoesNotRead) {
  std::vector<std::string> skipped;
  auto configs = ReadMigPartedConfigs(kSiteConfigs, &skipped);
  ASSERT_TRUE(configs.ok()) << configs.error();
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("mig-configs.broken"), std::string::npos) << skipped[0];
  const auto sources = SiteSources();
  const MigPartedConfig& half = SiteConfig(sources, "half-and-half");
  ASSERT_EQ(half.specs.size(), 2u);
  EXPECT_EQ(half.specs[1].devices, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_FALSE(half.specs[1].all_devices);
  const MigPartedConfig& per_model = SiteConfig(sources, "per-model");
  EXPECT_EQ(per_model.specs[0].device_filter.size(), 2u);
  EXPECT_EQ(per_model.specs[1].device_filter, std::vector<std::string>{"0x20b210de"});
  EXPECT_FALSE(ReadMigPartedConfigs("version: v2\nmig-configs: {}\n", &skipped).ok());
  EXPECT_FALSE(ReadMigPartedConfigs("[unclosed", &skipped).ok());
}

TEST(MigNodeLayout, PerGpuDevicesAndDeviceFiltersGiveEachGpuItsLayout) {
  const auto sources = SiteSources();
  const GpuKind& a100 = KindNamed("a100-80gb");
  auto half = MigPartedLayouts(SiteConfig(sources, "half-and-half"), a100, 8);
  ASSERT_TRUE(half.ok()) << half.error();
  ASSERT_EQ(half->size(), 8u);
  EXPECT_EQ(LayoutText(a100, *half, 0), "4g.40gb@0,3g.40gb@4");
  EXPECT_EQ(LayoutText(a100, *half, 3), "4g.40gb@0,3g.40gb@4");
  EXPECT_EQ(LayoutText(a100, *half, 4),
            "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6");
  // The A100-80GB's device ID (written in lower case) picks the second spec; the A100-40GB's the first.
  auto per_model = MigPartedLayouts(SiteConfig(sources, "per-model"), a100, 8);
  ASSERT_TRUE(per_model.ok()) << per_model.error();
  EXPECT_EQ(LayoutText(a100, *per_model, 7), "2g.20gb@0,2g.20gb@2,2g.20gb@4");
  const GpuKind& a100_40 = KindNamed("a100-40gb");
  auto small = MigPartedLayouts(SiteConfig(sources, "per-model"), a100_40, 4);
  ASSERT_TRUE(small.ok()) << small.error();
  EXPECT_EQ((*small)[0].instances.size(), 7u);
  // An H100 matches neither filter: no spec for its GPUs.
  auto h100 = MigPartedLayouts(SiteConfig(sources, "per-model"), KindNamed("h100-80gb"), 8);
  ASSERT_FALSE(h100.ok());
  EXPECT_NE(h100.error().find("GPU 0: no device spec matches it"), std::string::npos) << h100.error();
  auto off = MigPartedLayouts(SiteConfig(sources, "all-disabled"), a100, 2);
  ASSERT_TRUE(off.ok()) << off.error();
  EXPECT_FALSE((*off)[1].enabled);
}

TEST(MigNodeLayout, ConfigsTheHardwareCannotHoldAreRefusedWithTheReason) {
  const auto sources = SiteSources();
  const GpuKind& a100 = KindNamed("a100-80gb");
  auto too_many = MigPartedLayouts(SiteConfig(sources, "too-many"), a100, 8);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.error().find("cannot be placed"), std::string::npos) << too_many.error();
  auto ci = MigPartedLayouts(SiteConfig(sources, "compute-instances"), a100, 8);
  ASSERT_FALSE(ci.ok());
  EXPECT_NE(ci.error().find("no MIG profile '1c.3g.40gb'"), std::string::npos) << ci.error();
  auto partial = MigPartedLayouts(SiteConfig(sources, "first-four"), a100, 8);
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.error().find("GPU 4"), std::string::npos) << partial.error();
  EXPECT_TRUE(MigPartedDeviceIds("l40s-48gb").empty());
  EXPECT_FALSE(MigPartedDeviceIds("h100-80gb").empty());
}

TEST(MigNodeLayout, GfdCountsBecomeAFixedLayout) {
  const GpuKind& a100 = KindNamed("a100-80gb");
  // 16 x 2g.20gb + 8 x 3g.40gb on 8 GPUs: 2 + 1 on each.
  auto even = GfdMigLayouts(
      GfdA100Node("site-mix-2g3g", {{"nvidia.com/mig-2g.20gb", 16}, {"nvidia.com/mig-3g.40gb", 8}}, {}),
      a100);
  ASSERT_TRUE(even.ok()) << even.error();
  for (size_t g = 0; g < 8; ++g) EXPECT_EQ(LayoutText(a100, *even, g), "2g.20gb@0,2g.20gb@2,3g.40gb@4") << g;
  // Counts that do not divide: spread round the GPUs; every instance placed, every GPU valid.
  auto uneven = GfdMigLayouts(
      GfdA100Node("odd", {{"nvidia.com/mig-3g.40gb", 5}, {"nvidia.com/mig-1g.10gb", 9}}, {}), a100);
  ASSERT_TRUE(uneven.ok()) << uneven.error();
  std::map<std::string, int> total;
  for (const GpuMigLayout& g : *uneven) {
    EXPECT_TRUE(CheckMigLayout(a100, g.instances).ok());
    for (const MigInstance& m : g.instances) ++total[a100.profiles[m.profile].name];
  }
  EXPECT_EQ(total, (std::map<std::string, int>{{"1g.10gb", 9}, {"3g.40gb", 5}}));
  // Labels alone (no MIG resource allocatable yet), "+me" written ".me", and 2 GPUs with MIG off.
  auto labels =
      GfdMigLayouts(GfdA100Node("x", {{"nvidia.com/gpu", 2}}, {{"1g.10gb.me", 6}, {"7g.80gb", 0}}), a100);
  ASSERT_TRUE(labels.ok()) << labels.error();
  EXPECT_EQ(LayoutText(a100, *labels, 0), "1g.10gb+me@0");
  EXPECT_FALSE((*labels)[6].enabled);
  EXPECT_FALSE((*labels)[7].enabled);
}

TEST(MigNodeLayout, GfdCountsNoLayoutHoldsAreRefused) {
  const GpuKind& a100 = KindNamed("a100-80gb");
  // 8 x 7g.80gb and 8 x 1g.10gb: a 7g.80gb fills its GPU.
  auto full = GfdMigLayouts(
      GfdA100Node("x", {{"nvidia.com/mig-7g.80gb", 8}, {"nvidia.com/mig-1g.10gb", 8}}, {}), a100);
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.error().find("cannot be laid out on 8 MIG-enabled GPU(s)"), std::string::npos)
      << full.error();
  auto unknown = GfdMigLayouts(GfdA100Node("x", {{"nvidia.com/mig-5g.50gb", 8}}, {}), a100);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().find("5g.50gb"), std::string::npos) << unknown.error();
  auto nothing = GfdMigLayouts(GfdA100Node("x", {}, {}), a100);
  ASSERT_FALSE(nothing.ok());
  EXPECT_NE(nothing.error().find("advertises no MIG device"), std::string::npos) << nothing.error();
}

TEST(MigNodeLayout, ResolutionOrderConfigMapThenTesseraThenGfd) {
  const auto sources = SiteSources();
  const GpuKind& a100 = KindNamed("a100-80gb");
  const std::map<std::string, int64_t> advertised = {{"nvidia.com/mig-2g.20gb", 16},
                                                     {"nvidia.com/mig-3g.40gb", 8}};
  auto cm = ResolveNodeMigLayout(GfdA100Node("half-and-half", advertised, {}), a100, sources);
  ASSERT_TRUE(cm.ok()) << cm.error();
  EXPECT_EQ(cm->source, "ConfigMap gpu-operator/site-mig-config");
  EXPECT_TRUE(cm->note.empty());
  EXPECT_EQ(LayoutText(a100, cm->gpus, 5),
            "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6");
  auto named = ResolveNodeMigLayout(GfdA100Node("all-3g.40gb", advertised, {}), a100, sources);
  ASSERT_TRUE(named.ok()) << named.error();
  EXPECT_EQ(named->source, "Tessera's names");
  EXPECT_EQ(LayoutText(a100, named->gpus, 0), "3g.40gb@0,3g.40gb@4");
  auto gfd = ResolveNodeMigLayout(GfdA100Node("site-mix-2g3g", advertised, {}), a100, sources);
  ASSERT_TRUE(gfd.ok()) << gfd.error();
  EXPECT_EQ(LayoutText(a100, gfd->gpus, 7), "2g.20gb@0,2g.20gb@2,3g.40gb@4");
  EXPECT_NE(gfd->note.find("'site-mix-2g3g' is in no MIG ConfigMap (gpu-operator/site-mig-config)"),
            std::string::npos)
      << gfd->note;
  // A ConfigMap config the hardware cannot hold falls back to what the node advertises, saying why.
  auto fallback = ResolveNodeMigLayout(GfdA100Node("too-many", advertised, {}), a100, sources);
  ASSERT_TRUE(fallback.ok()) << fallback.error();
  EXPECT_NE(fallback->note.find("cannot be laid out exactly"), std::string::npos) << fallback->note;
  // Neither: an error naming the node and its config.
  auto neither = ResolveNodeMigLayout(GfdA100Node("site-mix-2g3g", {}, {}), a100, sources);
  ASSERT_FALSE(neither.ok());
  EXPECT_NE(neither.error().find("node a100-gfd: nvidia.com/mig.config=site-mix-2g3g"), std::string::npos)
      << neither.error();
}

// The node spec carries the layouts GPU by GPU, and the cluster model reads them back.
TEST(MigNodeLayout, NodeSpecsCarryTheLayoutsIntoTheCluster) {
  const auto sources = SiteSources();
  std::string note;
  auto spec = NodeSpecFor(GfdA100Node("half-and-half", {}, {}), {}, Catalog::Default(), sources, &note);
  ASSERT_TRUE(spec.ok()) << spec.error();
  EXPECT_TRUE(note.empty()) << note;
  ASSERT_EQ((*spec)["mig"]["layouts"].size(), 8u);
  EXPECT_EQ((*spec)["mig"]["layouts"][0], "4g.40gb@0,3g.40gb@4");
  std::vector<std::string> skipped;
  const Cluster c = ClusterFromSpecs({*spec}, Catalog::Default(), &skipped);
  ASSERT_EQ(c.nodes.size(), 1u) << (skipped.empty() ? "" : skipped[0]);
  ASSERT_EQ(c.nodes[0].mig_layouts.size(), 8u);
  EXPECT_EQ(c.nodes[0].mig_layouts[4].instances.size(), 7u);
  // Unknown and not modelled from GFD either: no spec, with the reason.
  auto refused = NodeSpecFor(GfdA100Node("nowhere", {}, {}), {}, Catalog::Default(), sources, &note);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("nowhere"), std::string::npos) << refused.error();
  // A config with MIG off on every GPU is a node of whole GPUs.
  auto off =
      NodeSpecFor(GfdA100Node("all-disabled", {{"nvidia.com/gpu", 8}}, {}), {}, Catalog::Default(), sources);
  ASSERT_TRUE(off.ok()) << off.error();
  EXPECT_FALSE(off->contains("mig"));
  EXPECT_EQ((*off)["gpus"], 8);
}

}  // namespace
}  // namespace tessera
