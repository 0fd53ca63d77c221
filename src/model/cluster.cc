#include "model/cluster.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fmt/format.h>
#include <set>

namespace tessera {
namespace {

int Intern(std::vector<std::string>& names, const std::string& name) {
  auto it = std::find(names.begin(), names.end(), name);
  if (it != names.end()) return static_cast<int>(it - names.begin());
  names.push_back(name);
  return static_cast<int>(names.size()) - 1;
}

const std::set<std::string> kNodeKeys = {
    "name",  "count",        "gpu",        "gpus",          "cpu",         "cpu_milli",     "memory_gib",
    "memory_mib", "labels",  "interconnect", "pcie_group_size", "mig",      "leaf",          "spine",
    "tier",  "pool",         "price_per_gpu_hour", "nic_gbps_per_gpu"};

// Reads one scalar field with a typed error naming source, node and field.
template <typename T>
Status ReadField(const YAML::Node& n, const char* key, T* out, const std::string& where) {
  if (!n[key]) return Status::Ok();
  try {
    *out = n[key].as<T>();
  } catch (const YAML::Exception&) {
    return Status::Error(fmt::format("{}: field '{}': expected a {} value, got '{}'", where, key,
                                     std::is_same_v<T, std::string> ? "text"
                                     : std::is_floating_point_v<T> ? "number"
                                     : std::is_same_v<T, bool>     ? "boolean"
                                                                   : "integer",
                                     n[key].IsScalar() ? n[key].Scalar() : "(not a scalar)"));
  }
  return Status::Ok();
}

Status ParseNode(const YAML::Node& y, const YAML::Node& defaults, const std::string& where,
                 const Catalog& catalog, Cluster* c, Node* out) {
  Node n;
  // Defaults first, then the entry itself.
  for (const YAML::Node* src : {&defaults, &y}) {
    if (!*src || !src->IsMap()) continue;
    for (auto it = src->begin(); it != src->end(); ++it) {
      std::string key = it->first.as<std::string>();
      if (!kNodeKeys.count(key)) return Status::Error(fmt::format("{}: unknown field '{}'", where, key));
    }
    const YAML::Node& s = *src;
    std::string gpu;
    if (auto st = ReadField(s, "gpu", &gpu, where); !st.ok()) return st;
    if (!gpu.empty()) {
      n.kind = catalog.Find(gpu);
      if (n.kind == kNone) return Status::Error(fmt::format("{}: field 'gpu': unknown GPU kind '{}'", where, gpu));
    }
    if (auto st = ReadField(s, "gpus", &n.gpu_count, where); !st.ok()) return st;
    if (s["cpu"]) {
      double cpu_cores = 0;
      if (auto st = ReadField(s, "cpu", &cpu_cores, where); !st.ok()) return st;
      if (cpu_cores < 0) return Status::Error(where + ": field 'cpu': must not be negative");
      n.cpu_milli = static_cast<int64_t>(cpu_cores * 1000 + 0.5);
    }
    if (auto st = ReadField(s, "cpu_milli", &n.cpu_milli, where); !st.ok()) return st;
    if (s["memory_gib"]) {
      double mem_gib = 0;
      if (auto st = ReadField(s, "memory_gib", &mem_gib, where); !st.ok()) return st;
      if (mem_gib < 0) return Status::Error(where + ": field 'memory_gib': must not be negative");
      n.memory_mib = static_cast<int64_t>(mem_gib * 1024 + 0.5);
    }
    if (auto st = ReadField(s, "memory_mib", &n.memory_mib, where); !st.ok()) return st;
    if (s["labels"]) {
      if (!s["labels"].IsMap()) return Status::Error(where + ": field 'labels': expected a map");
      for (auto it = s["labels"].begin(); it != s["labels"].end(); ++it)
        n.labels[it->first.as<std::string>()] = it->second.as<std::string>();
    }
    std::string ic;
    if (auto st = ReadField(s, "interconnect", &ic, where); !st.ok()) return st;
    if (!ic.empty()) {
      if (ic == "nvswitch") n.interconnect = Interconnect::kNvSwitch;
      else if (ic == "nvlink-pairs") n.interconnect = Interconnect::kNvLinkPairs;
      else if (ic == "pcie") n.interconnect = Interconnect::kPcie;
      else
        return Status::Error(fmt::format(
            "{}: field 'interconnect': '{}' is not one of nvswitch, nvlink-pairs, pcie", where, ic));
    }
    if (auto st = ReadField(s, "pcie_group_size", &n.pcie_group_size, where); !st.ok()) return st;
    if (s["mig"]) {
      const YAML::Node& m = s["mig"];
      if (!m.IsMap()) return Status::Error(where + ": field 'mig': expected a map {enabled, config}");
      if (auto st = ReadField(m, "enabled", &n.mig_enabled, where + ": mig"); !st.ok()) return st;
      if (auto st = ReadField(m, "config", &n.mig_config, where + ": mig"); !st.ok()) return st;
    }
    std::string leaf, spine, tier;
    if (auto st = ReadField(s, "leaf", &leaf, where); !st.ok()) return st;
    if (auto st = ReadField(s, "spine", &spine, where); !st.ok()) return st;
    if (!leaf.empty()) n.leaf = Intern(c->leaf_names, leaf);
    if (!spine.empty()) n.spine = Intern(c->spine_names, spine);
    if (auto st = ReadField(s, "tier", &tier, where); !st.ok()) return st;
    if (!tier.empty()) {
      auto t = ParseTier(tier);
      if (!t.ok()) return Status::Error(where + ": field 'tier': " + t.error());
      n.tier = *t;
    }
    if (auto st = ReadField(s, "pool", &n.pool, where); !st.ok()) return st;
    if (auto st = ReadField(s, "price_per_gpu_hour", &n.price_per_gpu_hour, where); !st.ok()) return st;
    if (auto st = ReadField(s, "nic_gbps_per_gpu", &n.nic_gbps_per_gpu, where); !st.ok()) return st;
  }
  if (n.gpu_count < 0 || n.gpu_count > 64)
    return Status::Error(fmt::format("{}: field 'gpus': {} is outside 0..64", where, n.gpu_count));
  if (n.gpu_count > 0 && n.kind == kNone)
    return Status::Error(where + ": field 'gpu': a node with GPUs needs a GPU kind");
  if (n.cpu_milli < 0) return Status::Error(where + ": field 'cpu': must not be negative");
  if (n.memory_mib < 0) return Status::Error(where + ": field 'memory_gib': must not be negative");
  if (n.price_per_gpu_hour < 0) return Status::Error(where + ": field 'price_per_gpu_hour': must not be negative");
  if (n.mig_enabled && n.kind != kNone && !catalog.kind(n.kind).mig_capable)
    return Status::Error(fmt::format("{}: field 'mig': GPU kind '{}' is not MIG-capable", where,
                                     catalog.kind(n.kind).id));
  if (n.pool.empty()) n.pool = TierName(n.tier);
  if (c->leaf_names.empty()) Intern(c->leaf_names, "leaf-0");
  if (c->spine_names.empty()) Intern(c->spine_names, "spine-0");
  *out = std::move(n);
  return Status::Ok();
}

}  // namespace

const char* TierName(Tier t) {
  switch (t) {
    case Tier::kReserved: return "reserved";
    case Tier::kOnDemand: return "on-demand";
    case Tier::kSpot: return "spot";
    case Tier::kOwned: return "owned";
  }
  return "?";
}

Result<Tier> ParseTier(std::string_view s) {
  if (s == "reserved") return Tier::kReserved;
  if (s == "on-demand" || s == "ondemand") return Tier::kOnDemand;
  if (s == "spot" || s == "preemptible") return Tier::kSpot;
  if (s == "owned") return Tier::kOwned;
  return Status::Error(fmt::format("'{}' is not one of reserved, on-demand, spot, owned", s));
}

int Cluster::TotalGpus() const {
  int total = 0;
  for (const Node& n : nodes) total += n.gpu_count;
  return total;
}

Result<Cluster> LoadClusterYaml(std::string_view text, std::string_view source, const Catalog& catalog) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::Error(fmt::format("{}:{}: YAML syntax error: {}", source, e.mark.line + 1, e.msg));
  }
  if (!root.IsMap()) return Status::Error(fmt::format("{}: expected a map with 'nodes:'", source));
  Cluster c;
  try {
    if (root["name"]) c.name = root["name"].as<std::string>();
    if (root["spine_oversubscription"]) c.spine_oversubscription = root["spine_oversubscription"].as<double>();
  } catch (const YAML::Exception&) {
    return Status::Error(fmt::format("{}: field 'name' or 'spine_oversubscription' has the wrong type", source));
  }
  if (c.spine_oversubscription < 1.0)
    return Status::Error(fmt::format("{}: field 'spine_oversubscription': must be >= 1", source));
  const YAML::Node defaults = root["defaults"];
  const YAML::Node nodes = root["nodes"];
  if (!nodes || !nodes.IsSequence()) return Status::Error(fmt::format("{}: field 'nodes': expected a list", source));
  std::set<std::string> seen;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const YAML::Node& y = nodes[i];
    std::string where = fmt::format("{}: nodes[{}]", source, i);
    if (!y.IsMap()) return Status::Error(where + ": expected a map");
    std::string name;
    int count = 1;
    if (auto st = ReadField(y, "name", &name, where); !st.ok()) return st;
    if (auto st = ReadField(y, "count", &count, where); !st.ok()) return st;
    if (name.empty()) return Status::Error(where + ": field 'name': required");
    if (count < 1 || count > 100000) return Status::Error(where + ": field 'count': must be 1..100000");
    where = fmt::format("{}: node '{}'", source, name);
    Node n;
    if (auto st = ParseNode(y, defaults, where, catalog, &c, &n); !st.ok()) return st;
    for (int k = 0; k < count; ++k) {
      Node copy = n;
      copy.name = count == 1 ? name : fmt::format("{}-{:03d}", name, k);
      if (!seen.insert(copy.name).second)
        return Status::Error(fmt::format("{}: duplicate node name '{}'", where, copy.name));
      c.nodes.push_back(std::move(copy));
    }
  }
  if (c.leaf_names.empty()) c.leaf_names.push_back("leaf-0");
  if (c.spine_names.empty()) c.spine_names.push_back("spine-0");
  return c;
}

}  // namespace tessera
