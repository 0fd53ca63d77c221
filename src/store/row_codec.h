#pragma once
// The text forms both stores keep a few columns in: a team's allowed priority classes (a JSON list; ""
// = the default) and a job's placements (JSON: per task its node and GPU grants).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "sched/placement.h"
#include "store/store.h"

namespace tessera {

std::string EncodeClasses(const std::optional<std::vector<std::string>>& c);
std::optional<std::vector<std::string>> DecodeClasses(const std::string& text);
std::string EncodePlacements(const std::vector<TaskPlacement>& tasks);
// The error names job `job`.
Result<std::vector<TaskPlacement>> DecodePlacements(const std::string& text, int64_t job);

// The SQL of a jobs read (Store::ReadJobs) in one dialect: the conditions (after WHERE) without and with
// the cursor, and the ORDER BY and LIMIT. Text values are parameters (`params`, named ?N for SQLite and $N
// for PostgreSQL, 1-based); integers are written in.
struct JobsSql {
  std::string filters, with_cursor, order_limit;
  std::vector<std::string> params;
};
JobsSql BuildJobsSql(const JobRowQuery& q, bool postgres);
// The condition (after WHERE) on jobs that Load(limits) reads: live ones and the most recently ended.
std::string LoadedJobsCondition(const LoadLimits& limits);
// The usage table's columns as both stores read them into a UsageRecord (in this order).
inline constexpr const char* kUsageColumns =
    "SELECT job_id, team, project, queue, gpu_kind, tier, pool, node, compute_milli, memory_milli, start_s, "
    "end_s, lost_s, usd_per_gpu_hour, list_usd_per_gpu_hour";

}  // namespace tessera
