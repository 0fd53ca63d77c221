#pragma once
// Capacity tiers in the time-based simulator (issue 5; docs/cost.md "Simulated tiers").
//
// A scenario's `tiers:` section (ParseTierConfig) gives each node pool of the cluster its tier dynamics
// (defaults from the PriceBook pool of the same name: provisioning delay, reclaim notice and rate), the
// checkpoint model, routing and autoscaling options. MakeTierHook builds the per-run SimHook that:
//   - routes requests by tier (sim/tier_routing.h): latency-sensitive work only on reserved/owned;
//   - autoscales elastic pools (sim/autoscale.h): acquire on queue demand after a provisioning delay,
//     release after an idle time;
//   - reclaims spot nodes: a Poisson process per node while it is up (rate per node-hour) and/or an
//     explicit reclaim trace; at the notice the node drains and every checkpointable job on it checkpoints
//     when the notice is at least the checkpoint cost; at the reclaim its jobs are preempted (requeued,
//     resumed from the last checkpoint on any allowed capacity after a restart cost);
//   - checkpoints periodically: interval per job = the configured one, else Young/Daly sqrt(2 C MTBF) with
//     MTBF = 1 / (sum of the reclaim rates of the gang's nodes), leaving out nodes whose notice covers the
//     write unless `periodic_when_notice_covers` (no periodic checkpoints off spot); each checkpoint stops
//     progress for C seconds (progress factor T / (T + C));
//   - records every hold and node interval into the cost Ledger (sim/ledger_bridge.h) and, at the end,
//     evaluates the CostModel: RunResult::extra gets total_cost, the cost_breakdown.* parts (CostBreakdown),
//     spot_reclaims, lost_gpu_hours, inference latency figures, ... (the baselines and the saving:
//     sim/cost_baselines.h)
// Deterministic for a given seed.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/status.h"
#include "cost/cost_model.h"
#include "cost/pricebook.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace tessera {

struct TierPoolConfig {
  std::string pool;                  // the nodes' `pool` name; must be a PriceBook pool
  Tier tier = Tier::kReserved;
  bool elastic = false;              // nodes absent until acquired (default: on-demand and spot)
  int64_t provisioning_delay_s = 0;
  int64_t reclaim_notice_s = 0;
  double reclaim_rate_per_hour = 0;  // per node-hour while up (spot)
  int64_t idle_release_s = 600;      // elastic: an up node with no job for this long is released
  std::vector<NodeId> nodes;
};

struct ReclaimTraceEvent {
  int64_t time_s = 0;
  std::string pool;
};

struct TierConfig {
  PriceBook book = PriceBook::Default();
  std::vector<TierPoolConfig> pools;   // one per pool found in the cluster, in first-node order
  double checkpoint_cost_s = 60;       // C: time to write one checkpoint
  double restart_cost_s = 120;         // time to resume from a checkpoint (GPUs held, no progress)
  double checkpoint_interval_s = 0;    // 0 = Young/Daly from C and the gang's loss rate (GangLossRatePerHour)
  // Periodic checkpoints also on nodes whose reclaim notice covers the write (default: none there, the
  // job checkpoints on notice instead).
  bool periodic_when_notice_covers = false;
  bool non_checkpointable_on_spot = false;
  // Latency-sensitive work may also run on (and autoscale) on-demand capacity: the on-demand-only
  // baseline (sim/cost_baselines.h), where there is no reserved capacity.
  bool latency_sensitive_on_demand = false;
  bool baselines = true;               // RunScenario also simulates the cost baselines (cost: {baselines})
  // The inference SLO every cost baseline is held to (cost: {inference_slo_p99_wait_s}): p99 queue wait of
  // latency-sensitive work, in every seed; a baseline scales out until it meets it (sim/cost_baselines.h).
  double inference_slo_p99_wait_s = 60;
  bool autoscale = true;               // policy "queue" (true) or "none"
  std::vector<ReclaimTraceEvent> reclaim_trace;
  CostOptions cost;
};

// Parses `tiers:` (schema in docs/cost.md "Simulated tiers"); `dir` resolves the `prices:` file. Errors
// name the source, the line and the field.
Result<TierConfig> ParseTierConfig(const YAML::Node& node, const std::string& where, const std::string& dir,
                                   const Cluster& cluster);

// The per-run hook (one per Simulate call; not thread-safe, not reusable).
std::unique_ptr<SimHook> MakeTierHook(std::shared_ptr<const TierConfig> config, const Cluster& cluster,
                                      const Catalog& catalog, const std::vector<TraceJob>& jobs, uint64_t seed);

}  // namespace tessera
