#pragma once
// The time-based discrete-event simulator (docs/simulator.md). It is a driver of the control-loop core
// (control/loop.h: the ClusterState, job table, cycle input and plan application every driver shares) with
// an injected clock and an event queue: it runs the production scheduling cycle (sched/cycle.h RunCycle with
// a Policy) at every event time where something changed, has the core apply the Plan's actions (bind,
// preempt, checkpoint, reserve, repartition), and never decides a placement itself.
//
// Metric definitions (docs/simulator.md "Metrics"), all time-averaged over [warmup_s, horizon_s]:
//   gpu_allocation  = sum over held grants of their compute share (whole GPU 1.0, share its milli, MIG
//                     instance its SMs / the GPU's SMs) / number of GPUs;
//   gpu_utilization = sum over running tasks of min(compute the task uses, compute of its grant) x the
//                     gang's step-time efficiency / number of GPUs;
//   effective_training_throughput = sum over running training gangs of GPUs x efficiency (GPU-equivalents
//                     of ideal training progress), with efficiency = compute / step time (sched/step_time.h).
// Deterministic: the same inputs give the same result (no clock, no unseeded randomness, fixed tie order).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "control/demand_learner.h"
#include "control/job_slot.h"
#include "control/workload_learner.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "sched/cycle.h"
#include "sched/policy.h"
#include "sched/sharing.h"
#include "sched/step_time.h"
#include "sim/harvest.h"
#include "sim/trace.h"

