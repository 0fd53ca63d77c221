// Chargeback (chargeback.h): the cost layer's ledger of what each job held, priced, grouped by team,
// project or job and tier; the service's usage calls, which add the running jobs' usage so far.
#include "service/chargeback.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "base/utc_time.h"
#include "cost/cost_model.h"
#include "cost/focus.h"
#include "cost/pricebook.h"
#include "service/service_driver.h"

namespace tessera {
namespace {

// Prices of `kind` on `node` with book `b`: the node's configured price, else its pool's in the book (same
// kind), else the book's on-demand list price; {price, list}, -1 where the book has none.
std::pair<double, double> PricesIn(const PriceBook& b, const Node* node, const std::string& kind) {
  const ListPrice* lp = b.FindListPrice(kind);
  const double list = lp != nullptr ? lp->usd_per_gpu_hour : -1;
  if (node != nullptr && node->price_per_gpu_hour > 0) return {node->price_per_gpu_hour, list};
  const Pool* p = node != nullptr && !node->pool.empty() ? b.FindPool(node->pool) : nullptr;
  if (p != nullptr && p->gpu_kind == kind) return {p->usd_per_gpu_hour, list};
  return {list, list};
}

const PriceBook& BookAt(const std::vector<PriceBook>& books, int64_t unix_s) {
  return books[BookValidOn(books, FormatDateUtc(unix_s)).index];
}

// Cuts [from, to) where a book's window starts or ends, so that each piece is priced with one book.
std::vector<int64_t> BookCuts(const std::vector<PriceBook>& books, int64_t from, int64_t to) {
  std::vector<int64_t> cuts = {from, to};
  for (const PriceBook& b : books)
    for (const std::string& day : {b.window().valid_from, b.window().valid_until}) {
      if (day.empty()) continue;
      auto t = ParseIsoUtc(day + "T00:00:00Z");
      if (t.ok() && *t > from && *t < to) cuts.push_back(*t);
    }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  return cuts;
}

// Usage clipped to [from, to) and every node's capacity since the ledger's start, idle shared proportionally;
// each piece priced with the book valid at its time (records and capacity split where a book's window ends).
Result<UsageLedgerOf> BuildLedger(const std::vector<UsageRecord>& usage, const Cluster& cluster,
                                  const Catalog& cat, const std::vector<PriceBook>& books,
                                  int64_t ledger_start, int64_t from, int64_t to) {
  UsageLedgerOf b;
  b.options.idle_policy = IdlePolicy::kProportional;
  b.options.epoch_unix_s = 0;
  b.options.enforce_validity = true;  // records carry their prices; the book of their time dates them
  std::map<std::string, const Node*> by_name;
  for (const Node& n : cluster.nodes) by_name[n.name] = &n;
  for (const UsageRecord& rec : usage) {
    const int64_t lo = std::max(rec.start_s, from), hi = std::min(rec.end_s, to);
    if (lo >= hi) continue;  // wholly outside [from, to)
    auto node = by_name.find(rec.node);
    // A summed record lies within one piece already.
    const std::vector<int64_t> cuts =
        rec.held_s >= 0 ? std::vector<int64_t>{rec.start_s, rec.end_s} : BookCuts(books, lo, hi);
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      UsageRecord u = rec;
      u.start_s = cuts[k];
      u.end_s = cuts[k + 1];
      u.lost_s = std::min(u.lost_s, HeldSeconds(u));
      std::tie(u.usd_per_gpu_hour, u.list_usd_per_gpu_hour) =
          PricesIn(BookAt(books, u.start_s), node == by_name.end() ? nullptr : node->second, u.gpu_kind);
      if (u.usd_per_gpu_hour < 0) u.usd_per_gpu_hour = 0;
      // A kind the book lists no on-demand price for (an L40S, say) is no error: its list cost is its cost.
      if (u.list_usd_per_gpu_hour < 0) u.list_usd_per_gpu_hour = u.usd_per_gpu_hour;
      if (Status st = b.ledger.AddUsage(std::move(u)); !st.ok()) return st;
    }
  }
  const std::vector<int64_t> cuts = BookCuts(books, std::max(from, ledger_start), to);
  for (const Node& n : cluster.nodes) {
    if (n.gpu_count == 0 || n.kind == kNone) continue;
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      CapacityRecord c = NodeCapacity(n, cat, cuts[k], cuts[k + 1]);
      c.usd_per_gpu_hour = std::max(0.0, PricesIn(BookAt(books, cuts[k]), &n, c.gpu_kind).first);
      if (Status st = b.ledger.AddCapacity(c); !st.ok()) return st;
    }
  }
  return b;
}

}  // namespace

