#include "k8s/dra/dra_jobs.h"

#include <fmt/format.h>

#include <vector>

#include "k8s/dra/dra_binder.h"
#include "k8s/dra/dra_cel.h"
#include "k8s/dra/dra_objects.h"

namespace tessera {

using json = nlohmann::json;

namespace {

// Whether every device of `model` the class's selectors match is a full GPU, and at least one is.
bool ClassSelectsWholeGpus(const DraDeviceClass& cls, const DraModel& model) {
  std::vector<CelSelector> selectors;
  for (const std::string& e : cls.selectors) selectors.push_back(CelSelector::Compile(e));
  for (const CelSelector& s : selectors)
    if (!s.supported()) return false;
  bool any = false;
  for (const DraModelNode& n : model.nodes)
    for (const DraModelDevice& d : n.devices) {
      bool match = true;
      for (const CelSelector& s : selectors)
        match = match && s.Evaluate(d.device, d.driver).verdict == CelVerdict::kMatch;
      if (!match) continue;
      if (d.role != DraDeviceRole::kFullGpu || d.gpu < 0) return false;
      any = true;
    }
  return any;
}

DraJobDemand DraPathFor(std::string why) { return {DraJobDemand::Kind::kDraPath, 0, std::move(why)}; }

}  // namespace

DraJobDemand DraJobDemandOf(const json& pod, const std::map<std::string, json>& claims,
                            const DraClassMap& classes, const DraModel& model,
                            std::map<std::string, bool>* class_cache) {
  DraJobDemand out;
  const std::vector<std::string> keys = PodClaimKeys(pod);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].empty())
      return {DraJobDemand::Kind::kNotYet, 0, fmt::format("claim #{} is not created yet", i)};
    auto it = claims.find(keys[i]);
    if (it == claims.end())
      return {DraJobDemand::Kind::kNotYet, 0, "claim " + keys[i] + " does not exist yet"};
    auto claim = ParseResourceClaim(it->second);
    if (!claim.ok()) return DraPathFor("claim " + keys[i] + ": " + claim.error());
    if (claim->spec.has_constraints) return DraPathFor("claim " + keys[i] + " has constraints");
    if (claim->allocation) {  // anything but one node is the DRA path's to refuse
      if (claim->allocation->nodes.size() != 1 ||
          (!out.node.empty() && out.node != claim->allocation->nodes[0]))
        return DraPathFor("claim " + keys[i] +
                          " is allocated elsewhere than the node of the pod's other claims");
      out.node = claim->allocation->nodes[0];
    }
    for (const DraRequest& r : claim->spec.requests) {
      const std::string where = fmt::format("claim {} request {}", keys[i], r.name);
      if (r.first_available || r.alternatives.size() != 1) return DraPathFor(where + " uses firstAvailable");
      const DraSubRequest& sub = r.alternatives[0];
      if (sub.mode != DraAllocationMode::kExactCount)
        return DraPathFor(where + " asks for all matching devices");
      if (!sub.selectors.empty()) return DraPathFor(where + " selects devices by CEL");
      if (sub.admin_access || sub.count < 1) return DraPathFor(where + " is not a count of whole GPUs");
      auto cls = classes.find(sub.device_class);
      if (cls == classes.end())
        return {DraJobDemand::Kind::kNotYet, 0,
                fmt::format("DeviceClass {} does not exist yet", sub.device_class)};
      auto cached = class_cache->find(sub.device_class);
      if (cached == class_cache->end())
        cached = class_cache->emplace(sub.device_class, ClassSelectsWholeGpus(cls->second, model)).first;
      if (!cached->second)
        return DraPathFor(
            fmt::format("{}: DeviceClass {} selects devices other than whole GPUs", where, sub.device_class));
      out.gpus += sub.count;
    }
  }
  if (out.gpus <= 0) return DraPathFor("its claims ask for no whole GPU");

  out.kind = DraJobDemand::Kind::kWholeGpus;
  return out;
}

std::map<std::string, DraLoopNode> DraLoopNodes(const DraModel& model,
                                                const std::map<std::string, json>& claims,
                                                const std::set<std::string>& foreign_pods) {
  std::vector<std::vector<char>> held(model.nodes.size());
  for (size_t n = 0; n < model.nodes.size(); ++n) held[n].assign(model.nodes[n].gpus.size(), 0);
  for (const auto& [key, c] : claims) {
    auto claim = ParseResourceClaim(c);
    if (!claim.ok() || !claim->allocation) continue;
    bool foreign = false;
    for (const DraReservation& r : claim->reserved_for) foreign = foreign || foreign_pods.count(r.uid) > 0;
    if (!foreign) continue;
    for (const DraDeviceResult& r : claim->allocation->results) {
      auto at = model.Find(r.driver, r.pool, r.device);
      if (!at) continue;
      const DraModelDevice& d = model.nodes[at->first].devices[at->second];
      if (d.gpu >= 0) held[at->first][d.gpu] = 1;
    }
  }
  std::map<std::string, DraLoopNode> out;
  for (size_t n = 0; n < model.nodes.size(); ++n) {
    const DraModelNode& node = model.nodes[n];
    std::vector<char> full(node.gpus.size(), 0);
    for (const DraModelDevice& d : node.devices)
      if (d.role == DraDeviceRole::kFullGpu && d.gpu >= 0 && d.usable) full[d.gpu] = 1;
    std::map<KindId, int> kinds;
    for (size_t g = 0; g < node.gpus.size(); ++g)
      if (full[g] && node.gpus[g].kind != kNone) ++kinds[node.gpus[g].kind];
    if (kinds.empty()) continue;
    DraLoopNode ln;
    int most = 0;
    for (const auto& [k, count] : kinds)
      if (count > most) ln.kind = k, most = count;
    for (size_t g = 0; g < node.gpus.size(); ++g) {
      if (!full[g] || node.gpus[g].kind != ln.kind) continue;
      ++ln.total;
      ln.free += !held[n][g];
    }
    out[node.name] = ln;
  }
  return out;
}

}  // namespace tessera
