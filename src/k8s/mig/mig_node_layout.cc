#include "k8s/mig/mig_node_layout.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>

#include "sched/mig_layouts.h"

namespace tessera {
namespace {

std::string UpperCase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// One spec of a config; throws YAML::Exception on wrong types (the caller skips the config).
Result<MigPartedSpec> ReadPartedSpec(const YAML::Node& s) {
  if (!s.IsMap()) return Status::Error("a device spec is not a mapping");
  MigPartedSpec spec;
  const YAML::Node devices = s["devices"];
  if (devices && devices.IsScalar() && devices.as<std::string>() == "all") {
    spec.all_devices = true;
  } else if (devices && devices.IsSequence()) {
    for (const auto& d : devices) {
      const int i = d.as<int>();
      if (i < 0 || i > 1024) return Status::Error(fmt::format("device index {} out of range", i));
      spec.devices.push_back(i);
    }
  } else {
    return Status::Error("devices is neither `all` nor a list of GPU indices");
  }
  if (const YAML::Node f = s["device-filter"]; f && f.IsScalar()) {
    spec.device_filter.push_back(f.as<std::string>());
  } else if (f && f.IsSequence()) {
    for (const auto& id : f) spec.device_filter.push_back(id.as<std::string>());
  }
  spec.enabled = s["mig-enabled"] && s["mig-enabled"].as<bool>();
  if (const YAML::Node md = s["mig-devices"]; spec.enabled && md && md.IsMap())
    for (auto it = md.begin(); it != md.end(); ++it) {
      const int n = it->second.as<int>();
      if (n < 0 || n > 64)
        return Status::Error(
            fmt::format("mig-devices.{}: count {} out of range", it->first.as<std::string>(), n));
      if (n > 0) spec.counts[it->first.as<std::string>()] = n;
    }
  return spec;
}

// Whether `spec` applies to GPU `gpu` of a kind whose device IDs are `ids`; error when its filter names no
// ID Tessera knows for any kind it could tell apart (the kind has no known IDs).
Result<bool> SpecMatches(const MigPartedSpec& spec, const std::vector<std::string>& ids, int gpu) {
  if (!spec.all_devices && std::find(spec.devices.begin(), spec.devices.end(), gpu) == spec.devices.end())
    return false;
  if (spec.device_filter.empty()) return true;
  if (ids.empty())
    return Status::Error("its device-filter names PCI device IDs and Tessera knows none of this GPU kind's");
  for (const std::string& f : spec.device_filter)
    for (const std::string& id : ids)
      if (UpperCase(f) == UpperCase(id)) return true;  // 0x20b210de names the same GPU as 0x20B210DE
  return false;
}

// The GPU layout of one spec, placed with Tessera's geometry.
Result<GpuMigLayout> PlaceSpec(const MigPartedSpec& spec, const GpuKind& kind) {
  if (!spec.enabled) return GpuMigLayout{false, {}};
  std::vector<int> want;
  for (const auto& [profile, n] : spec.counts) {
    const int p = kind.FindProfile(profile);
    if (p < 0) return Status::Error(fmt::format("GPU kind '{}' has no MIG profile '{}'", kind.id, profile));
    want.insert(want.end(), n, p);
  }
  GpuMigLayout out;
  if (want.empty()) return out;
  out.instances = PlaceProfiles(kind, want);
  if (out.instances.empty())
    return Status::Error("its mig-devices cannot be placed on one GPU under NVIDIA's placement rules");
  return out;
}

// A resource or label profile ("1g.10gb.me", as the device plugin writes "+me") as the kind's profile index.
int AdvertisedProfile(const GpuKind& kind, std::string name) {
  if (const int p = kind.FindProfile(name); p >= 0) return p;
  if (name.size() > 3 && name.compare(name.size() - 3, 3, ".me") == 0) name.replace(name.size() - 3, 1, "+");
  return kind.FindProfile(name);
}

// Instances per profile index the node advertises (allocatable first, else GFD's labels).
Result<std::map<int, int64_t>> AdvertisedCounts(const NodeModel& n, const GpuKind& kind, std::string* from) {
  std::map<std::string, int64_t> raw;
  for (const auto& [resource, milli] : n.allocatable_milli)
    if (resource.rfind(kMigResourcePrefix, 0) == 0 && milli >= 1000)
      raw[resource.substr(kMigResourcePrefix.size())] = milli / 1000;
  *from = "allocatable";
  if (raw.empty()) {
    for (const auto& [profile, count] : n.gfd_mig_counts)
      if (count > 0) raw[profile] = count;
    *from = "GFD labels";
  }
  if (raw.empty())
    return Status::Error(
        "it advertises no MIG device (no allocatable nvidia.com/mig-<profile>, no "
        "nvidia.com/mig-<profile>.count label)");
  std::map<int, int64_t> out;
  for (const auto& [profile, count] : raw) {
    const int p = AdvertisedProfile(kind, profile);
    if (p < 0)
      return Status::Error(
          fmt::format("it advertises nvidia.com/mig-{}, not a MIG profile of {}", profile, kind.id));
    if (count > int64_t{n.gpu_count} * kind.profiles[p].max_count)
      return Status::Error(
          fmt::format("it advertises {} x {}, more than its {} GPUs can hold", count, profile, n.gpu_count));
    out[p] += count;
  }
  return out;
}

// Spreads the instances over `gpus` GPUs: evenly when every count divides, else round the GPUs, largest
// profiles first. Empty when they cannot all be placed.
std::vector<std::vector<MigInstance>> SpreadInstances(const GpuKind& kind,
                                                      const std::map<int, int64_t>& counts, int gpus) {
  std::vector<std::pair<int, int>> order;  // (-memory slices, profile)
  bool even = true;
  for (const auto& [p, n] : counts) {
    order.push_back({-kind.profiles[p].memory_slices, p});
    even = even && n % gpus == 0;
  }
  std::sort(order.begin(), order.end());
  std::vector<std::vector<int>> per(gpus);
  int next = 0;
  for (const auto& [slices, p] : order)
    for (int64_t k = 0; k < counts.at(p); ++k) {
      if (even) {
        per[k % gpus].push_back(p);
        continue;
      }
      int tried = 0;
      for (; tried < gpus; ++tried) {
        std::vector<int> with = per[(next + tried) % gpus];
        with.push_back(p);
        if (!PlaceProfiles(kind, with).empty()) break;
      }
      if (tried == gpus) return {};
      per[(next + tried) % gpus].push_back(p);
      next = (next + tried + 1) % gpus;
    }
  std::vector<std::vector<MigInstance>> out;
  for (const std::vector<int>& profiles : per) {
    out.push_back(profiles.empty() ? std::vector<MigInstance>{} : PlaceProfiles(kind, profiles));
    if (!profiles.empty() && out.back().empty()) return {};
  }
  return out;
}

std::string CountsText(const GpuKind& kind, const std::map<int, int64_t>& counts) {
  std::string out;
  for (const auto& [p, n] : counts)
    out += fmt::format("{}{} x {}", out.empty() ? "" : ", ", n, kind.profiles[p].name);
  return out;
}

}  // namespace

Result<std::vector<MigPartedConfig>> ReadMigPartedConfigs(const std::string& text,
                                                          std::vector<std::string>* skipped) {
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::Error(fmt::format("not a mig-parted config: {}", e.what()));
  }
  if (!doc.IsMap() || !doc["version"] || !doc["version"].IsScalar() || doc["version"].Scalar() != "v1")
    return Status::Error("not a mig-parted config: `version: v1` is missing");
  const YAML::Node cfgs = doc["mig-configs"];
  if (!cfgs || !cfgs.IsMap()) return Status::Error("not a mig-parted config: `mig-configs` is not a mapping");
  std::vector<MigPartedConfig> out;
  for (auto it = cfgs.begin(); it != cfgs.end(); ++it) {
    const std::string name = it->first.IsScalar() ? it->first.Scalar() : "?";
    MigPartedConfig c{name, {}};
    std::string why;
    try {
      if (!it->second.IsSequence() || it->second.size() == 0) why = "not a list of device specs";
      for (size_t i = 0; why.empty() && i < it->second.size(); ++i) {
        auto spec = ReadPartedSpec(it->second[i]);
        if (spec.ok())
          c.specs.push_back(*spec);
        else
          why = fmt::format("spec {}: {}", i, spec.error());
      }
    } catch (const YAML::Exception& e) {
      why = e.what();
    }
    if (why.empty())
      out.push_back(std::move(c));
    else if (skipped)
      skipped->push_back(fmt::format("mig-configs.{}: {}", name, why));
  }
  return out;
}

