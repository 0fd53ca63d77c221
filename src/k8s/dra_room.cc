// The scheduler's DRA room (dra_room.h). Pods whose claims ask only for whole GPUs are jobs of the loop
// (dra_jobs.h): Classify judges every pod of ours with claims, NodeSpec makes DRA-only nodes nodes of the
// loop, BindPod carries out the loop's launch (the allocator chooses devices on the node the loop chose). The
// other pods with claims (MIG slices by CEL, allocationMode All, firstAvailable, ...) stay on the DRA path:
// planned one at a time (highest priority, then oldest first) against the DRA model and usage (dra_sync.h),
// their claims allocated and reserved, then bound (dra_binder.h), outside quotas and preemption.
#include "k8s/dra_room.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <tuple>

#include "k8s/api/objects.h"
#include "k8s/dra/dra_binder.h"
#include "k8s/scheduler.h"

namespace tessera {

using json = nlohmann::json;

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int Priority(const json& pod) {
  const json* spec = Field(pod, "spec");
  const json* p = spec != nullptr ? Field(*spec, "priority") : nullptr;
  return p != nullptr && p->is_number_integer() ? p->get<int>() : 0;
}

bool NodeSchedulable(const json& node) {
  const json* spec = Field(node, "spec");
  const json* unsched = spec != nullptr ? Field(*spec, "unschedulable") : nullptr;
  if (unsched != nullptr && unsched->is_boolean() && unsched->get<bool>()) return false;
  const json* status = Field(node, "status");
  const json* conds = status != nullptr ? Field(*status, "conditions") : nullptr;
  if (conds == nullptr || !conds->is_array()) return false;
  for (const json& c : *conds)
    if (c.is_object() && c.value("type", "") == "Ready") return c.value("status", "") == "True";
  return false;
}

// A pod refused only because capacity is short gets its reason after this long (the watch may still be
// catching up with a release); an unsupported request gets it at once.
constexpr int64_t kRefuseAfterMs = 2000;

// A loop launch whose claims do not fit on the chosen node yet (a victim's claims still being deallocated
// by the claim controller) tries again this often, this many times.
constexpr double kDraLaunchRetryS = 0.5;
constexpr int kDraLaunchTries = 10;

// One queue order across the loop and the DRA path: a DRA-path pod waits while a waiting pod with claims that
// is the loop's (or not judged yet: its claims are still being made) comes first (higher priority, then
// older), for at most this long of that pod's wait (a loop job held by its quota or by the loop's order does
// not hold the DRA path up for longer).
constexpr int64_t kDraYieldMs = 15000;

// The queue position of a pod with claims (smaller first): priority, then creation, then name.
std::tuple<int, std::string, std::string> DraQueueOrder(const json& pod) {
  return {-Priority(pod), Meta(pod, "creationTimestamp"), Meta(pod, "name")};
}

}  // namespace

DraRoom::DraRoom(K8sScheduler* scheduler) : s_(scheduler) {}

DraRoom::~DraRoom() { Stop(); }

void DraRoom::Start(std::function<void()> wake, std::function<void(const std::string&)> log) {
  sync_ = std::make_unique<DraSync>(&s_->api_, std::move(wake), std::move(log));
  sync_->Start();
}

bool DraRoom::WaitSynced(double timeout_s) { return sync_ && sync_->WaitSynced(timeout_s); }

void DraRoom::Stop() {
  if (sync_) sync_->Stop();
}

const DraJobDemand* DraRoom::DemandOf(const std::string& uid) const {
  auto it = demand_.find(uid);
  return it == demand_.end() ? nullptr : &it->second;
}

std::vector<std::string> DraRoom::Nodes() const {
  std::vector<std::string> out;
  const auto nodes_snap = s_->nodes_->Snapshot();
  for (const auto& [name, node] : *nodes_snap)
    if (NodeSchedulable(node)) out.push_back(name);
  return out;
}

void DraRoom::Classify() {
  demand_.clear();
  if (!sync_ || !sync_->enabled()) return loop_nodes_.clear();
  std::lock_guard<std::mutex> l(mu_);
  DraSync::View view = sync_->Snapshot();
  std::map<std::string, bool> class_cache;
  std::set<std::string> foreign;  // pods not done whose claims hold devices the loop does not account
  const auto pods_snap = s_->pods_->Snapshot();
  for (const auto& [key, p] : *pods_snap) {
    const std::string uid = Meta(p, "uid");
    if (PodIsOurs(p, s_->options_.scheduler_name) && PodUsesDra(p)) {
      auto& d = demand_[uid] = DraJobDemandOf(p, view.claims, view.classes, *view.model, &class_cache);
      if (d.kind == DraJobDemand::Kind::kWholeGpus) continue;
    }
    if (!PodTerminal(p)) foreign.insert(uid);
  }
  loop_nodes_ = DraLoopNodes(*view.model, view.claims, foreign);
}

DraJobDemand::Kind DraRoom::KindOf(const json& pod) const {
  auto it = demand_.find(Meta(pod, "uid"));
  return it == demand_.end() ? DraJobDemand::Kind::kNotYet : it->second.kind;
}

