#pragma once
// Multi-tenant scenarios (issue 4): a scenario file with a `tenancy` section (docs/scheduling.md format) and
// `teams_workload` (per-team Poisson arrivals with on/off bursts and a job mix). Each (policy, seed) runs
// twice on the same jobs, with borrowing and without, and reports per policy:
//   production_inference_wait_p99_s  p99 of first-bind - submit over production-inference jobs;
//   guarantee_wait_p99_s             p99 of first-bind - submit over jobs that fit their queue's guarantee
//                                    when they arrived (the time from demand within a guarantee to placement);
//   jain_fairness                    Jain's index over teams of (GPU allocation / fair entitlement), where the
//                                    entitlement is the team's guarantee plus its weight share of the rest;
//   gpu_utilization / gpu_utilization_no_borrowing and borrowing_gain_points;
//   preemptions, lost_gpu_hours (work lost since the last checkpoint);
//   queues.<leaf queue>.gpu_allocation / wait_mean_s   the queue's share of the cluster and its jobs' mean
//                                    wait to first bind (unplaced: to the horizon), over the window.
// Figures are means over seeds (with min/max).

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "model/catalog.h"

namespace tessera {

// True when the scenario text has a top-level `teams_workload` section.
bool IsMultiTenantScenario(const std::string& text);

// Parses multi-tenant scenario text without running it (`dir` resolves the cluster file); the error names
// the source, the line and the field.
Status CheckMultiTenantScenario(std::string_view text, const std::string& source, const std::string& dir,
                                const Catalog& catalog);

// Loads and runs a multi-tenant scenario file; `policies` empty = the scenario's.
Result<nlohmann::json> RunMultiTenantScenario(const std::string& path, const std::vector<std::string>& policies,
                                              const Catalog& catalog);

// Jain's fairness index of x (1 = equal; 1/n = one takes all). Empty or all-zero input gives 1.
double JainIndex(const std::vector<double>& x);
// p-th percentile (0..100) by nearest rank; 0 for an empty sample.
double NearestRankPercentile(std::vector<double> v, double p);

}  // namespace tessera
