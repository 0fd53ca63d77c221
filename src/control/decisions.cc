#include "control/decisions.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace tessera {

std::string MigLayoutText(const ClusterState& s, GpuId g) {
  const GpuState& gs = s.gpu(g);
  std::string out;
  if (!gs.mig_enabled) return out;
  for (int i = 0; i < gs.n_instances; ++i)
    out += (out.empty() ? "" : ",") + s.kind_of_gpu(g).profiles[gs.instances[i].profile].name + "@" +
           std::to_string(static_cast<int>(gs.instances[i].start));
  return out;
}

std::string DecisionLine(const Decision& d, const ClusterState& state, const SlotNameOf& job_name,
                         const NameOf& node_name) {
  nlohmann::ordered_json o;
  o["t"] = d.t;
  o["job"] = job_name(d.group);
  o["event"] = DecisionKindName(d.kind);
  if (d.kind == DecisionKind::kStart) {
    nlohmann::ordered_json placements = nlohmann::ordered_json::array();
    for (const TaskPlacement& t : d.tasks)
      for (const GpuGrant& g : t.gpus) {
        nlohmann::ordered_json p;
        p["node"] = node_name(t.node);
        p["gpu"] = g.gpu - state.node(t.node).first_gpu;
        if (g.mig_profile >= 0)
          p["mig"] = state.kind_of_gpu(g.gpu).profiles[g.mig_profile].name + "@" + std::to_string(g.mig_start);
        else
          p["mig"] = nullptr;
        p["share"] = std::clamp(g.milli, 1, 1000) / 1000.0;
        placements.push_back(std::move(p));
      }
    o["placements"] = std::move(placements);
  }
  return o.dump();
}

}  // namespace tessera