std::optional<Result<json>> DraRoom::NodeSpec(NodeModel model, const NodeUse& foreign) const {
  auto dra = loop_nodes_.find(model.name);
  if (dra == loop_nodes_.end()) return std::nullopt;
  // GPUs published only through DRA: its whole GPUs, of the kind the slices say (those DRA-path claims use
  // are held GPU by GPU: ClusterRoom::Sync).
  model.kind = dra->second.kind;
  model.gpu_count = dra->second.total;
  model.allocatable_milli[std::string(kGpuResource)] = int64_t{dra->second.total} * 1000;
  model.mig_config.clear();
  NodeUse use = foreign;
  use.gpus = 0;  // device-plugin GPUs: the node has none
  return NodeSpecFor(model, use, Catalog::Default());
}

std::optional<ApiResponse> DraRoom::BindPod(const PodRef& ref, const std::string& node) {
  json pod;
  for (const json& p : s_->PodsOf(JobKey{"pod", ref.ns, ref.name}))  // a pod's own job, or a gang member
    if (Meta(p, "uid") == ref.uid) pod = p;
  if (pod.is_null() || !PodUsesDra(pod)) return std::nullopt;
  if (!sync_ || !sync_->enabled()) return ApiResponse{0, nullptr, "resource.k8s.io/v1 is not served"};
  std::string why;
  for (int attempt = 0; attempt < kDraLaunchTries; ++attempt) {
    if (attempt > 0 && !s_->leader_->Pause(kDraLaunchRetryS)) break;
    std::lock_guard<std::mutex> l(mu_);
    DraSync::View view = sync_->Snapshot();
    DraWorld world{view.model, &view.classes, view.usage.get(), &view.claims, {node}, DraPolicy::kTessera};
    const DraPodPlan plan = PlanDraPod(pod, world);
    if (plan.kind == DraPodPlan::Kind::kBind && plan.node == node) {
      const DraBindOutcome out = ExecuteDraPlan(pod, plan, view.claims, DraCallOf(&s_->api_));
      for (const json& c : out.claims_now) sync_->Wrote(c);
      if (!out.bound) return ApiResponse{409, nullptr, "DRA: " + out.error};
      s_->Log(fmt::format("pod {}/{}: claims allocated on {} for the loop ({} claim(s))", ref.ns, ref.name,
                          node, plan.claims.size()));
      return ApiResponse{201, json::object(), ""};
    }
    why = plan.kind == DraPodPlan::Kind::kBind ? "its claims are allocated on " + plan.node : plan.message;
    if (plan.kind == DraPodPlan::Kind::kBind ||
        (plan.kind == DraPodPlan::Kind::kRefuse && plan.reason != "Unschedulable"))
      break;  // only capacity being released is worth waiting for
  }
  return ApiResponse{409, nullptr, "DRA: " + why};
}

void DraRoom::Sync() {
  if (!sync_) return;
  const int64_t now = NowMs();
  std::vector<json> waiting;
  std::set<std::string> seen, loop_seen;
  std::vector<std::tuple<int, std::string, std::string>> loop_ahead;  // loop pods DRA-path pods yield to
  ObjectMap dra_pods;  // ours with claims (the scheduler's index of the pods informer's events)
  {
    std::lock_guard<std::mutex> l(s_->pods_mu_);
    dra_pods = s_->dra_pods_;
  }
  for (const auto& [key, p] : dra_pods) {
    if (!PodWaiting(p)) continue;
    const std::string uid = Meta(p, "uid");
    if (sync_->enabled() && KindOf(p) != DraJobDemand::Kind::kDraPath) {  // the loop's, or not judged yet
      loop_seen.insert(uid);
      if (now - loop_waiting_.emplace(uid, now).first->second < kDraYieldMs)
        loop_ahead.push_back(DraQueueOrder(p));
      continue;
    }
    seen.insert(uid);
    auto b = bound_.find(uid);
    if (b == bound_.end() || now - b->second > 30000) waiting.push_back(p);
  }
  std::erase_if(bound_, [&](const auto& e) { return !seen.count(e.first) || now - e.second > 30000; });
  std::erase_if(refused_since_, [&](const auto& e) { return !seen.count(e.first); });
  std::erase_if(loop_waiting_, [&](const auto& e) { return !loop_seen.count(e.first); });
  if (!loop_ahead.empty()) {
    const auto first = *std::min_element(loop_ahead.begin(), loop_ahead.end());
    std::erase_if(waiting, [&](const json& p) { return first < DraQueueOrder(p); });
  }
  if (waiting.empty()) return;
  if (!sync_->enabled()) {
    for (const json& p : waiting)
      s_->SetReason(p, "Unsupported",
                    "tessera: the pod asks for ResourceClaims, but resource.k8s.io/v1 is not served");
    return;
  }
  std::stable_sort(waiting.begin(), waiting.end(),
                   [](const json& a, const json& b) { return DraQueueOrder(a) < DraQueueOrder(b); });
  std::lock_guard<std::mutex> l(mu_);
  DraSync::View view = sync_->Snapshot();
  DraWorld world{view.model, &view.classes, view.usage.get(), &view.claims, Nodes(), DraPolicy::kTessera};
  // A PodGroup's waiting pods are placed together (all or none); other pods one at a time.
  std::vector<std::vector<json>> units;
  std::map<std::string, size_t> unit_of;
  for (const json& pod : waiting) {
    const JobKey key = JobKeyOf(pod);
    if (key.kind != "podgroup") {
      units.push_back({pod});
      continue;
    }
    auto [it, fresh] = unit_of.emplace(key.str(), units.size());
    if (fresh) units.emplace_back();
    units[it->second].push_back(pod);
  }
  for (const auto& unit : units) {
    if (JobKeyOf(unit[0]).kind == "podgroup")
      Gang(unit, world, &view.claims, now);
    else
      Pod(unit[0], world, &view.claims, now);
  }
}

