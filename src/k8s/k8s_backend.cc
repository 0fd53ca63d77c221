#include "k8s/k8s_backend.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>

#include "k8s/api/events.h"
#include "k8s/cluster_view.h"
#include "k8s/dra/dra_binder.h"

namespace tessera {

using json = nlohmann::json;

namespace {

std::string PodPath(const PodRef& p) { return fmt::format("/api/v1/namespaces/{}/pods/{}", p.ns, p.name); }

}  // namespace

bool PodAsksGpu(const json& pod) {
  if (PodUsesDra(pod)) return true;
  auto d = ReadPodDemand(pod);
  return d.ok() && d->AnyGpu();
}

Result<std::vector<PodRef>> MembersToBind(const std::vector<json>& pods, size_t tasks) {
  std::vector<PodRef> out;
  for (bool gpu : {true, false})  // members that ask for GPUs first: CPU-only companions are bound apart
    for (const json& p : pods)
      if (PodWaiting(p) && out.size() < tasks && PodAsksGpu(p) == gpu)
        out.push_back({Meta(p, "namespace"), Meta(p, "name"), Meta(p, "uid")});
  if (out.size() < tasks)
    return Status::Error(fmt::format("{} of {} members wait to be placed", out.size(), tasks));
  return out;
}

bool RunOver(const std::vector<PodRef>& run, const std::vector<json>& now, bool* failed) {
  *failed = false;
  for (const PodRef& r : run) {
    for (const json& p : now) {
      if (Meta(p, "name") != r.name || Meta(p, "uid") != r.uid) continue;
      if (!PodTerminal(p)) return false;
      const json* st = Field(p, "status");
      if (st != nullptr && Field(*st, "phase") != nullptr && (*st)["phase"] == "Failed") *failed = true;
    }
  }
  return true;
}

K8sBackend::K8sBackend(const ApiClient* api, K8sBackendHooks hooks) : api_(api), hooks_(std::move(hooks)) {
  for (int i = 0; i < kWorkers; ++i) workers_.emplace_back([this] { Work(); });
}

K8sBackend::~K8sBackend() { Shutdown(); }

void K8sBackend::Shutdown() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    shutdown_ = true;
    work_.clear();
    retries_.clear();
  }
  cv_.notify_all();
  for (std::thread& w : workers_)
    if (w.joinable() && w.get_id() != std::this_thread::get_id()) w.join();
}

void K8sBackend::Log(const std::string& s) const {
  if (hooks_.log) hooks_.log(s);
}

void K8sBackend::Event(const json& object, const std::string& type, const std::string& reason,
                       const std::string& message) const {
  if (hooks_.event) return hooks_.event(object, type, reason, message);
  (void)PostEvent(*api_, object, type, reason, message, "tessera");
}

bool K8sBackend::Pause(int ms) const {
  std::unique_lock<std::mutex> l(mu_);
  return !cv_.wait_for(l, std::chrono::milliseconds(ms), [this] { return stop_; });
}

std::deque<K8sBackend::QueuedWork>::iterator K8sBackend::NextRunnable() {
  return std::find_if(work_.begin(), work_.end(), [this](const QueuedWork& w) { return !active_.count(w.slot); });
}

void K8sBackend::Work() {
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    auto due = std::chrono::steady_clock::time_point::max();
    for (const Retry& r : retries_) due = std::min(due, r.at);
    cv_.wait_until(l, due, [&] {
      return stop_ || NextRunnable() != work_.end() || std::chrono::steady_clock::now() >= due;
    });
    if (stop_) return;
    auto next = NextRunnable();
    if (next == work_.end()) {
      RunRetries(l);
      continue;
    }
    QueuedWork w = std::move(*next);
    work_.erase(next);
    ++busy_;
    active_.insert(w.slot);
    l.unlock();
    w.fn();
    l.lock();
    --busy_;
    active_.erase(w.slot);
    cv_.notify_all();
  }
}

