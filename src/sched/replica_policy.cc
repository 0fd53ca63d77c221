#include "sched/replica_policy.h"

#include <algorithm>

namespace tessera {

ReplicaPolicy::ReplicaPolicy(std::string name, SharingMode mode, int replicas)
    : name_(name), mode_(mode), replicas_(std::max(1, replicas)), engine_(K8sReplicaTraits(std::move(name))) {}

PlaceResult ReplicaPolicy::Place(const ClusterState& s, const Request& r) const {
  if (!r.SubGpu() || r.gpu_milli == 0) return engine_.Place(s, r);  // whole GPUs, or no GPU
  Request replica = r;  // one replica by count: kube-scheduler sees neither demand nor GPU memory
  replica.gpu_milli = kMilliPerGpu / replicas_;
  replica.gpu_memory_mib = 0;
  replica.allow_mig = false;
  PlaceResult res = engine_.Place(s, replica);
  if (!res.ok) return res;
  for (TaskPlacement& t : res.tasks)
    for (GpuGrant& g : t.gpus) {
      if (g.milli >= kMilliPerGpu) continue;  // a whole GPU (no replica was free)
      const int64_t gpu_mib = s.kind_of_gpu(g.gpu).memory_mib;
      const int64_t room = mode_ == SharingMode::kMps ? gpu_mib / replicas_ : s.gpu(g.gpu).free_memory_mib;
      g.memory_mib = std::clamp<int64_t>(r.gpu_memory_mib, 0, std::max<int64_t>(0, room));
    }
  return res;
}

}  // namespace tessera