void DraRoom::Refuse(const json& pod, const std::string& reason, const std::string& message, int64_t now) {
  const int64_t since = refused_since_.emplace(Meta(pod, "uid"), now).first->second;
  auto d = demand_.find(Meta(pod, "uid"));
  const std::string path = d == demand_.end() ? ""
                                              : fmt::format(
                                                    " (placed by the DRA allocator outside "
                                                    "Tessera's queue and quotas: {})",
                                                    d->second.why);
  if (reason != "Unschedulable" || now - since >= kRefuseAfterMs) s_->SetReason(pod, reason, message + path);
}

void DraRoom::Pod(const json& pod, const DraWorld& world, std::map<std::string, json>* claims, int64_t now) {
  const DraPodPlan plan = PlanDraPod(pod, world);
  if (plan.kind == DraPodPlan::Kind::kRefuse) Refuse(pod, plan.reason, plan.message, now);
  if (plan.kind == DraPodPlan::Kind::kBind) (void)Write(pod, plan, claims, now);
}

void DraRoom::Gang(const std::vector<json>& pods, const DraWorld& world, std::map<std::string, json>* claims,
                   int64_t now) {
  // The same readiness as any gang's (intake's): its PodGroup known, minMember members waiting.
  const JobKey key = JobKeyOf(pods[0]);
  const std::optional<json> group = s_->group_room_->PodGroupOf(key);
  const GangReadiness ready = ReadinessOf(key, group ? &*group : nullptr, pods.size());
  if (!ready.ready) {
    for (const json& p : pods) s_->SetReason(p, ready.reason, ready.message);
    return;
  }
  DraUsage scratch = *world.usage;  // committed only when every member fits
  DraWorld w = world;
  w.usage = &scratch;
  std::vector<DraPodPlan> plans;
  for (const json& p : pods) {
    plans.push_back(PlanDraPod(p, w));
    if (plans.back().kind == DraPodPlan::Kind::kWait) return;
    if (plans.back().kind == DraPodPlan::Kind::kRefuse) {
      for (const json& q : pods)
        Refuse(q, plans.back().reason,
               fmt::format("PodGroup {}: pod {}: {}", key.name, Meta(p, "name"), plans.back().message), now);
      return;
    }
  }
  *world.usage = scratch;
  std::vector<const json*> bound;
  for (size_t i = 0; i < pods.size(); ++i) {
    if (Write(pods[i], plans[i], claims, now)) {
      bound.push_back(&pods[i]);
      continue;
    }
    for (const json* b :
         bound)  // all or none: the members bound are deleted (their controller recreates them)
      (void)s_->api_.Delete(
          fmt::format("/api/v1/namespaces/{}/pods/{}", Meta(*b, "namespace"), Meta(*b, "name")));
    return s_->Log(fmt::format("PodGroup {}: {} bound member(s) deleted after a failed binding", key.str(),
                               bound.size()));
  }
}

bool DraRoom::Write(const json& pod, const DraPodPlan& plan, std::map<std::string, json>* claims,
                    int64_t now) {
  const std::string uid = Meta(pod, "uid"), who = Meta(pod, "namespace") + "/" + Meta(pod, "name");
  refused_since_.erase(uid);
  const DraBindOutcome out = ExecuteDraPlan(pod, plan, *claims, DraCallOf(&s_->api_));
  for (const json& c : out.claims_now) {
    sync_->Wrote(c);
    (*claims)[Meta(c, "namespace") + "/" + Meta(c, "name")] = c;
  }
  if (!out.bound) {
    s_->Log(fmt::format("pod {}: not bound yet: {}", who, out.error));
    return false;
  }
  bound_[uid] = now;
  std::string devices;
  for (const DraClaimWrite& w : plan.claims)
    for (const DraDeviceResult& r : w.results) devices += (devices.empty() ? "" : ", ") + r.device;
  s_->Log(fmt::format("pod {} bound to {} (claims: {}; new devices: {})", who, plan.node, plan.claims.size(),
                      devices.empty() ? "none" : devices));
  return true;
}

}  // namespace tessera
