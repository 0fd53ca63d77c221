#pragma once
// DraRoom: the scheduler's Dynamic Resource Allocation (docs/kubernetes.md "Dynamic Resource Allocation"),
// a room of K8sScheduler (scheduler.h). It keeps the DRA informers (DraSync) and, per pod of ours with
// claims, whether it is a job of the loop (claims that ask only for whole GPUs: dra_jobs.h) and with what
// demand; the whole GPUs of each DRA-only node the loop may place on; and the DRA path for the other pods
// (MIG slices by CEL, allocationMode All, firstAvailable, ...): planned one at a time (highest priority, then
// oldest first) against the DRA model and usage, their claims allocated and reserved, then bound
// (dra_binder.h), outside quotas and preemption. A DRA-path pod yields to a waiting loop pod with claims
// that comes first in the queue order, for a while.
//
// Threads: Classify, Sync and the accessors run on the scheduler's loop thread; BindPod on the backend's
// threads. mu_ guards every use of the informers' snapshot and of DraSync::Wrote.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "k8s/api/api_client.h"
#include "k8s/api/objects.h"
#include "k8s/cluster_view.h"
#include "k8s/dra/dra_binder.h"
#include "k8s/dra/dra_jobs.h"
#include "k8s/dra/dra_sync.h"
#include "k8s/k8s_backend.h"

namespace tessera {

class K8sScheduler;

class DraRoom {
 public:
  explicit DraRoom(K8sScheduler* scheduler);
  ~DraRoom();  // Stop()

  // The DRA informers: started (waking the scheduler on every change), waited for, stopped.
  void Start(std::function<void()> wake, std::function<void(const std::string&)> log);
  bool WaitSynced(double timeout_s);
  void Stop();

  // Judges every pod of ours with claims (which are the loop's, with what demand) and what the loop may
  // place on each DRA-only node.
  void Classify();
  // The pod's demand as Classify last judged it (kNotYet when not judged); by uid (null when not judged).
  DraJobDemand::Kind KindOf(const nlohmann::json& pod) const;
  const DraJobDemand* DemandOf(const std::string& uid) const;
  // The DRA-only nodes' whole GPUs for the loop, by node name.
  const std::map<std::string, DraLoopNode>& loop_nodes() const { return loop_nodes_; }
  // For a node whose GPUs only DRA publishes, its spec for the Service: its whole GPUs (those DRA-path
  // claims use are held GPU by GPU, as other pods' are); nullopt for any other node.
  std::optional<Result<nlohmann::json>> NodeSpec(NodeModel model, const NodeUse& foreign) const;
  // The backend's binding of a loop pod with claims (any thread): its claims planned on `node` only,
  // allocated and reserved, then the binding; nullopt for a pod without claims.
  std::optional<ApiResponse> BindPod(const PodRef& pod, const std::string& node);
  // The DRA path: pods with claims the loop cannot express, allocated, reserved and bound.
  void Sync();

 private:
  std::vector<std::string> Nodes() const;  // schedulable nodes, for the DRA path's plans
  void Pod(const nlohmann::json& pod, const DraWorld& world, std::map<std::string, nlohmann::json>* claims,
           int64_t now_ms);
  void Gang(const std::vector<nlohmann::json>& pods, const DraWorld& world,
            std::map<std::string, nlohmann::json>* claims, int64_t now_ms);
  void Refuse(const nlohmann::json& pod, const std::string& reason, const std::string& message, int64_t now_ms);
  bool Write(const nlohmann::json& pod, const DraPodPlan& plan, std::map<std::string, nlohmann::json>* claims,
             int64_t now_ms);

  K8sScheduler* const s_;
  std::unique_ptr<DraSync> sync_;
  std::mutex mu_;
  // Loop thread: our DRA pods by uid; the DRA nodes' whole GPUs for the loop, by node name.
  std::map<std::string, DraJobDemand> demand_;
  std::map<std::string, DraLoopNode> loop_nodes_;
  // Loop thread: pod uid -> when bound (until the watch shows it); pod uid -> first refused (ms).
  std::map<std::string, int64_t> bound_, refused_since_;
  // Loop thread: uid of a waiting pod with claims that is the loop's (or not judged yet) -> since when (ms);
  // DRA-path pods behind it in the queue order wait for it a while (Sync).
  std::map<std::string, int64_t> loop_waiting_;
};

}  // namespace tessera
