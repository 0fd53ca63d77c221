#pragma once
// NodeRoom: the nodes of the service's cluster, a room of ServiceDriver (service_driver.h). It answers the
// admin's node operations (list, add, cordon, uncordon, drain, remove, hold GPUs or host capacity), restores
// the nodes' states from the store, and keeps what the loop's allocation does not hold about each node (a
// drain asked, health, the GPUs an admin holds) and, per GPU kind, the largest live node and the live GPUs.
// Node ids are the nodes' positions in the store: a removed node stays as a tombstone (ClusterState keeps it
// too), so the dense ids that stored placements use never shift.
//
// It works on the driver's loop under the driver's lock (mu_): methods named ...Locked need it held, the
// others take it. A change is written through the driver (PutLocked) with an audit entry, and a drain's
// stops go through the driver's one take rule (ControlLoop::AppendTakeOf).

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sched/cluster_state.h"
#include "service/service.h"
#include "store/store.h"

namespace tessera {

class ServiceDriver;

class NodeRoom {
 public:
  struct KindStats {
    int max_gpus = 0;  // GPUs of the largest node of the kind
    int total_gpus = 0;
  };

  // The kinds' figures from the driver's configured cluster (until Restore recounts the live nodes).
  explicit NodeRoom(ServiceDriver* driver);
  // The cluster from the store's nodes into config->cluster (kept when the store has none).
  static Status LoadStoredCluster(const StoredState& s, ServiceConfig* config);
  // After the driver's restore: seeds an empty store with the configured nodes, else applies the stored
  // node states (a drain that had not finished goes on).
  Status Restore(const StoredState& s);

  Outcome<std::vector<NodeView>> List(const Caller& c) const;
  Outcome<NodeView> Add(const Caller& c, const std::string& spec_json);
  Outcome<NodeView> Cordon(const Caller& c, const std::string& name);
  Outcome<NodeView> Uncordon(const Caller& c, const std::string& name);
  // Cordons the node and stops (requeues) every job with a task there.
  Outcome<NodeView> Drain(const Caller& c, const std::string& name);
  // Removes an idle node (a node with tasks is refused: drain it first).
  Outcome<NodeView> Remove(const Caller& c, const std::string& name);
  // Holds `gpus` GPUs of the node out of scheduling (those held already first, then idle ones, then busy
  // ones once their work ends); returns how many are held.
  Outcome<int> HoldGpus(const Caller& c, const std::string& name, int gpus);
  // Holds CPU and memory of the node for work outside the loop; returns what is held.
  Outcome<std::pair<int64_t, int64_t>> HoldHost(const Caller& c, const std::string& name, int64_t cpu_milli,
                                                int64_t memory_mib);
  // Every node's state by id (ready, cordoned, draining, drained, unhealthy, removed).
  std::vector<std::string> States() const;
  std::string Name(NodeId n) const;  // "" for no such node

  // Under the driver's lock.
  std::string StateLocked(NodeId n) const;
  const std::vector<KindStats>& KindStatsLocked() const { return kind_stats_; }  // by KindId

 private:
  // Per node id, what the allocation state does not hold.
  struct Entry {
    bool draining = false;    // a drain was asked (drained once nothing runs there)
    bool unhealthy = false;   // reported unhealthy (kept cordoned)
    std::vector<GpuId> held;  // GPUs HoldGpus cordoned, in the order they were taken
  };
  ClusterState& State() const;  // the driver's allocation (under the lock)
  NodeId FindLocked(const std::string& name) const;  // a live node by name, or -1
  NodeView ViewLocked(NodeId n) const;
  NodeRow RowLocked(NodeId n, int64_t now) const;
  void RecountKindsLocked();  // kind_stats_ over the live nodes
  // Stops and requeues, through the driver's take rule, every running job with a task on node `n`.
  void DrainJobsLocked(NodeId n, int64_t now, WriteBatch* b, std::vector<JobPtr>* changed);
  // A change of live node `name` by an admin: `change` (under the lock) changes it and adds its writes;
  // the node's row is written with them and an audit entry `action` (node.cordon, ...); returns the node
  // once durable, and wakes the cycle.
  using ChangeFn = std::function<std::optional<ApiError>(NodeId, WriteBatch*, std::vector<JobPtr>*)>;
  Outcome<NodeView> Change(const Caller& c, const std::string& name, const std::string& action,
                           const ChangeFn& change);
  // Stores node n, the batch and its audit entry (`before`: the node's state before, "" for a new node).
  Outcome<NodeView> CommitLocked(std::unique_lock<std::mutex>* lock, const Caller& c, const std::string& action,
                                 const std::string& before, NodeId n, WriteBatch b, std::vector<JobPtr> changed);

  ServiceDriver* const d_;
  std::vector<KindStats> kind_stats_;  // by KindId (live nodes)
  std::vector<Entry> entries_;         // by node id
};

}  // namespace tessera
