#pragma once
// The control-loop core every driver shares (docs/architecture.md "Control loop"): it owns the allocation
// state (ClusterState), the job table and each queue's decayed usage; it builds the CycleInput from them,
// applies the cycle's Plan, and moves jobs through their phases when the driver reports what happened
// (a run started, completed, failed). Time is passed in; randomness comes in with the jobs (e.g. the time
// limit factor). It performs no side effect of its own: every change is reported back (the applied actions
// of a plan, the holds released) so each driver does its own: the simulator schedules events and records
// metrics; the service writes its store and calls its executor.
//
// A driver's loop:  Submit arrivals -> Decide(now) -> Apply(plan, now, observer) -> for each bind, when the
// job really runs, Start(job, now, efficiency) -> Complete / Fail / Interrupt + Requeue as runs end.

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "control/demand_learner.h"
#include "control/job_table.h"
#include "control/usage.h"
#include "control/workload_learner.h"
#include "sched/cluster_state.h"
#include "sched/cycle.h"
#include "sched/policy.h"
#include "sched/preemption.h"
#include "sched/take.h"

namespace tessera {

struct LoopOptions {
  CycleOptions cycle;
  // The cycle sees expected ends: pending jobs' durations (remaining work times their time limit factor),
  // running jobs' expected ends, for reservations, backfill and estimates.
  bool expected_ends = false;
  // A running job's expected end follows its actual progress rate (its end_s), as a time limit fitted to the
  // job would say; false = from its ideal remaining work.
  bool running_end_at_progress = false;
  // Per-node drain times (latest expected end of the work there) go into the CycleInput as a placement hint.
  bool drain_times = false;
  // A job preempted with nobody waiting for its capacity holds its grants this long (kTerminating) before
  // it returns to the queue; 0 = it returns at once.
  int64_t termination_grace_s = 0;
  // Feed each queue's decayed usage (half-life cycle.usage_half_life_s) to the cycle; false = zeros.
  bool track_usage = false;
  // Admission headroom learned from the demand drivers observe (ObserveDemand; demand_learner.h), carried to
  // the policy by the cycle's snapshot.
  DemandLearning demand_learning;
  // The workload's typical tasks learned from submissions (workload_learner.h), carried to the policy by
  // the cycle's snapshot.
  WorkloadLearning workload_learning;
};

// A hold that ended (completion, failure, preemption): what the job gave back.
struct Released {
  JobSlot job = kNoSlot;
  JobPhase from = JobPhase::kBound;  // the phase it left
  int64_t start_s = -1;              // its run's start (meaningful when from == kRunning)
  int64_t last_checkpoint_s = -1;
  int64_t held_milli = 0;
  std::vector<TaskPlacement> tasks;  // the grants it gave back
};

// One action of a plan, as applied (reported in plan order, while applying).
struct Applied {
  ActionKind kind = ActionKind::kBind;
  JobSlot job = kNoSlot;
  bool conflict = false;        // not applicable (unknown job, wrong phase, grants no longer fit)
  bool done = false;            // it changed something (a checkpoint of a job not running does nothing)
  // kBind: when the job may take its capacity (after the victims' grace period), and its grants that switch
  // MIG mode or create/destroy an instance (the driver's reconfiguration delay).
  int64_t granted_s = -1;
  bool first_bind = false;
  int64_t backfill_until_s = -1;  // kBind: Action::backfill_until_s (let into a reservation starting then)
  int64_t reserve_start_s = -1;   // kReserve: when the reservation expects its gang to start
  int mig_mode_gpus = 0;
  int mig_instance_gpus = 0;
  // kPreempt: the grants it held, when the work it lost began (-1 = it was not running), and either the
  // release (it went back to the queue) or, when it holds its grants for the grace period, vacate_s.
  std::vector<TaskPlacement> tasks;
  int64_t lost_since_s = -1;
  int64_t vacate_s = -1;
  std::optional<Released> released;
  // kRepartition: GPUs reconfigured and GPUs whose change failed.
  int gpus_reconfigured = 0;
  int gpus_failed = 0;
};

// When a run of `work_s` ideal seconds (-1 = forever) started at `now` at `efficiency` ends (-1 = never).
int64_t RunEnd(int64_t now, double work_s, double efficiency);

class ControlLoop {
 public:
  using Observer = std::function<void(const Applied&)>;

  ControlLoop(ClusterState state, std::vector<QueueConfig> queues, LoopOptions options);

  ClusterState& state() { return state_; }
  const ClusterState& state() const { return state_; }
  JobTable& jobs() { return jobs_; }
  const JobTable& jobs() const { return jobs_; }
  const std::vector<QueueConfig>& queues() const { return queues_; }
  const LoopOptions& options() const { return options_; }
  const QueueUsage& usage() const { return usage_; }
  // Time limits learned online: the mean, over jobs completed so far, of ideal run time / time limit (each
  // job's 1 / time_limit_factor), once kLearnAfter have completed (1 before). The cycle plans with each job's
  // limit times this: users who over-estimate by a factor are read at the factor the cluster has observed.
  // The geometric mean (the typical ratio, which a few extreme over-estimates do not drag down).
  double LimitScale() const {
    return limit_n_ >= kLearnAfter ? std::exp(limit_sum_ / static_cast<double>(limit_n_)) : 1.0;
  }
  static constexpr int64_t kLearnAfter = 20;
  // A shared unit's summed real demand / summed declared demand over one interval, as the driver measured it
  // (`sensitive`: the unit holds a latency-sensitive replica). Cycles after it admit sharers with the
  // headroom learned from these (DemandLearner), once enough were seen.
  void ObserveDemand(double ratio, bool sensitive) { demand_.Observe(ratio, sensitive); }
  const DemandLearner& demand() const { return demand_; }
  // The typical tasks learned from the jobs submitted so far (each Submit is one observation).
  const WorkloadLearner& workload() const { return workload_; }

