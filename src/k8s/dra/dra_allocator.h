#pragma once
// Chooses devices for a pod's unallocated ResourceClaims on one node (kubernetes-contracts.md 8.2): every
// request of every claim satisfied (ExactCount with its count, All with every matching device of the node,
// firstAvailable with the first subrequest that fits, results then named "<request>/<subrequest>"); the
// DeviceClass selectors, then the request's, all true (a CEL runtime error on a device fails the request on
// that node; an unsupported expression refuses the pod with the expression named); shared counters within
// their sets and no device twice (DraUsage). Pure: a model and a usage in, a decision out.
//
// Policies: kTessera places MIG devices fragmentation-aware (onto GPUs already in use, at the start that
// keeps the most MIG layout freedom, sched/mig_layouts.h MigFreedom) and picks the node best-fit;
// kFirstFit takes nodes by name and devices by name, the upstream allocator's order. Both search with
// backtracking (bounded by `search_budget`), so neither misses a fit that greedy choice would.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "k8s/dra/dra_model.h"
#include "k8s/dra/dra_objects.h"

namespace tessera {

enum class DraPolicy { kTessera, kFirstFit };

struct DraClaimRef {
  std::string name;  // "namespace/name", for messages
  const DraClaimSpec* spec = nullptr;
};

struct DraClaimChoice {
  std::string claim;
  std::vector<DraDeviceResult> results;
};

struct DraDecision {
  bool fits = false;
  std::string node;
  std::vector<DraClaimChoice> claims;  // in the order of the input claims
  std::string reason;                  // when !fits: why, naming claims, requests, expressions
  bool unsupported = false;            // the reason is an unsupported selector or feature (no node can help)
};

struct DraAllocateOptions {
  DraPolicy policy = DraPolicy::kTessera;
  std::vector<std::string> nodes;  // nodes allowed; empty = every node of the model
  int64_t search_budget = 50000;   // search steps per node
};

using DraClassMap = std::map<std::string, DraDeviceClass>;

DraDecision AllocateDra(const DraModel& model, const DraClassMap& classes, const DraUsage& usage,
                        const std::vector<DraClaimRef>& claims, const DraAllocateOptions& options);

// Marks a decision's devices as in use.
void CommitDra(const DraDecision& decision, DraUsage* usage);

// An exact bound: the largest number of `optional` claims placeable together with every `must` claim on the
// free counters of `usage` (each claim on one node), by exhaustive search with symmetric GPUs merged.
// `exhaustive` is false when `budget` steps did not suffice (then `placed` is a lower bound).
struct DraPackingBound {
  int placed = -1;  // -1: the musts alone do not fit
  bool exhaustive = true;
};
DraPackingBound DraBestPacking(const DraModel& model, const DraClassMap& classes, const DraUsage& usage,
                               const std::vector<DraClaimSpec>& musts,
                               const std::vector<DraClaimSpec>& optional, int64_t budget = 2000000);

}  // namespace tessera
