#pragma once
// An upper bound on gpu_utilization (docs/simulator.md "Metrics", "Upper bound") for one job stream on one
// cluster that no scheduler can exceed: a fractional two-dimensional packing by GPU compute and GPU memory,
// without slice granularity, placement, gang topology or time order.
//
// With x_j the ideal work job j does inside the window [warmup_s, horizon_s] (seconds of progress), a_j its
// compute (compute_milli / 1000 x GPUs) and b_j its memory need (memory_mib x GPUs), every run satisfies
//   utilisation x G x W <= sum a_j x_j,  sum a_j x_j <= G x W  (compute per GPU <= 1),
//   sum b_j x_j <= M x W  (memory held per GPU <= its memory),  0 <= x_j <= cap_j,
// where G is the number of GPUs, M their summed memory, W the window length and cap_j the time the job can
// spend in the window (from its arrival) or, when work is never repeated, at most its duration. The bound is
// the optimum of that linear programme: min(G W, the fractional knapsack of the b_j within M W) / (G W).

#include <cstdint>
#include <string>
#include <vector>

#include "model/catalog.h"
#include "model/cluster.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace tessera {

struct UtilizationBound {
  double gpu_utilization = 0;  // in [0, 1]
  // The constraint that binds: "compute" (every GPU's compute used), "memory" (every GPU's memory held by
  // the jobs with the most compute per MiB) or "work" (the stream runs out of work in the window).
  std::string limit;
  double offered_compute = 0;  // sum of a_j x cap_j / (G W): the work the stream offers the window
};

// `work_may_repeat`: preemptions, failures or capacity reclaims may make a job redo lost work, so its work in
// the window is capped by the window only, not by its duration. A run to completion (horizon_s == 0) has a
// window that ends with the run; only compute per GPU bounds it (1.0).
UtilizationBound BoundUtilization(const Cluster& cluster, const Catalog& catalog,
                                  const std::vector<TraceJob>& jobs, const SimOptions& options,
                                  bool work_may_repeat);

}  // namespace tessera