// The evictions due now, tried again (called with `l` held; released while they run).
void K8sBackend::RunRetries(std::unique_lock<std::mutex>& l) {
  const auto now = std::chrono::steady_clock::now();
  std::vector<Retry> due;
  for (auto it = retries_.begin(); it != retries_.end();) {
    if (it->at > now) {
      ++it;
      continue;
    }
    auto run = runs_.find(it->slot);
    if (run != runs_.end() && run->second.run == it->run && run->second.stopping) due.push_back(*it);
    it = retries_.erase(it);
  }
  l.unlock();
  for (const Retry& r : due) Evict(r.slot, r.run, r.pod, r.attempt);
  if (!due.empty()) PodsChanged();
  l.lock();
}

void K8sBackend::Drain() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [this] { return stop_ || (work_.empty() && busy_ == 0); });
}

void K8sBackend::Emit(BackendEvent e) {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> l(mu_);
    events_.push_back(std::move(e));
    wake = wake_;
  }
  if (wake) wake();
}

LaunchAck K8sBackend::Launch(const LaunchSpec& spec, int64_t now) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!stop_) work_.push_back({spec.slot, [this, spec, now] { DoLaunch(spec, now); }});
  }
  cv_.notify_all();
  LaunchAck ack;
  ack.in_flight = true;
  return ack;
}

void K8sBackend::DoLaunch(const LaunchSpec& spec, int64_t now) {
  BackendEvent fail{BackendEventKind::kLaunchFailed, spec.slot, spec.run, now, kNone, ""};
  const std::optional<JobKey> key = ParseJobKey(spec.key);  // LaunchSpecOf gives the driver's key
  if (!key) return fail.message = "the job is not a Kubernetes job", Emit(fail);
  if (spec.node_names.size() != spec.tasks.size())  // LaunchSpecOf names every task's node
    return fail.message = fmt::format("{}: the launch does not name each task's node", key->name), Emit(fail);
  const std::vector<json> pods = hooks_.pods(*key);
  auto members = MembersToBind(pods, spec.tasks.size());
  if (!members.ok()) return fail.message = fmt::format("{}: {}", key->name, members.error()), Emit(fail);
  const std::set<std::string> nodes(spec.node_names.begin(), spec.node_names.end());
  if (!WaitVacated(nodes))
    return fail.message = fmt::format("{}: pods evicted from {} are still terminating after {} s", key->name,
                                      fmt::join(nodes, ", "), kVacateWaitS),
           Emit(fail);
  std::vector<PodRef> bound;
  for (size_t i = 0; i < members->size(); ++i) {
    const PodRef& p = (*members)[i];
    const std::string& node = spec.node_names[i];
    if (std::string why = hooks_.admit ? hooks_.admit(p, node) : ""; !why.empty()) {
      const int unwound = Unwind(bound);
      fail.message = fmt::format("pod {}/{} not bound to node {}: {}{}", p.ns, p.name, node, why,
                                 unwound > 0 ? fmt::format("; {} bound member(s) deleted", unwound) : "");
      Log(fail.message);
      return Emit(fail);
    }
    const ApiResponse r = BindOne(p, node);
    if (!r.ok()) {
      if (hooks_.forget) hooks_.forget(p);
      const int unwound = Unwind(bound);
      fail.message = fmt::format("binding pod {}/{} to node {} failed ({} {}){}", p.ns, p.name, node, r.status,
                                 r.error, unwound > 0 ? fmt::format("; {} bound member(s) deleted", unwound) : "");
      Log(fail.message);
      return Emit(fail);
    }
    bound.push_back(p);
  }
  for (size_t i = 0; i < bound.size(); ++i) {  // as kube-scheduler's Scheduled events
    const PodRef& p = bound[i];
    const json pod = {{"kind", "Pod"}, {"metadata", {{"name", p.name}, {"namespace", p.ns}, {"uid", p.uid}}}};
    Event(pod, "Normal", "Scheduled",
          fmt::format("Successfully assigned {}/{} to {}", p.ns, p.name, spec.node_names[i]));
  }
  ClearNominated(bound, pods);
  {
    std::lock_guard<std::mutex> l(mu_);
    Run& r = PutRunLocked(spec.slot, Run{spec.run, now, {}, false, false, spec.tasks.size(), false, {}});
    SetPodsLocked(spec.slot, r, bound);
    r.key = key;
  }
  Emit({BackendEventKind::kStarted, spec.slot, spec.run, now, kNone, ""});
}

