// K8sScheduler's answers to the backend about preemption (who takes the victims' capacity) and about pods
// their users deleted (the job is cancelled), and to the MIG repartitioner about the pods its drains take
// (the loop preempts their jobs).
#include <fmt/format.h>

#include "k8s/cluster_view.h"
#include "k8s/scheduler.h"

namespace tessera {

using json = nlohmann::json;

// A running job still starting (its launch waits for its victims) with a placement on one of `nodes`: its
// waiting pods, in the order the backend binds them, each with the node of its task.
std::vector<std::pair<json, std::string>> K8sScheduler::PreemptorOn(const std::set<std::string>& nodes) const {
  std::vector<std::pair<json, std::string>> out;
  if (!service_) return out;
  JobQuery q;
  q.states = {JobState::kRunning};
  q.limit = 1000;
  for (const JobView& v : service_->ListJobs(admin_, q).jobs) {
    const JobRecord& j = *v.job;
    const auto on = [&](const TaskPlacement& t) { return nodes.count(service_->NodeName(t.node)) > 0; };
    if (!j.starting || std::none_of(j.placements.begin(), j.placements.end(), on)) continue;
    std::vector<JobKey> keys;
    if (j.user == admin_.user) {
      if (auto key = KeyOfJob(j.project, j.team, j.name)) keys.push_back(*key);
    } else {
      keys = api_jobs_->KeysOf(j.id);
    }
    size_t task = 0;
    for (const JobKey& key : keys)
      for (const json& pod : PodsOf(key))
        if (PodWaiting(pod) && task < j.placements.size())
          out.push_back({pod, service_->NodeName(j.placements[task++].node)});
    if (!out.empty()) return out;
  }
  return out;
}

void K8sScheduler::CancelJobOfSlot(JobSlot slot, const std::string& why) {
  JobPtr j = service_ ? service_->JobOfSlot(slot) : nullptr;
  if (!j) return;
  const auto done = service_->Cancel(admin_, j->id);
  Log(done.ok() ? fmt::format("job {} ({}) cancelled: {}", j->id, j->name, why)
                : fmt::format("job {} ({}): cancelling it failed: {}", j->id, j->name, done.error().message));
}

std::optional<bool> K8sScheduler::LoopMayPreempt(const GpuPod& pod, int64_t for_job) const {
  if (!backend_ || !service_) return std::nullopt;
  const auto run = backend_->RunOfPod(pod.uid);
  if (!run || run->stopping) return std::nullopt;
  return service_->MayPreemptFor(run->slot, for_job);
}

bool K8sScheduler::PreemptPod(const GpuPod& pod, const std::string& node, const std::string& why) {
  if (!backend_ || !service_) return false;
  const auto run = backend_->RunOfPod(pod.uid);
  if (!run) return false;
  if (run->stopping) return true;  // under way: the backend evicts (and retries a refused eviction)
  JobPtr j = service_->JobOfSlot(run->slot);
  if (!j) return false;
  if (j->state != JobState::kRunning) return true;  // preempted already; its stop is on its way
  (void)service_->CordonNode(admin_, node);
  const auto done = service_->Preempt(admin_, j->id, why);
  if (!done.ok()) {
    Log(fmt::format("job {} ({}): preempting it failed: {}", j->id, j->name, done.error().message));
    return false;
  }
  if (done->job->state == JobState::kRunning) return false;  // nothing held in the loop: evicted directly
  Log(fmt::format("job {} ({}) preempted for pod {}/{}: {}; back in the queue", j->id, j->name, pod.ns, pod.name,
                  why));
  return true;
}

}  // namespace tessera
