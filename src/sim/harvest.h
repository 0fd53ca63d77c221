#pragma once
// The opportunistic tier (docs/simulator.md "Harvesting idle compute"): preemptible, checkpointable
// single-GPU training waiting in the queue runs on compute that an inference replica holds but does not use,
// as a second, capped MPS client of the replica's MIG instance or whole GPU, and gives it back within the
// owner's SLO:
//  - throttling: the harvester's cap follows the owner's demand (a framework-level kernel throttle as in
//    AntMan, OSDI'20), so the owner's p99 slowdown under the calibrated MPS model (sched/sharing.h) stays
//    within `slo_margin` x its SLO; after a rise of demand the old cap holds for `react_s` first;
//  - eviction: when the owner's unit closes, a second replica joins it, or the scheduler binds the job for
//    real, the harvester stops and loses the work since its last checkpoint; a newcomer that cannot fit
//    beside the harvester's memory waits the termination grace period (counted above its SLO);
//  - costs: periodic checkpoints (writing one stops progress), a restore before progress resumes, the lost
//    work; all reported as lost compute and never counted as utilisation.
// Pure helpers here; the simulator (simulator.cc) keeps the harvesters.

#include <cstdint>

#include "sched/sharing.h"

namespace tessera {

struct HarvestOptions {
  bool enabled = false;
  // Kubernetes pod termination: terminationGracePeriodSeconds defaults to 30 s (Pod lifecycle docs).
  int64_t grace_s = 30;
  // Periodic checkpoints of a harvester, the time to write one and to restore from one; the write and
  // restore figures are the capacity tiers' (sim/spot.h, docs/cost.md "Simulated tiers").
  int64_t checkpoint_every_s = 1800;
  int64_t checkpoint_cost_s = 60;
  int64_t restore_s = 120;
  // How long the old cap holds after the owner's demand rises (the throttle's reaction time).
  int64_t react_s = 5;
  // The owner's p99 slowdown is kept within this share of its SLO.
  double slo_margin = 0.9;
  // A unit is harvested only if its cap at the owner's declared demand reaches this (thousandths of a GPU).
  int min_cap_milli = 50;
  // Also harvest compute nobody holds: free whole GPUs and idle MIG instances (reserved for a gang that waits
  // for more GPUs to drain, or fragments), until a bind or a repartition takes them.
  bool free_compute = true;
  // Gangs of up to this many GPUs harvest too, all on one node, at their slowest place's pace times their
  // step-time efficiency there (1 = single-GPU jobs only). Measured on the mixed scenario, 8 raised tessera's
  // utilisation to 0.736 but started training ahead of its share (mix deviation 0.021 > 0.02), so 1.
  int gang_max_gpus = 1;
  // Units whose owner is latency-sensitive (production inference) are left alone unless true.
  bool sensitive_units = false;
};

// `o` under MPS (the mode a harvested unit runs in: a capped client beside the owner).
SharingOptions HarvestSharing(SharingOptions o);

// The largest cap (thousandths of a GPU) a harvester may run at on a unit of `capacity_milli` compute whose
// one owner demands `owner_milli` now, so that the owner's p99 slowdown with the harvester as a second MPS
// client stays within `slo_limit`; 0 when no cap does (demand at capacity, or contention alone too high).
int HarvestCapMilli(const SharingOptions& o, int owner_milli, int capacity_milli, double slo_limit);

// The owner's p99 slowdown with a harvester at `cap_milli` (1 when the cap is 0: the harvester is paused).
double HarvestedOwnerSlowdown(const SharingOptions& o, int owner_milli, int cap_milli, int capacity_milli);

// The useful compute (thousandths of a GPU) a harvester capped at `cap_milli` turns into its own progress
// beside an owner demanding `owner_milli`: the cap over the MPS contention factor of two busy clients.
double HarvestUsefulMilli(const SharingOptions& o, int owner_milli, int cap_milli, int capacity_milli);

}  // namespace tessera
