#include "k8s/mig/mig_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <set>

#include "sched/mig_layouts.h"

namespace tessera {
namespace {

MigCounts CountsOf(const GpuKind& kind, const std::vector<MigInstance>& layout) {
  MigCounts c;
  for (const MigInstance& i : layout) ++c[kind.profiles[i.profile].name];
  return c;
}

// tessera-<n>x<profile>-..., largest profiles first (label values: at most 63 characters).
std::string NameOf(const GpuKind& kind, const MigCounts& counts) {
  std::vector<std::pair<int, std::string>> parts;
  for (const auto& [profile, n] : counts) {
    const int p = kind.FindProfile(profile);
    std::string label = profile;  // mig-parted writes "+me" as ".me" in names (label values have no "+")
    if (const size_t plus = label.find('+'); plus != std::string::npos) label[plus] = '.';
    parts.push_back({-kind.profiles[p].memory_slices * 100 - kind.profiles[p].compute_slices,
                     fmt::format("{}x{}", n, label)});
  }
  std::sort(parts.begin(), parts.end());
  std::string name = "tessera";
  for (const auto& [order, text] : parts) name += "-" + text;
  return name;
}

}  // namespace

Result<std::vector<MigConfig>> MigConfigsFor(const GpuKind& kind) {
  if (!kind.mig_capable) return Status::Error(fmt::format("GPU kind {} has no MIG", kind.id));
  std::vector<MigConfig> out = {{"all-disabled", false, {}}, {"all-enabled", true, {}}};
  std::set<MigCounts> seen;
  auto add = [&](const std::string& name, const MigCounts& counts) {
    if (counts.empty() || !seen.insert(counts).second) return;
    out.push_back({name, true, counts});
  };
  if (auto balanced = NamedMigLayout(kind, "all-balanced"); balanced.ok())
    add("all-balanced", CountsOf(kind, *balanced));
  for (const MigProfile& p : kind.profiles) {
    auto layout = NamedMigLayout(kind, "all-" + p.name);
    if (layout.ok()) add("all-" + p.name, CountsOf(kind, *layout));
  }
  for (const auto& layout : MaximalMigLayouts(kind)) {
    const MigCounts c = CountsOf(kind, layout);
    add(NameOf(kind, c), c);
  }
  return out;
}

std::string MigPartedYaml(const std::vector<MigConfig>& configs) {
  YAML::Emitter e;
  e << YAML::BeginMap << YAML::Key << "version" << YAML::Value << "v1";
  e << YAML::Key << "mig-configs" << YAML::Value << YAML::BeginMap;
  for (const MigConfig& c : configs) {
    e << YAML::Key << c.name << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
    e << YAML::Key << "devices" << YAML::Value << "all";
    e << YAML::Key << "mig-enabled" << YAML::Value << c.enabled;
    if (c.enabled) {  // mig-parted requires mig-devices with MIG on (empty: no instances)
      e << YAML::Key << "mig-devices" << YAML::Value << YAML::Flow << YAML::BeginMap;
      for (const auto& [profile, n] : c.counts)
        e << YAML::Key << YAML::DoubleQuoted << profile << YAML::Value << n;
      e << YAML::EndMap << YAML::Block;
    }
    e << YAML::EndMap << YAML::EndSeq;
  }
  e << YAML::EndMap << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace tessera
