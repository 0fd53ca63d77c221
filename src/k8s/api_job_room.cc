// ApiJobRoom (api_job_room.h): jobs submitted through Tessera's API with a container become Kubernetes
// objects (job_objects.h); the loop places them like pods' jobs and the backend binds the pods made here.
#include "k8s/api_job_room.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "k8s/api/objects.h"
#include "k8s/cluster_view.h"
#include "k8s/scheduler.h"

namespace tessera {

using json = nlohmann::json;

ApiJobRoom::ApiJobRoom(K8sScheduler* scheduler) : s_(scheduler) {}

std::map<int64_t, std::vector<JobKey>> ApiJobRoom::Keys() const {
  std::lock_guard<std::mutex> l(mu_);
  return keys_;
}

std::vector<std::string> ApiJobRoom::KeysFor(const JobRecord& job) const {
  if (job.user == s_->admin_.user) {  // a job from pods
    const std::optional<JobKey> key = KeyOfJob(job.project, job.team, job.name);
    return key ? std::vector<std::string>(job.replicas, key->str()) : std::vector<std::string>{};
  }
  std::vector<std::string> out;
  for (const JobKey& k : KeysOf(job.id)) out.push_back(k.str());  // made already: as they were made
  if (!out.empty()) return out;
  auto keys = ApiJobKeys(job, TeamNamespacesFor(job.team));
  for (const JobKey& k : keys.ok() ? *keys : std::vector<JobKey>{}) out.push_back(k.str());
  return out;
}

std::vector<JobKey> ApiJobRoom::KeysOf(int64_t id) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = keys_.find(id);
  return it == keys_.end() ? std::vector<JobKey>{} : it->second;
}

// Tessera never creates namespaces: an API job waits until its team's namespace exists.
bool ApiJobRoom::EnsureNamespace(const std::string& ns) {
  if (namespaces_.count(ns)) return true;
  const ApiResponse r = s_->api_.Get("/api/v1/namespaces/" + ns);
  if (r.ok()) return namespaces_.insert(ns), true;
  if (missing_namespaces_.insert(ns).second)
    s_->Log(fmt::format("namespace {} ({} {}): API jobs of its team wait until an administrator creates it",
                        ns, r.status, r.error));
  return false;
}

// The explicit --team-namespaces mapping; without one, a team's own namespace when it may hold API jobs
// (not default, kube-* or the scheduler's own).
TeamNamespaces ApiJobRoom::TeamNamespacesFor(const std::string& team) const {
  if (!s_->options_.team_namespaces.empty()) return s_->options_.team_namespaces;
  const auto reserved =
      SchedulerNamespaces(s_->options_.lease_namespace, s_->api_.config().ns, s_->options_.mig_config_map);
  if (!NamespaceRefusal(team, reserved).empty()) return {};
  return {{team, team}};
}

void ApiJobRoom::Materialize(const JobRecord& job) {
  auto it = jobs_.find(job.id);
  if (it == jobs_.end()) {
    const json* pc = nullptr;
    const auto classes = s_->classes_->Objects();
    if (auto c = classes.find(job.priority_class); c != classes.end()) pc = &c->second;
    auto objects = ObjectsForJob(job, s_->options_.scheduler_name, pc != nullptr ? job.priority_class : "",
                                 TeamNamespacesFor(job.team));
    if (!objects.ok()) {
      s_->Log(fmt::format("job {} ({}) cannot run on Kubernetes and is cancelled: {}", job.id, job.name,
                          objects.error()));
      (void)s_->service_->Cancel(s_->admin_, job.id);
      return;
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      keys_[job.id] = objects->keys;
    }
    it = jobs_.emplace(job.id, std::move(objects).value()).first;
    s_->Log(fmt::format("job {} ({}): {} pod(s) in namespace {}", job.id, job.name, it->second.pods.size(),
                        it->second.ns));
  }
  const JobObjects& o = it->second;
  if (!EnsureNamespace(o.ns)) return;
  if (o.pod_group && !s_->groups_->Objects().count(o.ns + "/" + Meta(*o.pod_group, "name"))) {
    const ApiResponse r = s_->api_.Post(
        fmt::format("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{}/podgroups", o.ns), *o.pod_group);
    if (!r.ok() && r.status != 409)
      s_->Log(fmt::format("job {}: creating its PodGroup failed ({} {})", job.id, r.status, r.error));
  }
  const auto pods_snap = s_->pods_->Snapshot();
  const auto& pods = *pods_snap;
  for (const json& want : o.pods) {
    const std::string path = fmt::format("/api/v1/namespaces/{}/pods", o.ns);
    auto have = pods.find(o.ns + "/" + Meta(want, "name"));
    if (have == pods.end()) {
      const ApiResponse r = s_->api_.Post(path, want);
      if (!r.ok() && r.status != 409)
        s_->Log(fmt::format("job {}: creating pod {} failed ({} {})", job.id, Meta(want, "name"), r.status,
                            r.error));
    } else if (job.state == JobState::kPending && PodTerminal(have->second)) {
      // A pod of an earlier run that ended while the job went back to the queue: made again once gone.
      (void)s_->api_.Delete(path + "/" + Meta(want, "name"));
    }
  }
}

void ApiJobRoom::Forget(int64_t id, bool cancelled) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  if (cancelled) {  // its pods go with it; a finished job's pods stay, as a Job's do
    const auto pods_snap = s_->pods_->Snapshot();
    const auto& pods = *pods_snap;
    for (const json& p : it->second.pods) {
      auto have = pods.find(it->second.ns + "/" + Meta(p, "name"));
      if (have != pods.end() && !PodTerminal(have->second))
        (void)s_->api_.Delete(fmt::format("/api/v1/namespaces/{}/pods/{}", it->second.ns, Meta(p, "name")));
    }
    if (it->second.pod_group)
      (void)s_->api_.Delete(fmt::format("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{}/podgroups/{}",
                                        it->second.ns, Meta(*it->second.pod_group, "name")));
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    keys_.erase(id);
  }
  jobs_.erase(it);
}

void ApiJobRoom::Sync() {
  std::set<int64_t> active;
  for (const char* state : {"Pending", "Running"}) {
    bool more = true;
    int64_t after = 0;
    while (more) {
      const std::vector<JobView> page = s_->service_->List(s_->admin_, state, "", "", after, 1000, &more);
      for (const JobView& v : page) {
        after = v.job->id;
        if (v.job->user == s_->admin_.user || without_container_.count(v.job->id)) continue;
        if (!jobs_.count(v.job->id) && !HasContainer(*v.job)) {
          without_container_.insert(v.job->id);
          continue;
        }
        active.insert(v.job->id);
        Materialize(*v.job);
      }
      if (page.empty()) break;
    }
  }
  std::vector<int64_t> gone;
  for (const auto& [id, o] : jobs_)
    if (!active.count(id)) gone.push_back(id);
  for (int64_t id : gone) {
    auto job = s_->service_->Get(s_->admin_, id);
    Forget(id, !job.ok() || job->job->state == JobState::kCancelled);
  }
}

}  // namespace tessera