ApiResponse K8sBackend::BindOne(const PodRef& p, const std::string& node) const {
  if (!Leading()) return ApiResponse{0, nullptr, ApiClient::kNotLeader};
  if (hooks_.bind)
    if (std::optional<ApiResponse> r = hooks_.bind(p, node)) return *r;
  return api_->Post(PodPath(p) + "/binding", BindingObject(p.ns, p.name, p.uid, node));
}

void K8sBackend::ClearNominated(const std::vector<PodRef>& bound, const std::vector<json>& pods) {
  for (const PodRef& b : bound)
    for (const json& p : pods)
      if (Meta(p, "uid") == b.uid && !NominatedNode(p).empty())
        (void)api_->Patch(PodPath(b) + "/status", NominatedNodePatch(""), "application/strategic-merge-patch+json");
}

bool K8sBackend::EvictedStillOn(const std::set<std::string>& nodes) const {
  struct Stopping {
    JobSlot slot;
    std::vector<PodRef> pods;
    std::optional<JobKey> key;
  };
  std::vector<Stopping> stopping;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [slot, r] : runs_)
      if (r.stopping) stopping.push_back({slot, r.pods, r.key});
  }
  for (const auto& [slot, refs, known] : stopping) {
    const std::optional<JobKey>& key = known;
    if (!key) continue;
    for (const json& p : hooks_.pods(*key))
      for (const PodRef& r : refs)
        if (Meta(p, "uid") == r.uid && !PodTerminal(p) && nodes.count(PodNode(p))) return true;
  }
  return false;
}

bool K8sBackend::WaitVacated(const std::set<std::string>& nodes) const {
  for (int i = 0; i < kVacateWaitS * 10; ++i) {
    if (!EvictedStillOn(nodes)) return true;
    if (!Pause(100)) return false;
  }
  return !EvictedStillOn(nodes);
}

int K8sBackend::Unwind(const std::vector<PodRef>& bound) {
  int deleted = 0;
  for (const PodRef& p : bound) {
    const json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"gracePeriodSeconds", 0},
                          {"preconditions", {{"uid", p.uid}}}};
    const ApiResponse r = api_->Delete(PodPath(p), options);
    if (r.ok() || r.status == 404) ++deleted;
    else Log(fmt::format("unwinding: deleting pod {}/{} failed ({} {})", p.ns, p.name, r.status, r.error));
  }
  return deleted;
}

void K8sBackend::Stop(JobSlot slot, uint32_t run, int64_t, std::string_view reason, int64_t) {
  const bool preempted = reason.substr(0, 9) == "preempted";
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!stop_) work_.push_back({slot, [this, slot, run, preempted] { DoStop(slot, run, preempted); }});
  }
  cv_.notify_all();
}

void K8sBackend::DoStop(JobSlot slot, uint32_t run, bool preempted) {
  std::vector<PodRef> pods;
  std::optional<JobKey> known;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = runs_.find(slot);
    if (it == runs_.end() || it->second.run != run) return;  // not ours to stop
    it->second.stopping = true;
    pods = it->second.pods;
    known = it->second.key;
  }
  if (preempted) {
    const std::optional<JobKey>& key = known;
    std::vector<json> victims;
    for (const json& p : key ? hooks_.pods(*key) : std::vector<json>{})
      for (const PodRef& r : pods)
        if (Meta(p, "uid") == r.uid && !PodTerminal(p)) victims.push_back(p);
    const std::string by = Nominate(victims);
    for (const json& v : victims) MarkDisruption({Meta(v, "namespace"), Meta(v, "name"), Meta(v, "uid")}, by);
  }
  for (const PodRef& p : pods) Evict(slot, run, p, 0);
  PodsChanged();
}

