#pragma once
// The cluster as Tessera models it, from Kubernetes nodes: each GPU node's kind (GFD product), GPU count,
// MIG mode and layout (nvidia.com/mig.config), leaf and spine (configurable labels), CPU and memory from
// its allocatable, less what pods of other schedulers already use there (they count as used capacity,
// so Tessera never oversubscribes a node). Pure functions: objects in, values out.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "k8s/api/objects.h"
#include "k8s/mig/mig_node_layout.h"
#include "model/catalog.h"
#include "model/cluster.h"

namespace tessera {

// What pods use on one node (sums of their requests).
struct NodeUse {
  int64_t gpus = 0;
  std::map<std::string, int64_t> mig;  // profile -> slices
  int64_t cpu_milli = 0;
  int64_t memory_bytes = 0;
  int pods = 0;
  void Add(const PodDemand& d);
};

// Whether the pod is done (Succeeded or Failed): its requests no longer count.
bool PodTerminal(const nlohmann::json& pod);
// spec.nodeName, or "".
std::string PodNode(const nlohmann::json& pod);

// Per node name, what the bound, unfinished pods accepted by `counts` use (pods whose quantities do not
// parse are skipped).
std::map<std::string, NodeUse> UsageByNode(const std::vector<const nlohmann::json*>& pods);

// The node as an entry of the cluster YAML (JSON) with `foreign` taken off its capacity, or an error
// saying why Tessera does not place on it (no GPU product it knows, no GPUs, a MIG layout it cannot model).
// A MIG node's entry carries its layout GPU by GPU (`mig.layouts`), resolved from its nvidia.com/mig.config
// through `mig_sources` (mig_node_layout.h); when that was modelled from GFD rather than the config,
// *mig_note (if given) says why.
Result<nlohmann::json> NodeSpecFor(const NodeModel& n, const NodeUse& foreign, const Catalog& catalog,
                                   const std::vector<MigConfigSource>& mig_sources = {},
                                   std::string* mig_note = nullptr);

// The cluster of these node specs (leaves and spines in order of first appearance; "leaf-0"/"spine-0" when
// a node has none). Specs that do not parse are skipped with their error in *skipped.
Cluster ClusterFromSpecs(const std::vector<nlohmann::json>& specs, const Catalog& catalog,
                         std::vector<std::string>* skipped);

}  // namespace tessera