std::vector<std::string> MigPartedDeviceIds(std::string_view kind_id) {
  static const std::map<std::string_view, std::vector<std::string>> kIds = {
      {"a100-40gb", {"0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"}},
      {"a100-80gb", {"0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE"}},
      {"a30-24gb", {"0x20B710DE"}},
      {"h100-80gb", {"0x233010DE", "0x233110DE", "0x232210DE", "0x232410DE"}},
      {"h100-94gb", {"0x232110DE", "0x233A10DE"}},
      {"h200-141gb", {"0x233510DE", "0x233B10DE"}},
      {"b200-180gb", {"0x290110DE"}},
  };
  auto it = kIds.find(kind_id);
  return it == kIds.end() ? std::vector<std::string>{} : it->second;
}

Result<std::vector<GpuMigLayout>> MigPartedLayouts(const MigPartedConfig& config, const GpuKind& kind,
                                                   int gpus) {
  const std::vector<std::string> ids = MigPartedDeviceIds(kind.id);
  std::vector<GpuMigLayout> out;
  for (int g = 0; g < gpus; ++g) {
    const MigPartedSpec* chosen = nullptr;
    for (size_t i = 0; i < config.specs.size(); ++i) {
      const MigPartedSpec& s = config.specs[i];
      auto match = SpecMatches(s, ids, g);
      if (!match.ok()) return Status::Error(fmt::format("spec {}: {}", i, match.error()));
      if (!*match) continue;
      if (chosen != nullptr && (chosen->enabled != s.enabled || chosen->counts != s.counts))
        return Status::Error(fmt::format("GPU {}: two device specs with different layouts match it", g));
      chosen = &s;
    }
    if (chosen == nullptr) return Status::Error(fmt::format("GPU {}: no device spec matches it", g));
    auto layout = PlaceSpec(*chosen, kind);
    if (!layout.ok()) return Status::Error(fmt::format("GPU {}: {}", g, layout.error()));
    out.push_back(*layout);
  }
  return out;
}

