#pragma once
// kube-scheduler with the NVIDIA device plugin's GPU replicas (docs/sharing.md "Baselines"): time-slicing
// (`sharing.timeSlicing.resources[].replicas: N`) or MPS (`sharing.mps`, each replica limited to 1/N of the
// GPU's memory and active threads). A sub-GPU replica asks for one replica (1/N of a GPU by count, whatever
// its demand); kube-scheduler sees no GPU memory, so placement is by count and LeastAllocated nodes.
//   time-slicing: no memory isolation. A replica whose memory does not fit beside the GPU's other replicas
//     gets a grant of only the memory left, and is killed for out of memory when it starts.
//   MPS: each replica's memory limit is the GPU's memory / N; a replica needing more is killed at start.
// Whole-GPU work (training, tensor-parallel replicas) takes whole GPUs as kube-scheduler places them. Any
// idle GPU may take replicas (as if every node were labelled for sharing while replicas use it): the
// favourable reading of a per-node setting.

#include <memory>
#include <string>

#include "sched/engine_policy.h"

namespace tessera {

class ReplicaPolicy : public Policy {
 public:
  ReplicaPolicy(std::string name, SharingMode mode, int replicas);
  std::string_view name() const override { return name_; }
  PlaceResult Place(const ClusterState& snapshot, const Request& request) const override;

 private:
  std::string name_;
  SharingMode mode_;
  int replicas_;
  EnginePolicy engine_;
};

}  // namespace tessera
