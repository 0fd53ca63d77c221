#pragma once
// The Kubernetes backend of the control loop (control/backend.h): a launch binds the job's pods to the
// nodes of its grants (POST pods/NAME/binding with the pod's UID as precondition), all or none: when any
// member's binding fails, the members already bound are deleted (their controller recreates them) and the
// launch fails back to the queue with the API server's answer. Every write is made only while
// hooks.leading() answers true, checked right before it (a replica that stopped leading binds nothing).
// A stop evicts the pods through the Eviction API (policy/v1, never DELETE) without a grace period of its
// own, so each pod's terminationGracePeriodSeconds applies; a 429 (a PodDisruptionBudget refuses) means
// not evicted now: logged and retried later with back-off, without holding up other work. A stop for a
// preemption (its reason starts with "preempted") first writes DisruptionTarget=True (reason
// PreemptionByScheduler, naming the preemptor) on each victim, and status.nominatedNodeName on the
// preemptor's waiting pods (hooks.preemptor_on; cleared once they are bound), as kube-scheduler does
// (preemption.h). A launch onto a node where evicted pods still terminate waits until they are gone.
// Bound pods get a Scheduled Event. A run ends when all its pods are done (Succeeded, Failed) or gone; a
// pod its user deleted while it ran (deletionTimestamp without a DisruptionTarget condition) cancels the
// job (hooks.cancel), one evicted or disrupted by someone else (a DisruptionTarget condition, terminating or
// Failed) interrupts it (back to the queue). A MIG repartition's drain stops a run through the loop
// (Service::Preempt: a stop for a preemption, as above), never behind its back.
// The loop's per-GPU repartitioning is off on Kubernetes (the GPU Operator
// applies one config per node, after a node drain: mig_repartitioner.h does that outside the loop), so
// Reconfigure should not be called; if it is, it answers kReconfigureFailed and the loop plans around that GPU.
//
// Thread safety: the driver's calls come from one thread; the API calls run on the backend's own threads
// and their results come back as events (asynchronous() is true). Shutdown may be called from any thread.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "control/backend.h"
#include "k8s/api/api_client.h"
#include "k8s/pod_jobs.h"
#include "k8s/preemption.h"

namespace tessera {

// One pod as a run holds it.
struct PodRef {
  std::string ns, name, uid;
};

struct K8sBackendHooks {
  std::function<std::vector<nlohmann::json>(const JobKey&)> pods;  // the job's pods now (any state), in order
  std::function<void(const std::string&)> log;
  // Before each binding: "" to bind the pod to the node, else why not (a Kubernetes filter it would break
  // now); after a failed binding, forget undoes what admit assumed. Unset: every binding is tried.
  std::function<std::string(const PodRef&, const std::string&)> admit;
  std::function<void(const PodRef&)> forget;
  std::function<bool()> leading;  // whether writes may be made now (empty: always)
  // The waiting pods of the job whose placement takes capacity on `nodes` (a preemptor while its victims
  // terminate), each with the node it is placed on; empty when none (or not known yet).
  std::function<std::vector<std::pair<nlohmann::json, std::string>>(const std::set<std::string>& nodes)>
      preemptor_on;
  // The run's job is cancelled for `why` (its user deleted a running pod); the loop then stops the run.
  std::function<void(JobSlot, const std::string& why)> cancel;
  // Binds a pod with ResourceClaims to the node (its claims allocated there and reserved for it first) and
  // answers as the binding did; nullopt for a pod without claims, which the backend binds itself. Unset:
  // the backend binds every pod.
  std::function<std::optional<ApiResponse>(const PodRef&, const std::string& node)> bind;
  // Records an Event about a pod off the caller's path (EventRecorder); empty: posted at once.
  std::function<void(const nlohmann::json& object, const std::string& type, const std::string& reason,
                     const std::string& message)>
      event;
};

// Whether the pod asks for nvidia.com/gpu, a MIG slice or ResourceClaims.
bool PodAsksGpu(const nlohmann::json& pod);
// The members to bind, in order (those asking for GPUs first): the waiting pods of `pods` (at most `tasks`), or an error saying how many
// wait when fewer than `tasks` do.
Result<std::vector<PodRef>> MembersToBind(const std::vector<nlohmann::json>& pods, size_t tasks);
// Whether a run of these pods is over, given the job's pods now: every pod is done or gone (a pod with
// another UID under the same name is a new one). *failed: one of them failed.
bool RunOver(const std::vector<PodRef>& run, const std::vector<nlohmann::json>& now, bool* failed);

class K8sBackend final : public Backend {
 public:
  // A launch onto nodes where pods it evicted still terminate waits this long at most, then fails back to
  // the queue.
  static constexpr int kVacateWaitS = 120;
  K8sBackend(const ApiClient* api, K8sBackendHooks hooks);
  ~K8sBackend() override;