Result<std::vector<GpuMigLayout>> GfdMigLayouts(const NodeModel& n, const GpuKind& kind) {
  if (!kind.mig_capable) return Status::Error(fmt::format("GPU kind '{}' has no MIG", kind.id));
  if (n.gpu_count <= 0 || n.gpu_count > 64) return Status::Error("no nvidia.com/gpu.count label (1-64 GPUs)");
  std::string from;
  auto counts = AdvertisedCounts(n, kind, &from);
  if (!counts.ok()) return counts.status();
  const int whole = static_cast<int>(std::min<int64_t>(n.gpu_count, n.Allocatable(kGpuResource)));
  const int mig_gpus = n.gpu_count - whole;
  const auto spread =
      mig_gpus > 0 ? SpreadInstances(kind, *counts, mig_gpus) : std::vector<std::vector<MigInstance>>{};
  if (spread.empty())
    return Status::Error(
        fmt::format("its {} ({}) cannot be laid out on {} MIG-enabled GPU(s) under NVIDIA's "
                    "placement rules",
                    from, CountsText(kind, *counts), mig_gpus));
  std::vector<GpuMigLayout> out;
  for (const auto& instances : spread) out.push_back({true, instances});
  out.resize(n.gpu_count, GpuMigLayout{false, {}});
  return out;
}

Result<NodeMigLayout> ResolveNodeMigLayout(const NodeModel& n, const GpuKind& kind,
                                           const std::vector<MigConfigSource>& sources) {
  const std::string& name = n.mig_config;
  std::string why;
  for (const MigConfigSource& src : sources) {
    auto c = std::find_if(src.configs.begin(), src.configs.end(),
                          [&](const MigPartedConfig& x) { return x.name == name; });
    if (c == src.configs.end()) continue;
    auto layouts = MigPartedLayouts(*c, kind, n.gpu_count);
    if (layouts.ok()) return NodeMigLayout{*layouts, "ConfigMap " + src.config_map, ""};
    why = fmt::format("config '{}' of ConfigMap {} cannot be laid out exactly: {}", name, src.config_map,
                      layouts.error());
    break;
  }
  if (why.empty()) {
    if (auto named = NamedMigLayout(kind, name); named.ok())
      return NodeMigLayout{std::vector<GpuMigLayout>(n.gpu_count, GpuMigLayout{true, *named}),
                           "Tessera's names", ""};
    std::string searched;
    for (const MigConfigSource& src : sources) searched += (searched.empty() ? "" : ", ") + src.config_map;
    why = fmt::format("config '{}' is in no MIG ConfigMap ({}) and not one of Tessera's names", name,
                      searched.empty() ? "none could be read" : searched);
  }
  auto gfd = GfdMigLayouts(n, kind);
  if (!gfd.ok())
    return Status::Error(
        fmt::format("node {}: nvidia.com/mig.config={}: {}; nor can it be modelled from what the node "
                    "advertises: {}",
                    n.name, name, why, gfd.error()));
  return NodeMigLayout{
      *gfd, "GFD labels and allocatable",
      fmt::format("{}; modelled as a fixed layout from its GPU Feature Discovery labels and allocatable",
                  why)};
}

}  // namespace tessera
