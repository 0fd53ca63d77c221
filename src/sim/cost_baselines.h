#pragma once
// Cost baselines of a scenario with capacity tiers (docs/cost.md "Baselines and the saving
// decomposition"): the same job stream simulated again, under the same routing and SLO figures, on
//   on_demand_only:     every node moved to the on-demand pool of its GPU kind (elastic, autoscaled;
//                       latency-sensitive work too, waiting for the provisioning delay like the rest);
//   reserved_on_demand: spot nodes moved to on-demand, reserved and owned capacity kept (no spot), which
//                       isolates what spot itself saves.
// Each run of the scenario then carries, per seed:
//   baselines.<baseline>.<figure>            the baseline's total_cost, idle, inference delays, completion;
//   cost_saving_vs_on_demand                 1 - total_cost / baselines.on_demand_only.total_cost;
//   cost_saving_vs_reserved_on_demand        the same against reserved_on_demand;
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

enum class CostBaseline { kOnDemandOnly, kReservedOnDemand };
const char* CostBaselineName(CostBaseline b);  // "on_demand_only", "reserved_on_demand"

// The scenario with its cluster's pools and its tiers changed for the baseline (no reclaims, baselines
// off). Error when a GPU kind to move has no on-demand pool in the scenario's price book.
Result<Scenario> BaselineScenario(const Scenario& s, const Catalog& catalog, CostBaseline b);

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
