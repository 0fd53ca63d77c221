#pragma once
// The scheduling cycle: a pure function from a snapshot (allocation state, pending and running jobs,
// queues, time) to a Plan of actions (bind, preempt, checkpoint, reserve) plus, for every pending job,
// its queue position and why it waits. Nothing outside the return value changes; callers (simulator,
// service, Kubernetes adapter) apply the plan.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/ids.h"
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
};

struct PriorityClass {
  std::string name;
  int value = 0;
  bool preemptible = true;  // false: `preemption: never`
};

struct PendingJob {
  Request request;               // request.id is the job id; request.priority the class value
  int queue = 0;                 // index into CycleInput::queues
  int64_t submit_time_s = 0;
  int64_t eligible_time_s = 0;   // when it became eligible (dependencies, holds)
  bool held = false;
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
};

struct CycleOptions {
  int64_t min_runtime_s = 300;          // a job younger than this is not preempted (anti-thrashing)
  double usage_half_life_s = 7 * 24 * 3600.0;
  double history_weight = 0.5;          // blend of current share and decayed historical usage
  bool allow_borrowing = true;
  bool allow_preemption = true;
  int max_backfill_scan = 100000;       // pending jobs examined per cycle
};

struct CycleInput {
  const ClusterState* snapshot = nullptr;
  std::vector<QueueConfig> queues;
  std::vector<PendingJob> pending;
  std::vector<RunningJob> running;
  std::vector<double> historical_usage;  // per queue, decayed GPU-milli-seconds (same index as queues)
  int64_t now_s = 0;
  CycleOptions options;
};

enum class ActionKind : uint8_t { kBind, kPreempt, kCheckpoint, kReserve, kRepartition };
const char* ActionKindName(ActionKind k);

struct Action {
  ActionKind kind = ActionKind::kBind;
  JobId job = 0;
  std::vector<TaskPlacement> tasks;  // kBind / kReserve: where
  std::string reason;
};

enum class WaitCategory : uint8_t { kWaiting, kCapacity, kQuota, kHeld, kInvalid };
const char* WaitCategoryName(WaitCategory c);

struct PendingStatus {
  JobId job = 0;
  int team_position = 0;  // 1-based position in its queue
  int pool_position = 0;  // 1-based position in the global order
  WaitCategory category = WaitCategory::kWaiting;
  std::string code;       // stable CamelCase: Priority, FairShare, Resources, MigProfileUnavailable, ...
  std::string message;    // a sentence with the numbers
  std::string resource;   // blocking resource, e.g. "nvidia.com/gpu"
  int64_t requested = 0, available = 0, limit = -1, still_needed = 0;
  int64_t waiting_s = 0;  // since eligible
};

struct Plan {
  std::vector<Action> actions;
  std::vector<PendingStatus> pending;
};

// Runs one cycle. REQUIRES: input.snapshot reflects every running job.
Plan RunCycle(const CycleInput& input, const Policy& policy);

}  // namespace tessera
