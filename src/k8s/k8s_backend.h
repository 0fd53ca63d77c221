#pragma once
// The Kubernetes backend of the control loop (control/backend.h): a launch binds the job's pods to the
// nodes of its grants (POST pods/NAME/binding with the pod's UID as precondition), all or none: when any
// member's binding fails, the members already bound are deleted (their controller recreates them) and the
// launch fails back to the queue with the API server's answer. A stop evicts the pods (Eviction API,
// retried with back-off on 429 while a PodDisruptionBudget refuses); a launch onto a node where evicted pods
// still terminate waits until they are gone (their terminationGracePeriodSeconds honoured before the
// capacity is used). Bound pods get a Scheduled Event. A run ends when all its pods are done
// (Succeeded, Failed) or gone. The loop's per-GPU repartitioning is off on Kubernetes (the GPU Operator
// applies one config per node, after a node drain: mig_repartitioner.h does that outside the loop), so
// Reconfigure should not be called; if it is, it answers kReconfigureFailed and the loop plans around that GPU.
//
// Thread safety: the driver's calls come from one thread; the API calls run on the backend's own threads
// and their results come back as events (asynchronous() is true).

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/backend.h"
#include "k8s/api_client.h"
#include "k8s/pod_jobs.h"

namespace tessera {

// One pod as a run holds it.
struct PodRef {
  std::string ns, name, uid;
};

struct K8sBackendHooks {
  std::function<std::optional<JobKey>(JobSlot)> key_of;            // the Kubernetes job of a loop job
  std::function<std::string(NodeId)> node_name;                   // a node id of the loop's cluster
  std::function<std::vector<nlohmann::json>(const JobKey&)> pods;  // the job's pods now (any state), in order
  std::function<void(const std::string&)> log;
  // Before each binding: "" to bind the pod to the node, else why not (a Kubernetes filter it would break
  // now); after a failed binding, forget undoes what admit assumed. Unset: every binding is tried.
  std::function<std::string(const PodRef&, const std::string&)> admit;
  std::function<void(const PodRef&)> forget;
};

// The members to bind, in order: the waiting pods of `pods` (at most `tasks`), or an error saying how many
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
  void Stop(JobSlot slot, uint32_t run, int64_t grace_s, std::string_view reason, int64_t now) override;
  void Reconfigure(GpuId gpu, const std::string& layout, int64_t now) override;
  bool Adopt(const LaunchSpec& spec, int64_t started_at, int64_t now) override;
  std::vector<BackendEvent> Poll(int64_t now) override;
  int64_t NextEventS() const override { return -1; }
  std::vector<BackendRun> Running() const override;
  bool asynchronous() const override { return true; }
  void OnEvents(std::function<void()> wake) override;

  // Pods changed: runs whose pods are all done or gone end (kEnded, kFailed, or kStopped when stopped).
  void PodsChanged();
  // Makes the queued work now (tests); returns when the queue is empty.
  void Drain();

 private:
  struct Run {
    uint32_t run = 0;
    int64_t started_at = 0;
    std::vector<PodRef> pods;
    bool stopping = false;
    bool adopted = false;  // after a restart: pods resolved on the next PodsChanged
    size_t tasks = 0;
  };
  void Work();
  void DoLaunch(const LaunchSpec& spec, int64_t now);
  void DoStop(JobSlot slot, uint32_t run, int64_t grace_s, int64_t now);
  // Pods of runs being stopped (evicted) still on one of `nodes` (not yet gone: their
  // terminationGracePeriodSeconds runs); WaitVacated waits up to kVacateWaitS for none to be left.
  bool EvictedStillOn(const std::set<std::string>& nodes) const;
  bool WaitVacated(const std::set<std::string>& nodes) const;
  // Deletes the bound members of a failed gang launch; returns how many were deleted.
  int Unwind(const std::vector<PodRef>& bound);
  void Emit(BackendEvent e);
  void Log(const std::string& s) const;

  const ApiClient* api_;
  K8sBackendHooks hooks_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> work_;
  bool busy_ = false;
  bool stop_ = false;
  std::vector<BackendEvent> events_;
  std::map<JobSlot, Run> runs_;
  std::function<void()> wake_;
  std::thread worker_;
};

}  // namespace tessera
