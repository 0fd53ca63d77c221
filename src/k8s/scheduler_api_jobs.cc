// Jobs submitted through Tessera's API with a container become Kubernetes objects (job_objects.h); the
// loop places them like pods' jobs and the backend binds the pods it created.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "k8s/api/objects.h"
#include "k8s/cluster_view.h"
#include "k8s/scheduler.h"

namespace tessera {

using json = nlohmann::json;

// Tessera never creates namespaces: an API job waits until its team's namespace exists.
bool K8sScheduler::EnsureNamespace(const std::string& ns) {
  if (namespaces_.count(ns)) return true;
  const ApiResponse r = api_.Get("/api/v1/namespaces/" + ns);
  if (r.ok()) return namespaces_.insert(ns), true;
  if (missing_namespaces_.insert(ns).second)
    Log(fmt::format("namespace {} ({} {}): API jobs of its team wait until an administrator creates it", ns,
                    r.status, r.error));
  return false;
}

// The explicit --team-namespaces mapping; without one, a team's own namespace when it may hold API jobs
// (not default, kube-* or the scheduler's own).
TeamNamespaces K8sScheduler::TeamNamespacesFor(const std::string& team) const {
  if (!options_.team_namespaces.empty()) return options_.team_namespaces;
  const auto reserved = SchedulerNamespaces(options_.lease_namespace, api_.config().ns, options_.mig_config_map);
  if (!NamespaceRefusal(team, reserved).empty()) return {};
  return {{team, team}};
}

void K8sScheduler::MaterializeApiJob(const JobRecord& job) {
  auto it = api_jobs_.find(job.id);
  if (it == api_jobs_.end()) {
    const json* pc = nullptr;
    const auto classes = classes_->Objects();
    if (auto c = classes.find(job.priority_class); c != classes.end()) pc = &c->second;
    auto objects = ObjectsForJob(job, options_.scheduler_name, pc != nullptr ? job.priority_class : "",
                                 TeamNamespacesFor(job.team));
    if (!objects.ok()) {
      Log(fmt::format("job {} ({}) cannot run on Kubernetes and is cancelled: {}", job.id, job.name,
                      objects.error()));
      (void)service_->Cancel(admin_, job.id);
      return;
    }
    {
      std::lock_guard<std::mutex> l(api_mu_);
      api_keys_[job.id] = objects->keys;
    }
    it = api_jobs_.emplace(job.id, std::move(objects).value()).first;
    Log(fmt::format("job {} ({}): {} pod(s) in namespace {}", job.id, job.name, it->second.pods.size(),
                    it->second.ns));
  }
  const JobObjects& o = it->second;
  if (!EnsureNamespace(o.ns)) return;
  if (o.pod_group && !groups_->Objects().count(o.ns + "/" + Meta(*o.pod_group, "name"))) {
    const ApiResponse r = api_.Post(
        fmt::format("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{}/podgroups", o.ns), *o.pod_group);
    if (!r.ok() && r.status != 409)
      Log(fmt::format("job {}: creating its PodGroup failed ({} {})", job.id, r.status, r.error));
  }
  const auto pods_snap = pods_->Snapshot();
  const auto& pods = *pods_snap;
  for (const json& want : o.pods) {
    const std::string path = fmt::format("/api/v1/namespaces/{}/pods", o.ns);
    auto have = pods.find(o.ns + "/" + Meta(want, "name"));
    if (have == pods.end()) {
      const ApiResponse r = api_.Post(path, want);
      if (!r.ok() && r.status != 409)
        Log(fmt::format("job {}: creating pod {} failed ({} {})", job.id, Meta(want, "name"), r.status,
                        r.error));
    } else if (job.state == JobState::kPending && PodTerminal(have->second)) {
      // A pod of an earlier run that ended while the job went back to the queue: made again once gone.
      (void)api_.Delete(path + "/" + Meta(want, "name"));
    }
  }
}

void K8sScheduler::ForgetApiJob(int64_t id, bool cancelled) {
  auto it = api_jobs_.find(id);
  if (it == api_jobs_.end()) return;
  if (cancelled) {  // its pods go with it; a finished job's pods stay, as a Job's do
    const auto pods_snap = pods_->Snapshot();
  const auto& pods = *pods_snap;
    for (const json& p : it->second.pods) {
      auto have = pods.find(it->second.ns + "/" + Meta(p, "name"));
      if (have != pods.end() && !PodTerminal(have->second))
        (void)api_.Delete(fmt::format("/api/v1/namespaces/{}/pods/{}", it->second.ns, Meta(p, "name")));
    }
    if (it->second.pod_group)
      (void)api_.Delete(fmt::format("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{}/podgroups/{}",
                                    it->second.ns, Meta(*it->second.pod_group, "name")));
  }
  {
    std::lock_guard<std::mutex> l(api_mu_);
    api_keys_.erase(id);
  }
  api_jobs_.erase(it);
}

void K8sScheduler::SyncApiJobs() {
  std::set<int64_t> active;
  for (const char* state : {"Pending", "Running"}) {
    bool more = true;
    int64_t after = 0;
    while (more) {
      const std::vector<JobView> page = service_->List(admin_, state, "", "", after, 1000, &more);
      for (const JobView& v : page) {
        after = v.job->id;
        if (v.job->user == admin_.user || without_container_.count(v.job->id)) continue;
        if (!api_jobs_.count(v.job->id) && !HasContainer(*v.job)) {
          without_container_.insert(v.job->id);
          continue;
        }
        active.insert(v.job->id);
        MaterializeApiJob(*v.job);
      }
      if (page.empty()) break;
    }
  }
  std::vector<int64_t> gone;
  for (const auto& [id, o] : api_jobs_)
    if (!active.count(id)) gone.push_back(id);
  for (int64_t id : gone) {
    auto job = service_->Get(admin_, id);
    ForgetApiJob(id, !job.ok() || job->job->state == JobState::kCancelled);
  }
}

}  // namespace tessera
