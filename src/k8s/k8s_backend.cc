#include "k8s/k8s_backend.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <set>
#include <nlohmann/json.hpp>

#include "k8s/cluster_view.h"
#include "k8s/events.h"

namespace tessera {

using json = nlohmann::json;

namespace {

std::string PodPath(const PodRef& p) { return fmt::format("/api/v1/namespaces/{}/pods/{}", p.ns, p.name); }

}  // namespace

Result<std::vector<PodRef>> MembersToBind(const std::vector<json>& pods, size_t tasks) {
  std::vector<PodRef> out;
  for (const json& p : pods)
    if (PodWaiting(p) && out.size() < tasks)
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
  worker_ = std::thread([this] { Work(); });
}

K8sBackend::~K8sBackend() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void K8sBackend::Log(const std::string& s) const {
  if (hooks_.log) hooks_.log(s);
}

void K8sBackend::Work() {
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    cv_.wait(l, [this] { return stop_ || !work_.empty(); });
    if (stop_) return;
    auto w = std::move(work_.front());
    work_.pop_front();
    busy_ = true;
    l.unlock();
    w();
    l.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void K8sBackend::Drain() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [this] { return stop_ || (work_.empty() && !busy_); });
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
    work_.push_back([this, spec, now] { DoLaunch(spec, now); });
  }
  cv_.notify_all();
  LaunchAck ack;
  ack.in_flight = true;
  return ack;
}