std::string K8sBackend::Nominate(const std::vector<json>& victims) {
  std::set<std::string> nodes;
  for (const json& v : victims)
    if (!PodNode(v).empty()) nodes.insert(PodNode(v));
  if (nodes.empty() || !hooks_.preemptor_on) return "";
  std::vector<std::pair<json, std::string>> preemptor;
  for (int i = 0; i < 10 && preemptor.empty(); ++i)  // its placement is published with the cycle's commit
    if ((preemptor = hooks_.preemptor_on(nodes)).empty() && !Pause(100)) return "";
  std::vector<std::string> names;
  for (const auto& [pod, node] : preemptor) {
    const PodRef p{Meta(pod, "namespace"), Meta(pod, "name"), Meta(pod, "uid")};
    names.push_back(p.ns + "/" + p.name);
    if (NominatedNode(pod) == node || !Leading()) continue;
    const ApiResponse r = api_->Patch(PodPath(p) + "/status", NominatedNodePatch(node),
                                      "application/strategic-merge-patch+json");
    if (!r.ok()) Log(fmt::format("pod {}: writing nominatedNodeName {} failed ({} {})", names.back(), node, r.status, r.error));
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

void K8sBackend::MarkDisruption(const PodRef& p, const std::string& by) {
  const std::string message = by.empty() ? "tessera: preempting to accommodate a higher priority job"
                                         : fmt::format("tessera: preempting to accommodate {}", by);
  if (!Leading()) return;
  const ApiResponse r = api_->Patch(PodPath(p) + "/status", DisruptionTargetPatch(message, Rfc3339Now()),
                                    "application/strategic-merge-patch+json");
  if (!r.ok()) Log(fmt::format("pod {}/{}: writing DisruptionTarget failed ({} {})", p.ns, p.name, r.status, r.error));
  const json pod = {{"kind", "Pod"}, {"metadata", {{"name", p.name}, {"namespace", p.ns}, {"uid", p.uid}}}};
  Event(pod, "Normal", "Preempted", by.empty() ? "Preempted by a higher priority job" : "Preempted by " + by);
}

void K8sBackend::Evict(JobSlot slot, uint32_t run, const PodRef& p, int attempt) {
  if (!Leading()) return Log(fmt::format("not evicting pod {}/{}: this replica is not the leader", p.ns, p.name));
  const ApiResponse r = api_->Post(PodPath(p) + "/eviction", EvictionFor(p.ns, p.name, p.uid));
  if (r.ok() || r.status == 404 || r.status == 409) return;
  if (r.error == ApiClient::kNotLeader) return;
  const int delay = RetryDelayMs(attempt);
  Log(fmt::format("evicting pod {}/{}: {} {}; {}; trying again in {} s", p.ns, p.name, r.status, r.error,
                  r.status == 429 ? "a PodDisruptionBudget refuses: not evicted now" : "not evicted", delay / 1000));
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) return;
    retries_.push_back({std::chrono::steady_clock::now() + std::chrono::milliseconds(delay), slot, run, p, attempt + 1});
  }
  cv_.notify_all();
}

void K8sBackend::Reconfigure(GpuId gpu, const std::string& layout, int64_t now) {
  Log(fmt::format("MIG repartitioning (GPU {} to '{}') through the GPU Operator is not supported yet", gpu, layout));
  Emit({BackendEventKind::kReconfigureFailed, kNoSlot, 0, now, gpu,
        "MIG repartitioning through the GPU Operator is not supported yet"});
}

bool K8sBackend::Adopt(const LaunchSpec& spec, int64_t started_at, int64_t) {
  // The Service that adopts is not up yet: the nodes' names and the key come with the spec.
  std::optional<JobKey> key = ParseJobKey(spec.key);
  std::lock_guard<std::mutex> l(mu_);
  Run& r = PutRunLocked(spec.slot, Run{spec.run, started_at, {}, false, true, spec.tasks.size()});
  if (spec.node_names.size() == spec.tasks.size()) r.nodes = spec.node_names;  // else: no placement to resume
  r.key = std::move(key);
  return true;
}

