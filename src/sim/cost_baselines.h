#pragma once
// Cost baselines of a scenario with capacity tiers (docs/cost.md "Baselines and the saving
// decomposition"): the same job stream simulated again, under the same routing, on
//   on_demand_only:        every node on the on-demand pool of its GPU kind, the first `always_on_gpus`
//                          of them kept up for the whole run (paid whether used), the rest elastic;
//   commitments_on_demand: the first `commitment_gpus` on the cheapest 1- or 3-year commitment of their
//                          kind in the price book (reserved tier, paid for the whole run), the rest elastic
//                          on-demand; the level is the one of least mean cost that meets the SLO;
//   reserved_on_demand:    spot nodes moved to on-demand, reserved and owned capacity kept (no spot), which
//                          isolates what spot itself saves.
// Every baseline is held to the scenario's inference SLO (tiers.cost.inference_slo_p99_wait_s): the
// always-on / commitment level grows until the p99 queue wait of latency-sensitive work meets it in every
// seed. Each run of the scenario then carries, per seed:
//   baselines.<baseline>.<figure>            the baseline's total_cost, idle, inference delays, completion,
//                                            inference_p99_wait_s, slo_met (1/0), inference_slo_p99_wait_s;
//   cost_saving_vs_best                      1 - mean total_cost / the mean total_cost of the cheapest
//                                            baseline that met the SLO (over the seeds; the headline);
//   cost_saving_vs_on_demand                 1 - total_cost / baselines.on_demand_only.total_cost;
//   cost_saving_vs_reserved_on_demand        the same against reserved_on_demand (and _commitments_on_demand);
//   saving_decomposition.<part>              baselines.on_demand_only.total_cost - total_cost, by part;
//   saving_vs_reserved_on_demand.<part>      the same against reserved_on_demand.
// The parts (SavingDecomposition) add up to the saving exactly (to float rounding).

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/catalog.h"
#include "sim/scenario.h"
#include "sim/simulator.h"

namespace tessera {

enum class CostBaseline { kOnDemandOnly, kReservedOnDemand, kCommitmentsOnDemand };
// "on_demand_only", "reserved_on_demand", "commitments_on_demand"
const char* CostBaselineName(CostBaseline b);

// The scenario with its cluster's pools and its tiers changed for the baseline (no reclaims, baselines
// off). `level`: nodes kept always on (on_demand_only) or under commitment (commitments_on_demand).
// Error when a GPU kind to move has no on-demand pool in the scenario's price book.
Result<Scenario> BaselineScenario(const Scenario& s, const Catalog& catalog, CostBaseline b, int level = 0);

// Splits baseline_total - total into signed USD parts, from the cost_breakdown.* figures of both runs
// (sim/ledger_bridge.h CostBreakdown): commitment and spot (the discount the run's useful work got on
// committed and spot capacity, less the baseline's), on_demand_discount (the same on on-demand, 0 at list
// price), checkpoints, lost_work, restarts and paid_idle (the baseline's minus the run's: negative when the
// run paid more), work_volume (useful work at list prices, the baseline's minus the run's).
std::map<std::string, double> SavingDecomposition(const RunResult& run, const RunResult& baseline);

// Runs both baselines for the same policies and seeds and adds their figures to every run of `out`.
Status AddCostBaselines(const Scenario& s, const std::vector<std::string>& policies, const Catalog& catalog,
                        ScenarioOutcome* out);

// Text cost table of a tiered scenario: per policy the price date, the totals of the run and the
// baselines, the savings and the decomposition (means over seeds).
std::string CostTable(const ScenarioOutcome& o, const std::string& price_date);

}  // namespace tessera
