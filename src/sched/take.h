#pragma once
// Taking a running job's capacity away: a cycle's preemption, a node's drain, a MIG repartition's drain.
// The one rule every taker follows for checkpoint-before-take (pure): a job that can checkpoint and whose
// last checkpoint (or start) is at least `min_age_s` old gets a checkpoint first, so that a younger one
// is not paid for twice; then the job is preempted.

#include <cstdint>
#include <string>

#include "sched/cycle.h"

namespace tessera {

struct TakeTarget {
  JobId job = 0;
  bool checkpointable = false;
  bool running = false;            // running now (only a running job can checkpoint)
  int64_t since_checkpoint_s = 0;  // now - max(run start, last checkpoint)
};

// Appends the take's actions to `plan` (a checkpoint where the rule says, then the preemption, both for
// `for_job`) and returns the preemption, for the caller to complete (units, reclaim).
Action& AppendTake(const TakeTarget& t, JobId for_job, std::string reason, int64_t min_age_s, Plan* plan);

}  // namespace tessera
