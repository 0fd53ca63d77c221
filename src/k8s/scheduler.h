#pragma once
// The Kubernetes scheduler: `tessera serve` with the Kubernetes backend. It becomes the leader (a Lease),
// lists and watches nodes, pods, PriorityClasses, PodDisruptionBudgets (a job whose pods a budget protects
// now is no victim, budgets.h), PodGroups (coscheduling, Volcano and KAI) and Queues (Volcano and KAI: a
// queue is a team with its quota, queues.h); a kind that is not served is not used), starts the one Service
// (store, loop, API) over the cluster those nodes make, and keeps the two in step: nodes that arrive, cordon
// or go change the Service's cluster through its nodes API; pods with our schedulerName become jobs (a
// PodGroup is one gang job of its pods, minMember tasks); the backend (k8s_backend.h) binds what the loop
// places; pending reasons go back to the pods as a PodScheduled=False condition. Pods with ResourceClaims
// that ask only for whole GPUs are jobs too (its DraRoom, dra_room.h): nodes whose GPUs only DRA publishes
// are nodes of the loop, the loop chooses the node and the DRA allocator the devices there when the launch
// binds. Pods of other schedulers count as used capacity. With a MIG manager ConfigMap, MIG nodes are
// repartitioned through the GPU Operator for pods no layout holds (mig_repartitioner.h); its drains preempt
// through the loop (PreemptPod), a node being repartitioned stays cordoned, and once its new layout is
// advertised it is read again (removed from the Service's cluster and added with its new MIG config). Whole
// GPUs that pods outside the loop use are held GPU by GPU (Service::HoldGpus) and given back when those pods
// end; pods of ours that ask no GPU are bound outside the loop (GroupRoom::BindCpuOnly).
//
// Its rooms (each header states its part): LeaderRoom (the Lease, the store's lease), ClusterRoom (nodes),
// TeamRoom (teams and queues), GroupRoom (PodGroups, pods outside the loop), FilterRoom (node filters),
// DraRoom (Dynamic Resource Allocation), ApiJobRoom (API jobs' objects), ExtenderRoom (kube-scheduler's
// extender verbs from the loop's view); the class itself keeps the pass,
// pods into jobs and the reasons written back.
//
// Thread safety: Start and Stop from one thread; the rest runs on the scheduler's threads.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "k8s/api/api_client.h"
#include "k8s/api/events.h"
#include "k8s/api/informer.h"
#include "k8s/api/lease.h"
#include "k8s/api_job_room.h"
#include "k8s/budgets.h"
#include "k8s/cluster_room.h"
#include "k8s/cluster_view.h"
#include "k8s/dra/dra_jobs.h"
#include "k8s/dra/dra_sync.h"
#include "k8s/dra_room.h"
#include "k8s/extender/extender_server.h"
#include "k8s/extender_room.h"
#include "k8s/filter_room.h"
#include "k8s/filters.h"
#include "k8s/group_room.h"
#include "k8s/job_objects.h"
#include "k8s/k8s_backend.h"
#include "k8s/leader_room.h"
#include "k8s/mig/mig_repartitioner.h"
#include "k8s/pod_jobs.h"
#include "k8s/queues.h"
#include "k8s/team_namespaces.h"
#include "k8s/team_room.h"
#include "service/service.h"
#include "store/postgres_store.h"

