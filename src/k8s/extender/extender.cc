#include "k8s/extender/extender.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/json_depth.h"
#include "k8s/api/objects.h"

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
  json pass = json::array(), failed = json::object();
  for (size_t i = 0; i < a->nodes.size(); ++i) {
    const std::string why = WhyNotFits(a->pod, a->nodes[i]);
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

// Best fit: a fitting node scores higher the less of its GPU resources the pod leaves free there (whole nodes
// stay free for gangs); a pod without GPUs prefers nodes without them. Nodes it does not fit score 0.
ExtenderAnswer Extender::Prioritize(std::string_view body) const {
  auto j = ParseBody(body);
  if (!j.ok()) return Refuse(400, j.error());
  int status = 400;
  auto a = ReadArgs(*j, options_, &status);
  if (!a.ok()) return Refuse(400, a.error());
  json out = json::array();
  for (const NodeModel& n : a->nodes) {
    int score = 0;
    if (WhyNotFits(a->pod, n).empty()) {
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

// Per candidate node: its victims, lowest priority first, until they free what the pod needs there (all of
// them when even that is not enough: kube-scheduler's own choice stands).
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
  json out = json::object();
  const json none = json::object();
  for (const auto& [node, v] : (by_node != nullptr ? *by_node : none).items()) {
    const json* pods = v.is_object() ? Field(v, "Pods") : nullptr;
    if (pods == nullptr || !pods->is_array()) continue;
    std::vector<std::pair<PodDemand, std::string>> victims;
    for (const json& p : *pods) {
      if (full == nullptr) {  // meta victims: UIDs only
        if (const json* uid = Field(p, "UID"); uid != nullptr && uid->is_string())
          victims.push_back({{}, uid->get<std::string>()});
        continue;
      }
      auto d = ReadPodDemand(p);
      if (d.ok() && !d->uid.empty()) victims.push_back({*d, d->uid});
    }
    std::stable_sort(victims.begin(), victims.end(),
                     [](auto& x, auto& y) { return x.first.priority < y.first.priority; });
    int64_t need = demand->gpus, freed = 0;
    for (const auto& [p, c] : demand->mig) need += c;
    json chosen = json::array();
    for (const auto& [d, uid] : victims) {
      if (full != nullptr && need > 0 && freed >= need) break;
      chosen.push_back({{"UID", uid}});
      int64_t gpus = d.gpus;
      for (const auto& [p, c] : d.mig) gpus += demand->mig.count(p) ? c : 0;
      freed += gpus;
    }
    if (chosen.empty()) continue;
    const json* npv = Field(v, "NumPDBViolations");
    out[node] = {{"Pods", chosen},
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
