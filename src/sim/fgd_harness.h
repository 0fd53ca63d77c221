#pragma once
// The FGD evaluation harness ("tune 1.3", ../shared/reference/fgd-harness.md): shuffle the pod list with
// the seed, inflate it by resampling until the GPU request reaches 1.3x cluster GPU capacity, place the
// pods one at a time through a Policy on a ClusterState (the production engine), never retry, never
// delete; after each pod record arrived load, allocation (the GPU milli the placements grant) and the
// FGD fragmentation measure, and optionally every decision.
//
// Deterministic: the same inputs and seed give the same curve. No clock, no I/O.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "sched/fgd_policy.h"
#include "sched/request.h"

namespace tessera {

struct FgdHarnessOptions {
  double inflation = 1.3;     // stop appending copies once the GPU request reaches this x capacity
  bool record_curve = false;  // keep one CurvePoint per pod
  bool record_placements = false;  // keep one PodDecision per pod
};

// One pod's outcome, enough to replay the run against the trace without Tessera.
struct PodDecision {
  int64_t pod_index = 0;  // 0-based position in the arrival order (after shuffle and inflation)
  int64_t pod_row = 0;    // 0-based data row of the pod in the pod list it was drawn from
  bool placed = false;
  NodeId node = kNone;    // when placed
  std::vector<std::pair<int, int>> gpus;  // (GPU index within the node, milli granted)
};

struct CurvePoint {
  int64_t pod_index = 0;              // 0-based position in the inflated order
  double arrived_pct = 0;             // GPU requested so far (failed pods included) / capacity
  double allocated_pct = 0;           // GPU milli allocated / capacity
  double frag_pct_of_capacity = 0;    // cluster fragmentation / capacity
  double frag_pct_of_idle = 0;        // cluster fragmentation / idle GPU milli (0 when none idle)
};

struct FgdRunResult {
  std::string policy;
  uint64_t seed = 0;
  // Read at the first pod where arrived load reaches 100% (the last pod if it never does).
  double unallocated_gpu_pct_at_100 = 0;
  double fragmentation_pct_at_100 = 0;  // of capacity
  double frag_pct_of_idle_at_100 = 0;
  bool reached_100 = false;
  int64_t pods = 0;      // after inflation
  int64_t placed = 0;
  int64_t failed = 0;
  int64_t capacity_milli = 0;
  std::vector<CurvePoint> curve;
  std::vector<PodDecision> decisions;  // with FgdHarnessOptions::record_placements
};

// GPU milli a request asks for (CPU-only 0, share gpu_milli, whole gpus_per_task x 1000).
int64_t RequestedGpuMilli(const Request& r);
// Sum of GPU capacity (milli) over the cluster's GPUs.
int64_t GpuCapacityMilli(const Cluster& cluster);

// The harness's arrival order for `seed`: the shuffled originals followed by copies drawn with
// replacement until the total GPU request reaches inflation x capacity. Ids are renumbered 0..n-1.
// `rows`, when given, receives for each position the index in `pods` the request was taken from.
std::vector<Request> ShuffleAndInflate(const std::vector<Request>& pods, int64_t capacity_milli, double inflation,
                                       uint64_t seed, std::vector<int64_t>* rows = nullptr);
// The seed from which harness policies draw their node order (a separate stream from the shuffle).
uint64_t PolicySeed(uint64_t seed);

// One run. `dist` is the typical-task distribution of the original pod list (before inflation).
Result<FgdRunResult> RunFgdHarness(const Cluster& cluster, const Catalog& catalog, const std::vector<Request>& pods,
                                   const TaskShapeDistribution& dist, std::string_view policy, uint64_t seed,
                                   const FgdHarnessOptions& options = {});

}  // namespace tessera