namespace tessera {

class ClusterState;
struct Plan;
struct RunResult;

// --- Capacity-tier hook (issue 5; implemented in sim/spot.h). Optional: SimOptions::hook == nullptr
// leaves the simulator exactly as before. The hook may block/unblock capacity (absent nodes of elastic
// pools), ask for checkpoints and preemptions (spot reclaims), and observes every hold for cost. The
// simulator adds the trace to the loop's table in order, so a job's slot is its index in the trace (and
// its actions name it by EngineId(slot)). ---
class SimHook {
 public:
  virtual ~SimHook() = default;
  // The policy the cycle calls (e.g. a tier-routing wrapper around `inner`); must outlive the run.
  virtual const Policy& Route(const Policy& inner) { return inner; }
  // Before the first event.
  virtual Status Begin(ClusterState& state) { return Status::Ok(); }
  // Next time the hook needs control; INT64_MAX = none.
  virtual int64_t NextTimeS() const { return INT64_MAX; }
  // At an event time, after job events and before the cycle; called again while it returns actions
  // (applied like the cycle's: kCheckpoint, kPreempt). Sets *capacity_changed when capacity changed.
  virtual void OnTime(int64_t now, ClusterState& state, Plan* actions, bool* capacity_changed) {}
  // After the cycles of an instant, with the pending jobs (queue order).
  virtual void AfterCycles(int64_t now, ClusterState& state, const std::vector<JobSlot>& pending) {}
  // A job bound to `tasks`; returns an extra start delay in seconds (e.g. restart from a checkpoint).
  virtual int64_t OnBind(JobSlot job, const std::vector<TaskPlacement>& tasks, int64_t now) { return 0; }
  // A job starts running; returns the factor on its progress rate (periodic checkpoint overhead).
  virtual double OnRun(JobSlot job, int64_t now) { return 1.0; }
  // A job releases its hold (completed or not); start_s -1 = never ran; last_checkpoint_s -1 = none.
  virtual void OnRelease(JobSlot job, int64_t now, bool completed, int64_t start_s,
                         int64_t last_checkpoint_s) {}
  // At the end of the run (end_s = last simulated time).
  virtual void End(int64_t end_s, RunResult* result) {}
};

struct SimOptions {
  int64_t horizon_s = 0;        // end of the measured run; 0 = run until every job has finished
  int64_t warmup_s = 0;         // metrics are integrated over [warmup_s, horizon_s]
  // Arrivals: "trace" (each job arrives at its submit_s) or "backlog" (jobs become visible in trace order
  // whenever fewer than backlog_depth wait; a saturating submit throttle, see docs/simulator.md).
  std::string arrivals = "trace";
  int backlog_depth = 64;
  // A bind whose grants create or destroy MIG instances starts this much later (the instance is held
  // meanwhile); one that switches MIG mode waits mig_mode_delay_s (Ampere resets the GPU, 1.6).
  int64_t mig_instance_delay_s = 30;
  int64_t mig_mode_delay_s = 60;
  FabricParams fabric;          // leaf_oversubscription is taken from the cluster unless overridden
  bool fabric_oversubscription_from_cluster = true;
  int64_t sample_every_s = 3600;  // allocation/utilisation time series resolution
  int max_cycles_per_instant = 64;
  SimHook* hook = nullptr;      // capacity tiers (issue 5, sim/spot.h); not owned; nullptr = none
  // Multi-tenant runs (sim/multi_tenant.h): queues, cycle options and a periodic cycle; null = one queue
  // per team with no guarantees and default cycle options.
  struct Tenancy {
    std::vector<QueueConfig> queues;
    std::map<std::string, int> queue_of_team;  // TraceJob::team -> queue index (missing: queue 0)
    std::map<int, PriorityClass> class_by_priority;  // class value -> its class (missing: the defaults)
    CycleOptions cycle;
    int64_t cycle_every_s = 10;  // also run a cycle this often while jobs wait
  };
  std::shared_ptr<const Tenancy> tenancy;
  // Default (non-tenant) runs: each team's queue's weight in the fair share of contended capacity (its
  // QueueConfig::over_quota_weight); a team not named weighs 1.
  std::map<std::string, int> queue_weights;
  // Default (non-tenant) runs: the cycle knows every job's expected run time (pending: its remaining ideal
  // work; running: its end at its actual progress rate, as a time limit fitted to the job would say) and runs
  // conservative backfill: every multi-GPU job may hold a reservation (CycleOptions::reserve_beyond_guarantee)
  // on the GPUs that free first, planned around the reservations before it; reserved nodes are fenced;
  // smaller jobs fill around reservations, or into them when they end before the reservation starts; and
  // placement keeps nodes' lifetimes aligned (Request::expected_end_s with ClusterState drain times), so
  // nodes drain early for gangs. false (default) = greedy first fit in queue order, as kube-scheduler does.
  // Scenario files name the policies that run with it (`gang_backfill: [tessera]`).
  bool gang_backfill = false;
  // With gang_backfill: how many waiting gangs hold a reservation per cycle (in queue order). Each plans around
  // the ones before it (conservative backfill), and a job that ends before a reservation starts may still use
  // its GPUs, so more reservations cost little utilisation and keep big gangs from piling up in the backlog.
  int gang_reservations = 32;
  // With gang_backfill: whether jobs expected to end before a reservation starts may use its capacity
  // (CycleOptions::backfill_into_reservations; the scenario's `backfill_into_reservations`).
  bool backfill_into_reservations = true;
  // Time limits the cycle sees (expected ends): each job's true run time times a factor drawn per job,
  // uniformly in [time_limit_factor_min, time_limit_factor_max], from time_limit_seed. 1, 1 = exact limits;
  // users' limits overestimate (Slurm sites see 2-5x), which makes reservations and backfill pessimistic.
  // Failure injection: every GPU fails at random with this mean time between failures (hours). A running job
  // on G GPUs fails at rate G / gpu_mtbf_h, loses the work since its last checkpoint and goes back to the
  // queue (the failed GPU is taken as replaced at once). 0 = off. Reference: Meta's Llama 3 pre-training saw
  // 419 unexpected interruptions in 54 days on 16,384 GPUs, about 50,000 GPU-hours per failure.
  double gpu_mtbf_h = 0;
  uint64_t failure_seed = 0;
  double time_limit_factor_min = 1.0;
  double time_limit_factor_max = 1.0;
  uint64_t time_limit_seed = 0;
  // With gang_backfill: a queue whose head gang has waited this long is examined first (CycleOptions::
  // gang_aging_s), so another queue's small jobs cannot take the GPUs its reservation waits for. -1 = off.
  int64_t gang_aging_s = 0;
  // Sharing inside instances (docs/sharing.md): the interference model and SLOs the latency figures use
  // (the scenario's `sharing:` section; tessera packs with the same options).
  SharingOptions sharing;
  // The quantiles the loop learns admission headroom at from the demand it observes (sharing.learn_headroom).
  DemandLearning demand_learning;
  // How the loop learns the workload's typical tasks from submissions (the scenario's `learn_workload`).
  WorkloadLearning workload_learning;
  // Real demand (docs/simulator.md "What is not known in advance"): an inference replica's compute demand,
  // constant over epochs of demand_epoch_s, is its declared demand times a lognormal factor of mean 1 and
  // log-sd demand_sigma, drawn per replica and epoch from demand_seed (0 = exactly the declared demand).
  // Placement, admission and the utilisation integrals use the declared demand (the factor's mean is 1);
  // the SLO figures use the real one.
  double demand_sigma = 0.25;
  int64_t demand_epoch_s = 300;
  uint64_t demand_seed = 0;
  // Keep the run's decisions (control/decisions.h) in RunResult::decisions.
  bool record_decisions = false;
  // The opportunistic tier (sim/harvest.h): waiting preemptible training on compute inference holds and
  // does not use. Off by default; scenarios turn it on for tessera variants (scenario.h HarvestsFor).
  HarvestOptions harvest;
};

// The time limit (whole seconds) a user gave trace job `index` of a run with options `o`: its duration times
// a factor drawn uniformly in [time_limit_factor_min, time_limit_factor_max] from (index, time_limit_seed),
// rounded up; 0 for a job that runs forever. The service's replay submits the same limit.
int64_t SimTimeLimit(const TraceJob& job, size_t index, const SimOptions& o);

// Per job, for multi-tenant metrics (filled when SimOptions::tenancy is set).
struct SimJobRecord {
  std::string team;
  int priority = 0;
  int64_t submit_s = 0;
  int64_t first_bind_s = -1;         // -1 = never bound
  int64_t gpu_milli = 0;             // requested GPU units
  bool within_guarantee = false;     // its queue's allocation plus this job fit the guarantee at arrival
  // While it waited, the queue's own (higher-priority or earlier) work came to cover its guarantee: from here
  // on the job waits on its own team's order, not for its guarantee. -1 = never.
  int64_t guarantee_met_s = -1;
  bool in_window = false;
};

// Figures of one class (or team) in one run.
struct ClassStats {
  double allocation = 0;      // time-averaged share of cluster GPU capacity
  double utilization = 0;
  int64_t jobs_arrived = 0;   // in the window
  int64_t jobs_started = 0;   // first bound inside the window (whenever they arrived)
  int64_t gpu_requests_arrived = 0;  // of jobs arrived in the window: the demanded mix
  int64_t gpu_requests_served = 0;   // of jobs first bound in the window: the served mix
  std::vector<double> queue_delays_s;  // bind - submit, jobs arrived in the window and bound
  std::vector<double> jct_s;           // completion - submit, jobs arrived in the window and completed
};

struct SamplePoint {
  double t_h = 0;
  double allocation = 0;
  double utilization = 0;
};

struct RunResult {
  std::string policy;
  uint64_t seed = 0;
  int gpus = 0;
  double gpu_allocation = 0;
  double gpu_utilization = 0;
  double effective_training_throughput = 0;  // GPU-equivalents
  double training_gpus_allocated = 0;        // time-averaged GPUs held by training
  std::map<std::string, ClassStats> by_class;  // "inference", "training", ...
  std::map<std::string, ClassStats> by_team;
  int64_t oom_events = 0;
  int64_t mig_repartitions = 0;   // GPUs reconfigured (instances created/destroyed or MIG mode switched)
  int64_t preemptions = 0;
  int64_t checkpoints = 0;
  int64_t reservations = 0;
  // Backfill into reservations (the backfill cycle): jobs let into reserved capacity inside the window, those
  // that held it past the start of the reservation they were let into (and their GPU-seconds past it, inside
  // the window), and the
  // reserved gangs that started inside the window: how many, how many after their first reservation's
  // expected start, and by how much (0 when on time or early).
  int64_t backfills = 0, backfill_overruns = 0;
  double backfill_overrun_gpu_s = 0;
  int64_t reserved_gangs_started = 0, reserved_gangs_late = 0;
  std::vector<double> reserved_gang_lateness_s;
  int64_t apply_conflicts = 0;    // actions the simulator could not apply (engine/simulator disagreement)
  int64_t jobs_completed = 0;
  int64_t jobs_failed = 0;
  int64_t jobs_cancelled = 0;     // by the trace's cancel_s
  int64_t unplaced_jobs = 0;      // pending at the end
  // Backlog arrivals: when the stream had no job left to release (-1 = never). Before the horizon, the
  // run's utilisation is set by the stream's length, not by the policy.
  int64_t backlog_dry_s = -1;
  int64_t unplaced_gpu_requests = 0;
  double makespan_s = 0;          // time of the last completion
  bool all_completed = false;
  int64_t cycles = 0;
  double wall_ms = 0;
  std::vector<SamplePoint> series;
  std::map<std::string, double> extra;    // hook figures (issue 5: cost, spot), reported under their names
  std::vector<SimJobRecord> job_records;  // multi-tenant runs only
  double lost_gpu_s = 0;                  // GPU-seconds of work lost to preemption (since last checkpoint)
  int64_t job_failures = 0;               // injected failures of running jobs (SimOptions::gpu_mtbf_h)
  double failure_lost_gpu_s = 0;          // GPU-seconds of work they lost (since the last checkpoint)
  // The opportunistic tier (SimOptions::harvest), time-averaged shares of the fleet's compute inside the
  // window: what harvesters turned into kept progress (included in gpu_utilization and the training class's
  // utilisation), and what they spent without keeping it (work lost to evictions since the last checkpoint,
  // checkpoint writes, restores; never in gpu_utilization).
  bool harvest_enabled = false;
  double harvested_utilization = 0;
  double lost_compute = 0;
  int64_t harvest_starts = 0, harvest_evictions = 0, harvest_completions = 0, harvest_checkpoints = 0;
  // Per SLO class (production-inference, inference, ...), from the real demand: how many replicas spent any
  // time inside the window above their SLO, and the p99 slowdown over replica-time (1 = alone; 1000 =
  // saturated).
  std::map<std::string, int64_t> slo_violations;
  std::map<std::string, double> p99_slowdown;
  // Per inference class, from the real demand: replica-seconds run inside the window and those spent above
  // the class's SLO slowdown (violation fraction = their ratio). A class with no replicas is absent.
  std::map<std::string, double> slo_replica_s;
  std::map<std::string, double> slo_violation_s;
  // What the run assumed (SimOptions): the real-demand model, the time limits' factor and the sharing mode.
  double demand_sigma = 0;
  int64_t demand_epoch_s = 0;
  double time_limit_factor_min = 1, time_limit_factor_max = 1;
  std::string sharing_mode;
  // static-mig-best: the layout and share its search chose, and their first-day utilisation.
  std::string static_mig_layout;
  double static_mig_share = 0, static_mig_first_day = 0;
  // With SimOptions::record_decisions: one JSON line per decision (control/decisions.h), job = trace id.
  std::vector<std::string> decisions;
};

// Runs one simulation. `jobs` in arrival order (ties by position).
Result<RunResult> Simulate(const Cluster& cluster, const Catalog& catalog, const std::vector<TraceJob>& jobs,
                           const Policy& policy, const SimOptions& options);

}  // namespace tessera
