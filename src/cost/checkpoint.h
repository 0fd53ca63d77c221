#pragma once
// Checkpoint interval and the expected cost of failures (spot reclaims) for checkpointable training.
// All times in seconds. Pure functions.
//
// Model: failures (reclaims) arrive as a Poisson process with rate lambda = 1 / MTBF. A job writes a
// checkpoint every `interval` seconds of work, each costing `checkpoint_cost` seconds, and restarting
// costs `restart_cost` seconds. If the reclaim notice is at least the checkpoint cost, the job
// checkpoints on notice and loses no work; otherwise it loses the work since its last checkpoint,
// on average half an interval (first-order model of Young 1974 / Daly 2006).

#include <vector>

namespace tessera {

// Young/Daly first-order optimum: sqrt(2 * checkpoint_cost * mtbf). +inf when mtbf is +inf (never
// reclaimed); 0 when checkpoint_cost is 0. REQUIRES: checkpoint_cost >= 0, mtbf > 0.
double YoungDalyIntervalS(double checkpoint_cost_s, double mtbf_s);

// The same from a reclaim rate per hour (MTBF = 3600 / rate seconds); rate <= 0 gives +inf.
double YoungDalyIntervalForRateS(double checkpoint_cost_s, double reclaims_per_hour);

// Daly's higher-order estimate, sqrt(2 C M) * (1 + sqrt(C / 2M) / 3 + C / 18M) - C for C < 2M, else M.
// Reported for comparison; the default interval is the first-order one.
double DalyIntervalS(double checkpoint_cost_s, double mtbf_s);

// One node a gang runs on: how often it is reclaimed and how much warning a reclaim gives.
struct NodeReclaim {
  double rate_per_hour = 0;
  double notice_s = 0;
};

// Reclaims per hour that cost a gang work. A reclaim of any of its nodes stops the whole gang, so the
// rates of its distinct nodes add up (Poisson processes superpose). A node whose notice covers the
// checkpoint write (notice >= checkpoint cost) costs no work: the job checkpoints on notice, so the node
// is left out unless `count_covered` (periodic checkpoints there anyway, e.g. against other failures).
// The Young/Daly interval of the gang is YoungDalyIntervalForRateS(C, this).
double GangLossRatePerHour(const std::vector<NodeReclaim>& nodes, double checkpoint_cost_s, bool count_covered);

struct CheckpointCostModel {
  double interval_s = 0;         // work between checkpoints (+inf: never checkpoint)
  double checkpoint_cost_s = 0;  // time to write one checkpoint
  double restart_cost_s = 0;     // time to resume from a checkpoint after a reclaim
  double mtbf_s = 0;             // mean time between reclaims (+inf: never)
  double notice_s = 0;           // reclaim notice
};

// True when a checkpoint fits inside the reclaim notice (the job checkpoints on notice).
bool CheckpointsOnNotice(const CheckpointCostModel& m);

// Expected work lost per reclaim, in seconds: 0 when the job checkpoints on notice, else interval / 2
// (+inf interval: half the MTBF is not defined, so the whole expected run to a reclaim, mtbf).
double ExpectedLostWorkPerReclaimS(const CheckpointCostModel& m);

// Expected wasted fraction of wall time (first order): checkpoint_cost / interval for writing
// checkpoints, plus (lost work + restart) / mtbf for reclaims. Minimised near the Young/Daly interval.
double ExpectedWasteFraction(const CheckpointCostModel& m);

}  // namespace tessera
