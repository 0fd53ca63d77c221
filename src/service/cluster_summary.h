#pragma once
// The cluster as the API (`GET /api/v1/cluster`), `/metrics` and the portal's utilisation history show it:
// one read-only summary per snapshot, so that the three never disagree. What tasks hold is counted; what a
// cordon holds (capacity kept free of new work on a cordoned node or GPU) is not.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/cluster.h"
#include "sched/cluster_state.h"

namespace tessera {

struct InstanceSummary {
  std::string profile;  // e.g. "3g.40gb"
  int start = 0;        // first memory slice
  bool busy = false;    // a task holds it (a cordon's hold is not busy)
};

struct GpuSummary {
  int index = 0;  // on its node
  bool mig_enabled = false;
  int tasks = 0;                           // tasks on it
  int64_t allocated_milli = 0;             // compute-equivalent thousandths held by tasks
  std::vector<InstanceSummary> instances;  // MIG layout (empty outside MIG mode)
};

struct NodeSummary {
  NodeId id = 0;
  std::string name, state, gpu_kind, leaf;  // state: ready, cordoned, draining, drained, unhealthy
  Tier tier = Tier::kReserved;
  int64_t allocated_milli = 0;
  std::vector<GpuSummary> gpus;
};

struct ClusterSummary {
  std::string name;
  std::vector<NodeSummary> nodes;  // live nodes (removed ones are left out), in index order
  int64_t gpus = 0, busy_gpus = 0, allocated_milli = 0;
  double utilisation() const { return gpus ? static_cast<double>(allocated_milli) / (1000.0 * gpus) : 0.0; }
};

// Summarises `state`; `node_states` gives each node index's state (missing: "cordoned" or "ready").
std::shared_ptr<const ClusterSummary> SummariseCluster(const ClusterState& state,
                                                       const std::vector<std::string>& node_states);

}  // namespace tessera