  // A queue added, or a queue's configuration changed, while the driver runs (e.g. a team created through an
  // API). AddQueue returns its index.
  int AddQueue(QueueConfig q);
  void UpdateQueue(int q, QueueConfig config) { queues_[q] = std::move(config); }
  // History carried over from a store: each queue's decayed usage as of `at_s` (queues beyond `usage` start
  // at zero). REQUIRES: no job holds capacity yet.
  void RestoreUsage(const std::vector<double>& usage, int64_t at_s);
  // Each queue's usage decayed and accrued up to `now` (e.g. before a driver keeps it).
  void AdvanceUsage(int64_t now) { usage_.AdvanceTo(now); }

  // A job the driver knows (kFuture). Returns its slot.
  JobSlot Add(ControlJob job) { return jobs_.Add(std::move(job)); }
  // The job enters the queue at `now` (at the back of the queue order); its request is one observation of
  // the workload.
  void Submit(JobSlot j, int64_t now);

  // Taking job j's capacity at `now` outside a cycle (a drain, a repartition's preemption): the actions the
  // one rule (sched/take.h) gives, for the job itself (its capacity is taken at once), appended to `plan`.
  void AppendTakeOf(JobSlot j, int64_t now, std::string reason, Plan* plan) const;

  // The cycle's input for `now`: pending jobs in queue order, holding jobs, queues, decayed usage, drain
  // times, vacating capacity. Advances usage to `now`.
  CycleInput BuildInput(int64_t now);
  // The same into *in, reusing the memory an earlier input there holds (fields all overwritten).
  void BuildInput(int64_t now, CycleInput* in);
  // Grows *in's job lists to hold `pending` and `running` jobs with their memory written once, so that a
  // BuildInput into *in (under a driver's lock) writes into mapped pages: a page's first touch is a fault
  // (about 16 us each on a virtual machine, hundreds of them for a queue of 10,000 jobs).
  static void ReserveInput(CycleInput* in, size_t pending, size_t running);
  // BuildInput + RunCycle.
  Plan Decide(int64_t now, const Policy& policy);
  // Applies a plan's actions in order; `observer` (may be empty) sees each as soon as it is applied.
  // Returns them all. Jobs bound leave the pending order at the end.
  std::vector<Applied> Apply(const Plan& plan, int64_t now, const Observer& observer = {});

  // A bound job starts running at `now` at `efficiency`; returns its expected completion (-1 = none).
  int64_t Start(JobSlot j, int64_t now, double efficiency);
  // A running job completes: releases its grants (kDone).
  Released Complete(JobSlot j, int64_t now);
  // A bound or running job fails for good (e.g. out of memory at start): releases (kFailed).
  Released Fail(JobSlot j, int64_t now);
  // A bound or running job stops early (preemption, node failure): a running job keeps only the work up to
  // its last checkpoint (one that never checkpointed restarts from scratch). Returns when the lost work
  // began, or -1 if it was not running. The job still holds its grants: Requeue or Terminate next.
  int64_t Interrupt(JobSlot j);
  // A job that was already running when the driver (re)started, from its recorded grants (without MIG
  // change flags): it takes them, first creating any MIG instance they name that the state lacks, and runs
  // since `start_s` at `efficiency`; its usage counts from `now`. An error (the grants no longer fit) names
  // the problem and changes nothing of the job.
  Status Resume(JobSlot j, const std::vector<TaskPlacement>& tasks, int64_t start_s, int64_t now, double efficiency);
  // The job leaves for good before it ends (e.g. cancelled): a pending job leaves the queue order, a holding
  // one releases its grants (returned; job -1 when it held none). It ends in kFailed.
  Released Withdraw(JobSlot j, int64_t now);
  // Holds its grants for the grace period, doing no work (kTerminating); Requeue at the end.
  void Terminate(JobSlot j);
  // Releases its grants and puts it back in the queue at its submit-time position (kPending).
  Released Requeue(JobSlot j, int64_t now);

  // The cycle's preemption rule (sched/preemption.h MayPreempt) asked outside a cycle (a drain, an
  // extender's victims): whether bound or running job `victim` may be preempted now for pending job
  // `for_job`, with what each queue holds now (its queue within its guarantee with `for_job`; the victim's
  // queue borrowing). kNone when `victim` does not hold grants or `for_job` is not pending.
  PreemptKind MayPreemptFor(JobSlot victim, JobSlot for_job, int64_t now) const;
  // The same for a job the loop does not hold yet: `request` in leaf queue `queue`.
  PreemptKind MayPreemptFor(JobSlot victim, const Request& request, int queue, int64_t now) const;

 private:
  Applied ApplyBind(const Action& a, int64_t now);
  Applied ApplyPreempt(const Action& a, int64_t now);
  Applied ApplyRepartition(const Action& a);
  // The job takes `tasks` (REQUIRES: they fit) and holds them from `now` (kBound).
  void Hold(JobSlot j, const std::vector<TaskPlacement>& tasks, int64_t now);
  void EnsureInstances(const std::vector<TaskPlacement>& tasks);
  Released ReleaseHold(JobSlot j, int64_t now);
  void AddRunning(const ControlJob& j, int64_t now, CycleInput& in, size_t* used, std::vector<int64_t>* drain) const;

  ClusterState state_;
  std::vector<QueueConfig> queues_;
  LoopOptions options_;
  JobTable jobs_;
  QueueUsage usage_;
  DemandLearner demand_;
  WorkloadLearner workload_;
  double limit_sum_ = 0;  // sum over completed jobs of log(1 / time_limit_factor)
  int64_t limit_n_ = 0;
};

}  // namespace tessera
