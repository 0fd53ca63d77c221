#pragma once
// The scheduling cycle: a pure function from a snapshot (allocation state, pending and running jobs,
// queues, time) to a Plan of actions (bind, preempt, checkpoint, reserve) plus, for every pending job,
// its queue position and why it waits. Nothing outside the return value changes; callers (simulator,
// service, Kubernetes adapter) apply the plan.
//
// Algorithm (docs/scheduling.md has the long form):
//  1. Accounting: GPU units per queue (a MIG slice counts by its compute fraction, or by its memory
//     fraction with SliceUnits::kMemory), propagated up the queue tree; per-queue demand.
//  2. Fair share: top-down water-filling over the queue tree: each queue first gets min(demand,
//     guaranteed), the rest of its parent's share goes by over-quota weight, capped by limit and demand.
//  3. Order: a heap of queues keyed by (production-level head job first, head within guarantee first,
//     head priority, blended
//     share / entitlement), where blended share = (1-w) * dominant resource share (GPU units per kind and
//     GPU memory) + w * time-decayed historical usage share. Within a queue: priority, submit time, id.
//  4. For each job in that order: quota (limit, borrowing, per-kind limits), a per-cycle failure cache
//     by request shape, then Policy::Place on a working copy of the snapshot. A job that does not fit may
//     reclaim borrowed capacity (owner within its guarantee) or preempt strictly lower priorities; a gang
//     that still does not fit gets a reservation (what-if on a copy: running jobs end at expected_end_s)
//     whose currently free GPUs are held, so backfill never delays it.
//  5. Every job left pending gets its positions, a category, a CamelCase code, a sentence with the
//     numbers, the blocking resource and an estimated start from a what-if replay of expected ends.
// Action order in the plan is the order to apply: checkpoint/preempt actions for a job come before its
// bind; reserve actions bind nothing.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/ids.h"
#include "base/shared_text.h"
#include "sched/cluster_state.h"
#include "sched/placement.h"
#include "sched/policy.h"
#include "sched/request.h"

