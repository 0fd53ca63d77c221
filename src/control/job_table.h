#pragma once
// The job table of the control loop: every job a driver (simulator, service, Kubernetes scheduler) knows,
// with its request, queue, phase, grants and times, plus the pending queue (in queue order) and the set
// of jobs holding capacity. Plain bookkeeping: no clock, no randomness, no allocation state.
//
// Phases: kFuture (known, not yet submitted) -> kPending -> kBound (holds its grants, not yet running:
// reconfiguration, the victims' grace period) -> kRunning -> kDone | kFailed; a bound or running job that is
// preempted or fails goes back to kPending, or first to kTerminating (holds its grants for the termination
// grace period, doing no work) when nobody waits for its capacity.

#include <cstdint>
#include <set>
#include <vector>

#include "control/job_slot.h"
#include "sched/placement.h"
#include "sched/request.h"

namespace tessera {

enum class JobPhase : uint8_t { kFuture, kPending, kBound, kRunning, kTerminating, kDone, kFailed };
const char* JobPhaseName(JobPhase p);

struct ControlJob {
  Request request;                // request.id == EngineId(the job's slot)
  int queue = 0;                  // index into the loop's queues
  bool preemptible = true;        // its priority class allows preemption
  bool checkpointable = false;
  JobPhase phase = JobPhase::kFuture;
  int64_t submit_s = 0;           // when it (last) entered the queue's order; a requeue keeps it
  int64_t first_bind_s = -1;      // -1 = never bound
  int64_t bind_s = -1;            // current (or last) bind
  int64_t start_s = -1;           // current (or last) run start
  int64_t end_s = -1;             // expected completion of the current run at its progress rate; -1 = none
  uint32_t epoch = 0;             // bumped whenever a hold ends (drivers drop events of older epochs)
  std::vector<TaskPlacement> tasks;  // grants while bound, running or terminating
  int64_t held_milli = 0;         // sum of the grants' milli while holding
  int64_t held_units = 0;         // GPU units held (CycleOptions::slice_units), for usage accounting
  double remaining_work_s = -1;   // ideal seconds of work left (at efficiency 1); -1 = unknown (runs forever)
  int64_t last_checkpoint_s = -1; // -1 = none
  double efficiency = 1;          // progress rate of the current run (work seconds per wall second)
  double time_limit_factor = 1;   // the time limit the cycle sees is the remaining work times this
  std::string key;                // the driver's name for it outside the loop (LaunchSpec::key); opaque here
};

class JobTable {
 public:
  // Adds a job in kFuture; returns its slot (and sets request.id to its EngineId).
  JobSlot Add(ControlJob job);
  int32_t size() const { return static_cast<int32_t>(jobs_.size()); }
  bool valid(JobSlot j) const { return j.value() >= 0 && j.value() < size(); }
  ControlJob& operator[](JobSlot j) { return jobs_[j.value()]; }
  const ControlJob& operator[](JobSlot j) const { return jobs_[j.value()]; }

  // Pending jobs in queue order (submit time, then arrival order).
  const std::vector<JobSlot>& pending() const { return pending_; }
  // Jobs holding capacity (bound, running, terminating), by slot.
  const std::set<JobSlot>& holding() const { return holding_; }

  // At the back of the queue order (a new arrival).
  void PushPending(JobSlot j) { pending_.push_back(j); }
  // Before the first pending job submitted after it (a requeued job keeps its place).
  void InsertPendingBySubmit(JobSlot j);
  void ErasePending(const std::vector<JobSlot>& jobs);
  void AddHolding(JobSlot j) { holding_.insert(j); }
  void EraseHolding(JobSlot j) { holding_.erase(j); }

 private:
  std::vector<ControlJob> jobs_;
  std::vector<JobSlot> pending_;
  std::set<JobSlot> holding_;
};

// The factor on a job's remaining work that gives the time limit the cycle plans with: time_limit_s /
// duration_s (both positive), else 1. Every driver computes it so, to the same double.
inline double TimeLimitFactor(int64_t duration_s, int64_t time_limit_s) {
  return duration_s > 0 && time_limit_s > 0 ? static_cast<double>(time_limit_s) / static_cast<double>(duration_s)
                                            : 1.0;
}

}  // namespace tessera
