// The scheduler's DRA pass (scheduler.h): our waiting pods with ResourceClaims are planned one at a time
// (highest priority, then oldest first) against the DRA model and usage (dra_sync.h), their claims
// allocated and reserved, then bound (dra_binder.h). They never become Service jobs.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "k8s/dra_binder.h"
#include "k8s/objects.h"
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

}  // namespace

std::vector<std::string> K8sScheduler::DraNodes() const {
  std::vector<std::string> out;
  for (const auto& [name, node] : nodes_->Objects())
    if (NodeSchedulable(node)) out.push_back(name);
  return out;
}

void K8sScheduler::SyncDra() {
  if (!dra_) return;
  const int64_t now = NowMs();
  std::vector<json> waiting;
  std::set<std::string> seen;
  for (const auto& [key, p] : pods_->Objects()) {
    if (!PodIsOurs(p, options_.scheduler_name) || !PodUsesDra(p) || !PodWaiting(p)) continue;
    const std::string uid = Meta(p, "uid");
    seen.insert(uid);
    auto b = dra_bound_.find(uid);
    if (b == dra_bound_.end() || now - b->second > 30000) waiting.push_back(p);
  }
  std::erase_if(dra_bound_, [&](const auto& e) { return !seen.count(e.first) || now - e.second > 30000; });
  std::erase_if(dra_refused_since_, [&](const auto& e) { return !seen.count(e.first); });
  if (waiting.empty()) return;
  if (!dra_->enabled()) {
    for (const json& p : waiting)
      SetReason(p, "Unsupported",
                "tessera: the pod asks for ResourceClaims, but resource.k8s.io/v1 is not served");
    return;
  }
  std::stable_sort(waiting.begin(), waiting.end(), [](const json& a, const json& b) {
    const std::string ta = Meta(a, "creationTimestamp"), tb = Meta(b, "creationTimestamp");
    return std::make_tuple(-Priority(a), ta, Meta(a, "name")) <
           std::make_tuple(-Priority(b), tb, Meta(b, "name"));
  });
  DraSync::View view = dra_->Snapshot();
  DraWorld world{view.model, &view.classes, view.usage.get(), &view.claims, DraNodes(), DraPolicy::kTessera};
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
      DraGang(unit, world, &view.claims, now);
    else
      DraPod(unit[0], world, &view.claims, now);
  }
}

void K8sScheduler::DraRefuse(const json& pod, const std::string& reason, const std::string& message,
                             int64_t now) {
  const int64_t since = dra_refused_since_.emplace(Meta(pod, "uid"), now).first->second;
  if (reason != "Unschedulable" || now - since >= kRefuseAfterMs) SetReason(pod, reason, message);
}

void K8sScheduler::DraPod(const json& pod, const DraWorld& world, std::map<std::string, json>* claims,
                          int64_t now) {
  const DraPodPlan plan = PlanDraPod(pod, world);
  if (plan.kind == DraPodPlan::Kind::kRefuse) DraRefuse(pod, plan.reason, plan.message, now);
  if (plan.kind == DraPodPlan::Kind::kBind) (void)DraWrite(pod, plan, claims, now);
}

void K8sScheduler::DraGang(const std::vector<json>& pods, const DraWorld& world,
                           std::map<std::string, json>* claims, int64_t now) {
  const JobKey key = JobKeyOf(pods[0]);
  size_t tasks = pods.size();
  for (Informer* g : {groups_.get(), volcano_groups_.get()}) {
    const auto groups = g->Objects();
    auto it = groups.find(key.ns + "/" + key.name);
    if (it != groups.end() && MinMemberOf(it->second) > 0) tasks = MinMemberOf(it->second);
  }
  if (pods.size() < tasks) {
    for (const json& p : pods)
      SetReason(p, "GangIncomplete",
                fmt::format("tessera: PodGroup {} has {} of its {} members (minMember) "
                            "waiting; it is placed once all are there",
                            key.name, pods.size(), tasks));
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
        DraRefuse(q, plans.back().reason,
                  fmt::format("PodGroup {}: pod {}: {}", key.name, Meta(p, "name"), plans.back().message),
                  now);
      return;
    }
  }
  *world.usage = scratch;
  std::vector<const json*> bound;
  for (size_t i = 0; i < pods.size(); ++i) {
    if (DraWrite(pods[i], plans[i], claims, now)) {
      bound.push_back(&pods[i]);
      continue;
    }
    for (const json* b :
         bound)  // all or none: the members bound are deleted (their controller recreates them)
      (void)api_.Delete(
          fmt::format("/api/v1/namespaces/{}/pods/{}", Meta(*b, "namespace"), Meta(*b, "name")));
    return Log(fmt::format("PodGroup {}: {} bound member(s) deleted after a failed binding", key.str(),
                           bound.size()));
  }
}

bool K8sScheduler::DraWrite(const json& pod, const DraPodPlan& plan, std::map<std::string, json>* claims,
                            int64_t now) {
  const std::string uid = Meta(pod, "uid"), who = Meta(pod, "namespace") + "/" + Meta(pod, "name");
  dra_refused_since_.erase(uid);
  const DraBindOutcome out = ExecuteDraPlan(pod, plan, *claims, DraCallOf(&api_));
  for (const json& c : out.claims_now) {
    dra_->Wrote(c);
    (*claims)[Meta(c, "namespace") + "/" + Meta(c, "name")] = c;
  }
  if (!out.bound) {
    Log(fmt::format("pod {}: not bound yet: {}", who, out.error));
    return false;
  }
  dra_bound_[uid] = now;
  std::string devices;
  for (const DraClaimWrite& w : plan.claims)
    for (const DraDeviceResult& r : w.results) devices += (devices.empty() ? "" : ", ") + r.device;
  Log(fmt::format("pod {} bound to {} (claims: {}; new devices: {})", who, plan.node, plan.claims.size(),
                  devices.empty() ? "none" : devices));
  return true;
}

}  // namespace tessera
