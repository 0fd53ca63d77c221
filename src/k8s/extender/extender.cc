#include "k8s/extender/extender.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/json_depth.h"
#include "base/utc_time.h"
#include "k8s/api/objects.h"
#include "sched/preemption.h"

namespace tessera {
namespace {

using json = nlohmann::json;

ExtenderAnswer Refuse(int status, const std::string& why) { return {status, json{{"Error", why}}}; }

// The ExtenderArgs body: the pod's demand and the nodes sent (full objects), or why not.
struct Args {
  PodDemand pod;
  std::vector<NodeModel> nodes;
  std::vector<json> node_objects;
};

Result<json> ParseBody(std::string_view body) {
  if (Status st = CheckJsonDepth(body); !st.ok()) return Status::Error("the body: " + st.message());
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Error("the body is not JSON");
  if (!j.is_object())
    return Status::Error(fmt::format("the body is a JSON {}, not an object", j.type_name()));
  return j;
}

// Parses ExtenderArgs; `status` says how bad: 400 for a malformed request, 200 for a pod whose resources
// cannot be read (answered with Error set and no node passing).
Result<Args> ReadArgs(const json& j, const ExtenderOptions& o, int* status) {
  *status = 400;
  const json* pod = Field(j, "Pod");
  if (pod == nullptr) return Status::Error("no Pod");
  if (!pod->is_object()) return Status::Error("Pod is not an object");
  const json* nodes = Field(j, "Nodes");
  if (nodes == nullptr) {
    if (Field(j, "NodeNames") != nullptr)
      return Status::Error(
          "only NodeNames were sent: this extender keeps no node cache (nodeCacheCapable: false)");
    return Status::Error("no Nodes");
  }
  const json* items = nodes->is_object() ? Field(*nodes, "items") : nullptr;
  if (!nodes->is_object() || (items != nullptr && !items->is_array()))
    return Status::Error("Nodes is not a NodeList");
  Args a;
  if (items != nullptr)
    for (const json& n : *items) {
      auto m = ReadNodeModel(n, *o.catalog, o.leaf_label, o.spine_label);
      if (!m.ok()) return Status::Error("Nodes.items: " + m.error());
      a.nodes.push_back(std::move(m).value());
      a.node_objects.push_back(n);
    }
  *status = 200;
  auto d = ReadPodDemand(*pod);
  if (!d.ok()) return Status::Error(d.error());
  a.pod = std::move(d).value();
  return a;
}

// What the pod takes of a node's GPU resources, and what the node has of them.
std::pair<int64_t, int64_t> GpuTakeAndHave(const PodDemand& d, const NodeModel& n) {
  int64_t take = d.gpus, have = d.gpus > 0 ? n.Allocatable(kGpuResource) : 0;
  for (const auto& [profile, count] : d.mig) {
    take += count;
    have += n.Allocatable(std::string(kMigResourcePrefix) + profile);
  }
  return {take, have};
}

// One victim kube-scheduler named: what it frees of the pod's GPU resources and its cost to the loop.
struct Victim {
  std::string uid;
  int64_t frees = 0;
  VictimCost cost;
  bool allowed = true;  // the loop's rule lets it go
};

// Victim `p` of `pod` asking `want` (index `i` in the node's list) at `now` (0: ages unknown).
Victim VictimOf(const json& p, const PodDemand& d, const json& pod, const PodDemand& want, int64_t i,
                int64_t now, const ExtenderOptions& o) {
  Victim v;
  v.uid = d.uid;
  v.frees = want.gpus > 0 ? d.gpus : 0;
  for (const auto& [profile, c] : d.mig) v.frees += want.mig.count(profile) ? c : 0;
  RunningJob r;
  r.priority = d.priority;
  r.start_time_s = now - o.min_runtime_s;  // unknown start: old enough
  const json* status = Field(p, "status");
  const json* started = status != nullptr ? Field(*status, "startTime") : nullptr;
  if (now > 0 && started != nullptr && started->is_string())
    if (auto t = ParseIsoUtc(started->get<std::string>()); t.ok()) r.start_time_s = std::min(*t, now);
  r.last_checkpoint_s = r.start_time_s;
  CycleOptions rules;
  rules.min_runtime_s = o.min_runtime_s;
  v.allowed = MayPreempt(Preemptor{want.priority, 0, false}, r, false, now, rules) != PreemptKind::kNone;
  if (o.loop_victim)
    if (const std::optional<bool> loop = o.loop_victim(pod, p)) v.allowed = *loop;
  int64_t units_milli = d.gpus * 1000;  // a MIG slice counts its compute slices of 7
  for (const auto& [profile, c] : d.mig)
    units_milli += c * std::max(1, std::atoi(profile.c_str())) * 1000 / 7;
  v.cost = {false, d.priority, LostWorkGpuSeconds(r, units_milli, now), 1, i};
  return v;
}

// The cycle's choice among `victims` for `need` units: cheapest first until they free it, then the released
// ones spared from the last-but-one back while what is left still frees it. All allowed ones when even they
// do not.
std::vector<std::string> ChooseVictims(std::vector<Victim> victims, int64_t need) {
  std::erase_if(victims, [](const Victim& v) { return !v.allowed; });
  std::sort(victims.begin(), victims.end(),
            [](const Victim& a, const Victim& b) { return CheaperVictim(a.cost, b.cost); });
  size_t n = 0;
  int64_t freed = 0;
  while (n < victims.size() && (need <= 0 || freed < need)) freed += victims[n++].frees;
  std::vector<bool> spared(n, false);
  for (int k = static_cast<int>(n) - 2; k >= 0 && freed >= need; --k)
    if (need > 0 && freed - victims[k].frees >= need) {
      spared[k] = true;
      freed -= victims[k].frees;
    }
  std::vector<std::string> out;
  for (size_t k = 0; k < n; ++k)
    if (!spared[k]) out.push_back(victims[k].uid);
  return out;
}

// The loop's view of the pod on the nodes sent, by node name; nullopt when there is none to ask (the
// standalone extender) or the pod asks for no GPU.
Result<std::optional<std::map<std::string, LoopFit>>> LoopFitsOf(const json& j, const Args& a,
                                                                 const ExtenderOptions& o) {
  if (!o.loop_view || !a.pod.AnyGpu()) return std::optional<std::map<std::string, LoopFit>>();
  std::vector<std::string> names;
  for (const NodeModel& n : a.nodes) names.push_back(n.name);
  auto fits = o.loop_view(*Field(j, "Pod"), names);
  if (!fits.ok()) return fits.status();
  std::map<std::string, LoopFit> out;
  for (LoopFit& f : *fits) out[f.node] = std::move(f);
  return std::optional<std::map<std::string, LoopFit>>(std::move(out));
}

json FilterError(const std::string& error) {
  return json{{"Nodes", {{"metadata", json::object()}, {"items", json::array()}}},
              {"NodeNames", nullptr},
              {"FailedNodes", json::object()},
              {"FailedAndUnresolvableNodes", json::object()},
              {"Error", error}};
}

}  // namespace

ExtenderAnswer Extender::Filter(std::string_view body) const {
  auto j = ParseBody(body);
  if (!j.ok()) return Refuse(400, j.error());
  int status = 400;
  auto a = ReadArgs(*j, options_, &status);
  if (!a.ok()) {
    if (status != 200) return Refuse(status, a.error());
    json failed = json::object();
    if (const json* nodes = Field(*j, "Nodes"); nodes != nullptr)
      if (const json* items = Field(*nodes, "items"); items != nullptr && items->is_array())
        for (const json& n : *items)
          if (const json* m = Field(n, "metadata"); m != nullptr && Field(*m, "name") != nullptr)
            failed[Field(*m, "name")->is_string() ? Field(*m, "name")->get<std::string>() : "?"] = a.error();
    return {200, json{{"Nodes", {{"metadata", json::object()}, {"items", json::array()}}},
                      {"NodeNames", nullptr},
                      {"FailedNodes", json::object()},
                      {"FailedAndUnresolvableNodes", failed},
                      {"Error", a.error()}}};
  }
  auto loop = LoopFitsOf(*j, *a, options_);
  if (!loop.ok()) return {200, FilterError("tessera: " + loop.error())};
  json pass = json::array(), failed = json::object();
  for (size_t i = 0; i < a->nodes.size(); ++i) {
    std::string why;
    if (!*loop) {
      why = WhyNotFits(a->pod, a->nodes[i]);
    } else if (auto f = (*loop)->find(a->nodes[i].name); f == (*loop)->end() || !f->second.fits) {
      why = "tessera: " + (f == (*loop)->end() ? std::string("not judged") : f->second.reason);
    }
    if (why.empty())
      pass.push_back(a->node_objects[i]);
    else
      failed[a->nodes[i].name] = why;
  }
  return {200, json{{"Nodes", {{"metadata", json::object()}, {"items", pass}}},
                    {"NodeNames", nullptr},
                    {"FailedNodes", failed},
                    {"FailedAndUnresolvableNodes", json::object()},
                    {"Error", ""}}};
}

// With the loop's view: its policy's choices 10, 9, ... (at least 2), other nodes it fits on 1, the rest 0.
// Else best fit: a fitting node scores higher the less of its GPU resources the pod leaves free there (whole
// nodes stay free for gangs); a pod without GPUs prefers nodes without them. Nodes it does not fit score 0.
ExtenderAnswer Extender::Prioritize(std::string_view body) const {
  auto j = ParseBody(body);
  if (!j.ok()) return Refuse(400, j.error());
  int status = 400;
  auto a = ReadArgs(*j, options_, &status);
  if (!a.ok()) return Refuse(400, a.error());
  auto loop = LoopFitsOf(*j, *a, options_);
  if (!loop.ok()) return Refuse(500, "tessera: " + loop.error());
  json out = json::array();
  for (const NodeModel& n : a->nodes) {
    int score = 0;
    if (*loop) {  // the loop's policy: its choices in order, then the other nodes it fits on
      auto f = (*loop)->find(n.name);
      if (f != (*loop)->end() && f->second.fits)
        score = f->second.rank >= 0 ? std::max(2, 10 - f->second.rank) : 1;
    } else if (WhyNotFits(a->pod, n).empty()) {
      const auto [take, have] = GpuTakeAndHave(a->pod, n);
      const bool node_has_gpus = n.Allocatable(kGpuResource) > 0 || n.gpu_count > 0;
      if (!a->pod.AnyGpu())
        score = node_has_gpus ? 1 : 10;
      else
        score = have > 0 ? static_cast<int>(std::clamp<int64_t>(1 + 9 * take / have, 1, 10)) : 1;
    }
    out.push_back({{"Host", n.name}, {"Score", score}});
  }
  return {200, out};
}

// Per candidate node: the victims the cycle would take (extender.h).
ExtenderAnswer Extender::Preempt(std::string_view body) const {
  auto j = ParseBody(body);
  if (!j.ok()) return Refuse(400, j.error());
  const json* pod = Field(*j, "Pod");
  if (pod == nullptr || !pod->is_object()) return Refuse(400, "no Pod");
  auto demand = ReadPodDemand(*pod);
  if (!demand.ok()) return Refuse(400, demand.error());
  const json* full = Field(*j, "NodeNameToVictims");
  const json* meta = Field(*j, "NodeNameToMetaVictims");
  const json* by_node = full != nullptr ? full : meta;
  if (by_node != nullptr && !by_node->is_object()) return Refuse(400, "NodeNameToVictims is not an object");
  int64_t need = demand->gpus;
  for (const auto& [p, c] : demand->mig) need += c;
  const int64_t now = options_.now_s ? options_.now_s() : 0;
  json out = json::object();
  const json none = json::object();
  for (const auto& [node, v] : (by_node != nullptr ? *by_node : none).items()) {
    const json* pods = v.is_object() ? Field(v, "Pods") : nullptr;
    if (pods == nullptr || !pods->is_array()) continue;
    std::vector<std::string> chosen;
    if (full == nullptr) {  // meta victims: UIDs only, kept as sent
      for (const json& p : *pods)
        if (const json* uid = Field(p, "UID"); uid != nullptr && uid->is_string())
          chosen.push_back(uid->get<std::string>());
    } else {
      std::vector<Victim> victims;
      for (const json& p : *pods)
        if (auto d = ReadPodDemand(p); d.ok() && !d->uid.empty())
          victims.push_back(
              VictimOf(p, *d, *pod, *demand, static_cast<int64_t>(victims.size()), now, options_));
      chosen = ChooseVictims(std::move(victims), need);
    }
    if (chosen.empty()) continue;
    json uids = json::array();
    for (const std::string& uid : chosen) uids.push_back({{"UID", uid}});
    const json* npv = Field(v, "NumPDBViolations");
    out[node] = {{"Pods", uids},
                 {"NumPDBViolations", npv != nullptr && npv->is_number_integer() ? npv->get<int64_t>() : 0}};
  }
  return {200, json{{"NodeNameToMetaVictims", out}}};
}

ExtenderAnswer Extender::Bind(std::string_view body) const {
  auto j = ParseBody(body);
  if (!j.ok()) return Refuse(400, j.error());
  for (const char* key : {"PodName", "PodNamespace", "PodUID", "Node"})
    if (const json* v = Field(*j, key); v == nullptr || !v->is_string())
      return Refuse(400, fmt::format("ExtenderBindingArgs: no {}", key));
  return {200, json{{"Error", "this extender does not bind without --kubeconfig; leave bindVerb unset"}}};
}

}  // namespace tessera