  LaunchAck Launch(const LaunchSpec& spec, int64_t now) override;
  // Evicts the run's pods (`grace_s` is not used: each pod's own grace period applies).
  void Stop(JobSlot slot, uint32_t run, int64_t grace_s, std::string_view reason, int64_t now) override;
  void Reconfigure(GpuId gpu, const std::string& layout, int64_t now) override;
  bool Adopt(const LaunchSpec& spec, int64_t started_at, int64_t now) override;
  std::vector<BackendEvent> Poll(int64_t now) override;
  int64_t NextEventS() const override { return -1; }
  std::vector<BackendRun> Running() const override;
  bool asynchronous() const override { return true; }
  void OnEvents(std::function<void()> wake) override;

  // The run holding the pod with this UID: its job's slot, and whether it is being stopped (its pods
  // evicted); nullopt when no run holds it.
  struct PodRun {
    JobSlot slot = kNoSlot;
    bool stopping = false;
  };
  std::optional<PodRun> RunOfPod(const std::string& uid) const;
  // Pods changed: runs whose pods are all done or gone end (kEnded, kFailed, or kStopped when stopped).
  // With `uid`, only the pod with that UID changed: only the runs holding it (and runs whose pods are not
  // known yet) are looked at, so a watch event costs what its run has, not what every run has.
  void PodsChanged(const std::string& uid = "");
  // Makes the queued work now (tests); returns when the queue is empty (retries may remain).
  void Drain();
  // Ends the backend's work now: waits end, queued work is dropped and later calls are ignored; returns
  // once the work in progress ended (its API calls time out at worst).
  void Shutdown();
  // How long an eviction that a PodDisruptionBudget refuses waits before its next try (attempt 0, 1, ...).
  // Threads carrying out launches and stops (API requests of different jobs in flight at once).
  static constexpr int kWorkers = 6;
  static int RetryDelayMs(int attempt) { return std::min(30000, 1000 << std::min(attempt, 5)); }