void Chargeback::Restore(std::vector<UsageRecord> usage, int64_t ledger_start) {
  std::lock_guard<std::mutex> lock(mu_);
  usage_ = std::move(usage);
  ledger_start_ = ledger_start;
}

void Chargeback::Add(const std::vector<UsageRecord>& usage) {
  std::lock_guard<std::mutex> lock(mu_);
  if (store_ == nullptr) usage_.insert(usage_.end(), usage.begin(), usage.end());
}

std::vector<UsageRecord> Chargeback::Records(int64_t* ledger_start) const {
  std::lock_guard<std::mutex> lock(mu_);
  *ledger_start = ledger_start_;
  return usage_;
}

int64_t Chargeback::LedgerStart() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ledger_start_;
}

std::vector<int64_t> Chargeback::Cuts(int64_t from, int64_t to) const {
  std::vector<int64_t> cuts = BookCuts(*books_, from, to);
  for (int64_t t = NextMonthStartUnix(from); t < to; t = NextMonthStartUnix(t)) cuts.push_back(t);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  return cuts;
}

UsageSumKey SumKeyOf(const UsageQuery& q) { return {q.group_by != "team", q.group_by == "job"}; }

Outcome<UsageLedgerOf> Chargeback::Ledger(const UsageQuery& q, const std::vector<UsageRecord>& usage,
                                          int64_t ledger_start, const Cluster& cluster, int64_t now) const {
  const int64_t from = q.from < 0 ? ledger_start : q.from, to = q.to < 0 ? now : q.to;
  if (to < from) return Invalid("to", "to: must not be before from");
  auto built = BuildLedger(usage, cluster, *catalog_, *books_, ledger_start, from, to);
  if (!built.ok()) return ApiError{ErrorCode::kInternal, "", built.error()};
  return std::move(built).value();
}

// The durable records and the running jobs' usage so far are read together under the service lock (a run
// that ends adds its records under the same lock, so a query counts each run once); the ledger is built
// and priced after it is released. With a store, the records of the interval are read there first, outside
// the lock, and those written since under it (UsageFromStore). `summed`: the records summed (SumUsage) by
// the query's groups, with a store by the database.
Outcome<UsageLedgerOf> ServiceDriver::UsageLedger(const UsageQuery& q, bool summed) const {
  std::vector<UsageRecord> usage;
  int64_t start = 0;
  const int64_t now = Now();
  Cluster cluster;  // the live one (nodes added through the API included)
  if (chargeback_->store() == nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    cluster = loop_->state().cluster();
    usage = chargeback_->Records(&start);
    for (int64_t id : RunningLocked())
      for (UsageRecord& u : UsageOf(*book_->Current(id), now)) usage.push_back(std::move(u));
  } else {
    start = chargeback_->LedgerStart();
  }
  const int64_t from = q.from < 0 ? start : q.from, to = q.to < 0 ? now : q.to;
  UsageRead read{from, to, 0, -1, summed ? chargeback_->Cuts(from, to) : std::vector<int64_t>{}, SumKeyOf(q)};
  if (chargeback_->store() != nullptr && to >= from) {
    if (Status st = UsageFromStore(read, now, &usage, &cluster); !st.ok())
      return ApiError{ErrorCode::kUnavailable, "", "usage: " + st.message()};
  }
  if (summed) usage = SumUsage(usage, read.cuts, read.key);
  return chargeback_->Ledger(q, usage, start, cluster, now);
}

