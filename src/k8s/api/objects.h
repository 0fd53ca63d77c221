#pragma once
// Kubernetes objects as Tessera reads them: a pod's demand (GPUs, MIG slices, CPU, memory) from its
// containers, and a node's GPU model from its allocatable resources and GPU Feature Discovery labels
// (kubernetes-contracts.md sections 2.6, 4.1 and 4.4). Malformed objects give errors naming the field.
// JSON keys are matched as Go's encoding/json does: an exact match first, else case-insensitively.

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "base/ids.h"
#include "base/status.h"
#include "model/catalog.h"

namespace tessera {

// The value under `key` (exact, else case-insensitive), or nullptr; null values count as absent.
const nlohmann::json* Field(const nlohmann::json& object, std::string_view key);
// Field(object, key) when it is a string, else "".
std::string StringField(const nlohmann::json& object, std::string_view key);
// metadata.<key> when it is a string (name, namespace, uid, resourceVersion, ...), else "".
std::string Meta(const nlohmann::json& object, std::string_view key);

inline constexpr std::string_view kGpuResource = "nvidia.com/gpu";
inline constexpr std::string_view kMigResourcePrefix = "nvidia.com/mig-";

struct PodDemand {
  std::string name, ns, uid;
  int64_t gpus = 0;                    // nvidia.com/gpu
  std::map<std::string, int64_t> mig;  // MIG profile (e.g. "3g.40gb") -> slices (mixed strategy)
  int64_t cpu_milli = 0;
  int64_t memory_bytes = 0;
  int priority = 0;
  bool AnyGpu() const { return gpus > 0 || !mig.empty(); }
};

// A pod spec's requests per resource, in thousandths: per resource, the sum over containers of requests
// (limits where no request is given), and at least the largest init container's.
Result<std::map<std::string, int64_t>> PodResources(const nlohmann::json& spec);

// The pod's demand: per resource, the sum over containers of requests (limits where no request is given),
// and at least the largest init container's. Device resources must be whole numbers.
Result<PodDemand> ReadPodDemand(const nlohmann::json& pod);

struct NodeModel {
  std::string name;
  std::map<std::string, int64_t> allocatable_milli;  // every resource, in thousandths
  std::string product;                               // nvidia.com/gpu.product
  KindId kind = kNone;                               // the catalog's kind of that product, if known
  int gpu_count = 0;                                 // nvidia.com/gpu.count
  std::string mig_config;                            // nvidia.com/mig.config
  std::map<std::string, int64_t> gfd_mig_counts;     // GFD's nvidia.com/mig-<profile>.count ("+" written ".")
  std::string leaf, spine, zone;
  bool unschedulable = false;
  bool ready = true;
  int64_t Allocatable(std::string_view resource) const;  // whole units (device counts), 0 when absent
};

// `leaf_label` / `spine_label` name the topology labels (empty = none).
Result<NodeModel> ReadNodeModel(const nlohmann::json& node, const Catalog& catalog,
                                std::string_view leaf_label, std::string_view spine_label);

// The core/v1 Binding of pod NS/NAME (with its UID as precondition) to `node`: what a scheduler POSTs to
// .../pods/NAME/binding.
nlohmann::json BindingObject(const std::string& ns, const std::string& name, const std::string& uid,
                             const std::string& node);

// Whether the node can hold the demand by its allocatable resources (nothing else counted); else why not,
// with the numbers.
std::string WhyNotFits(const PodDemand& d, const NodeModel& n);

}  // namespace tessera
