#pragma once
// Multi-tenant scenarios (issue 4): a scenario file (sim/scenario.h, one reader for every scenario) with a
// `tenancy` section (docs/scheduling.md format) and `teams_workload` (per-team Poisson arrivals with on/off
// bursts and a job mix). Each (policy, seed) runs twice on the same jobs, with borrowing and without, and
// reports per policy:
//   production_inference_wait_p99_s  p99 of first-bind - submit over production-inference jobs;
//   guarantee_wait_p99_s             p99 of first-bind - submit over jobs that fit their queue's guarantee
//                                    when they arrived (the time from demand within a guarantee to
//                                    placement);
//   jain_fairness                    Jain's index over teams of (GPU allocation / fair entitlement), where
//   the
//                                    entitlement is the team's guarantee plus its weight share of the rest;
//   gpu_utilization / gpu_utilization_no_borrowing and borrowing_gain_points;
//   preemptions, lost_gpu_hours (work lost since the last checkpoint);
//   queues.<leaf queue>.gpu_allocation / wait_mean_s   the queue's share of the cluster and its jobs' mean
//                                    wait to first bind (unplaced: to the horizon), over the window.
// Figures are means over seeds (with min/max).

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/catalog.h"
#include "sched/tenancy.h"
#include "sim/trace.h"

namespace tessera {

struct Scenario;

// One kind of job a team submits (`teams_workload[i].mix[k]`); ranges are [lo, hi], drawn uniformly.
struct TeamMixEntry {
  std::string cls_name;  // priority class
  int priority = 0;
  double weight = 1;
  int gpus = 1;  // 0 = a fractional share (`compute`, `memory_gib`)
  int tasks_lo = 1, tasks_hi = 1;
  double compute_lo = 1, compute_hi = 1;
  double mem_lo_gib = 40, mem_hi_gib = 40;
  double dur_lo_min = 60, dur_hi_min = 60;
  bool checkpointable = false;
};

// One team's (or queue's) arrivals: Poisson at rate_per_h, times burst_factor for the first burst_on_h of
// every burst_period_h.
struct TeamStream {
  std::string queue;  // leaf queue the jobs go to
  double rate_per_h = 1;
  double burst_factor = 1, burst_on_h = 0, burst_period_h = 0;
  std::vector<TeamMixEntry> mix;
};

// Reads `teams_workload` (a list; `path` names it in errors) against the scenario's tenancy: every stream
// names a leaf queue (or a team with one leaf) and priority classes of the tenancy.
Result<std::vector<TeamStream>> ParseTeamStreams(const YAML::Node& list, std::string_view source,
                                                 std::string_view path, const TenancyConfig& tenancy);

// The jobs of one seed over [0, horizon_s), ids 1.. in submit order.
std::vector<TraceJob> GenerateTeamJobs(const std::vector<TeamStream>& streams, int64_t horizon_s,
                                       uint64_t seed);

// Runs a multi-tenant scenario (Scenario::IsMultiTenant) for `policies` over its seeds.
Result<nlohmann::json> RunMultiTenantScenario(const Scenario& s, const std::vector<std::string>& policies,
                                              const Catalog& catalog,
                                              std::vector<std::string>* decisions = nullptr);

// Jain's fairness index of x (1 = equal; 1/n = one takes all). Empty or all-zero input gives 1.
double JainIndex(const std::vector<double>& x);
// p-th percentile (0..100) by nearest rank; 0 for an empty sample.
double NearestRankPercentile(std::vector<double> v, double p);

}  // namespace tessera
