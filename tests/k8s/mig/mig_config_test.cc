// The mig-parted configuration of every layout Tessera may ask for: valid YAML with the GPU Operator's
// names, every layout placeable on a GPU, every profile offered, names usable as label values.
#include "k8s/mig/mig_config.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <regex>

#include "sched/mig_layouts.h"

namespace tessera {
namespace {

TEST(MigConfig, EveryLayoutIsPlaceableAndEveryProfileOffered) {
  for (const char* gpu : {"a100-80gb", "a100-40gb", "h100-80gb"}) {
    const GpuKind& kind = Catalog::Default().kind(Catalog::Default().Find(gpu));
    auto configs = MigConfigsFor(kind);
    ASSERT_TRUE(configs.ok()) << configs.error();
    const YAML::Node doc = YAML::Load(MigPartedYaml(*configs));
    ASSERT_EQ(doc["version"].as<std::string>(), "v1");
    ASSERT_EQ(doc["mig-configs"].size(), configs->size());
    std::set<std::string> offered;
    for (const MigConfig& c : *configs) {
      EXPECT_LE(c.name.size(), 63u) << c.name;
      EXPECT_TRUE(std::regex_match(c.name, std::regex("[A-Za-z0-9]([-A-Za-z0-9_.+]*[A-Za-z0-9])?")))
          << c.name;
      const YAML::Node spec = doc["mig-configs"][c.name][0];
      EXPECT_EQ(spec["devices"].as<std::string>(), "all");
      EXPECT_EQ(spec["mig-enabled"].as<bool>(), c.enabled);
      if (!c.enabled) continue;
      ASSERT_TRUE(spec["mig-devices"].IsMap()) << c.name;
      std::vector<int> profiles;
      for (const auto& [name, n] : c.counts) {
        EXPECT_EQ(spec["mig-devices"][name].as<int>(), n);
        offered.insert(name);
        for (int k = 0; k < n; ++k) profiles.push_back(kind.FindProfile(name));
      }
      const auto placed = PlaceProfiles(kind, profiles);
      EXPECT_EQ(placed.size(), profiles.size()) << gpu << " " << c.name << " is not placeable";
      EXPECT_TRUE(CheckMigLayout(kind, placed).ok()) << c.name;
    }
    for (const MigProfile& p : kind.profiles)
      if (!p.media) EXPECT_TRUE(offered.count(p.name)) << gpu << ": no config offers " << p.name;
  }
  const GpuKind& a100 = Catalog::Default().kind(Catalog::Default().Find("a100-80gb"));
  const auto configs = *MigConfigsFor(a100);
  EXPECT_EQ(configs[0].name, "all-disabled");
  EXPECT_FALSE(configs[0].enabled);
  const auto one_g = std::find_if(configs.begin(), configs.end(),
                                  [](const MigConfig& c) { return c.name == "all-1g.10gb"; });
  ASSERT_NE(one_g, configs.end());
  EXPECT_EQ(one_g->counts.at("1g.10gb"), 7);
  EXPECT_FALSE(MigConfigsFor(Catalog::Default().kind(Catalog::Default().Find("l40s-48gb"))).ok());
}

// The loop reads a node's nvidia.com/mig.config by name: every config name maps back to its own counts.
TEST(MigConfig, EveryNameReadsBackAsItsLayout) {
  const GpuKind& kind = Catalog::Default().kind(Catalog::Default().Find("a100-80gb"));
  const auto configs = MigConfigsFor(kind);  // held: a range-for over *temporary would dangle
  ASSERT_TRUE(configs.ok());
  for (const MigConfig& c : *configs) {
    auto layout = NamedMigLayout(kind, c.name);
    ASSERT_TRUE(layout.ok()) << c.name << ": " << layout.error();
    MigCounts counts;
    for (const MigInstance& i : *layout) ++counts[kind.profiles[i.profile].name];
    EXPECT_EQ(counts, c.counts) << c.name;
  }
  EXPECT_FALSE(NamedMigLayout(kind, "tessera-3x9g.99gb").ok());
  EXPECT_FALSE(NamedMigLayout(kind, "tessera-x3g.40gb").ok());
  EXPECT_FALSE(NamedMigLayout(kind, "tessera-").ok());
}

}  // namespace
}  // namespace tessera
