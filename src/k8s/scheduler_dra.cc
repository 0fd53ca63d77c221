// The scheduler's DRA pass (scheduler.h): our waiting pods with ResourceClaims are planned one at a time
// (highest priority, then oldest first) against the DRA model and usage (dra_sync.h), their claims
// allocated and reserved, then bound (dra_binder.h). They never become Service jobs.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "k8s/dra_binder.h"
#include "k8s/objects.h"
#include "k8s/scheduler.h"

namespace tessera {

using json = nlohmann::json;

namespace {

std::string Meta(const json& o, const char* key) {
  const json* meta = Field(o, "metadata");
  const json* v = meta != nullptr ? Field(*meta, key) : nullptr;
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

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
  for (const json& pod : waiting) DraPod(pod, world, &view.claims, now);
}

void K8sScheduler::DraPod(const json& pod, const DraWorld& world, std::map<std::string, json>* claims,
                          int64_t now) {
  const std::string uid = Meta(pod, "uid"), who = Meta(pod, "namespace") + "/" + Meta(pod, "name");
  const DraPodPlan plan = PlanDraPod(pod, world);
  if (plan.kind == DraPodPlan::Kind::kWait) return;
  if (plan.kind == DraPodPlan::Kind::kRefuse) {
    const int64_t since = dra_refused_since_.emplace(uid, now).first->second;
    if (plan.reason != "Unschedulable" || now - since >= kRefuseAfterMs)
      SetReason(pod, plan.reason, plan.message);
    return;
  }
  dra_refused_since_.erase(uid);
  const DraBindOutcome out = ExecuteDraPlan(pod, plan, *claims, DraCallOf(&api_));
  for (const json& c : out.claims_now) {
    dra_->Wrote(c);
    (*claims)[Meta(c, "namespace") + "/" + Meta(c, "name")] = c;
  }
  if (!out.bound) return Log(fmt::format("pod {}: not bound yet: {}", who, out.error));
  dra_bound_[uid] = now;
  std::string devices;
  for (const DraClaimWrite& w : plan.claims)
    for (const DraDeviceResult& r : w.results) devices += (devices.empty() ? "" : ", ") + r.device;
  Log(fmt::format("pod {} bound to {} (claims: {}; new devices: {})", who, plan.node, plan.claims.size(),
                  devices.empty() ? "none" : devices));
}

}  // namespace tessera