namespace tessera {

struct SchedulerOptions {
  std::string scheduler_name = "tessera";
  std::string leaf_label = "tessera.io/leaf";
  std::string spine_label;
  std::string lease_namespace;  // empty = the kubeconfig's namespace
  std::string db = "tessera.db";
  // A PostgreSQL store instead (libpq URI): replicas share it. The database's lease follows the Kubernetes
  // Lease (taken once the previous leader's ran out, renewed with it) and fences every write, so a
  // replica that lost the Lease but still runs writes nothing (docs/high-availability.md).
  std::string store;
  std::string identity;  // the Lease holder identity (hostname_pid when empty)
  // NS/NAME of the GPU Operator MIG manager's ConfigMap (key config.yaml): MIG nodes are repartitioned to
  // its configs when waiting pods need it (mig_repartitioner.h); empty = no repartitioning.
  std::string mig_config_map;
  int64_t mig_drain_timeout_s = 300;  // a repartition's drain not done by then is abandoned and reported
  int64_t min_runtime_s = 300;  // a job younger than this is not preempted (CycleOptions::min_runtime_s)
  // team -> namespace of its API jobs' pods (team_namespaces.h); a team not here has its API jobs refused.
  // Empty: each team's own namespace, unless NamespaceRefusal refuses it. Namespaces are never created.
  TeamNamespaces team_namespaces;
  std::function<void(const std::string&)> log;
  // Polled while Start waits (for the Lease, for the caches): once it answers true, Start gives up with an
  // error (a signal asked the process to end). Empty = never.
  std::function<bool()> cancelled;
  LeaseOptions lease;  // durations; namespace and identity come from the fields above
  // Also serve kube-scheduler's extender verbs, from the loop's view (extender_room.h); nullopt = not.
  std::optional<ExtenderServerOptions> extender;
  // The API server's requests (not watches, not the Lease's) at most kube_api_qps per second with bursts of
  // kube_api_burst, as client-go's --kube-api-qps and --kube-api-burst; qps <= 0: no limit.
  double kube_api_qps = 0;
  int kube_api_burst = 0;  // <= 0: twice the qps (at least 1)
};

class K8sScheduler {
 public:
  // Waits to be the leader, syncs the caches and starts the Service; errors when the store or the API
  // cannot be used, when leadership is lost meanwhile, or when options.cancelled says so. While it waits,
  // configuration problems (kubeconfig, TLS, RBAC, a missing Lease namespace) are logged with what to fix,
  // and retried with back-off.
  static Result<std::unique_ptr<K8sScheduler>> Start(KubeConfig kube, SchedulerOptions options);
  ~K8sScheduler();
  // Stops writing at once (no binding, eviction or create from now on), ends the loop and the Lease's
  // renewals and, unless leadership was lost, releases the Lease so that a standby takes over. Bounded by
  // the API calls' timeouts (a few seconds). Stop calls it first.
  void StopScheduling();
  // StopScheduling, then the informers, the backend and the Service.
  void Stop();
  Service& service() { return *service_; }
  // Leadership was lost (the process should end, as kube-scheduler does, and a new leader take over).
  bool lost_leadership() const { return lost_.load(); }
  // Whether this replica leads now (the Lease renewed within the renew deadline).
  bool leading() const { return leader_ && leader_->IsLeader(); }
  // Where the extender verbs are served (options.extender), e.g. http://127.0.0.1:8888; "" when not.
  std::string extender_url() const { return extender_ ? extender_->url() : ""; }

 private:
  friend class DraRoom;  // a room of the scheduler (dra_room.h): works on its informers and API client
  friend class FilterRoom;
  friend class ClusterRoom;
  friend class ApiJobRoom;
  friend class LeaderRoom;
  friend class GroupRoom;
  friend class TeamRoom;
  friend class ExtenderRoom;
  K8sScheduler(KubeConfig kube, SchedulerOptions options);
  Status Init();
  Status StartService();
  // The backend's hooks for preemption and user deletions (scheduler_preempt.cc).
  std::vector<std::pair<nlohmann::json, std::string>> PreemptorOn(const std::set<std::string>& nodes) const;
  void CancelJobOfSlot(JobSlot slot, const std::string& why);
  // A pod a MIG repartition drains (mig_repartitioner.h PreemptPodFn): when a run of the loop holds it, the
  // loop preempts its job (the node cordoned in the Service first, so nothing lands back there) and the
  // backend marks and evicts its pods; false when the loop holds no such run.
  bool PreemptPod(const GpuPod& pod, const std::string& node, const std::string& why);
  // The loop's rule for such a pod (mig_plan.h DrainRules::loop_rule): whether the job of the run that holds
  // it may be preempted now for loop job `for_job`; nullopt when no run of the loop holds it.
  std::optional<bool> LoopMayPreempt(const GpuPod& pod, int64_t for_job) const;
  void Loop();
  void Wake();
  void OnPod(WatchEvent e, const nlohmann::json& pod);
  // One pass: nodes, teams, jobs from pods, reasons back to pods.
  void Reconcile();
  void SyncJobs();
  // Running jobs with a pod that a PodDisruptionBudget protects now (budgets.h): no cycle evicts them.
  void SyncBudgets();
  // Pods by reference into a copy of pods_by_key_ the caller holds (its values are shared, never edited).
  using PodRefs = std::vector<std::reference_wrapper<const nlohmann::json>>;
  bool Orphaned(const std::string& key, const std::map<std::string, PodRefs>& by_key);
  // A job of pods waiting to be submitted (SyncJobs gathers them; SubmitIntake stores them in one write).
  struct Intake {
    JobKey key;
    JobSpec spec;
    std::vector<nlohmann::json> waiting;
    size_t tasks = 0;
  };
  // The job of `key`'s pods into `intake`, or its reason written on its pods when it cannot be one.
  void SubmitJob(const JobKey& key, const PodRefs& pods, std::vector<Intake>* intake);
  void SubmitIntake(std::vector<Intake> intake);
  void WriteReasons();
  bool JobRunning(int64_t id) const;
  void SetReason(const nlohmann::json& pod, const std::string& reason, const std::string& message);
  std::vector<nlohmann::json> PodsOf(const JobKey& key) const;
  std::string PriorityClassOf(const nlohmann::json& pod) const;
  void Log(const std::string& s) const;

