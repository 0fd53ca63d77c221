#pragma once
// Aggregation of simulator runs over seeds into the JSON and CSV that `tessera simulate run` prints
// (docs/simulator.md "Metrics"). A figure over seeds is {"mean", "min", "max"}; queueing delays and JCTs
// are pooled over seeds and summarised as mean / p50 / p99.

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sim/scenario.h"
#include "sim/simulator.h"

namespace tessera {

struct Spread {
  double mean = 0, min = 0, max = 0;
};
Spread SpreadOf(const std::vector<double>& v);
// Nearest-rank percentile (q in [0, 1]) of unsorted values; 0 for none.
double Percentile(std::vector<double> v, double q);

// Served-versus-demanded mix of GPU requests by class for one run: the largest absolute difference
// between a class's share of GPU requests that arrived in the window (demanded; backlog runs: released
// into the backlog) and its share of GPU requests first bound in the window (served: work that ran,
// completed or still running, whenever it arrived). A sub-GPU replica counts one request, k GPUs k. The two
// counts differ by the change in what waits between the window's ends, so a class whose waiting work grows
// (e.g. 8-GPU gangs piling up in a saturated backlog) shows as under-served.
double MixDeviation(const RunResult& r);

// The per-policy object of the JSON output for runs of one policy over seeds.
nlohmann::json PolicySummary(const std::vector<RunResult>& runs);
// {"scenario", "gpus", "seeds", "same_cycle", "bound", "results": [...]} or, for sweeps, {"sweep": [{...,
// "bound", "results": [...]}]}. Each result carries its "cycle" and its "distance_to_bound" (bound - its
// utilisation, per seed).
nlohmann::json CycleJson(const CycleSpec& c);
// {"gpu_utilization": spread, "offered_compute": spread, "limit": {constraint: seeds}} of a variant's bounds.
nlohmann::json BoundJson(const VariantOutcome& v);
// Per seed: the bound minus the run's utilisation.
std::vector<double> DistanceToBound(const VariantOutcome& v, const std::vector<RunResult>& runs);
nlohmann::json OutcomeJson(const ScenarioOutcome& o, bool is_sweep);
// One CSV row per (variant, policy, seed) with the scalar figures.
std::string OutcomeCsv(const ScenarioOutcome& o);

}  // namespace tessera
