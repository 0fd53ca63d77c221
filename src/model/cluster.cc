#include "model/cluster.h"

#include <algorithm>
#include <fmt/format.h>
#include <set>

#include "base/yaml_reader.h"

namespace tessera {
namespace {

int Intern(std::vector<std::string>& names, const std::string& name) {
  auto it = std::find(names.begin(), names.end(), name);
  if (it != names.end()) return static_cast<int>(it - names.begin());
  names.push_back(name);
  return static_cast<int>(names.size()) - 1;
}

// Reads the node fields of one map (the `defaults` map or a `nodes[i]` entry) over `*n`.
Status ReadNodeFields(FieldReader& r, const Catalog& catalog, Cluster* c, Node* n) {
  r.Allow("name");
  r.Allow("count");
  std::string gpu;
  r.String("gpu", &gpu, false);
  if (r.ok() && !gpu.empty()) {
    n->kind = catalog.Find(gpu);
    if (n->kind == kNone) r.Fail("gpu", fmt::format("unknown GPU kind '{}' (known: {})", gpu, catalog.KnownIds()));
  }
  r.Int("gpus", &n->gpu_count, false, 0, 64);
  double cpu_cores = -1;
  r.Double("cpu", &cpu_cores, false, 0, 1e6);
  if (cpu_cores >= 0) n->cpu_milli = static_cast<int64_t>(cpu_cores * 1000 + 0.5);
  r.Int("cpu_milli", &n->cpu_milli, false, 0, int64_t{1000} * 1000 * 1000);
  double mem_gib = -1;
  r.Double("memory_gib", &mem_gib, false, 0, 1 << 24);
  if (mem_gib >= 0) n->memory_mib = static_cast<int64_t>(mem_gib * 1024 + 0.5);
  r.Int("memory_mib", &n->memory_mib, false, 0, int64_t{1} << 34);
  const YAML::Node labels = r.Map("labels");
  if (r.ok() && labels.IsDefined()) {
    for (auto it = labels.begin(); it != labels.end(); ++it) {
      auto key = YamlString(it->first, r.source(), r.PathOf("labels"));
      if (!key.ok()) return key.status();
      auto value = YamlString(it->second, r.source(), r.PathOf("labels." + *key));
      if (!value.ok()) return value.status();
      n->labels[*key] = *value;
    }
  }
  std::string ic;
  r.Choice("interconnect", &ic, false, {"nvswitch", "nvlink-pairs", "pcie"});
  if (ic == "nvswitch") n->interconnect = Interconnect::kNvSwitch;
  if (ic == "nvlink-pairs") n->interconnect = Interconnect::kNvLinkPairs;
  if (ic == "pcie") n->interconnect = Interconnect::kPcie;
  r.Int("pcie_group_size", &n->pcie_group_size, false, 0, 64);
  if (const YAML::Node m = r.Map("mig"); r.ok() && m.IsDefined()) {
    FieldReader mr(m, r.source(), r.PathOf("mig"));
    mr.Bool("enabled", &n->mig_enabled);
    mr.String("config", &n->mig_config, false);
    std::vector<std::string> layouts;
    mr.StringList("layouts", &layouts, false);
    if (mr.ok() && !layouts.empty() && n->kind == kNone) mr.Fail("layouts", "per-GPU layouts need the node's GPU kind");
    if (mr.ok() && !layouts.empty()) n->mig_layouts.clear();
    for (size_t i = 0; mr.ok() && i < layouts.size(); ++i) {
      auto l = ParseGpuMigLayout(catalog.kind(n->kind), layouts[i]);
      if (l.ok()) n->mig_layouts.push_back(*l);
      else mr.Fail("layouts", fmt::format("GPU {}: {}", i, l.error()));
    }
    if (Status st = mr.Finish(); !st.ok()) return st;
  }
  std::string leaf, spine, tier;
  r.String("leaf", &leaf, false);
  r.String("spine", &spine, false);
  if (!leaf.empty()) n->leaf = Intern(c->leaf_names, leaf);
  if (!spine.empty()) n->spine = Intern(c->spine_names, spine);
  r.String("tier", &tier, false);
  if (r.ok() && !tier.empty()) {
    auto t = ParseTier(tier);
    if (t.ok()) n->tier = *t;
    else r.Fail("tier", t.error());
  }
  r.String("pool", &n->pool, false);
  r.Double("price_per_gpu_hour", &n->price_per_gpu_hour, false, 0, 1e6);
  r.Double("nic_gbps_per_gpu", &n->nic_gbps_per_gpu, false, 0, 1e6);
  return r.Finish();
}

// One `nodes[i]` entry over the `defaults` map. `path` is "nodes[i]".
Status ParseNode(const YAML::Node& y, const YAML::Node& defaults, std::string_view source, const std::string& path,
                 const Catalog& catalog, Cluster* c, Node* out) {
  Node n;
  if (defaults.IsDefined()) {
    FieldReader d(defaults, source, "defaults", /*absent_ok=*/true);
    if (Status st = ReadNodeFields(d, catalog, c, &n); !st.ok()) return st;
  }
  FieldReader r(y, source, path);
  if (Status st = ReadNodeFields(r, catalog, c, &n); !st.ok()) return st;
  if (n.gpu_count > 0 && n.kind == kNone) r.Fail("gpu", "a node with GPUs needs a GPU kind");
  if (n.mig_enabled && n.kind != kNone && !catalog.kind(n.kind).mig_capable)
    r.Fail("mig", fmt::format("GPU kind '{}' is not MIG-capable", catalog.kind(n.kind).id));
  if (!n.mig_layouts.empty() && (!n.mig_enabled || static_cast<int>(n.mig_layouts.size()) != n.gpu_count))
    r.Fail("mig", fmt::format("{} per-GPU layouts for {} GPUs{}", n.mig_layouts.size(), n.gpu_count,
                              n.mig_enabled ? "" : " (and MIG is not enabled)"));
  if (!r.ok()) return r.status();
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
  if (s == "on-demand" || s == "on_demand" || s == "ondemand") return Tier::kOnDemand;
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
  auto parsed = ParseYaml(text, source);
  if (!parsed.ok()) return parsed.status();
  FieldReader top(*parsed, source, "");
  Cluster c;
  top.String("name", &c.name, false);
  top.Double("spine_oversubscription", &c.spine_oversubscription, false, 1, 1e6);
  const YAML::Node defaults = top.Map("defaults");
  const YAML::Node nodes = top.Seq("nodes", /*required=*/true);
  if (Status st = top.Finish(); !st.ok()) return st;
  std::set<std::string> seen;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const YAML::Node y = nodes[i];
    const std::string path = fmt::format("nodes[{}]", i);
    FieldReader head(y, source, path);
    std::string name;
    int count = 1;
    head.String("name", &name, true);
    head.Int("count", &count, false, 1, 100000);
    if (head.ok() && name.empty()) head.Fail("name", "must not be empty");
    if (!head.ok()) return head.status();
    Node n;
    if (auto st = ParseNode(y, defaults, source, path, catalog, &c, &n); !st.ok()) return st;
    for (int k = 0; k < count; ++k) {
      Node copy = n;
      copy.name = count == 1 ? name : fmt::format("{}-{:03d}", name, k);
      if (!seen.insert(copy.name).second)
        return Status::Error(fmt::format("{}: duplicate node name '{}'", YamlWhere(source, y, path + ".name"),
                                         copy.name));
      c.nodes.push_back(std::move(copy));
    }
  }
  if (c.leaf_names.empty()) c.leaf_names.push_back("leaf-0");
  if (c.spine_names.empty()) c.spine_names.push_back("spine-0");
  return c;
}

Result<Node> ParseClusterNode(std::string_view text, std::string_view source, const Catalog& catalog, Cluster* c) {
  auto parsed = ParseYaml(text, source);
  if (!parsed.ok()) return parsed.status();
  FieldReader head(*parsed, source, "");
  std::string name;
  head.String("name", &name, true);
  if (head.ok() && name.empty()) head.Fail("name", "must not be empty");
  if (head.ok() && head.Has("count")) head.Fail("count", "one node at a time: no 'count' here");
  if (!head.ok()) return head.status();
  Node n;
  if (Status st = ParseNode(*parsed, YAML::Node(), source, "", catalog, c, &n); !st.ok()) return st;
  n.name = name;
  return n;
}

}  // namespace tessera