void K8sBackend::CompleteAdopted(JobSlot slot, uint32_t run, std::vector<PodRef> bound, std::vector<json> waiting,
                                 std::vector<std::string> nodes) {
  std::string why = nodes.empty() || waiting.size() < nodes.size() ? "too few members wait, or no placement" : "";
  for (size_t i = 0; why.empty() && i < nodes.size(); ++i) {
    const PodRef p{Meta(waiting[i], "namespace"), Meta(waiting[i], "name"), Meta(waiting[i], "uid")};
    why = hooks_.admit ? hooks_.admit(p, nodes[i]) : "";
    if (!why.empty()) break;
    const ApiResponse r = BindOne(p, nodes[i]);
    if (!r.ok()) {
      if (hooks_.forget) hooks_.forget(p);
      why = fmt::format("binding pod {}/{} to node {} failed ({} {})", p.ns, p.name, nodes[i], r.status, r.error);
      break;
    }
    bound.push_back(p);
  }
  std::lock_guard<std::mutex> l(mu_);
  auto it = runs_.find(slot);
  if (it == runs_.end() || it->second.run != run) return;
  if (why.empty()) {
    SetPodsLocked(slot, it->second, bound);
    Log(fmt::format("a gang found partly bound after a restart is whole again ({} pods)", bound.size()));
    return;
  }
  EraseRunLocked(it);
  work_.push_back({slot, [this, bound, slot, run, why] {
    const int unwound = Unwind(bound);
    Log(fmt::format("a gang found partly bound after a restart could not be completed ({}): {} member(s) "
                    "deleted, back to the queue", why, unwound));
    Emit({BackendEventKind::kInterrupted, slot, run, 0, kNone, "partly bound after a restart; unwound"});
  }});
}

std::vector<BackendEvent> K8sBackend::Poll(int64_t now) {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<BackendEvent> out;
  out.swap(events_);
  for (BackendEvent& e : out)
    if (e.at == 0) e.at = now;  // reports from pod changes carry the time they are polled at
  return out;
}

std::vector<BackendRun> K8sBackend::Running() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<BackendRun> out;
  for (const auto& [slot, r] : runs_) out.push_back({slot, r.run, r.started_at});
  return out;
}

std::optional<K8sBackend::PodRun> K8sBackend::RunOfPod(const std::string& uid) const {
  std::lock_guard<std::mutex> l(mu_);
  auto s = slot_of_uid_.find(uid);
  if (s == slot_of_uid_.end()) return std::nullopt;
  auto r = runs_.find(s->second);
  return r == runs_.end() ? std::nullopt : std::optional<PodRun>(PodRun{r->first, r->second.stopping});
}

K8sBackend::Run& K8sBackend::PutRunLocked(JobSlot slot, Run run) {
  auto it = runs_.find(slot);
  if (it != runs_.end()) SetPodsLocked(slot, it->second, {});  // the slot's earlier run leaves the index
  Run& r = runs_[slot] = std::move(run);
  SetPodsLocked(slot, r, {});  // its pods come through SetPodsLocked (none yet)
  return r;
}

void K8sBackend::SetPodsLocked(JobSlot slot, Run& r, std::vector<PodRef> pods) {
  for (const PodRef& p : r.pods)
    if (auto s = slot_of_uid_.find(p.uid); s != slot_of_uid_.end() && s->second == slot)
      slot_of_uid_.erase(s);
  r.pods = std::move(pods);
  for (const PodRef& p : r.pods) slot_of_uid_[p.uid] = slot;
  if (r.adopted || r.pods.empty())
    unresolved_.insert(slot);
  else
    unresolved_.erase(slot);
}

void K8sBackend::EraseRunLocked(std::map<JobSlot, Run>::iterator it) {
  SetPodsLocked(it->first, it->second, {});
  unresolved_.erase(it->first);
  runs_.erase(it);
}

void K8sBackend::OnEvents(std::function<void()> wake) {
  std::lock_guard<std::mutex> l(mu_);
  wake_ = std::move(wake);
}

