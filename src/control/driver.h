#pragma once
// Driver: the rules every driver of the control loop follows, in one place, so that what the simulator
// measures is what the service (and later the Kubernetes scheduler) does. The simulator and the service
// own one each; they differ only in where arrivals come from, where the cycle's decision runs and what they
// record (docs/architecture.md "Driver rules").
//
// The rules:
//  - An instant (RunInstant): backend events due at `now` (ends, failures, refused launches), then due
//    timers (launches after their start delay, vacates after a termination grace period), then the owner's
//    arrivals and capacity changes; then, when something changed and jobs wait, a cycle; with backlog
//    arrivals, further cycles while a cycle binds and more jobs arrive (at most max_cycles_per_instant).
//  - A bind launches after its start delay: the MIG reconfiguration it needs (instance create/destroy, or a
//    MIG mode switch), the owner's extra delay (a restart from a checkpoint) and the victims' grace period.
//    The members of a group (a job's replicas or gang members held as separate jobs) hold their grants
//    until every member is bound and due, then launch together.
//  - A preemption takes the whole group: every member holding capacity is interrupted; the run is stopped
//    with the termination grace period (checkpoints are the cycle's own actions, sent to the backend).
//  - A launch the backend refuses fails the job for good; a launch that fails later, or a run interrupted
//    through no fault of its own, goes back to the queue; a run that ends completes the job.
//  - A cancel withdraws the whole group (a pending job leaves the queue, a running one is stopped).
//  - A bind or repartition that changes a GPU's MIG layout sends the new layout to the backend
//    (Reconfigure); a failed reconfiguration cordons the GPU (its layout is unknown) until it is uncordoned.
//  - Every start, preemption, end, failure and cancel is recorded as a Decision when recording is on.
// Time is passed in; the driver reads no clock and performs no I/O besides its Backend calls.

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "control/backend.h"
#include "control/loop.h"
#include "sched/policy.h"

namespace tessera {

// The launch of slot `j` as `loop` holds it now: its epoch, grants, work left, key and node names.
LaunchSpec LaunchSpecOf(const ControlLoop& loop, JobSlot j);

class Driver;

struct DriverOptions {
  // A bind whose grants create or destroy MIG instances launches this much later; one that switches MIG
  // mode waits mig_mode_delay_s (Ampere resets the GPU).
  int64_t mig_instance_delay_s = 30;
  int64_t mig_mode_delay_s = 60;
  int max_cycles_per_instant = 64;
  // A cycle at least this often while jobs wait (0 = only when something changed).
  int64_t cycle_every_s = 0;
  // A stopped run (preempted with nobody waiting, cancelled) has this long to end.
  int64_t stop_grace_s = 0;
};

enum class ReleaseCause : uint8_t { kCompleted, kFailed, kLaunchRefused, kLaunchFailed, kInterrupted, kPreempted,
                                    kVacated, kCancelled };

enum class DecisionKind : uint8_t { kStart, kPreempt, kEnd, kFail, kCancel };
const char* DecisionKindName(DecisionKind k);

// One decision of the loop, for the record (group = the group's first member).
struct Decision {
  int64_t t = 0;
  JobSlot group = kNoSlot;
  DecisionKind kind = DecisionKind::kStart;
  std::vector<TaskPlacement> tasks;  // kStart: every member's grants, in member order (without MIG flags)
};

// What the driver's owner learns as it happens (the simulator's metrics, the service's store and views).
class DriverListener {
 public:
  virtual ~DriverListener() = default;
  // Every action of a plan as the loop applied it, before the driver acts on it.
  virtual void OnApplied(const Applied& a, int64_t now) {}
  // Extra delay before a bound job launches (e.g. a restart from its checkpoint).
  virtual int64_t ExtraStartDelay(JobSlot j, int64_t now) { return 0; }
  // The job was launched and runs (as far as the loop knows) at `efficiency`; `in_flight`: the backend
  // confirms later (kStarted).
  virtual void OnStarted(JobSlot j, int64_t now, double efficiency, bool in_flight) {}
  // A hold ended; `lost_since_s` (kInterrupted, kPreempted) is when the work it lost began (-1 = none).
  virtual void OnReleased(const Released& r, int64_t now, ReleaseCause cause, int64_t lost_since_s) {}
  // An asynchronous backend's report that is not a change of the loop (started, stopped, checkpointed,
  // a failed reconfiguration).
  virtual void OnBackendEvent(const BackendEvent& e) {}
};

// What one instant takes from its owner.
class InstantSource {
 public:
  virtual ~InstantSource() = default;
  // Backend events and timers due at `now` (a driver with a lock takes it here).
  virtual bool Due(Driver& driver, int64_t now);
  // Jobs waiting in the queue.
  virtual size_t Waiting() const = 0;
  // Jobs arriving at `now` are submitted; returns whether any did.
  virtual bool Arrive(int64_t now) = 0;
  // Backlog arrivals: jobs submitted while fewer than the depth wait; returns how many. Only called when
  // backlog() is true.
  virtual int ReleaseBacklog(int64_t now) { return 0; }
  virtual bool backlog() const { return false; }
  // Capacity changes of the owner (tiers, spot reclaims) applied at `now`; returns whether any happened.
  virtual bool External(int64_t now) { return false; }
  // One cycle at `now` (decide and ApplyPlan); returns the jobs bound.
  virtual int Cycle(int64_t now) = 0;
};

class Driver {
 public:
  // `loop`, `backend` and `listener` (may be null) must outlive the driver.
  Driver(ControlLoop* loop, Backend* backend, DriverOptions options, DriverListener* listener);

