#pragma once
// The text forms both stores keep a few columns in: a team's allowed priority classes (a JSON list; ""
// = the default) and a job's placements (JSON: per task its node and GPU grants).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
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

// The SQL of a usage read (Store::ReadUsage) in one dialect. Parameters: 1 and 2 the interval (a summed
// read: one piece of the cuts), 3 after_seq, 4 through_seq. `key` null: a plain read, kUsageColumns in the
// order written; else one piece summed as SumUsage sums it, columns as SummedUsageOf reads them.
std::string UsageReadSql(const UsageSumKey* key, bool postgres);
// The intervals a usage read runs its SQL over, in order: [from, to) for a plain read, each piece of the
// cuts for a summed one.
std::vector<std::pair<int64_t, int64_t>> UsageReadSpans(const UsageRead& q);
// The last usage record's number, 0 when none.
inline constexpr const char* kLastUsageSeqSql = "SELECT COALESCE(MAX(seq), 0) FROM usage";

// The summed record of a row of a summed usage read: `i(col)` reads an integer column, `t(col)` a text one.
template <typename IntAt, typename TextAt>
UsageRecord SummedUsageOf(IntAt i, TextAt t) {
  UsageRecord u;
  u.team = t(0);
  u.project = t(1);
  u.job_id = i(2);
  u.gpu_kind = t(3);
  u.tier = static_cast<Tier>(i(4));
  u.pool = t(5);
  u.node = t(6);
  u.compute_milli = static_cast<int32_t>(i(7));
  u.memory_milli = static_cast<int32_t>(i(8));
  u.start_s = i(9);
  u.end_s = i(10);
  u.held_s = i(11);
  u.lost_s = i(12);
  return u;
}

}  // namespace tessera
