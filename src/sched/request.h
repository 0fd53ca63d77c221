#pragma once
// Request: the engine's unit of placement. A gang of `tasks` identical tasks placed all or nothing;
// an inference service with R replicas is R requests of one task each.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/ids.h"
#include "model/cluster.h"
#include "model/workload.h"

namespace tessera {

struct Request {
  JobId id = 0;
  WorkloadClass cls = WorkloadClass::kInference;
  int tasks = 1;                 // gang members, all or nothing
  // Whole GPUs per task. 0 means a sub-GPU task: one MIG instance or one fractional share.
  int gpus_per_task = 1;
  int gpu_milli = 1000;          // sub-GPU tasks: compute share of one full GPU (1..1000); whole: 1000
  int64_t gpu_memory_mib = 0;    // memory needed on each GPU (or in the MIG instance / share)
  // A MIG instance of a named profile (a pod's nvidia.com/mig-<profile> resource): its compute and memory
  // slices, which name the same profile on every kind that has it (0: no profile named). Where MIG layouts
  // are fixed (PolicyTraits::exact_mig_profiles) the task takes exactly that profile.
  int8_t mig_compute_slices = 0, mig_memory_slices = 0;
  int64_t cpu_milli = 0;         // per task
  int64_t host_memory_mib = 0;   // per task
  uint64_t kind_mask = 0;        // bit k = GPU kind k allowed; 0 = any kind
  uint8_t tier_mask = 0;         // bit t = Tier t allowed; 0 = any tier
  bool allow_mig = true;         // a sub-GPU task may use a MIG instance
  bool allow_share = true;       // a sub-GPU task may take a fractional share of a non-MIG GPU
  bool require_same_leaf = false;  // gangs: fail rather than cross leaf switches
  // Latency-sensitive work (production inference): shared instances keep it within its tighter SLO.
  bool latency_sensitive = false;
  bool may_preempt = true;  // false: waits for capacity, never preempts (its class's `preempts: false`)
  int priority = 0;
  // When the request would end if placed now (its time limit), or -1 if unknown. Placement may use it with
  // the snapshot's drain times to keep nodes' lifetimes aligned, so that nodes drain early for gangs.
  int64_t expected_end_s = -1;
  // The nodes a task may go to (nodes[n] for node n of the snapshot; a node past the end is not allowed);
  // null = every node. Drivers set it from constraints the engine does not model (Kubernetes' node filters);
  // PlaceWithin (policy.h) honours it.
  std::shared_ptr<const std::vector<bool>> nodes;

  bool SubGpu() const { return gpus_per_task == 0; }
  int GpusPerTask() const { return gpus_per_task == 0 ? 1 : gpus_per_task; }
  int TotalGpus() const { return tasks * GpusPerTask(); }
  bool KindAllowed(KindId k) const { return kind_mask == 0 || ((kind_mask >> k) & 1u); }
  bool TierAllowed(Tier t) const { return tier_mask == 0 || ((tier_mask >> static_cast<int>(t)) & 1u); }
  bool NodeAllowed(NodeId n) const {
    return nodes == nullptr || (n >= 0 && static_cast<size_t>(n) < nodes->size() && (*nodes)[n]);
  }
};

}  // namespace tessera