void K8sBackend::PodsChanged(const std::string& uid) {
  std::map<JobSlot, Run> runs;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (uid.empty()) {
      runs = runs_;
    } else {  // the pod's run (by the index), and the runs whose pods are not known yet
      if (auto of = slot_of_uid_.find(uid); of != slot_of_uid_.end())
        if (auto r = runs_.find(of->second); r != runs_.end()) runs.emplace(r->first, r->second);
      for (JobSlot slot : unresolved_)
        if (auto r = runs_.find(slot); r != runs_.end()) runs.emplace(slot, r->second);
    }
  }
  for (auto& [slot, r] : runs) {
    const std::optional<JobKey>& key = r.key;
    const std::vector<json> pods = key ? hooks_.pods(*key) : std::vector<json>{};
    if (r.adopted) {  // after a restart: the run's pods are the job's bound ones
      std::vector<PodRef> refs;
      std::vector<json> waiting;
      std::multiset<std::string> free(r.nodes.begin(), r.nodes.end());
      for (const json& p : pods) {
        if (!PodAsksGpu(p)) continue;  // CPU-only companions of a gang are not its tasks
        if (PodWaiting(p)) waiting.push_back(p);
        if (PodNode(p).empty()) continue;
        refs.push_back({Meta(p, "namespace"), Meta(p, "name"), Meta(p, "uid")});
        if (auto f = free.find(PodNode(p)); f != free.end()) free.erase(f);
      }
      std::lock_guard<std::mutex> l(mu_);
      auto it = runs_.find(slot);
      if (it != runs_.end() && it->second.run == r.run)
        it->second.adopted = false, SetPodsLocked(slot, it->second, refs);
      r.pods = refs;
      if (!refs.empty() && refs.size() < r.tasks && !stop_) {  // a gang cut short mid-binding
        std::vector<std::string> rest(free.begin(), free.end());
        rest.resize(std::min(rest.size(), r.tasks - refs.size()));
        if (rest.size() < r.tasks - refs.size()) rest.clear();  // the placement is unknown: unwind
        work_.push_back({slot, [this, s = slot, run = r.run, refs, waiting, rest] { CompleteAdopted(s, run, refs, waiting, rest); }});
        cv_.notify_all();
        continue;
      }
    }
    if (std::optional<BackendEvent> end = RunEnd(slot, r, pods)) Emit(std::move(*end));
  }
}

std::optional<BackendEvent> K8sBackend::RunEnd(JobSlot slot, Run& r, const std::vector<json>& pods) {
  std::string deleted;  // a pod its user deleted while it ran
  bool disrupted = false;
  for (const PodRef& ref : r.pods) {
    auto p = std::find_if(pods.begin(), pods.end(),
                          [&](const json& q) { return Meta(q, "name") == ref.name && Meta(q, "uid") == ref.uid; });
    const PodEnd end = p != pods.end() ? PodEndOf(*p) : PodEnd::kRunning;
    if (end != PodEnd::kRunning) r.ends[ref.uid] = end;
    auto seen = r.ends.find(ref.uid);
    const bool gone = p == pods.end();
    if (seen == r.ends.end() ? gone : seen->second == PodEnd::kDeleted) deleted = ref.ns + "/" + ref.name;
    if (seen != r.ends.end() && seen->second == PodEnd::kDisrupted) disrupted = true;
  }
  bool cancel = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = runs_.find(slot);
    if (it == runs_.end() || it->second.run != r.run) return std::nullopt;
    it->second.ends = r.ends;
    cancel = !deleted.empty() && !r.stopping && !r.cancelling && !r.pods.empty() && hooks_.cancel;
    if (cancel) it->second.cancelling = true;
  }
  if (cancel) {  // on a worker: the watch that saw the deletion goes on at once
    const std::string why = fmt::format("pod {} was deleted while it ran (by its user)", deleted);
    Log(fmt::format("cancelling the job: {}", why));
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!stop_) work_.push_back({slot, [this, slot, why] { hooks_.cancel(slot, why); }});
    }
    cv_.notify_all();
    return std::nullopt;
  }
  bool failed = false;
  const bool lost = r.pods.empty();  // an adopted run whose pods are gone: back to the queue
  if (!lost && !RunOver(r.pods, pods, &failed)) return std::nullopt;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = runs_.find(slot);
    if (it == runs_.end() || it->second.run != r.run) return std::nullopt;
    EraseRunLocked(it);
  }
  const bool interrupted = lost || (disrupted && !r.stopping);
  const BackendEventKind kind = r.stopping ? BackendEventKind::kStopped
                                : interrupted ? BackendEventKind::kInterrupted
                                : failed      ? BackendEventKind::kFailed
                                              : BackendEventKind::kEnded;
  return BackendEvent{kind, slot, r.run, 0, kNone,
                      lost ? "its pods are gone" : disrupted ? "its pods were evicted" : failed ? "a pod failed" : ""};
}

}  // namespace tessera
