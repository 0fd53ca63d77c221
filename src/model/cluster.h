#pragma once
// Cluster model: nodes with GPUs, intra-node topology, network position, capacity tier and price.
// Loaded from YAML (schema: docs/configuration.md); plain values, no allocation state (that is
// sched/ClusterState).

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "model/catalog.h"
#include "model/mig.h"

namespace tessera {

enum class Tier : uint8_t { kReserved, kOnDemand, kSpot, kOwned };
const char* TierName(Tier t);
inline constexpr uint8_t TierBit(Tier t) { return static_cast<uint8_t>(1u << static_cast<int>(t)); }
// Guaranteed capacity: every tier but spot (which the provider may reclaim at short notice).
inline constexpr uint8_t kGuaranteedTiers =
    TierBit(Tier::kReserved) | TierBit(Tier::kOnDemand) | TierBit(Tier::kOwned);
// The tiers a job may run on (a Request::tier_mask; 0 = any): spot only for checkpointable training, whose
// reclaim costs no more than the work since its last checkpoint; inference and other training run on
// guaranteed capacity only.
inline constexpr uint8_t AllowedTiers(bool training, bool checkpointable) {
  return training && checkpointable ? 0 : kGuaranteedTiers;
}
Result<Tier> ParseTier(std::string_view s);

struct Node {
  std::string name;
  KindId kind = kNone;        // kNone for CPU-only nodes
  int gpu_count = 0;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::map<std::string, std::string> labels;
  Interconnect interconnect = Interconnect::kPcie;
  // For kNvLinkPairs: GPUs (2i, 2i+1) are bridged. For PCIe boxes: GPUs per PCIe switch / NUMA group
  // (0 = all GPUs in one group).
  int pcie_group_size = 0;
  bool mig_enabled = false;   // initial MIG mode of every GPU on the node
  std::string mig_config;     // initial layout name ("all-balanced", "all-1g.10gb", ...), empty = none
  // Explicit initial layouts, one per GPU (YAML `mig.layouts`, ParseGpuMigLayout's text), each valid under
  // the placement rules; they win over mig_config, which then only names the layout. Empty = mig_config's.
  std::vector<GpuMigLayout> mig_layouts;
  LeafId leaf = 0;            // leaf switch index (Cluster::leaf_names)
  SpineId spine = 0;          // spine group / block index (Cluster::spine_names)
  Tier tier = Tier::kReserved;
  std::string pool;           // pool name (capacity tiers), defaults to tier name
  double price_per_gpu_hour = 0;
  double nic_gbps_per_gpu = 400;  // network injection per GPU, Gb/s
};

struct Cluster {
  std::string name;
  std::vector<Node> nodes;
  std::vector<std::string> leaf_names;
  std::vector<std::string> spine_names;
  double spine_oversubscription = 1.0;  // leaf uplink oversubscription ratio (1 = non-blocking)

  int TotalGpus() const;
};

// Parses cluster YAML. Errors name the source, the node and the field.
Result<Cluster> LoadClusterYaml(std::string_view text, std::string_view source, const Catalog& catalog);

// One node as an entry of the cluster YAML's `nodes` list (required `name`, no `count`, no defaults), from
// YAML or JSON text (a JSON object is YAML). Its leaf and spine names are looked up in `*c`'s and added
// there when new (the caller decides whether a new one is acceptable). Errors name the source and the field.
Result<Node> ParseClusterNode(std::string_view text, std::string_view source, const Catalog& catalog, Cluster* c);

}  // namespace tessera