// `read` from the store, outside the lock (the bulk of the interval's records, summed where it says); then
// under the lock the records written since it, as written, the running jobs' usage so far at `now` and the
// live cluster. Records are numbered in the order they commit, so the two reads hold each durable record
// once.
Status ServiceDriver::UsageFromStore(const UsageRead& read, int64_t now, std::vector<UsageRecord>* usage,
                                     Cluster* cluster) const {
  auto bulk = chargeback_->store()->ReadUsage(read);
  if (!bulk.ok()) return bulk.status();
  *usage = std::move(bulk->records);
  std::lock_guard<std::mutex> lock(mu_);
  UsageRead since{read.from, read.to, bulk->last_seq};
  auto recent = chargeback_->store()->ReadUsage(since);
  if (!recent.ok()) return recent.status();
  usage->insert(usage->end(), recent->records.begin(), recent->records.end());
  *cluster = loop_->state().cluster();
  for (int64_t id : RunningLocked())
    for (UsageRecord& u : UsageOf(*book_->Current(id), now)) usage->push_back(std::move(u));
  return Status::Ok();
}

Outcome<std::vector<UsageRow>> Service::Usage(const Caller& c, const UsageQuery& q) const {
  if (q.group_by != "team" && q.group_by != "project" && q.group_by != "job")
    return Invalid("group_by", "group_by: one of team, project, job");
  auto built = driver_->UsageLedger(q, true);
  if (!built.ok()) return built.error();
  return chargeback_->Rows(c, q, built.value());
}

Outcome<std::string> Service::UsageFocusCsv(const Caller& c, const UsageQuery& q) const {
  auto built = driver_->UsageLedger(q, false);  // FOCUS lists each run
  if (!built.ok()) return built.error();
  return chargeback_->FocusCsv(c, built.value());
}

Outcome<std::vector<UsageRow>> Chargeback::Rows(const Caller& c, const UsageQuery& q,
                                                const UsageLedgerOf& built) const {
  CostModel model(*books_, built.options);
  auto report = model.Evaluate(built.ledger);
  if (!report.ok()) return ApiError{ErrorCode::kInternal, "", report.error()};
  auto date = [&](size_t book) { return model.books()[book].price_date(); };
  std::map<std::tuple<std::string, std::string, std::string, std::string, std::string>, UsageRow> rows;
  const auto& recs = built.ledger.usage();
  for (size_t i = 0; i < recs.size(); ++i) {
    const UsageRecord& u = recs[i];
    const RecordCharge& ch = report->records[i];
    if (c.role != Role::kAdmin && u.team != c.team) continue;
    const std::string project = q.group_by == "team" ? "" : u.project;
    const std::string job = q.group_by == "job" ? std::to_string(u.job_id) : "";
    UsageRow& r = rows[{u.team, project, job, TierName(u.tier), date(ch.book)}];
    r.price_book_date = date(ch.book);
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
        out.push_back({"", "", "", TierName(p.tier), true, static_cast<double>(p.idle_milli_gpu_s) / 3.6e6,
                       p.idle_usd, 0, date(p.book)});
    return out;
  }
  // A team's idle: per tier, the part of each pool's idle the proportional policy charged it (capacity that
  // other teams held, or that nobody held in a pool the team did not use, is not the team's).
  std::map<std::string, UsageRow> idle;
  for (const TeamPoolLine& tp : report->by_team_pool) {
    if (tp.team != c.team || tp.idle_cost_usd <= 0) continue;
    auto p = std::find_if(report->pools.begin(), report->pools.end(),
                          [&](const PoolLine& l) { return l.pool == tp.pool; });
    if (p == report->pools.end() || p->idle_usd <= 0) continue;
    UsageRow& r = idle[TierName(p->tier)];
    r = {c.team, "", "", TierName(p->tier), true, r.gpu_hours, r.cost, r.idle_share_cost, date(p->book)};
    r.gpu_hours += static_cast<double>(p->idle_milli_gpu_s) / 3.6e6 * (tp.idle_cost_usd / p->idle_usd);
    r.cost += tp.idle_cost_usd;
    r.idle_share_cost += tp.idle_cost_usd;
  }
  for (auto& [tier, r] : idle) out.push_back(std::move(r));
  return out;
}

// Every team's records go into the ledger, so that capacity another team held is not idle in a team's view;
// a non-admin then gets its team's rows, with the share of idle the proportional policy gives it.
Outcome<std::string> Chargeback::FocusCsv(const Caller& c, const UsageLedgerOf& built) const {
  CostModel model(*books_, built.options);
  auto csv = model.FocusCsv(built.ledger, c.role == Role::kAdmin ? std::string() : c.team);
  if (!csv.ok()) return ApiError{ErrorCode::kInternal, "", csv.error()};
  return *csv;
}

}  // namespace tessera