 private:
  struct Run {
    uint32_t run = 0;
    int64_t started_at = 0;
    std::vector<PodRef> pods;
    bool stopping = false;
    bool adopted = false;  // after a restart: pods resolved on the next PodsChanged
    size_t tasks = 0;
    bool cancelling = false;                // its user deleted a running pod: the job is being cancelled
    std::map<std::string, PodEnd> ends;     // pod uid -> how it ended, as last seen (not kRunning)
    std::vector<std::string> nodes;         // adopted: the node of each task, as placed before the restart
    std::optional<JobKey> key;              // the job's key as the launch gave it (nullopt: none, no pods)
  };
  // An eviction a PodDisruptionBudget refused, tried again at `at`.
  struct Retry {
    std::chrono::steady_clock::time_point at;
    JobSlot slot = kNoSlot;
    uint32_t run = 0;
    PodRef pod;
    int attempt = 0;
  };
  // runs_, Run::pods and Run::adopted change only through these (mu_ held; adopted is cleared just before
  // SetPodsLocked), which keep slot_of_uid_ and unresolved_ in step.
  Run& PutRunLocked(JobSlot slot, Run run);  // `run` without pods: SetPodsLocked gives them
  void SetPodsLocked(JobSlot slot, Run& r, std::vector<PodRef> pods);
  void EraseRunLocked(std::map<JobSlot, Run>::iterator it);
  void Work();
  void RunRetries(std::unique_lock<std::mutex>& l);
  bool Leading() const { return !hooks_.leading || hooks_.leading(); }
  // Sleeps `ms`; false when the backend shut down meanwhile.
  bool Pause(int ms) const;
  void DoLaunch(const LaunchSpec& spec, int64_t now);
  // Clears the nominatedNodeName of bound pods that had one.
  void ClearNominated(const std::vector<PodRef>& bound, const std::vector<nlohmann::json>& pods);
  // One binding (hooks.bind first), only while leading.
  ApiResponse BindOne(const PodRef& p, const std::string& node) const;
  void DoStop(JobSlot slot, uint32_t run, bool preempted);
  // Writes nominatedNodeName on the preemptor's pods that take capacity where `victims` run; returns their
  // names (ns/name, joined) or "" when no preemptor is known within a second.
  std::string Nominate(const std::vector<nlohmann::json>& victims);
  void MarkDisruption(const PodRef& p, const std::string& by);
  // One eviction; a refusal is queued as a Retry (attempt + 1).
  void Evict(JobSlot slot, uint32_t run, const PodRef& p, int attempt);
  // The run's pods against the job's pods now: kEnded/kFailed/kStopped/kInterrupted, or a cancel (via
  // hooks.cancel) when its user deleted a running pod; nullopt while it runs.
  std::optional<BackendEvent> RunEnd(JobSlot slot, Run& r, const std::vector<nlohmann::json>& pods);
  // Pods of runs being stopped (evicted) still on one of `nodes` (not yet gone: their
  // terminationGracePeriodSeconds runs); WaitVacated waits up to kVacateWaitS for none to be left.
  bool EvictedStillOn(const std::set<std::string>& nodes) const;
  bool WaitVacated(const std::set<std::string>& nodes) const;
  // An adopted gang the restart found partly bound (`bound` of its tasks): its waiting members are bound to
  // the nodes the rest of its tasks hold, or, when that fails, every member is unwound and the job goes back
  // to the queue (kInterrupted). Runs on the worker.
  void CompleteAdopted(JobSlot slot, uint32_t run, std::vector<PodRef> bound, std::vector<nlohmann::json> waiting,
                       std::vector<std::string> nodes);
  // Deletes the bound members of a failed gang launch; returns how many were deleted.
  int Unwind(const std::vector<PodRef>& bound);
  void Emit(BackendEvent e);
  void Log(const std::string& s) const;
  void Event(const nlohmann::json& object, const std::string& type, const std::string& reason,
             const std::string& message) const;

  const ApiClient* api_;
  K8sBackendHooks hooks_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  // Queued work of one job (a launch, a stop, ...): works of different jobs run at once on kWorkers threads
  // (bindings of many jobs in flight together), those of one job in order, one at a time.
  struct QueuedWork {
    JobSlot slot = kNoSlot;
    std::function<void()> fn;
  };
  std::deque<QueuedWork>::iterator NextRunnable();
  std::deque<QueuedWork> work_;
  std::set<JobSlot> active_;  // slots whose work runs now
  int busy_ = 0;
  bool stop_ = false;
  std::atomic<bool> shutdown_{false};
  std::vector<Retry> retries_;
  std::vector<BackendEvent> events_;
  std::map<JobSlot, Run> runs_;
  std::unordered_map<std::string, JobSlot>
      slot_of_uid_;               // every run's pods by uid (PutRunLocked, SetPodsLocked)
  std::set<JobSlot> unresolved_;  // runs adopted, or without pods: every pod event looks at them
  std::function<void()> wake_;
  std::vector<std::thread> workers_;
};

}  // namespace tessera
