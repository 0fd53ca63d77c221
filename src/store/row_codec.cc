// The stores' shared column encodings (row_codec.h).
#include "store/row_codec.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace tessera {

std::string EncodeClasses(const std::optional<std::vector<std::string>>& c) {
  return c ? nlohmann::json(*c).dump() : std::string();
}

std::optional<std::vector<std::string>> DecodeClasses(const std::string& text) {
  if (text.empty()) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  std::vector<std::string> out;
  if (j.is_array())
    for (const auto& c : j)
      if (c.is_string()) out.push_back(c.get<std::string>());
  return out;
}

std::string EncodePlacements(const std::vector<TaskPlacement>& tasks) {
  if (tasks.empty()) return "[]";
  nlohmann::json out = nlohmann::json::array();
  for (const TaskPlacement& t : tasks) {
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuGrant& g : t.gpus)
      gpus.push_back({g.gpu, g.milli, g.memory_mib, g.mig_profile, g.mig_start});
    out.push_back({{"node", t.node}, {"gpus", std::move(gpus)}});
  }
  return out.dump();
}

Result<std::vector<TaskPlacement>> DecodePlacements(const std::string& text, int64_t job) {
  std::vector<TaskPlacement> out;
  try {
    for (const auto& t : nlohmann::json::parse(text)) {
      TaskPlacement tp;
      tp.node = t.at("node").get<NodeId>();
      for (const auto& g : t.at("gpus")) {
        GpuGrant gg;
        gg.gpu = g.at(0).get<GpuId>();
        gg.milli = g.at(1).get<int>();
        gg.memory_mib = g.at(2).get<int64_t>();
        gg.mig_profile = g.at(3).get<int16_t>();
        gg.mig_start = g.at(4).get<int8_t>();
        tp.gpus.push_back(gg);
      }
      out.push_back(std::move(tp));
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::Error(fmt::format("job {}: stored placements unreadable: {}", job, e.what()));
  }
  return out;
}

namespace {

// The column a read sorts by ("id" for an order not known).
const char* OrderColumn(const std::string& order) {
  for (const char* c : {"submitted_at", "started_at", "finished_at"})
    if (order == c) return c;
  return "id";
}

}  // namespace

JobsSql BuildJobsSql(const JobRowQuery& q, bool postgres) {
  JobsSql out;
  auto param = [&](const std::string& v) {
    out.params.push_back(v);
    return fmt::format("{}{}", postgres ? '$' : '?', out.params.size());
  };
  std::vector<std::string> conds;
  if (q.id > 0) conds.push_back(fmt::format("id = {}", q.id));
  if (!q.states.empty()) {
    std::string in;
    for (const std::string& s : q.states) in += (in.empty() ? "" : ", ") + param(s);
    conds.push_back("state IN (" + in + ")");
  }
  if (!q.team.empty()) conds.push_back("team = " + param(q.team));
  if (!q.project.empty()) conds.push_back("project = " + param(q.project));
  if (!q.search.empty()) {
    const std::string n = param(q.search);
    const char* has = postgres ? "strpos" : "instr";
    conds.push_back(fmt::format("({0}(lower(name), {1}) > 0 OR {0}(lower(project), {1}) > 0 OR "
                                "{0}(lower(\"user\"), {1}) > 0 OR CAST(id AS TEXT) = {1})",
                                has, n));
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& c : v) s += (s.empty() ? "" : " AND ") + c;
    return s.empty() ? std::string("TRUE") : s;
  };
  out.filters = join(conds);
  const std::string col = OrderColumn(q.order);
  if (q.has_after) {
    if (col == "id")
      conds.push_back(fmt::format("id > {}", q.after_id));
    else
      conds.push_back(fmt::format("({0} < {1} OR ({0} = {1} AND id < {2}))", col, q.after_key, q.after_id));
  }
  out.with_cursor = join(conds);
  out.order_limit = col == "id" ? "ORDER BY id" : fmt::format("ORDER BY {} DESC, id DESC", col);
  out.order_limit += fmt::format(" LIMIT {}", std::max(q.limit, 0));
  return out;
}

std::string LoadedJobsCondition(const LoadLimits& limits) {
  if (limits.retain_ended < 0) return "TRUE";
  return fmt::format(
      "state IN ('Pending', 'Running') OR id IN (SELECT id FROM jobs WHERE state NOT IN ('Pending', "
      "'Running') ORDER BY finished_at DESC, id DESC LIMIT {})",
      limits.retain_ended);
}

std::vector<std::pair<int64_t, int64_t>> UsageReadSpans(const UsageRead& q) {
  if (q.cuts.empty()) return {{q.from, q.to}};
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (size_t k = 0; k + 1 < q.cuts.size(); ++k) spans.emplace_back(q.cuts[k], q.cuts[k + 1]);
  return spans;
}

std::string UsageReadSql(const UsageSumKey* key, bool postgres) {
  const char* seq = postgres ? "seq > $3 AND seq <= $4" : "seq > ?3 AND seq <= ?4";
  if (key == nullptr) {
    return fmt::format("{} FROM usage WHERE end_s > {} AND start_s < {} AND {} ORDER BY seq", kUsageColumns,
                       postgres ? "$1" : "?1", postgres ? "$2" : "?2", seq);
  }
  // A record's clipped start and end; SQLite's two-argument MIN and MAX are PostgreSQL's LEAST and GREATEST.
  const std::string lo = postgres ? "GREATEST(start_s, $1)" : "MAX(start_s, ?1)";
  const std::string hi = postgres ? "LEAST(end_s, $2)" : "MIN(end_s, ?2)";
  const std::string lost = fmt::format("{}(lost_s, {} - {})", postgres ? "LEAST" : "MIN", hi, lo);
  const std::string project = key->by_project ? "project" : "''", job = key->by_job ? "job_id" : "0";
  std::string group = "team, gpu_kind, tier, pool, node, compute_milli, memory_milli";
  if (key->by_project) group += ", project";
  if (key->by_job) group += ", job_id";
  return fmt::format(
      "SELECT team, {}, {}, gpu_kind, tier, pool, node, compute_milli, memory_milli, MIN({}), MAX({}), "
      "SUM({} - {}), SUM({}) FROM usage WHERE end_s > {} AND start_s < {} AND end_s > start_s AND {} "
      "GROUP BY {}",
      project, job, lo, hi, hi, lo, lost, postgres ? "$1" : "?1", postgres ? "$2" : "?2", seq, group);
}

}  // namespace tessera