void K8sBackend::DoLaunch(const LaunchSpec& spec, int64_t now) {
  BackendEvent fail{BackendEventKind::kLaunchFailed, spec.slot, spec.run, now, kNone, ""};
  const std::optional<JobKey> key = hooks_.key_of(spec.slot);
  if (!key) return fail.message = "the job is not a Kubernetes job", Emit(fail);
  auto members = MembersToBind(hooks_.pods(*key), spec.tasks.size());
  if (!members.ok()) return fail.message = fmt::format("{}: {}", key->name, members.error()), Emit(fail);
  std::set<std::string> nodes;
  for (const TaskPlacement& t : spec.tasks) nodes.insert(hooks_.node_name(t.node));
  if (!WaitVacated(nodes))
    return fail.message = fmt::format("{}: pods evicted from {} are still terminating after {} s", key->name,
                                      fmt::join(nodes, ", "), kVacateWaitS),
           Emit(fail);
  std::vector<PodRef> bound;
  for (size_t i = 0; i < members->size(); ++i) {
    const PodRef& p = (*members)[i];
    const std::string node = hooks_.node_name(spec.tasks[i].node);
    const json binding = {{"apiVersion", "v1"},
                          {"kind", "Binding"},
                          {"metadata", {{"name", p.name}, {"namespace", p.ns}, {"uid", p.uid}}},
                          {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
    if (std::string why = hooks_.admit ? hooks_.admit(p, node) : ""; !why.empty()) {
      const int unwound = Unwind(bound);
      fail.message = fmt::format("pod {}/{} not bound to node {}: {}{}", p.ns, p.name, node, why,
                                 unwound > 0 ? fmt::format("; {} bound member(s) deleted", unwound) : "");
      Log(fail.message);
      return Emit(fail);
    }
    const ApiResponse r = api_->Post(PodPath(p) + "/binding", binding);
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
    (void)PostEvent(*api_, pod, "Normal", "Scheduled",
                    fmt::format("Successfully assigned {}/{} to {}", p.ns, p.name, hooks_.node_name(spec.tasks[i].node)),
                    "tessera");
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    runs_[spec.slot] = Run{spec.run, now, bound, false, false, spec.tasks.size()};
  }
  Emit({BackendEventKind::kStarted, spec.slot, spec.run, now, kNone, ""});
}

bool K8sBackend::EvictedStillOn(const std::set<std::string>& nodes) const {
  std::vector<std::pair<JobSlot, std::vector<PodRef>>> stopping;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [slot, r] : runs_)
      if (r.stopping) stopping.push_back({slot, r.pods});
  }
  for (const auto& [slot, refs] : stopping) {
    const std::optional<JobKey> key = hooks_.key_of(slot);
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
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
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

void K8sBackend::Stop(JobSlot slot, uint32_t run, int64_t grace_s, std::string_view, int64_t now) {
  {
    std::lock_guard<std::mutex> l(mu_);
    work_.push_back([this, slot, run, grace_s, now] { DoStop(slot, run, grace_s, now); });
  }
  cv_.notify_all();
}

void K8sBackend::DoStop(JobSlot slot, uint32_t run, int64_t grace_s, int64_t now) {
  std::vector<PodRef> pods;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = runs_.find(slot);
    if (it == runs_.end() || it->second.run != run) return;  // not ours to stop
    it->second.stopping = true;
    pods = it->second.pods;
  }
  for (const PodRef& p : pods) {
    const json eviction = {{"apiVersion", "policy/v1"},
                           {"kind", "Eviction"},
                           {"metadata", {{"name", p.name}, {"namespace", p.ns}}},
                           {"deleteOptions", {{"gracePeriodSeconds", grace_s}, {"preconditions", {{"uid", p.uid}}}}}};
    for (int attempt = 0, delay_ms = 250; attempt < 8; ++attempt, delay_ms = std::min(delay_ms * 2, 8000)) {
      const ApiResponse r = api_->Post(PodPath(p) + "/eviction", eviction);
      if (r.ok() || r.status == 404 || r.status == 409) break;
      Log(fmt::format("evicting pod {}/{}: {} {}{}", p.ns, p.name, r.status, r.error,
                      r.status == 429 ? " (a disruption budget refuses; retrying)" : ""));
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    }
  }
  PodsChanged();
  (void)now;
}

void K8sBackend::Reconfigure(GpuId gpu, const std::string& layout, int64_t now) {
  Log(fmt::format("MIG repartitioning (GPU {} to '{}') through the GPU Operator is not supported yet", gpu, layout));
  Emit({BackendEventKind::kReconfigureFailed, kNoSlot, 0, now, gpu,
        "MIG repartitioning through the GPU Operator is not supported yet"});
}

bool K8sBackend::Adopt(const LaunchSpec& spec, int64_t started_at, int64_t) {
  std::lock_guard<std::mutex> l(mu_);
  runs_[spec.slot] = Run{spec.run, started_at, {}, false, true, spec.tasks.size()};
  return true;
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

void K8sBackend::OnEvents(std::function<void()> wake) {
  std::lock_guard<std::mutex> l(mu_);
  wake_ = std::move(wake);
}

void K8sBackend::PodsChanged() {
  std::map<JobSlot, Run> runs;
  {
    std::lock_guard<std::mutex> l(mu_);
    runs = runs_;
  }
  for (auto& [slot, r] : runs) {
    const std::optional<JobKey> key = hooks_.key_of(slot);
    const std::vector<json> pods = key ? hooks_.pods(*key) : std::vector<json>{};
    if (r.adopted) {  // after a restart: the run's pods are the job's bound ones
      std::vector<PodRef> refs;
      for (const json& p : pods)
        if (!PodNode(p).empty()) refs.push_back({Meta(p, "namespace"), Meta(p, "name"), Meta(p, "uid")});
      std::lock_guard<std::mutex> l(mu_);
      auto it = runs_.find(slot);
      if (it != runs_.end() && it->second.run == r.run) it->second.adopted = false, it->second.pods = refs;
      r.pods = refs;
    }
    bool failed = false;
    const bool lost = r.pods.empty();  // an adopted run whose pods are gone: back to the queue
    if (!lost && !RunOver(r.pods, pods, &failed)) continue;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = runs_.find(slot);
      if (it == runs_.end() || it->second.run != r.run) continue;
      runs_.erase(it);
    }
    BackendEventKind kind = r.stopping ? BackendEventKind::kStopped
                            : lost     ? BackendEventKind::kInterrupted
                            : failed   ? BackendEventKind::kFailed
                                       : BackendEventKind::kEnded;
    Emit({kind, slot, r.run, 0, kNone, lost ? "its pods are gone" : failed ? "a pod failed" : ""});
  }
}

}  // namespace tessera
