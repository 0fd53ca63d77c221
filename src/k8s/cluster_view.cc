#include "k8s/cluster_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <nlohmann/json.hpp>

#include "sched/cluster_state.h"

namespace tessera {

using json = nlohmann::json;

void NodeUse::Add(const PodDemand& d) {
  gpus += d.gpus;
  for (const auto& [p, n] : d.mig) mig[p] += n;
  cpu_milli += d.cpu_milli;
  memory_bytes += d.memory_bytes;
  ++pods;
}

bool PodTerminal(const json& pod) {
  const json* st = Field(pod, "status");
  const json* phase = st != nullptr ? Field(*st, "phase") : nullptr;
  return phase != nullptr && phase->is_string() && (*phase == "Succeeded" || *phase == "Failed");
}

std::string PodNode(const json& pod) {
  const json* spec = Field(pod, "spec");
  const json* n = spec != nullptr ? Field(*spec, "nodeName") : nullptr;
  return n != nullptr && n->is_string() ? n->get<std::string>() : "";
}

std::map<std::string, NodeUse> UsageByNode(const std::vector<const json*>& pods) {
  std::map<std::string, NodeUse> out;
  for (const json* p : pods) {
    const std::string node = PodNode(*p);
    if (node.empty() || PodTerminal(*p)) continue;
    auto d = ReadPodDemand(*p);
    if (d.ok()) out[node].Add(*d);
  }
  return out;
}

Result<json> NodeSpecFor(const NodeModel& n, const NodeUse& foreign, const Catalog& catalog,
                         const std::vector<MigConfigSource>& mig_sources, std::string* mig_note) {
  if (n.kind == kNone)
    return Status::Error(fmt::format("node {}: no GPU product Tessera knows (nvidia.com/gpu.product '{}')", n.name,
                                     n.product));
  if (n.gpu_count > 64) return Status::Error(fmt::format("node {}: nvidia.com/gpu.count {} (at most 64)", n.name, n.gpu_count));
  std::optional<NodeMigLayout> layout;
  if (!n.mig_config.empty() && n.mig_config != "all-disabled") {
    if (!catalog.kind(n.kind).mig_capable)
      return Status::Error(fmt::format("node {}: nvidia.com/mig.config={} on {}, which has no MIG", n.name,
                                       n.mig_config, catalog.kind(n.kind).id));
    auto resolved = ResolveNodeMigLayout(n, catalog.kind(n.kind), mig_sources);
    if (!resolved.ok()) return resolved.status();
    layout = std::move(resolved).value();
    if (mig_note != nullptr) *mig_note = layout->note;
  }
  // A config that turns MIG off on every GPU is a node of whole GPUs.
  const bool mig = layout && std::any_of(layout->gpus.begin(), layout->gpus.end(),
                                         [](const GpuMigLayout& g) { return g.enabled; });
  int64_t gpus = n.gpu_count;
  if (!mig) {
    const int64_t alloc = n.Allocatable(kGpuResource);
    gpus = gpus > 0 ? std::min<int64_t>(gpus, alloc) : alloc;
    gpus -= foreign.gpus;
  }
  if (gpus <= 0) return Status::Error(fmt::format("node {}: no GPU free for Tessera", n.name));
  auto milli = [&](const char* r) {
    auto it = n.allocatable_milli.find(r);
    return it == n.allocatable_milli.end() ? int64_t{0} : it->second;
  };
  const int64_t cpu_milli = std::max<int64_t>(0, milli("cpu") - foreign.cpu_milli);
  const int64_t memory_mib = std::max<int64_t>(0, (milli("memory") / 1000 - foreign.memory_bytes) >> 20);
  json o = {{"name", n.name},
            {"gpu", catalog.kind(n.kind).id},
            {"gpus", gpus},
            {"cpu_milli", cpu_milli},
            {"memory_mib", memory_mib},
            {"interconnect", gpus >= 4 ? "nvswitch" : "pcie"},
            {"leaf", n.leaf.empty() ? "leaf-0" : n.leaf},
            {"spine", n.spine.empty() ? "spine-0" : n.spine},
            {"tier", "owned"}};
  if (mig) {
    o["mig"] = {{"enabled", true}, {"config", n.mig_config}, {"layouts", json::array()}};
    for (const GpuMigLayout& g : layout->gpus) o["mig"]["layouts"].push_back(FormatGpuMigLayout(catalog.kind(n.kind), g));
  }
  return o;
}

Cluster ClusterFromSpecs(const std::vector<json>& specs, const Catalog& catalog, std::vector<std::string>* skipped) {
  Cluster c;
  c.name = "kubernetes";
  for (const json& s : specs) {
    Cluster names = c;  // a failed node must not add its leaf or spine
    auto node = ParseClusterNode(s.dump(), "node " + s.value("name", ""), catalog, &names);
    Cluster alone = names;  // what the Service's state would refuse of this node refuses it here, alone
    if (node.ok()) alone.nodes = {*node};
    auto state = node.ok() ? ClusterState::Build(alone, catalog) : Result<ClusterState>(node.status());
    if (!state.ok()) {
      if (skipped) skipped->push_back(state.error());
      continue;
    }
    c.leaf_names = names.leaf_names;
    c.spine_names = names.spine_names;
    c.nodes.push_back(std::move(node).value());
  }
  if (c.leaf_names.empty()) c.leaf_names.push_back("leaf-0");
  if (c.spine_names.empty()) c.spine_names.push_back("spine-0");
  return c;
}

}  // namespace tessera