namespace tessera {

// A queue (team / project); `parent` builds the hierarchy ("" = root). Quantities are GPU units in
// thousandths (a MIG slice counts by its compute fraction).
struct QueueConfig {
  std::string name;
  std::string parent;
  int64_t guaranteed_milli = 0;  // deserved quota
  int64_t limit_milli = -1;      // hard limit including borrowing; -1 = none
  int over_quota_weight = 1;     // share of idle capacity when bursting
  // At most this much of the queue's idle guarantee is lent to borrowers (Kueue's lendingLimit); the rest
  // stays free for the queue's own arrivals, so they need no preemption. -1 = all of it. Leaf queues only.
  int64_t lending_limit_milli = -1;
  // Optional per-GPU-kind quota (same units). Empty = no per-kind rule.
  struct KindQuota {
    KindId kind = kNone;
    int64_t guaranteed_milli = 0;
    int64_t limit_milli = -1;
  };
  std::vector<KindQuota> kinds;
  std::string team;     // tenancy labels (informational)
  std::string project;
};

struct PriorityClass {
  std::string name;
  int value = 0;
  bool preemptible = true;  // false: `preemption: never`
  bool reclaimable = true;  // false: borrowed capacity is never reclaimed by a lower priority
  bool preempts_other_queues = false;  // may preempt strictly lower priorities of any queue
  bool preempts =
      true;  // false: its jobs wait for capacity, never preempt (Kubernetes preemptionPolicy: Never)
};

struct PendingJob {
  Request request;               // request.id is the job id; request.priority the class value
  int queue = 0;                 // index into CycleInput::queues
  int64_t submit_time_s = 0;
  int64_t eligible_time_s = 0;   // when it became eligible (dependencies, holds)
  bool held = false;
  int64_t expected_duration_s = 0;  // for what-if estimates; 0 = unknown (CycleOptions::default_runtime_s)
};

struct RunningJob {
  JobId id = 0;
  int queue = 0;
  int priority = 0;
  bool preemptible = true;
  WorkloadClass cls = WorkloadClass::kTraining;
  std::vector<TaskPlacement> tasks;
  int64_t cpu_milli = 0;          // per task
  int64_t host_memory_mib = 0;    // per task
  int64_t gpu_milli = 0;          // GPU units held (sum over tasks)
  int64_t start_time_s = 0;
  int64_t last_checkpoint_s = -1; // -1 = never checkpointed (work since start is at risk)
  bool checkpointable = false;
  int64_t expected_end_s = -1;    // for reservations and start estimates; -1 = unknown (runs forever)
};

// How a MIG slice or a fractional share counts in GPU units.
enum class SliceUnits : uint8_t { kCompute, kMemory };

struct CycleOptions {
  int64_t min_runtime_s = 300;          // a job younger than this is not preempted (anti-thrashing)
  double usage_half_life_s = 7 * 24 * 3600.0;
  double history_weight = 0.5;          // blend of current share and decayed historical usage
  bool allow_borrowing = true;
  bool allow_preemption = true;
  int max_backfill_scan = 100000;       // pending jobs examined per cycle
  // A whole-GPU job expected to end before a reservation starts may use the capacity held for it (Slurm's
  // backfill); false: reservations hold their capacity for their gang alone.
  bool backfill_into_reservations = true;
  int64_t reclaim_min_runtime_s = 30;   // the guard for reclaiming borrowed capacity
  // Jobs at or above this priority are preempted/reclaimed only by strictly higher priorities.
  int protected_priority = 1000;
  // Jobs at or above this priority may preempt strictly lower priorities in any queue.
  int cross_queue_preempt_priority = 1000;
  SliceUnits slice_units = SliceUnits::kCompute;
  int max_reservations = 2;             // head gangs that get a reservation per cycle
  // false: only a gang within its queue's guarantee (or production-level) may reserve, so a borrowing gang
  // never blocks an owner's guaranteed demand. true: every gang may (a cluster without quotas: Slurm-style
  // backfill, where the head gang of each queue holds capacity and smaller jobs only fill around it).
  bool reserve_beyond_guarantee = false;
  // Aging (Slurm's age factor for gangs): a queue whose head job is a multi-GPU job that has waited at least
  // this long (since eligible) is examined before every other queue head except production-level ones, so
  // its placement or reservation comes before other queues' jobs take the capacity it waits for. -1 = off.
  int64_t gang_aging_s = -1;
  // true: a reservation also holds the free CPU and host memory of its nodes for the rest of the cycle, so
  // no other task (e.g. a new MIG instance on a partly used GPU there) lands on them and delays it.
  bool fence_reserved_nodes = false;
  int max_preemption_attempts = 16;     // blocked jobs that may search for victims per cycle
  // A search for victims that finds none is remembered for the same kind of preemptor until the cycle's
  // state changes (the plan is the same either way; tests turn it off to compare).
  bool remember_no_victims = true;
  int max_victims_examined = 64;        // candidates released per search
  int estimate_limit = 100;             // pending jobs (pool order) that get a what-if start estimate
  int64_t default_runtime_s = 3600;     // estimate for jobs without expected_duration_s
  int64_t checkpoint_min_age_s = 60;    // victims whose last checkpoint is older get a checkpoint action
  // Victims get this long to checkpoint and exit (Kubernetes terminationGracePeriodSeconds, default 30 s);
  // the preemptor's bind waits for it (Action::start_s).
  int64_t termination_grace_s = 30;
  // Whole GPUs (in units) kept free for production-level priorities (>= cross_queue_preempt_priority), like
  // the placeholder pods of cluster over-provisioning: borrowing below production may not take them, and
  // when production work has used them, the cycle reclaims borrowed capacity (cheapest victims first) to
  // restore them, so the next production arrival starts without waiting for a victim's grace period. 0 = off.
  int64_t production_headroom_milli = 0;
};

struct CycleInput {
  const ClusterState* snapshot = nullptr;
  std::vector<QueueConfig> queues;
  std::vector<PendingJob> pending;
  std::vector<RunningJob> running;
  std::vector<double> historical_usage;  // per queue, decayed GPU-milli-seconds (same index as queues)
  int64_t now_s = 0;
  CycleOptions options;
  // Whole GPUs (units) held by preempted jobs in their termination grace period: they free within
  // options.termination_grace_s, so headroom restoration counts them as already free.
  int64_t vacating_milli = 0;
  // Per-node drain times (ClusterState "drain times": the latest expected end of the work on each node, a
  // placement hint), one per snapshot node; empty = none. The cycle's working copy carries them.
  std::vector<int64_t> drain_s;
};

enum class ActionKind : uint8_t { kBind, kPreempt, kCheckpoint, kReserve, kRepartition };
const char* ActionKindName(ActionKind k);

struct Action {
  ActionKind kind = ActionKind::kBind;
  JobId job = 0;
  std::vector<TaskPlacement> tasks;  // kBind / kReserve: where
  std::string reason;
  JobId for_job = 0;                 // kPreempt / kCheckpoint: the job the capacity goes to
  // kReserve: expected start of the reservation. kBind after preemption: when the victims' grace period ends
  // and the job may take their capacity (the bind waits until then); -1 = now.
  int64_t start_s = -1;
  int64_t units_milli = 0;           // kBind / kPreempt: GPU units
  // kBind backfilled into reserved capacity: the expected start of the reservation it was let into (it must
  // be gone by then; -1 = not backfilled).
  int64_t backfill_until_s = -1;
  bool reclaim = false;              // kPreempt: reclaims borrowed capacity (vs. priority preemption)
};

enum class WaitCategory : uint8_t { kWaiting, kCapacity, kQuota, kHeld, kInvalid };
const char* WaitCategoryName(WaitCategory c);

struct PendingStatus {
  JobId job = 0;
  int team_position = 0;  // 1-based position in its queue
  int pool_position = 0;  // 1-based position in the global order
  WaitCategory category = WaitCategory::kWaiting;
  // Stable CamelCase: Priority, FairShare, Resources, MigProfileUnavailable, ...; always a string literal.
  std::string_view code;
  SharedText message;     // a sentence with the numbers (jobs that wait for the same reason share one)
  std::string resource;   // blocking resource, e.g. "nvidia.com/gpu"
  int64_t requested = 0, available = 0, limit = -1, still_needed = 0;
  int64_t waiting_s = 0;  // since eligible
  int64_t estimated_start_s = -1;  // absolute time from the what-if run; -1 = not estimated / unknown
  int queue = 0;
  // When it waits behind a gang's reservation (it would fit but for the held capacity): that gang (-1 = none)
  // and when the reservation starts.
  JobId reservation_job = -1;
  int64_t reservation_start_s = -1;
};

// Per queue, after the cycle (units as QueueConfig).
struct QueueStatus {
  int64_t allocated_milli = 0;   // subtree, after the plan
  int64_t fair_share_milli = 0;  // deserved this cycle (guarantee + over-quota share of idle capacity)
  int64_t demand_milli = 0;      // allocated + pending (subtree)
  double dominant_share = 0;     // max over GPU kinds and GPU memory of allocated / capacity
  bool borrowing = false;        // allocated above guaranteed
};

struct Plan {
  std::vector<Action> actions;
  std::vector<PendingStatus> pending;  // one per job left pending, in CycleInput::pending order
  std::vector<QueueStatus> queues;  // same index as CycleInput::queues
};

// GPU units (thousandths) that `tasks` hold on `s`: a whole GPU counts 1000, a MIG instance its compute
// (or memory) fraction, a share its milli (or memory fraction).
int64_t UnitsOf(const ClusterState& s, const std::vector<TaskPlacement>& tasks, SliceUnits mode);
// Exponential decay of historical usage: usage * 2^(-dt/half_life) + added.
double DecayUsage(double usage, double dt_s, double half_life_s, double added);

// Runs one cycle. REQUIRES: input.snapshot reflects every running job.
Plan RunCycle(const CycleInput& input, const Policy& policy);

}  // namespace tessera
