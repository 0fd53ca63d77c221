#include "k8s/mig/mig_repartitioner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "k8s/api/events.h"
#include "k8s/api/objects.h"
#include "k8s/cluster_view.h"
#include "k8s/pod_jobs.h"
#include "k8s/preemption.h"

namespace tessera {

using json = nlohmann::json;

namespace {

constexpr int64_t kConfigsEveryS = 30;
constexpr int64_t kFailedSettleS = 10;  // a `failed` left from before the change is stale until then

json NodeRef(const MigNode& n) {
  return {{"kind", "Node"}, {"metadata", {{"name", n.name}, {"uid", n.uid}}}};
}

// The annotation a cordon for `config` carries (what a restart resumes from).
std::string AnnotationOf(const std::string& config, const std::string& previous, int priority, int64_t job,
                         bool revert) {
  return json{
      {"config", config}, {"previous", previous}, {"priority", priority}, {"job", job}, {"revert", revert}}
      .dump();
}

std::string AnnotationValue(const json& node) {
  const json* meta = Field(node, "metadata");
  const json* a = meta != nullptr ? Field(*meta, "annotations") : nullptr;
  return a != nullptr && a->is_object() ? StringField(*a, kRepartitionAnnotation) : "";
}

json PodObjectRef(const std::string& ns_name) {
  const size_t slash = ns_name.find('/');
  return {{"kind", "Pod"},
          {"metadata", {{"namespace", ns_name.substr(0, slash)}, {"name", ns_name.substr(slash + 1)}}}};
}

}  // namespace

MigRepartitioner::MigRepartitioner(const ApiClient* api, MigRepartitionOptions options,
                                   std::function<void(const std::string&)> log, PreemptPodFn preempt,
                                   MigWaitingFn waiting)
    : api_(api),
      options_(std::move(options)),
      log_(std::move(log)),
      preempt_(std::move(preempt)),
      waiting_(std::move(waiting)) {}

void MigRepartitioner::Log(const std::string& s) const {
  if (log_) log_(s);
}

std::string MigRepartitioner::Target(const std::string& node) const {
  auto it = ops_.find(node);
  return it == ops_.end() ? "" : it->second.phase == Phase::kRevert ? it->second.previous : it->second.config;
}

const MigPartedConfig* MigRepartitioner::ConfigNamed(const std::string& name) const {
  auto it = std::find_if(configs_.begin(), configs_.end(),
                         [&](const MigPartedConfig& c) { return c.name == name; });
  return it == configs_.end() ? nullptr : &*it;
}

void MigRepartitioner::LoadConfigs(int64_t now_s) {
  if (now_s - configs_at_ < kConfigsEveryS) return;
  configs_at_ = now_s;
  const size_t slash = options_.config_map.find('/');
  const std::string path =
      fmt::format("/api/v1/namespaces/{}/configmaps/{}", options_.config_map.substr(0, slash),
                  options_.config_map.substr(slash + 1));
  const ApiResponse r = api_->Get(path);
  const json* data = r.ok() ? Field(r.body, "data") : nullptr;
  const json* text = data != nullptr ? Field(*data, "config.yaml") : nullptr;
  std::string error;
  if (!r.ok())
    error = fmt::format("ConfigMap {}: {} {}", options_.config_map, r.status, r.error);
  else if (text == nullptr || !text->is_string())
    error = fmt::format("ConfigMap {}: no key config.yaml", options_.config_map);
  std::vector<std::string> skipped;
  if (error.empty()) {
    auto parsed = ParseMigParted(text->get<std::string>(), &skipped);
    if (parsed.ok())
      configs_ = std::move(parsed).value();
    else
      error = fmt::format("ConfigMap {}, key config.yaml: {}", options_.config_map, parsed.error());
  }
  if (error != configs_error_ ||
      (error.empty() && configs_error_.empty() && configs_count_ != configs_.size()))
    Log(error.empty() ? fmt::format("MIG configs: {} from {} ({} skipped)", configs_.size(),
                                    options_.config_map, skipped.size())
                      : "MIG repartitioning: " + error);
  configs_error_ = error;
  configs_count_ = configs_.size();
}

void MigRepartitioner::Step(const ObjectMap& nodes, const ObjectMap& pods, int64_t now_s) {
  LoadConfigs(now_s);
  std::vector<const json*> all;
  for (const auto& [k, p] : pods) all.push_back(&p);
  std::vector<MigNode> states;
  for (const auto& [name, n] : nodes) {
    states.push_back(ReadMigNode(n, all, options_.catalog));
    // Only on the first pass: later, an annotation the cache still shows is one this run just removed.
    if (!resumed_ && !AnnotationValue(n).empty()) Resume(n, states.back(), now_s);
  }
  resumed_ = true;
  for (auto it = ops_.begin(); it != ops_.end();) {
    auto n =
        std::find_if(states.begin(), states.end(), [&](const MigNode& m) { return m.name == it->first; });
    if (n == states.end()) {
      Log(fmt::format("node {} is gone: its MIG repartitioning to {} is dropped", it->first,
                      it->second.config));
      it = ops_.erase(it);
    } else if (!Advance(*n, &it->second, now_s)) {
      n->schedulable = true;  // uncordoned just now (the informer shows it on a later pass)
      it = ops_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = failed_.begin(); it != failed_.end();)
    it = now_s - it->second >= options_.retry_after_s ? failed_.erase(it) : std::next(it);
  if (!configs_.empty()) Plan(states, pods, now_s);
}

void MigRepartitioner::Resume(const json& node, const MigNode& n, int64_t now_s) {
  const json a = json::parse(AnnotationValue(node), nullptr, false);
  Op op;
  bool revert = false;
  if (a.is_object()) {
    op.config = StringField(a, "config");
    op.previous = StringField(a, "previous");
    const json* pr = Field(a, "priority");
    op.priority = pr != nullptr && pr->is_number_integer() ? pr->get<int>() : 0;
    const json* jb = Field(a, "job");
    op.job = jb != nullptr && jb->is_number_integer() ? jb->get<int64_t>() : 0;
    const json* rv = Field(a, "revert");
    revert = rv != nullptr && rv->is_boolean() && rv->get<bool>();
  }
  op.started_at = op.changed_at = now_s;
  if (!op.config.empty() && revert)
    op.phase = Phase::kRevert;
  else if (!op.config.empty() && n.config == op.config)
    op.phase = Phase::kApply;
  else if (!op.config.empty() && n.config == op.previous)
    op.phase = Phase::kDrain;
  else {
    Log(fmt::format(
        "node {}: {} names a MIG repartitioning ('{}') that its labels do not continue ({}={}): left "
        "as the labels say, uncordoned",
        n.name, kRepartitionAnnotation, AnnotationValue(node), kMigConfigLabel, n.config));
    (void)SetCordon(n.name, false);
    return;
  }
  Log(fmt::format(
      "node {}: resuming its MIG repartitioning from {} to {} after a restart ({}; {}={}, state {})", n.name,
      op.previous, op.config,
      op.phase == Phase::kDrain   ? "draining on"
      : op.phase == Phase::kApply ? "waiting for the change"
                                  : "going back",
      kMigConfigLabel, n.config, n.state.empty() ? "none" : n.state));
  ops_[n.name] = op;
}

std::vector<WaitingPod> MigRepartitioner::WaitingPods(const ObjectMap& pods) const {
  std::vector<WaitingPod> waiting;
  for (const auto& [k, p] : pods) {
    if (!PodIsOurs(p, options_.scheduler_name) || !PodWaiting(p)) continue;
    WaitingPod w;
    w.requests = DeviceRequests(p);
    if (w.requests.empty()) continue;
    auto d = ReadPodDemand(p);
    w.ns = d.ok() ? d->ns : "";
    w.name = d.ok() ? d->name : "";
    w.priority = d.ok() ? d->priority : 0;
    waiting.push_back(std::move(w));
  }
  return waiting;
}

void MigRepartitioner::Plan(const std::vector<MigNode>& nodes, const ObjectMap& pods, int64_t now_s) {
  const std::vector<WaitingPod> waiting = waiting_ ? waiting_() : WaitingPods(pods);
  if (waiting.empty()) return;
  std::map<std::string, std::string> busy;
  for (const auto& [node, op] : ops_) busy[node] = op.config;
  std::set<std::pair<std::string, std::string>> failed;
  for (const auto& [pair, at] : failed_) failed.insert(pair);
  std::map<std::string, std::string> refused;
  const DrainRules rules = Rules();
  const std::vector<Repartition> plans =
      PlanRepartitions(waiting, nodes, configs_, busy, failed, rules, &refused);
  for (const auto& [node, why] : refused)
    if (std::exchange(refused_[node], why) != why)
      Log(fmt::format("node {}: not repartitioned: {}", node, why));
  for (const Repartition& r : plans) {
    const MigNode& n =
        *std::find_if(nodes.begin(), nodes.end(), [&](const MigNode& m) { return m.name == r.node; });
    Op op;
    op.config = r.config;
    op.previous = n.config;
    op.priority = r.priority;
    op.job = r.job;
    op.for_pods = r.for_pods;
    op.started_at = now_s;
    int evict = 0, wait = 0;
    for (const GpuPod& p : n.pods) (Evictable(p, r.priority, rules, r.job) ? evict : wait) += !p.terminating;
    Log(fmt::format(
        "node {}: MIG repartitioning from {} to {} for {} waiting pod(s) (priority {}; GPU pods there: "
        "{} to preempt, {} to wait for)",
        n.name, n.config, r.config, r.for_pods.size(), r.priority, evict, wait));
    if (!SetCordon(n.name, true, &op)) continue;
    ops_[n.name] = op;
    Advance(n, &ops_[n.name], now_s);
  }
}

bool MigRepartitioner::Advance(const MigNode& node, Op* op, int64_t now_s) {
  if (op->phase == Phase::kDrain) return Drain(node, op, now_s);
  return Finish(node, op, now_s);
}

bool MigRepartitioner::Drain(const MigNode& node, Op* op, int64_t now_s) {
  if (op->abandoned) return !SetCordon(node.name, false);  // until the uncordon goes through
  if (node.schedulable) (void)SetCordon(node.name, true, op);
  if (!node.pods.empty() && now_s - op->started_at >= options_.drain_timeout_s) {
    failed_[{node.name, op->config}] = now_s;
    std::vector<std::string> left;
    for (const GpuPod& p : node.pods) left.push_back(fmt::format("{}/{}", p.ns, p.name));
    const std::string message = fmt::format(
        "tessera: MIG repartitioning of {} to {} abandoned: its drain did not end within {} s ({} GPU pod(s) "
        "still "
        "there: {}); the node stays {} and is uncordoned, and the waiting pods are placed elsewhere",
        node.name, op->config, options_.drain_timeout_s, left.size(), fmt::join(left, ", "), node.config);
    Log(message);
    Event(NodeRef(node), "MigRepartitionAbandoned", message);
    for (const std::string& p : op->for_pods) Event(PodObjectRef(p), "MigRepartitionAbandoned", message);
    op->abandoned = true;
    return !SetCordon(node.name, false);
  }
  const DrainRules rules = Rules();
  const std::string why = fmt::format("node {} is drained for MIG config {}", node.name, op->config);
  for (const GpuPod& p : node.pods) {
    if (p.terminating || !Evictable(p, op->priority, rules, op->job))
      continue;                                             // ends by itself, or waited for
    if (preempt_ && preempt_(p, node.name, why)) continue;  // the loop stops it and requeues its job
    Evict(node, p, why);
  }
  if (!node.pods.empty()) return true;  // the label changes only once no GPU pod is left
  if (op->config == node.config && node.state == "success") {
    op->phase = Phase::kApply;
    return Finish(node, op, now_s);
  }
  if (!SetLabel(node.name, op->config)) return true;
  op->phase = Phase::kApply;
  op->changed_at = now_s;
  op->seen_pending = false;
  Log(fmt::format("node {}: drained; {}={}", node.name, kMigConfigLabel, op->config));
  return true;
}

void MigRepartitioner::Evict(const MigNode& node, const GpuPod& p, const std::string& why) {
  const std::string path = fmt::format("/api/v1/namespaces/{}/pods/{}", p.ns, p.name);
  if (!p.disruption_target) {  // read as preempted, never as deleted by its user
    const ApiResponse m =
        api_->Patch(path + "/status", DisruptionTargetPatch("tessera: " + why, Rfc3339Now()),
                    "application/strategic-merge-patch+json");
    if (!m.ok() && m.status != 404)
      Log(fmt::format("node {}: pod {}/{}: writing DisruptionTarget failed ({} {})", node.name, p.ns, p.name,
                      m.status, m.error));
  }
  const ApiResponse r = api_->Post(path + "/eviction", EvictionFor(p.ns, p.name, p.uid));
  if (r.ok())
    Log(fmt::format("node {}: evicted pod {}/{} (priority {}) for MIG repartitioning", node.name, p.ns,
                    p.name, p.priority));
  else if (r.status != 429 && r.status != 404)
    Log(fmt::format("node {}: evicting pod {}/{} failed ({} {})", node.name, p.ns, p.name, r.status,
                    r.error));
}

bool MigRepartitioner::Finish(const MigNode& node, Op* op, int64_t now_s) {
  const std::string& want = op->phase == Phase::kRevert ? op->previous : op->config;
  if (node.config != want) return true;  // the informer has not seen the change yet
  if (node.state == "pending") op->seen_pending = true;
  const MigPartedConfig* config = ConfigNamed(want);
  if (node.state == "success" && (config == nullptr || Advertises(node, *config))) {
    if (!SetCordon(node.name, false)) return true;
    Log(fmt::format("node {}: MIG config {} applied{}; uncordoned", node.name, want,
                    op->phase == Phase::kRevert ? " again after the failed change" : ""));
    return false;
  }
  const bool failed =
      node.state == "failed" && (op->seen_pending || now_s - op->changed_at >= kFailedSettleS);
  const bool late = now_s - op->changed_at >= options_.apply_timeout_s;
  if (!failed && !late) return true;
  if (op->phase == Phase::kRevert) {
    Log(fmt::format("node {}: going back to MIG config {} did not succeed either (state {}); uncordoned",
                    node.name, want, node.state));
    (void)SetCordon(node.name, false);
    return false;
  }
  Failed(node, op,
         failed ? "the MIG manager reports nvidia.com/mig.config.state=failed"
                : fmt::format("no success within {} s (state {})", options_.apply_timeout_s, node.state),
         now_s);
  return true;
}

void MigRepartitioner::Failed(const MigNode& node, Op* op, const std::string& why, int64_t now_s) {
  failed_[{node.name, op->config}] = now_s;
  const std::string message = fmt::format(
      "tessera: MIG reconfiguration of {} to {} failed: {}; going back to {} "
      "and placing the waiting pods elsewhere",
      node.name, op->config, why, op->previous.empty() ? "its previous config" : op->previous);
  Log(message);
  Event(NodeRef(node), "MigReconfigureFailed", message);
  for (const std::string& p : op->for_pods) Event(PodObjectRef(p), "MigReconfigureFailed", message);
  op->phase = Phase::kRevert;
  op->changed_at = now_s;
  op->seen_pending = false;
  if (op->previous.empty() || !SetLabel(node.name, op->previous)) op->previous = op->config;
  (void)SetCordon(node.name, true, op);  // a restart now waits for the revert
}

bool MigRepartitioner::SetLabel(const std::string& node, const std::string& config) {
  const json patch = {{"metadata", {{"labels", {{std::string(kMigConfigLabel), config}}}}}};
  const ApiResponse r = api_->Patch("/api/v1/nodes/" + node, patch);
  if (!r.ok())
    Log(fmt::format("node {}: setting {}={} failed ({} {})", node, kMigConfigLabel, config, r.status,
                    r.error));
  return r.ok();
}

bool MigRepartitioner::SetCordon(const std::string& node, bool cordoned, const Op* op) {
  json patch = {{"spec", {{"unschedulable", cordoned}}}};
  if (!cordoned)
    patch["metadata"]["annotations"][std::string(kRepartitionAnnotation)] = nullptr;
  else if (op != nullptr)
    patch["metadata"]["annotations"][std::string(kRepartitionAnnotation)] =
        AnnotationOf(op->config, op->previous, op->priority, op->job, op->phase == Phase::kRevert);
  const ApiResponse r = api_->Patch("/api/v1/nodes/" + node, patch);
  if (!r.ok())
    Log(fmt::format("node {}: {} failed ({} {})", node, cordoned ? "cordoning" : "uncordoning", r.status,
                    r.error));
  return r.ok();
}

void MigRepartitioner::Event(const json& regarding, const std::string& reason, const std::string& message) {
  const ApiResponse r = PostEvent(*api_, regarding, "Warning", reason, message, "tessera");
  if (!r.ok()) Log(fmt::format("writing an Event failed ({} {})", r.status, r.error));
}

}  // namespace tessera