  SchedulerOptions options_;
  ApiClient api_;
  Caller admin_{"tessera-k8s", "", Role::kAdmin, ""};
  std::atomic<bool> scheduling_stopped_{false};
  std::unique_ptr<Informer> nodes_, pods_, classes_, groups_, volcano_groups_, kai_groups_;
  std::unique_ptr<Informer> volcano_queues_, kai_queues_, budgets_;
  std::unique_ptr<EventRecorder> events_;  // Events about pods, off the binding path
  int64_t all_runs_seen_us_ = 0;           // when Reconcile last had every run looked at (loop thread)
  std::unique_ptr<K8sBackend> backend_;
  std::unique_ptr<DraRoom> dra_;  // Dynamic Resource Allocation (dra_room.h)
  std::unique_ptr<FilterRoom> filters_;  // node filters (filter_room.h)
  std::unique_ptr<ClusterRoom> cluster_;  // nodes into the Service's cluster (cluster_room.h)
  std::unique_ptr<ApiJobRoom> api_jobs_;  // API jobs' objects (api_job_room.h)
  std::unique_ptr<GroupRoom> group_room_;  // PodGroups, pods outside the loop (group_room.h)
  std::unique_ptr<TeamRoom> teams_;        // teams and queues (team_room.h)
  std::unique_ptr<ExtenderRoom> extender_;  // extender verbs from the loop's view (extender_room.h)
  std::unique_ptr<LeaderRoom> leader_;     // the Lease and the store's lease (leader_room.h)
  // Loop thread: JobKey::str() -> when its job was submitted (steady seconds) and whether its pods use DRA;
  // its first reason waits kReasonAfterS (its filters are set after its first cycles may run), a DRA job's
  // kDraReasonAfterS (a DRA node's capacity may be re-read meanwhile).
  std::map<std::string, std::pair<double, bool>> submitted_;
  std::unique_ptr<MigRepartitioner> mig_;  // loop thread only
  std::unique_ptr<Clock> clock_;
  std::unique_ptr<Service> service_;
  std::atomic<bool> stop_{false}, lost_{false};
  std::thread loop_thread_;
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool wake_ = false;

  mutable std::mutex pods_mu_;
  std::map<std::string, ObjectMap> pods_by_key_;  // JobKey::str() -> name -> pod
  ObjectMap dra_pods_;  // ours with claims, by namespace/name (the same values as pods_by_key_'s)
  // Loop thread only.
  std::map<std::string, int64_t> job_of_key_;  // JobKey::str() -> active job id
  std::map<std::string, double>
      unwaited_since_;  // JobKey::str() -> steady seconds since a pending job's pods were all bound
  std::map<std::string, std::pair<std::string, std::string>> said_;  // pod uid -> (reason, message) written
  std::set<int64_t> eviction_blocked_;                               // as last given to the Service
};

}  // namespace tessera
