#include "sched/policy.h"

#include <fmt/format.h>

#include "sched/engine_policy.h"
#include "sched/fgd_policy.h"
#include "sched/harness_policies.h"
#include "sched/node_scorer.h"

namespace tessera {

const std::vector<PolicyInfo>& Policies() {
  // name, gangs, mig, gpu_memory, memory_blind
  static const std::vector<PolicyInfo> kPolicies = {
      {"tessera", true, true, true, false},        {"k8s-default", true, false, false, true},
      {"bestfit", true, true, true, false},        {"static-mig", true, true, false, true},
      {"fgd", false, false, false, false},         {"random", false, false, false, false},
      {"dotprod", false, false, false, false},     {"gpuclustering", false, false, false, false},
      {"gpupacking", false, false, false, false},
  };
  return kPolicies;
}

std::vector<std::string> PolicyNames() {
  std::vector<std::string> out;
  for (const PolicyInfo& p : Policies()) out.push_back(p.name);
  return out;
}

Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name, const PolicyOptions& o) {
  std::unique_ptr<Policy> p;
  if (name == "tessera") p = std::make_unique<EnginePolicy>(TesseraTraits(), MakeTesseraScorer(o.typical, o.tie_seed), o.sharing);
  else if (name == "k8s-default") p = std::make_unique<EnginePolicy>(K8sDefaultTraits());
  else if (name == "bestfit") p = std::make_unique<EnginePolicy>(BestFitTraits(), MakeBestFitScorer(o.tie_seed));
  else if (name == "static-mig") p = std::make_unique<EnginePolicy>(StaticMigTraits());
  else if (name == "fgd") p = std::make_unique<FgdPolicy>(o.typical, o.tie_seed);
  else if (name == "random") p = std::make_unique<RandomPolicy>(o.tie_seed);
  else if (name == "dotprod") p = std::make_unique<DotProdPolicy>(o.tie_seed);
  else if (name == "gpuclustering") p = std::make_unique<GpuClusteringPolicy>(o.tie_seed);
  else if (name == "gpupacking") p = std::make_unique<GpuPackingPolicy>(o.tie_seed);
  if (!p) {
    std::string known;
    for (const auto& n : PolicyNames()) known += (known.empty() ? "" : ", ") + n;
    return Status::Error(fmt::format("unknown policy '{}' (known: {})", name, known));
  }
  return p;
}

PlaceResult PlaceAndApply(ClusterState& state, const Policy& policy, const Request& request) {
  PlaceResult res = policy.Place(state, request);
  if (res.ok)
    state.Apply(res.tasks, request.cpu_milli, request.host_memory_mib, request.cls != WorkloadClass::kTraining);
  return res;
}

}  // namespace tessera
