#pragma once
// Policy: a pure placement decision. Place(snapshot, request) returns where the request's tasks go, or
// why they cannot go anywhere. Policies never mutate the snapshot; any memo cache a policy keeps must not
// change a decision (results depend only on the snapshot and the request).
//
// MakePolicy is the one factory for every policy name; each name means one algorithm wherever it runs
// (the scheduling cycle, the simulator, the FGD harness, `tessera place`).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sched/cluster_state.h"
#include "sched/placement.h"
#include "sched/request.h"
#include "sched/sharing.h"
#include "sched/task_shape.h"

namespace tessera {

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;
  virtual PlaceResult Place(const ClusterState& snapshot, const Request& request) const = 0;
};

// What a policy may be built from besides its name.
struct PolicyOptions {
  // The workload's typical-task distribution (fgd's measure, tessera's node score). Empty: unknown
  // (fgd then sees no fragmentation; tessera's node score falls back to best fit on GPU milli).
  TaskShapeDistribution typical;
  // Score ties go to the earliest node of a random node order drawn once from this seed (the FGD
  // harness's rule; random also draws from it). Without a seed: node index order (random uses seed 0).
  std::optional<uint64_t> tie_seed;
  // Sharing inside instances (tessera): SLOs, mode and per-process memory (docs/sharing.md).
  SharingOptions sharing;
  // Engine policies only (tessera, bestfit, k8s-default, static-mig; anything else is an error):
  // features turned off (EngineFeatures(); a scenario's ablation variants), the name the policy then
  // reports (empty: its own), and MIG layouts owned by someone else (the GPU Operator's MIG manager: the
  // policy never repartitions, and a MIG request takes exactly the profile it names).
  std::vector<std::string> off;
  std::string name;
  bool fixed_mig = false;
};

// What an engine policy can turn off: PolicyTraits flags (mig_aware, repartition, share, topology,
// separate_classes, frag_aware, share_instances) and `scorer` (bestfit's node score instead of tessera's;
// none for bestfit).
const std::vector<std::string>& EngineFeatures();

// What a registered policy can place. Every policy returns a result for every request: what it cannot
// place is a kInvalid result saying why.
struct PolicyInfo {
  std::string name;
  bool gangs = false;       // places gangs of several tasks (else single tasks only)
  bool mig = false;         // places sub-GPU tasks in MIG instances
  bool gpu_memory = false;  // honours Request::gpu_memory_mib (else memory-blind or kInvalid, see below)
  bool memory_blind = false;  // places requests with gpu_memory_mib but ignores it (kube-scheduler)
};

// Every registered policy, in a fixed order.
const std::vector<PolicyInfo>& Policies();
std::vector<std::string> PolicyNames();
Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name, const PolicyOptions& options = {});

// One request placed outside a scheduling cycle (place, bench, demo, the FGD harness): the policy's
// decision, applied to `state` when it fits. The result says where, or why not.
// The sharing a policy's replicas run under: the device plugin's or HAMi's for the baselines that stand for
// them (k8s-timeslice: time-slicing; k8s-mps: MPS with per-client limits; hami: time-sliced with core
// limits), the scenario's for the others.
SharingOptions SharingFor(std::string_view policy, SharingOptions scenario);

PlaceResult PlaceAndApply(ClusterState& state, const Policy& policy, const Request& request);

// policy.Place(state, request) among the nodes request.nodes allows: the others are cordoned for the call and
// their cordon lifted after it, so `state` is as it was. No allowed node: kResources with the reason.
PlaceResult PlaceWithin(const Policy& policy, ClusterState& state, const Request& request);

}  // namespace tessera
