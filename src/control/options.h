#pragma once
// The one builder of every driver's loop and driver options (the simulator's, the service's, the
// Kubernetes scheduler's), from one description of the setup, so that the same setup decides the same way
// whichever driver runs it.

#include <cstdint>

#include "control/driver.h"
#include "control/loop.h"
#include "sched/cycle.h"

namespace tessera {

struct LoopSetup {
  // A tenancy (queues with guarantees, priorities, preemption, fair share with history) configures the
  // cycle; null = one queue per team with no guarantees and default cycle options.
  const CycleOptions* tenancy_cycle = nullptr;
  int64_t tenancy_cycle_every_s = 10;  // with a tenancy: a cycle at least this often while jobs wait
  // Without a tenancy: conservative backfill with gang reservations (see SimOptions::gang_backfill).
  bool gang_backfill = false;
  int gang_reservations = 32;
  bool backfill_into_reservations = true;  // CycleOptions::backfill_into_reservations
  int64_t gang_aging_s = 0;
  int64_t mig_instance_delay_s = 30;
  int64_t mig_mode_delay_s = 60;
  int max_cycles_per_instant = 64;
  DemandLearning demand_learning;  // the quantiles admission headroom is learned at
  WorkloadLearning workload_learning;  // how the typical tasks are learned from submissions
};

LoopOptions MakeLoopOptions(const LoopSetup& s);
DriverOptions MakeDriverOptions(const LoopSetup& s);

}  // namespace tessera
