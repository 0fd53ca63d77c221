// Usage: the cost layer's ledger of what each job held, priced, grouped by team, project or job and tier.
#include <fmt/format.h>

#include <algorithm>

#include "cost/cost_model.h"
#include "cost/pricebook.h"
#include "service/service.h"

namespace tessera {
namespace {

// Usage clipped to [from, to) and every node's capacity since the ledger's start, idle shared proportionally.
Result<UsageLedgerOf> BuildLedger(const std::vector<UsageRecord>& usage, const Cluster& cluster, const Catalog& cat,
                                  int64_t ledger_start, int64_t from, int64_t to) {
  UsageLedgerOf b;
  b.options.idle_policy = IdlePolicy::kProportional;
  b.options.epoch_unix_s = 0;
  for (UsageRecord u : usage) {
    u.start_s = std::max(u.start_s, from);
    u.end_s = std::min(u.end_s, to);
    if (u.end_s <= u.start_s) continue;
    if (Status st = b.ledger.AddUsage(std::move(u)); !st.ok()) return st;
  }
  const int64_t cap_from = std::max(from, ledger_start);
  if (to > cap_from)
    for (const Node& n : cluster.nodes) {
      if (n.gpu_count == 0 || n.kind == kNone) continue;
      CapacityRecord c = NodeCapacity(n, cat, cap_from, to);
      auto list = PriceBook::Default().OnDemandListPrice(c.gpu_kind);
      c.usd_per_gpu_hour = n.price_per_gpu_hour > 0 ? n.price_per_gpu_hour : (list.ok() ? *list : 0);
      if (Status st = b.ledger.AddCapacity(c); !st.ok()) return st;
    }
  return b;
}

}  // namespace

Outcome<UsageLedgerOf> Service::UsageLedger(const UsageQuery& q) const {
  std::vector<UsageRecord> usage;
  int64_t start, now = Now();
  Cluster cluster;  // the live one (nodes added through the API included)
  {
    std::lock_guard<std::mutex> lock(mu_);
    cluster = loop_->state().cluster();
    usage = usage_;
    start = ledger_start_;
    for (int64_t id : RunningLocked())
      for (UsageRecord& u : UsageOf(*jobs_[id - 1].current, now)) usage.push_back(std::move(u));
  }
  const int64_t from = q.from < 0 ? start : q.from, to = q.to < 0 ? now : q.to;
  if (to < from) return Invalid("to", "to: must not be before from");
  auto built = BuildLedger(usage, cluster, *config_.catalog, start, from, to);
  if (!built.ok()) return ApiError{ErrorCode::kInternal, "", built.error()};
  return std::move(built).value();
}

Outcome<std::vector<UsageRow>> Service::Usage(const Caller& c, const UsageQuery& q) const {
  if (q.group_by != "team" && q.group_by != "project" && q.group_by != "job")
    return Invalid("group_by", "group_by: one of team, project, job");
  auto built = UsageLedger(q);
  if (!built.ok()) return built.error();
  CostModel model(PriceBook::Default(), built->options);
  auto report = model.Evaluate(built->ledger);
  if (!report.ok()) return ApiError{ErrorCode::kInternal, "", report.error()};
  std::map<std::tuple<std::string, std::string, std::string, std::string>, UsageRow> rows;
  const auto& recs = built->ledger.usage();
  for (size_t i = 0; i < recs.size(); ++i) {
    const UsageRecord& u = recs[i];
    const RecordCharge& ch = report->records[i];
    if (c.role != Role::kAdmin && u.team != c.team) continue;
    const std::string project = q.group_by == "team" ? "" : u.project;
    const std::string job = q.group_by == "job" ? std::to_string(u.job_id) : "";
    UsageRow& r = rows[{u.team, project, job, TierName(u.tier)}];
    r.team = u.team;
    r.project = project;
    r.job = job;
    r.tier = TierName(u.tier);
    r.gpu_hours += static_cast<double>(ch.milli_gpu_s) / 3.6e6;
    r.cost += ch.cost_usd;
    r.idle_share_cost += ch.idle_share_usd;
  }
  std::vector<UsageRow> out;
  for (auto& [k, r] : rows) out.push_back(std::move(r));
  if (c.role == Role::kAdmin) {
    for (const PoolLine& p : report->pools)
      if (p.idle_milli_gpu_s > 0)
        out.push_back({"", "", "", TierName(p.tier), true, static_cast<double>(p.idle_milli_gpu_s) / 3.6e6, p.idle_usd, 0});
    return out;
  }
  // A team's idle: per tier, the part of each pool's idle the proportional policy charged it (capacity that
  // other teams held, or that nobody held in a pool the team did not use, is not the team's).
  std::map<std::string, UsageRow> idle;
  for (const TeamPoolLine& tp : report->by_team_pool) {
    if (tp.team != c.team || tp.idle_cost_usd <= 0) continue;
    auto p = std::find_if(report->pools.begin(), report->pools.end(), [&](const PoolLine& l) { return l.pool == tp.pool; });
    if (p == report->pools.end() || p->idle_usd <= 0) continue;
    UsageRow& r = idle[TierName(p->tier)];
    r = {c.team, "", "", TierName(p->tier), true, r.gpu_hours, r.cost, r.idle_share_cost};
    r.gpu_hours += static_cast<double>(p->idle_milli_gpu_s) / 3.6e6 * (tp.idle_cost_usd / p->idle_usd);
    r.cost += tp.idle_cost_usd;
    r.idle_share_cost += tp.idle_cost_usd;
  }
  for (auto& [tier, r] : idle) out.push_back(std::move(r));
  return out;
}

// Every team's records go into the ledger, so that capacity another team held is not idle in a team's view;
// a non-admin then gets its team's rows, with the share of idle the proportional policy gives it.
Outcome<std::string> Service::UsageFocusCsv(const Caller& c, const UsageQuery& q) const {
  auto built = UsageLedger(q);
  if (!built.ok()) return built.error();
  CostModel model(PriceBook::Default(), built->options);
  auto csv = model.FocusCsv(built->ledger, c.role == Role::kAdmin ? std::string() : c.team);
  if (!csv.ok()) return ApiError{ErrorCode::kInternal, "", csv.error()};
  return *csv;
}

}  // namespace tessera