  const DriverOptions& options() const { return options_; }
  ControlLoop& loop() { return *loop_; }
  // Members launched together (each job is its own group until set). REQUIRES: not yet bound.
  void SetGroup(const std::vector<JobSlot>& members);
  std::vector<JobSlot> GroupOf(JobSlot j) const;

  // The earliest time a timer or the backend needs control; INT64_MAX = none.
  int64_t NextEventS() const;
  // The next instant after `now` given the owner's next own time: with jobs waiting, at most
  // cycle_every_s away (then *tick is set). `horizon_s` > 0 bounds idle ticking when nothing else is due.
  int64_t NextInstant(int64_t now, int64_t owner_next_s, int64_t horizon_s, bool* tick) const;
  // One instant (see the rules above); returns whether anything changed.
  bool RunInstant(int64_t now, bool tick, InstantSource& source);
  // Backend events and timers due at `now`; returns whether anything changed.
  bool HandleDue(int64_t now);

  // Applies a plan (decided anywhere, e.g. off a driver's lock) with the rules; returns the binds.
  int ApplyPlan(const Plan& plan, int64_t now);
  // Decide with `policy` and ApplyPlan; the plan goes to *plan_out when given.
  int CycleOnce(int64_t now, const Policy& policy, Plan* plan_out = nullptr);
  // The group of `j` leaves for good: pending members leave the queue, holding ones are stopped.
  void Cancel(JobSlot j, int64_t now, std::string_view reason);

  void set_recording(bool on) { recording_ = on; }
  const std::vector<Decision>& decisions() const { return decisions_; }
  // Takes the decisions recorded so far (the record starts empty again).
  std::vector<Decision> TakeDecisions();

 private:
  enum class TimerKind : uint8_t { kStart = 2, kVacate = 4 };
  struct Timer {
    int64_t at = 0;
    TimerKind kind = TimerKind::kStart;
    JobSlot job = kNoSlot;
    uint32_t epoch = 0;
    uint64_t seq = 0;
    bool operator>(const Timer& o) const;
  };

  void OnApplied(const Applied& a, int64_t now);
  void OnBound(const Applied& a, int64_t now);
  void OnPreempted(const Applied& a, int64_t now);
  void PreemptRestOfGroup(JobSlot j, int64_t now);
  void Ready(JobSlot j, int64_t now);
  bool IsReady(JobSlot j) const;
  void ClearReady(JobSlot j);
  void Launch(JobSlot j, int64_t now);
  bool OnBackend(const BackendEvent& e, int64_t now);
  bool OnBackendReport(const BackendEvent& e);
  void Reconfigure(const Action& a, int64_t now);
  void Requeued(JobSlot j, int64_t now, ReleaseCause cause);
  void Record(int64_t t, JobSlot j, DecisionKind kind, std::vector<TaskPlacement> tasks = {});
  void PushTimer(int64_t at, TimerKind kind, JobSlot j);

  ControlLoop* loop_;
  Backend* backend_;
  DriverOptions options_;
  DriverListener* listener_;
  DriverListener null_listener_;
  std::vector<Timer> timers_;  // a min-heap by (at, kind, seq)
  uint64_t next_seq_ = 0;
  std::vector<int32_t> group_of_;             // by slot: index into groups_, -1 (or beyond) = alone
  std::vector<std::vector<JobSlot>> groups_;
  std::vector<uint8_t> ready_;                // by slot: bound and its start delay passed
  bool recording_ = false;
  std::vector<Decision> decisions_;
};

}  // namespace tessera
