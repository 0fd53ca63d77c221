#pragma once
// An upper bound on gpu_utilization (docs/simulator.md "Metrics", "Upper bound") for one job stream on one
// cluster that no scheduler can exceed: a fractional two-dimensional packing by GPU compute and GPU memory,
// without slice granularity, placement, gang topology or time order.
//
// With x_j the ideal work job j does inside the window [warmup_s, horizon_s] (seconds of progress), a_j its
// compute (compute_milli / 1000 x GPUs), c_j and b_j the compute and memory it holds (a whole-GPU job its
// GPUs whole: c_j = GPUs, b_j = GPUs x its smallest fitting kind's memory; a sub-GPU job its need: c_j =
// a_j, b_j = memory_mib), every run satisfies
//   utilisation x G x W <= sum a_j x_j,  sum c_j x_j <= G x W,  sum b_j x_j <= M x W,  0 <= x_j <= cap_j,
// where G is the number of GPUs, M their summed memory, W the window length and cap_j the time the job can
// spend in the window (from its arrival) or, when work is never repeated, at most its duration. The bound is
// the optimum of that linear programme, computed as the minimum of its Lagrangian dual over the two prices.

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
  // What binds: "work" (the stream runs out of work in the window), "compute" or "memory" (that row alone
  // gives the same optimum), or "compute and memory".
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
