#pragma once
// Autoscaling of elastic pools (issue 5): on-demand and spot nodes are declared in the cluster file but
// absent until acquired. An absent node is cordoned in the ClusterState (ClusterState::CordonNode), so no
// policy places anything there; acquiring it starts a provisioning delay, after which it is uncordoned. A
// reclaim notice cordons a node (what runs there keeps running until reclaimed); an idle node is given back
// after `idle_release_s`, and a reclaimed spot node becomes absent (cordoned) again. Decisions only; the caller (sim/spot.h) owns time and events.
//
// Acquisition policy ("queue"): after each scheduling instant, every job still pending that may use an
// elastic pool is fitted first-fit, task by task, onto the free whole GPUs of the pool's up nodes and the
// GPUs of its nodes still provisioning (capacity already on its way); what does not fit acquires new
// nodes in the first pool (preference order) that still has absent nodes.

#include <cstdint>
#include <string>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "sched/cluster_state.h"

namespace tessera {

enum class NodePhase : uint8_t { kStatic, kAbsent, kProvisioning, kUp, kDraining };
const char* NodePhaseName(NodePhase p);

struct ElasticPoolSpec {
  std::string pool;
  Tier tier = Tier::kOnDemand;
  std::vector<NodeId> nodes;           // declared nodes (at most this many up at once)
  int64_t provisioning_delay_s = 0;
  int64_t idle_release_s = 600;
};

// What a pending job needs from elastic capacity.
struct ElasticDemand {
  int gpus_per_task = 1;               // whole GPUs per task (sub-GPU tasks count as 1)
  int tasks = 1;
  uint64_t kind_mask = 0;              // 0 = any kind
  std::vector<int> pools;              // pool indices in preference order
};

class Autoscaler {
 public:
  Autoscaler(std::vector<ElasticPoolSpec> pools, int num_nodes);

  // Marks every elastic node absent (blocks it). Error when a node is MIG-enabled or already in use.
  Status Begin(ClusterState& state);
  // Starts acquiring one absent node of `pool`; kNone when none is left. Ready at now + delay.
  NodeId Acquire(int pool, int64_t now);
  // Provisioning finished: the node becomes usable.
  void MakeReady(NodeId n, ClusterState& state);
  // Cordons the node (a reclaim notice: nothing new lands on it).
  void Drain(NodeId n, ClusterState& state);
  // The node goes away (idle release or reclaim). REQUIRES: no job holds any of its GPUs.
  void MakeAbsent(NodeId n, ClusterState& state);

  // Nodes to acquire for `demand` (in queue order), given the free capacity now; does not acquire.
  std::vector<std::pair<int, int>> PlanAcquisitions(const std::vector<ElasticDemand>& demand,
                                                    const ClusterState& state) const;

  NodePhase phase(NodeId n) const { return phase_[n]; }
  int pool_of(NodeId n) const { return pool_of_[n]; }
  int64_t ready_at(NodeId n) const { return ready_at_[n]; }
  const std::vector<ElasticPoolSpec>& pools() const { return pools_; }
  int64_t acquisitions() const { return acquisitions_; }

 private:
  std::vector<ElasticPoolSpec> pools_;
  std::vector<NodePhase> phase_;
  std::vector<int> pool_of_;                        // -1 = static node
  std::vector<int64_t> ready_at_;
  int64_t acquisitions_ = 0;
};

}  // namespace tessera
