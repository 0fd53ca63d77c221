#pragma once
// The jobs as the API shows them: each version of a job (immutable once published), why a pending job
// waits, the snapshot a cycle publishes, and the jobs list's query and page.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/shared_text.h"
#include "model/workload.h"
#include "sched/cluster_state.h"
#include "sched/cycle.h"
#include "service/cluster_summary.h"

namespace tessera {

enum class JobState : uint8_t { kPending, kRunning, kSucceeded, kFailed, kCancelled };
const char* JobStateName(JobState s);
bool ParseJobState(std::string_view s, JobState* out);
inline bool Terminal(JobState s) { return s != JobState::kPending && s != JobState::kRunning; }

// One version of a job as the API shows it (immutable once published; a change makes a new version).
struct JobRecord {
  int64_t id = 0;
  uint64_t version = 0;
  std::string user, team, project, name, priority_class;
  WorkloadClass cls = WorkloadClass::kTraining;
  std::string mig_profile;
  int64_t duration_s = 0;
  int64_t time_limit_s = 0;  // the scheduler's estimate of the run time; 0 = duration_s
  std::string spec_json;
  // What the engine places: a training job is one gang request; an inference job `replicas` one-task
  // requests, each a job of the control loop's table, started all together (placements: one task per
  // replica, in order).
  Request request;
  int replicas = 1;
  int queue = 0;  // leaf queue index
  JobState state = JobState::kPending;
  int64_t submitted_at = 0, started_at = -1, finished_at = -1;
  std::vector<TaskPlacement>
      placements;  // as recorded when it started (the loop's grants, without MIG flags)
  std::string message;
  bool checkpointable = false;
  // Running, but not yet running on the backend: every replica holds its grants and its launch waits for
  // a MIG reconfiguration, the victims' grace period, or an asynchronous backend's confirmation.
  bool starting = false;
  // Cancelled, and its run's stop has not completed yet on an asynchronous backend.
  bool stopping = false;
};
using JobPtr = std::shared_ptr<const JobRecord>;
inline int TotalGpus(const JobRecord& j) { return j.request.TotalGpus() * j.replicas; }

// Why a pending job waits, from the last cycle.
struct PendingInfo {
  int team_position = 0, pool_position = 0;
  std::string_view code;  // a string literal (PendingStatus::code)
  SharedText message;     // shared with the plan's status
  // The start estimate (service seconds; -1 = none, e.g. held by a limit it can never meet): `likely` from
  // the cycle's what-if replay (jobs end as declared), `earliest`/`latest` if the work it waits for ends a
  // quarter sooner / half again later than declared. Kept from cycle to cycle while nothing changed in the
  // job's queue (see estimates.cc); `estimate_change` says why it last changed (empty: first estimate).
  int64_t estimated_start = -1;
  int64_t estimate_earliest = -1, estimate_latest = -1;
  int64_t estimated_at = -1;         // the cycle time the estimate was made at
  std::string_view estimate_change;  // a string literal
  uint64_t queue_signature = 0;      // of the job's queue when estimated
  // It would fit but for the capacity held for a gang's reservation: that gang, and when it is to start.
  JobPtr reservation;
  int64_t reservation_start = -1;
};

struct JobView {
  JobPtr job;
  std::optional<PendingInfo> pending;  // absent until a cycle saw the job
};

struct QueueEntry {
  JobPtr job;
  PendingInfo info;
};

// Published after each cycle; never changed afterwards.
struct Snapshot {
  int64_t at = 0;
  uint64_t cycle = 0;
  std::shared_ptr<const ClusterState> cluster;       // allocation after the cycle
  std::vector<std::string> node_states;              // per node index (ready, cordoned, draining, ...)
  std::shared_ptr<const ClusterSummary> summary;     // of `cluster` and `node_states`: what the API shows
  std::vector<QueueEntry> queue;                     // pending jobs in pool order
  std::unordered_map<int64_t, PendingInfo> pending;  // by job id
  std::vector<std::string> queue_names;              // per queue index
  std::vector<QueueStatus> queues;
  // Per queue index: a hash of what decides its jobs' starts (its unfinished jobs' ids and versions, the
  // live nodes); and its running jobs' expected ends as (end time, GPU thousandths), for limit waits.
  std::vector<uint64_t> queue_signature;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> queue_ends;
};

// A page of the jobs list (Service::ListJobs).
enum class JobSort : uint8_t { kId, kSubmitted, kStarted, kEnded };
struct JobQuery {
  std::vector<JobState> states;  // empty: any
  std::string team, project;
  std::string search;           // case-insensitive substring of name, project or user, or the exact id
  JobSort sort = JobSort::kId;  // kId ascending; the others newest first (jobs without the time last)
  // Resume after this row: its sort key and id (from the previous page's last row).
  int64_t after_key = 0, after_id = 0;
  bool has_after = false;
  int limit = 100;
};
struct JobPage {
  std::vector<JobView> jobs;
  bool more = false;
  int64_t total = 0;  // rows matching the filters (all pages)
};
// The sort key of a job for `sort` (-1 when it has no such time).
int64_t JobSortKey(const JobRecord& j, JobSort sort);

}  // namespace tessera
