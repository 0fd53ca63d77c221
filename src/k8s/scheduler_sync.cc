// The scheduler's passes (scheduler.h): nodes into the Service's cluster, pods into jobs, reasons back.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "k8s/api/events.h"
#include "k8s/cluster_view.h"
#include "k8s/dra/dra_binder.h"
#include "k8s/scheduler.h"
#include "service/workload_json.h"

namespace tessera {

using json = nlohmann::json;

namespace {

}  // namespace

bool K8sScheduler::JobRunning(int64_t id) const {
  auto job = service_->Get(admin_, id);
  return job.ok() && job->job->state == JobState::kRunning;
}

namespace {

double SteadyS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int PodPriority(const json& pod) {
  const json* spec = Field(pod, "spec");
  const json* p = spec != nullptr ? Field(*spec, "priority") : nullptr;
  return p != nullptr && p->is_number_integer() ? p->get<int>() : 0;
}

}  // namespace

void K8sScheduler::SyncJobs() {
  std::map<std::string, PodRefs> by_key;  // into `pod_maps`
  std::map<std::string, JobKey> members;  // by_key's keys of PodGroup members that are jobs of their own
  std::set<std::string> running_gangs;    // read before pods_mu_: the Service's lock is never taken under it
  for (const auto& [key, id] : job_of_key_)
    if (key.rfind("podgroup/", 0) == 0 && JobRunning(id)) running_gangs.insert(key);
  std::map<std::string, ObjectMap> pod_maps;
  ObjectMap dra_pods;
  {
    std::lock_guard<std::mutex> l(pods_mu_);
    pod_maps = pods_by_key_;  // pointers: the pods themselves are shared
    dra_pods = dra_pods_;
  }
  {
    for (const auto& [key, m] : pod_maps) {
      // minMember means at least that many: once a group's gang job runs with its GPU members bound, each
      // member still waiting is a job of its own ("pod/NS/NAME"), bound as it fits.
      const bool runs = running_gangs.count(key) > 0 && group_room_->GangBound(key, m);
      if (!runs) running_gangs.erase(key);
      for (const auto& [name, p] : m) {
        by_key[key].push_back(p);
        if (key.rfind("podgroup/", 0) != 0) continue;
        const JobKey own{"pod", Meta(p, "namespace"), name};
        if (!job_of_key_.count(own.str()) && !(runs && PodWaiting(p) && PodAsksGpu(p))) continue;
        by_key[own.str()].push_back(p);
        members.emplace(own.str(), own);
      }
    }
  }
  // Pods with claims the loop cannot express (or not yet: their claims are still being made) are not its:
  // neither their job's entry nor their own (a PodGroup member's) is.
  for (const auto& [ns_name, p] : dra_pods) {
    if (PodTerminal(p) || dra_->KindOf(p) == DraJobDemand::Kind::kWholeGpus) continue;
    by_key.erase(JobKeyOf(p).str());
    by_key.erase(JobKey{"pod", Meta(p, "namespace"), Meta(p, "name")}.str());
  }
  // Active jobs: drop the finished, cancel the pending ones whose pods are gone or placed elsewhere.
  for (auto it = job_of_key_.begin(); it != job_of_key_.end();) {
    auto job = service_->Get(admin_, it->second);
    if (!job.ok() || Terminal(job->job->state)) {
      unwaited_since_.erase(it->first);
      it = job_of_key_.erase(it);
      continue;
    }
    if (job->job->state == JobState::kPending && Orphaned(it->first, by_key)) {
      (void)service_->Cancel(admin_, it->second);
      Log(fmt::format("job {} ({}) cancelled: no pod of it waits", it->second, it->first));
      it = job_of_key_.erase(it);
      continue;
    }
    if (job->job->state != JobState::kPending) unwaited_since_.erase(it->first);
    ++it;
  }
  // New jobs, highest priority first (a gang is submitted before the pods that would split its leaf).
  std::vector<std::pair<int, std::string>> order;
  for (const auto& [key, pods] : by_key) {
    if (job_of_key_.count(key) || JobIdOfPod(pods.front()) >= 0) continue;  // labelled: an API job's
    int prio = INT32_MIN;
    bool waiting = false;
    for (const json& p : pods) {
      waiting |= PodWaiting(p);
      prio = std::max(prio, PodPriority(p));
    }
    if (waiting) order.push_back({-prio, key});
  }
  std::sort(order.begin(), order.end());
  std::vector<Intake> intake;
  for (const auto& [neg, key] : order) {
    auto member = members.find(key);
    if (const json& first = by_key[key].front(); member == members.end() && JobKeyOf(first).kind == "pod") {
      auto d = ReadPodDemand(first);
      if (d.ok() && !d->AnyGpu() && !PodUsesDra(first)) {  // not the loop's: bound as kube-scheduler would
        if (PodWaiting(first)) group_room_->BindCpuOnly(first);
        continue;
      }
    }
    SubmitJob(member != members.end() ? member->second : JobKeyOf(by_key[key].front()), by_key[key], &intake);
  }
  SubmitIntake(std::move(intake));
  for (const std::string& key : running_gangs) group_room_->BindCompanions(by_key[key]);
}

// A pending job is orphaned once no pod of it waits: at once when its pods are gone or ending; when some
// are bound, only after kBoundGraceS of that (the job's published state lags its own bindings by a cycle,
// so a just-bound job still reads pending; pods bound by someone else stay bound).
bool K8sScheduler::Orphaned(const std::string& key, const std::map<std::string, PodRefs>& by_key) {
  constexpr double kBoundGraceS = 5.0;
  auto pods = by_key.find(key);
  bool waiting = false, bound = false;
  if (pods != by_key.end())
    for (const json& p : pods->second) {
      waiting |= PodWaiting(p);
      bound |= !PodNode(p).empty() && !PodTerminal(p);
    }
  if (waiting) {
    unwaited_since_.erase(key);
    return false;
  }
  if (!bound) {
    unwaited_since_.erase(key);
    return true;
  }
  const double now =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  auto [since, fresh] = unwaited_since_.emplace(key, now);
  if (now - since->second < kBoundGraceS) return false;
  unwaited_since_.erase(since);
  return true;
}

void K8sScheduler::SyncBudgets() {
  const auto budgets = budgets_->Objects();
  std::set<int64_t> blocked;
  if (!budgets.empty()) {
    std::map<std::string, int64_t> jobs = job_of_key_;
    for (const auto& [id, keys] : api_jobs_->Keys())
      for (const JobKey& k : keys) jobs[k.str()] = id;
    std::lock_guard<std::mutex> l(pods_mu_);
    for (const auto& [key, id] : jobs) {
      auto pods = pods_by_key_.find(key);
      if (pods == pods_by_key_.end()) continue;
      for (const auto& [name, pod] : pods->second)
        if (!PodNode(pod).empty() && !PodTerminal(pod) && !BlockingBudgets(budgets, pod).empty())
          blocked.insert(id);
    }
  }
  if (blocked == eviction_blocked_) return;
  eviction_blocked_ = blocked;
  service_->SetEvictionBlocked(std::move(blocked));
  Log(fmt::format("{} running job(s) protected by PodDisruptionBudgets: no victims",
                  eviction_blocked_.size()));
}

std::string K8sScheduler::PriorityClassOf(const json& pod) const {
  const json* spec = Field(pod, "spec");
  const json* pc = spec != nullptr ? Field(*spec, "priorityClassName") : nullptr;
  if (pc != nullptr && pc->is_string() && classes_->Objects().count(pc->get<std::string>()))
    return pc->get<std::string>();
  return "kubernetes-default";
}

void K8sScheduler::SubmitJob(const JobKey& key, const PodRefs& pods, std::vector<Intake>* intake) {
  std::vector<json> waiting;
  for (const json& p : pods)
    if (PodWaiting(p)) waiting.push_back(p);
  auto refuse = [&](const std::vector<json>& who, const std::string& reason, const std::string& message) {
    for (const json& p : who) SetReason(p, reason, message);
  };
  const std::optional<json> group = key.kind == "podgroup" ? group_room_->PodGroupOf(key) : std::nullopt;
  const GangReadiness ready = ReadinessOf(key, group ? &*group : nullptr, waiting.size());
  if (!ready.ready) return refuse(waiting, ready.reason, ready.message);
  size_t tasks = ready.tasks;
  std::string reason, why;
  const std::string team = teams_->TeamOf(key, waiting[0], group ? &*group : nullptr, &reason, &why);
  if (team.empty()) return refuse(waiting, reason, why);
  // A gang's CPU-only members (an MPI launcher, a driver) are companions, bound beside its GPU members once
  // those run (BindCompanions); its GPU members are the job's tasks, minMember less the companions.
  std::vector<json> gpu_members;
  for (const json& p : waiting)
    if (PodAsksGpu(p)) gpu_members.push_back(p);
  if (key.kind == "podgroup" && !gpu_members.empty() && gpu_members.size() < waiting.size()) {
    const size_t companions = waiting.size() - gpu_members.size();
    tasks = tasks > companions ? tasks - companions : 1;  // at most gpu_members.size(): waiting >= tasks
    waiting = gpu_members;
  }
  std::vector<PodDemand> demands;
  for (size_t i = 0; i < tasks; ++i) {
    auto d = ReadPodDemand(waiting[i]);
    if (!d.ok()) return refuse({waiting[i]}, "InvalidPod", "tessera: " + d.error());
    if (const DraJobDemand* dra = dra_->DemandOf(Meta(waiting[i], "uid")); dra != nullptr)
      d->gpus += dra->gpus;
    demands.push_back(*d);
  }
  auto spec = JobSpecFor(key, demands, static_cast<int>(tasks), PriorityClassOf(waiting[0]), team);
  if (!spec.ok())
    return refuse(waiting, "Unsupported", fmt::format("tessera: {} {}", key.name, spec.error()));
  teams_->Ensure(team);
  intake->push_back({key, std::move(spec).value(), std::move(waiting), tasks});
}

// One durable write for the pass's new jobs (a burst of pods costs one commit, not one each).
void K8sScheduler::SubmitIntake(std::vector<Intake> intake) {
  if (intake.empty()) return;
  std::vector<JobSpec> specs;
  specs.reserve(intake.size());
  for (const Intake& in : intake) specs.push_back(in.spec);
  const std::vector<Outcome<JobView>> jobs = service_->SubmitAll(admin_, specs);
  constexpr size_t kLoggedEach = 20;  // a larger intake is one line
  int64_t first = -1, last = -1;
  for (size_t i = 0; i < intake.size(); ++i) {
    const Intake& in = intake[i];
    const Outcome<JobView>& job = jobs[i];
    if (!job.ok()) {
      for (const json& p : in.waiting) SetReason(p, ErrorCodeName(job.error().code), "tessera: " + job.error().message);
      continue;
    }
    job_of_key_[in.key.str()] = job->job->id;
    submitted_[in.key.str()] = {SteadyS(), PodUsesDra(in.waiting[0])};
    if (intake.size() <= kLoggedEach) Log(fmt::format("job {}: {} ({} task(s))", job->job->id, in.key.str(), in.tasks));
    if (first < 0) first = job->job->id;
    last = job->job->id;
  }
  if (intake.size() > kLoggedEach && first >= 0)
    Log(fmt::format("jobs {}-{}: {} of {} pod jobs submitted", first, last,
                    std::count_if(jobs.begin(), jobs.end(), [](const auto& j) { return j.ok(); }), intake.size()));
}

void K8sScheduler::WriteReasons() {
  auto snap = service_->snapshot();
  if (!snap) return;
  const size_t nodes = nodes_->Snapshot()->size();
  // A job's first cycles may run before its filters were set (FilterRoom::Sync follows the submission): only
  // a job submitted a while ago (DRA: its claims allocated) has a reason to tell; one placed by then has
  // none.
  constexpr double kReasonAfterS = 1.0, kDraReasonAfterS = 2.0;
  const double now_s = SteadyS();
  std::erase_if(submitted_, [&](const auto& e) {
    return now_s - e.second.first >= (e.second.second ? kDraReasonAfterS : kReasonAfterS);
  });
  for (const auto& [key, id] : job_of_key_) {
    auto it = snap->pending.find(id);
    if (it == snap->pending.end() || it->second.code.empty() || submitted_.count(key)) continue;
    // No node passes: kube-scheduler's message alone (the loop's says only that); else how many pass and why
    // the loop still waits.
    const std::string* none = filters_->UnschedulableOf(key);
    const std::optional<size_t> pass = filters_->PassingOf(key);
    const std::string message =
        none != nullptr ? *none
                        : fmt::format("{}/{} nodes pass the pod's filters; tessera: {}: {}",
                                      pass ? *pass : nodes, nodes, it->second.code, it->second.message.str());
    std::vector<json> pods;
    {
      std::lock_guard<std::mutex> l(pods_mu_);
      auto p = pods_by_key_.find(key);
      if (p == pods_by_key_.end()) continue;
      for (const auto& [name, pod] : p->second)
        if (PodWaiting(pod)) pods.push_back(pod);
    }
    for (const json& p : pods) SetReason(p, "Unschedulable", message);
  }
}

// Every waiting pod's condition has reason Unschedulable (what Cluster Autoscaler and Karpenter act on);
// Tessera's own reason, when another, leads the message ("tessera: GangIncomplete: ...").
// kube-scheduler's message, when no node passes, comes first.
void K8sScheduler::SetReason(const json& pod, const std::string& code, const std::string& text) {
  const std::string uid = Meta(pod, "uid");
  const std::string reason = "Unschedulable";
  std::string message = text;
  if (code != reason) {
    constexpr std::string_view kOurs = "tessera: ";
    message = text.rfind(kOurs, 0) == 0 ? fmt::format("tessera: {}: {}", code, text.substr(kOurs.size()))
                                        : fmt::format("tessera: {}: {}", code, text);
    if (const std::string kube = filters_->NoNodeMessage(pod); !kube.empty()) message = kube + " " + message;
  }
  const std::string msg = message.size() > 1000 ? message.substr(0, 1000) : message;
  auto said = said_.find(uid);
  if (said != said_.end() && said->second == std::make_pair(reason, msg)) return;
  const json patch = {{"status",
                       {{"conditions",
                         {{{"type", "PodScheduled"},
                           {"status", "False"},
                           {"reason", reason},
                           {"message", msg},
                           {"lastProbeTime", nullptr},
                           {"lastTransitionTime", Rfc3339Now()}}}}}}};
  const ApiResponse r = api_.Patch(
      fmt::format("/api/v1/namespaces/{}/pods/{}/status", Meta(pod, "namespace"), Meta(pod, "name")), patch,
      "application/strategic-merge-patch+json");
  if (r.ok()) {
    said_[uid] = {reason, msg};
    // kubectl describe shows it under Events, as kube-scheduler's FailedScheduling.
    if (events_) events_->Record(pod, "Warning", "FailedScheduling", msg);
  } else {
    Log(fmt::format("pod {}/{}: writing the reason failed ({} {})", Meta(pod, "namespace"), Meta(pod, "name"),
                    r.status, r.error));
  }
}

}  // namespace tessera
