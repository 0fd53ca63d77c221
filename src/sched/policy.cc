#include "sched/policy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "sched/engine_policy.h"
#include "sched/fgd_policy.h"
#include "sched/harness_policies.h"
#include "sched/node_scorer.h"
#include "sched/replica_policy.h"

namespace tessera {

const std::vector<PolicyInfo>& Policies() {
  // name, gangs, mig, gpu_memory, memory_blind
  static const std::vector<PolicyInfo> kPolicies = {
      {"tessera", true, true, true, false},        {"k8s-default", true, false, false, true},
      {"bestfit", true, true, true, false},        {"static-mig", true, true, false, true},
      {"fgd", false, false, false, false},         {"random", false, false, false, false},
      {"dotprod", false, false, false, false},     {"gpuclustering", false, false, false, false},
      {"gpupacking", false, false, false, false},
      {"k8s-timeslice", true, false, false, true},  {"k8s-mps", true, false, false, true},
      {"hami", true, false, true, false},           {"bestfit-share", true, false, true, false},
      {"static-mig-best", true, true, false, true},
  };
  return kPolicies;
}

std::vector<std::string> PolicyNames() {
  std::vector<std::string> out;
  for (const PolicyInfo& p : Policies()) out.push_back(p.name);
  return out;
}

const std::vector<std::string>& EngineFeatures() {
  static const std::vector<std::string> kFeatures = {"mig_aware",        "repartition", "share",  "topology",
                                                     "separate_classes", "frag_aware",  "scorer", "share_instances"};
  return kFeatures;
}

namespace {

bool IsEngine(std::string_view name) {
  return name == "tessera" || name == "bestfit" || name == "k8s-default" || name == "static-mig";
}

// An engine policy with PolicyOptions' features off, name and fixed MIG layouts. Every engine variant
// runs with the options' sharing; tessera without its score uses bestfit's.
Result<std::unique_ptr<Policy>> MakeEngineVariant(std::string_view base, const PolicyOptions& o) {
  PolicyTraits t = base == "tessera"       ? TesseraTraits()
                   : base == "bestfit"     ? BestFitTraits()
                   : base == "k8s-default" ? K8sDefaultTraits()
                                           : StaticMigTraits();
  if (!o.name.empty()) t.name = o.name;
  bool own_scorer = base == "tessera" || base == "bestfit";
  for (const std::string& f : o.off) {
    if (f == "mig_aware") t.mig_aware = false;
    else if (f == "repartition") t.repartition = false;
    else if (f == "share") t.share = false;
    else if (f == "topology") t.topology = false;
    else if (f == "separate_classes") t.separate_classes = false;
    else if (f == "frag_aware") t.frag_aware = false;
    else if (f == "share_instances") t.share_instances = false;
    else if (f == "scorer") own_scorer = false;
    else return Status::Error(fmt::format("unknown feature '{}' (known: {})", f, fmt::join(EngineFeatures(), ", ")));
  }
  if (o.fixed_mig) {
    t.repartition = false;
    t.exact_mig_profiles = true;
  }
  std::unique_ptr<NodeScorer> scorer;
  if (base == "tessera")
    scorer = own_scorer ? MakeTesseraScorer(o.typical, o.tie_seed) : MakeBestFitScorer(o.tie_seed);
  else if (base == "bestfit" && own_scorer)
    scorer = MakeBestFitScorer(o.tie_seed);
  return std::unique_ptr<Policy>(std::make_unique<EnginePolicy>(std::move(t), std::move(scorer), o.sharing));
}

}  // namespace

Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name, const PolicyOptions& o) {
  if (!o.off.empty() || !o.name.empty() || o.fixed_mig) {
    if (IsEngine(name)) return MakeEngineVariant(name, o);
    const std::vector<std::string> names = PolicyNames();
    if (std::find(names.begin(), names.end(), name) != names.end())
      return Status::Error(fmt::format("'{}' has no features to turn off (tessera, bestfit, k8s-default, static-mig do)", name));
  }
  std::unique_ptr<Policy> p;
  if (name == "tessera") p = std::make_unique<EnginePolicy>(TesseraTraits(), MakeTesseraScorer(o.typical, o.tie_seed), o.sharing);
  else if (name == "k8s-default") p = std::make_unique<EnginePolicy>(K8sDefaultTraits());
  else if (name == "bestfit") p = std::make_unique<EnginePolicy>(BestFitTraits(), MakeBestFitScorer(o.tie_seed));
  else if (name == "static-mig" || name == "static-mig-best") {
    PolicyTraits t = StaticMigTraits();  // static-mig-best: the same placement on a searched layout
    t.name = std::string(name);
    p = std::make_unique<EnginePolicy>(std::move(t));
  }
  else if (name == "k8s-timeslice")
    p = std::make_unique<ReplicaPolicy>("k8s-timeslice", SharingMode::kTimeSlicing, o.sharing.replicas);
  else if (name == "k8s-mps") p = std::make_unique<ReplicaPolicy>("k8s-mps", SharingMode::kMps, o.sharing.replicas);
  else if (name == "hami") p = std::make_unique<EnginePolicy>(HamiTraits(), nullptr, o.sharing);
  else if (name == "bestfit-share") p = std::make_unique<EnginePolicy>(BestFitShareTraits(), nullptr, o.sharing);
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

SharingOptions SharingFor(std::string_view policy, SharingOptions scenario) {
  if (policy == "k8s-timeslice") {
    scenario.mode = SharingMode::kTimeSlicing;
    scenario.per_client_cap = false;
  } else if (policy == "k8s-mps") {
    scenario.mode = SharingMode::kMps;
    scenario.per_client_cap = true;  // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = 100 / N
  } else if (policy == "hami") {
    scenario.mode = SharingMode::kTimeSlicing;  // HAMi-core shares by time, limiting each client's cores
    scenario.per_client_cap = true;
  }
  return scenario;
}

PlaceResult PlaceWithin(const Policy& policy, ClusterState& state, const Request& request) {
  if (request.nodes == nullptr) return policy.Place(state, request);
  std::vector<NodeId> held;
  bool any = false;
  for (NodeId n = 0; n < state.num_nodes(); ++n) {
    if (request.NodeAllowed(n)) {
      any = any || !state.node_cordoned(n);
      continue;
    }
    if (!state.node_cordoned(n) && state.CordonNode(n).ok()) held.push_back(n);
  }
  PlaceResult res = any ? policy.Place(state, request)
                        : PlaceResult::NoFit(NoFitCode::kResources, "no node passes the job's node constraints");
  for (NodeId n : held) (void)state.UncordonNode(n);
  return res;
}

PlaceResult PlaceAndApply(ClusterState& state, const Policy& policy, const Request& request) {
  PlaceResult res = PlaceWithin(policy, state, request);
  if (res.ok)
    state.Apply(res.tasks, request.cpu_milli, request.host_memory_mib, request.cls != WorkloadClass::kTraining);
  return res;
}

}  // namespace tessera
