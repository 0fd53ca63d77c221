#pragma once
// ClusterRoom: the API's nodes as the Service's cluster, a room of K8sScheduler (scheduler.h). Each pass
// (Sync) it adds the nodes that arrive, cordons and uncordons as the API and the MIG repartitioner say,
// re-reads a node whose MIG layout or allocatable changed (removed once nothing of ours runs there, added
// anew) and removes the nodes that go. A node is modelled from its labels and capacity (cluster_view.h)
// with the MIG configs of the ConfigMaps its nvidia.com/mig.config is resolved in (LoadMigSources); what
// cannot be read or modelled about a node is reported on it (a Warning Event and a log line, once per
// change). What pods outside the loop use there is held in the Service: whole GPUs one by one
// (Service::HoldGpus), CPU and memory likewise (Service::HoldHost), so that a node keeps its place in the
// cluster as they come and go.
//
// Threads: the scheduler's loop thread (and StartService before the loop starts).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "k8s/api/informer.h"
#include "k8s/cluster_view.h"
#include "k8s/mig/mig_node_layout.h"
#include "k8s/mig/mig_plan.h"
#include "service/service.h"

namespace tessera {

// What a MIG repartition is planned for (mig_repartitioner.h): the loop's jobs that ask for MIG slices or
// whole GPUs and that its last cycle (`snap`) left waiting for capacity, in the loop's order. A job the
// policy holds whatever the capacity (over its queue's limit or borrow limit, held, invalid) is not among
// them, nor one of fractional shares. Each task of each replica is one WaitingPod (nvidia.com/mig-<profile>:
// 1, or its nvidia.com/gpu) named by its replica's key (`keys`, JobKey strings: the pod or PodGroup it is or
// will be), at its priority class's value in `classes` (0 when not there).
std::vector<WaitingPod> MigWaitingOf(const Snapshot& snap, const std::vector<PriorityClass>& classes,
                                     const std::function<std::vector<std::string>(const JobRecord&)>& keys);

class K8sScheduler;

class ClusterRoom {
 public:
  explicit ClusterRoom(K8sScheduler* scheduler);

  // The MIG ConfigMaps nodes' nvidia.com/mig.config names are looked up in (mig_node_layout.h):
  // --mig-config-map, then the one the GPU Operator's ClusterPolicy names (spec.migManager.config.name in
  // its namespace; without a ClusterPolicy, gpu-operator/default-mig-parted-config). Read again every 30 s
  // unless `now`; what of them cannot be read is reported on the ConfigMap.
  void LoadMigSources(bool now);
  // The node's spec for the Service (NodeSpecFor, else DraRoom::NodeSpec), `used` by pods outside the loop
  // taken off; what Tessera cannot read or model about the node, and a MIG layout modelled from GFD, is
  // reported on the node.
  Result<nlohmann::json> NodeSpecOf(const nlohmann::json& node, const std::map<std::string, NodeUse>& used,
                                    NodeModel* model);
  // Whether something is reported on node `name` now.
  bool Reported(const std::string& name) const { return node_said_.count(name) > 0; }
  // One pass over the nodes (every node when one changed, else once a second; every pass with a MIG
  // repartitioner or DRA-only nodes).
  void Sync();
  // Bound, unfinished pods whose requests the Service's cluster does not hold: other schedulers' pods, and
  // ours that no running job of this Service holds (pointers into the snapshot it keeps until the next call).
  std::vector<const nlohmann::json*> ForeignPods();
  // MigWaitingOf the Service's last cycle (the MIG repartitioner's input; any thread).
  std::vector<WaitingPod> MigWaiting() const;

 private:
  void ReportNode(const nlohmann::json& node, const std::string& reason, const std::string& message);
  // A node of the cluster whose spec (its MIG config) or cordon changed; `spec` from NodeSpecFor.
  void SyncNode(const NodeView& view, const nlohmann::json& node, const nlohmann::json& spec,
                bool want_cordon);
  void AddNode(const std::string& name, const nlohmann::json& spec, bool want_cordon);
  // Holds back, GPU by GPU, the whole GPUs that pods outside the loop use on node `name`, so that their
  // capacity is taken at once and given back when they end, even while our tasks run there.
  void HoldForeignGpus(const std::string& name, const nlohmann::json& spec, int64_t gpus);
  // Holds the CPU and memory pods outside the loop use on the node, asking again until all of it is held.
  void HoldForeignHost(const std::string& name, int64_t cpu_milli, int64_t memory_mib);

  K8sScheduler* const s_;
  // The MIG configs nodes are resolved with, when they were read, what was last logged about them, and per
  // node what was last reported on it.
  std::vector<MigConfigSource> mig_sources_;
  int64_t mig_sources_at_ = INT64_MIN / 2;
  std::string mig_sources_said_;
  std::map<std::string, std::string> node_said_;
  std::map<std::string, std::pair<int64_t, int64_t>> held_host_;  // node -> mCPU, MiB held in full (as set)
  std::map<std::string, int> held_gpus_;  // node -> GPUs held for pods outside the loop (as set)
  // Each node's last read (its object, spec and model), reused while the object is the same; cleared when
  // the MIG sources change.
  struct NodeRead {
    ObjectMap::Ptr node;
    Result<nlohmann::json> spec;
    NodeModel model;
  };
  std::map<std::string, NodeRead> node_reads_;
  uint64_t nodes_seen_ = UINT64_MAX;  // the nodes informer's version last read in full, and when
  int64_t nodes_synced_us_ = 0;
  std::shared_ptr<const Informer::ObjectMap> foreign_pods_;  // the pods ForeignPods last read
};

}  // namespace tessera
