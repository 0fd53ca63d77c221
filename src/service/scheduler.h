#pragma once
// Scheduler: the service's one seam to the scheduling engine. It takes the pending jobs and the running
// work of one cycle and returns the Plan (binds with placements, preemptions, reasons and positions for
// every job left pending). Today it calls sched's RunCycle with the `tessera` policy directly.

#include <memory>

#include "sched/cycle.h"
#include "sched/policy.h"

namespace tessera {

class Scheduler {
 public:
  Scheduler();
  // REQUIRES: input.snapshot reflects every job in input.running.
  Plan Decide(const CycleInput& input) const { return RunCycle(input, *policy_); }

 private:
  std::unique_ptr<Policy> policy_;
};

}  // namespace tessera
