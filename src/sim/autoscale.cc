#include "sim/autoscale.h"

#include <fmt/format.h>

#include <algorithm>

namespace tessera {

const char* NodePhaseName(NodePhase p) {
  switch (p) {
    case NodePhase::kStatic: return "static";
    case NodePhase::kAbsent: return "absent";
    case NodePhase::kProvisioning: return "provisioning";
    case NodePhase::kUp: return "up";
    case NodePhase::kDraining: return "draining";
  }
  return "?";
}

Autoscaler::Autoscaler(std::vector<ElasticPoolSpec> pools, int num_nodes)
    : pools_(std::move(pools)),
      phase_(num_nodes, NodePhase::kStatic),
      pool_of_(num_nodes, -1),
      ready_at_(num_nodes, -1) {
  for (size_t p = 0; p < pools_.size(); ++p)
    for (NodeId n : pools_[p].nodes) pool_of_[n] = static_cast<int>(p);
}

Status Autoscaler::Begin(ClusterState& state) {
  for (const ElasticPoolSpec& p : pools_)
    for (NodeId n : p.nodes) {
      const NodeState& ns = state.node(n);
      if (ns.mig_gpus > 0)
        return Status::Error(fmt::format("elastic pool '{}': node {} has MIG enabled (elastic nodes start whole)",
                                         p.pool, state.cluster().nodes[n].name));
      if (ns.free_whole != ns.gpu_count)
        return Status::Error(fmt::format("elastic pool '{}': node {} is not empty", p.pool,
                                         state.cluster().nodes[n].name));
      if (Status st = state.CordonNode(n); !st.ok()) return st;
      phase_[n] = NodePhase::kAbsent;
    }
  return Status::Ok();
}

NodeId Autoscaler::Acquire(int pool, int64_t now) {
  for (NodeId n : pools_[pool].nodes)
    if (phase_[n] == NodePhase::kAbsent) {
      phase_[n] = NodePhase::kProvisioning;
      ready_at_[n] = now + pools_[pool].provisioning_delay_s;
      ++acquisitions_;
      return n;
    }
  return kNone;
}

void Autoscaler::MakeReady(NodeId n, ClusterState& state) {
  if (phase_[n] != NodePhase::kProvisioning) return;
  TESSERA_CHECK(state.UncordonNode(n).ok(), "elastic nodes are never removed");
  phase_[n] = NodePhase::kUp;
}

void Autoscaler::Drain(NodeId n, ClusterState& state) {
  if (phase_[n] != NodePhase::kUp) return;
  TESSERA_CHECK(state.CordonNode(n).ok(), "node ids are valid");
  phase_[n] = NodePhase::kDraining;
}

void Autoscaler::MakeAbsent(NodeId n, ClusterState& state) {
  if (phase_[n] == NodePhase::kStatic || phase_[n] == NodePhase::kAbsent) return;
  TESSERA_CHECK(state.CordonNode(n).ok(), "node ids are valid");
  phase_[n] = NodePhase::kAbsent;
  ready_at_[n] = -1;
}

std::vector<std::pair<int, int>> Autoscaler::PlanAcquisitions(const std::vector<ElasticDemand>& demand,
                                                              const ClusterState& state) const {
  // Free whole GPUs per node of each pool: up nodes as they are, provisioning nodes whole.
  std::vector<std::vector<int>> free(pools_.size());
  std::vector<int> absent(pools_.size(), 0);
  std::vector<KindId> kind(pools_.size(), kNone);
  std::vector<int> node_gpus(pools_.size(), 0);
  for (size_t p = 0; p < pools_.size(); ++p)
    for (NodeId n : pools_[p].nodes) {
      const NodeState& ns = state.node(n);
      kind[p] = ns.kind;
      node_gpus[p] = std::max(node_gpus[p], ns.gpu_count);
      if (phase_[n] == NodePhase::kUp) free[p].push_back(ns.free_whole);
      else if (phase_[n] == NodePhase::kProvisioning) free[p].push_back(ns.gpu_count);
      else if (phase_[n] == NodePhase::kAbsent) ++absent[p];
    }
  std::vector<std::pair<int, int>> out;  // (pool, nodes)
  auto add = [&](int p) {
    for (auto& [q, k] : out)
      if (q == p) {
        ++k;
        return;
      }
    out.push_back({p, 1});
  };
  for (const ElasticDemand& d : demand) {
    const int g = std::max(1, d.gpus_per_task);
    bool placed = false;
    // 1. Capacity already up or on its way.
    for (int p : d.pools) {
      if (d.kind_mask != 0 && (kind[p] == kNone || !((d.kind_mask >> kind[p]) & 1u))) continue;
      std::vector<int> f = free[p];
      int left = d.tasks;
      for (int& x : f)
        while (left > 0 && x >= g) x -= g, --left;
      if (left == 0) {
        free[p] = std::move(f);
        placed = true;
        break;
      }
    }
    if (placed) continue;
    // 2. New nodes in the first pool that can hold the whole gang.
    for (int p : d.pools) {
      if (d.kind_mask != 0 && (kind[p] == kNone || !((d.kind_mask >> kind[p]) & 1u))) continue;
      if (node_gpus[p] < g) continue;
      const int per_node = node_gpus[p] / g;
      const int need = (d.tasks + per_node - 1) / per_node;
      if (need > absent[p]) continue;
      absent[p] -= need;
      int left = d.tasks;
      for (int k = 0; k < need; ++k) {
        const int take = std::min(left, per_node);
        free[p].push_back(node_gpus[p] - take * g);
        left -= take;
        add(p);
      }
      break;
    }
  }
  return out;
}

}  // namespace tessera
