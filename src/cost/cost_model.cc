#include "cost/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/utc_time.h"

namespace tessera {

const char* ChargeBasisName(ChargeBasis b) { return b == ChargeBasis::kCompute ? "compute" : "memory"; }

Result<ChargeBasis> ParseChargeBasis(std::string_view s) {
  if (s == "compute") return ChargeBasis::kCompute;
  if (s == "memory") return ChargeBasis::kMemory;
  return Status::Error(fmt::format("unknown charge basis '{}' (expected compute or memory)", s));
}

const char* IdlePolicyName(IdlePolicy p) {
  switch (p) {
    case IdlePolicy::kNone: return "none";
    case IdlePolicy::kProportional: return "proportional";
    case IdlePolicy::kEven: return "even";
  }
  return "?";
}

Result<IdlePolicy> ParseIdlePolicy(std::string_view s) {
  if (s == "none") return IdlePolicy::kNone;
  if (s == "proportional") return IdlePolicy::kProportional;
  if (s == "even") return IdlePolicy::kEven;
  return Status::Error(fmt::format("unknown idle policy '{}' (expected none, proportional or even)", s));
}

namespace {

constexpr double kMilliSecondsPerGpuHour = 1000.0 * 3600.0;

double Hours(int64_t milli_gpu_s) { return static_cast<double>(milli_gpu_s) / kMilliSecondsPerGpuHour; }

void AddTo(CostLine& line, const RecordCharge& c) {
  line.milli_gpu_s += c.milli_gpu_s;
  line.useful_milli_gpu_s += c.useful_milli_gpu_s;
  line.cost_cents += c.cost_cents;
  line.list_cost_cents += c.list_cost_cents;
  line.idle_share_cents += c.idle_share_cents;
}

template <typename K>
std::vector<CostLine> Lines(std::map<K, CostLine>& m) {
  std::vector<CostLine> out;
  out.reserve(m.size());
  for (auto& [k, v] : m) {
    v.cost_usd = CentsToUsd(v.cost_cents);
    v.list_cost_usd = CentsToUsd(v.list_cost_cents);
    v.idle_share_usd = CentsToUsd(v.idle_share_cents);
    out.push_back(v);
  }
  return out;
}

// Exact: the lines' totals plus unshared idle = total; their costs = charged; their idle = shared idle.
Status CheckLines(const std::vector<CostLine>& lines, const CostReport& rep, const char* what) {
  int64_t total = rep.idle_unshared_cents, cost = 0, idle = 0, held = 0;
  for (const CostLine& l : lines) {
    total += l.TotalCents();
    cost += l.cost_cents;
    idle += l.idle_share_cents;
    held += l.milli_gpu_s;
  }
  int64_t allocated = 0;
  for (const PoolLine& p : rep.pools) allocated += p.allocated_milli_gpu_s;
  if (held != allocated) {
    return Status::Error(fmt::format("chargeback by {}: {} milli-GPU-s held, pools say {}", what, held, allocated));
  }
  if (total != rep.total_cents || cost != rep.charged_cents || idle != rep.idle_shared_cents) {
    return Status::Error(fmt::format("chargeback by {} does not reconcile: lines + unshared idle = {}, total = {}",
                                     what, FormatCents(total), FormatCents(rep.total_cents)));
  }
  return Status::Ok();
}

// Weight of a record when a pool's idle is shared: its exact cost, else (a free pool) its GPU-seconds.
Int128 IdleWeight(const RecordCharge& c, bool by_cost) {
  return by_cost ? CostAtoms(c.milli_gpu_s, c.price_micros) : Int128{c.milli_gpu_s};
}

// Shares `idle_cents` of one pool among the teams of `records` (indices into `usage`) by `policy`, then to
// each team's records, both by largest remainder; adds to RecordCharge::idle_share_cents.
void ShareIdle(int64_t idle_cents, const std::vector<size_t>& records, const std::vector<UsageRecord>& usage,
               IdlePolicy policy, std::vector<RecordCharge>& charges) {
  bool by_cost = false;
  for (size_t i : records) by_cost = by_cost || (charges[i].price_micros > 0 && charges[i].milli_gpu_s > 0);
  std::map<std::string, std::vector<size_t>> teams;
  for (size_t i : records) teams[usage[i].team].push_back(i);
  std::vector<Int128> team_w;
  for (const auto& [team, idx] : teams) {
    Int128 w = 0;
    for (size_t i : idx) w += IdleWeight(charges[i], by_cost);
    team_w.push_back(policy == IdlePolicy::kEven ? Int128{1} : w);
  }
  const std::vector<int64_t> team_cents = LargestRemainder(idle_cents, team_w);
  size_t t = 0;
  for (const auto& [team, idx] : teams) {
    std::vector<Int128> w;
    for (size_t i : idx) w.push_back(IdleWeight(charges[i], by_cost));
    const std::vector<int64_t> parts = LargestRemainder(team_cents[t++], w);
    for (size_t k = 0; k < idx.size(); ++k) charges[idx[k]].idle_share_cents += parts[k];
  }
}

PoolLine& PoolOf(std::map<std::string, PoolLine>& pools, const std::string& key, Tier tier, const std::string& kind) {
  PoolLine& pl = pools[key];
  if (pl.pool.empty()) {
    pl.pool = key;
    pl.tier = tier;
    pl.gpu_kind = kind;
  }
  return pl;
}

}  // namespace

Result<double> OnDemandOnlyCost(const std::map<std::string, double>& gpu_hours_by_kind, const PriceBook& book) {
  double total = 0;
  for (const auto& [kind, hours] : gpu_hours_by_kind) {
    if (hours == 0) continue;
    Result<double> price = book.OnDemandListPrice(kind);
    if (!price.ok()) return price.status();
    total += hours * *price;
  }
  return total;
}

double CostSaving(double actual_cost, double on_demand_only_cost) {
  return on_demand_only_cost > 0 ? 1.0 - actual_cost / on_demand_only_cost : 0.0;
}

Result<size_t> CostModel::BookFor(const std::string& pool, const std::string& kind, int64_t start_s) const {
  if (!options_.enforce_validity) return size_t{0};
  const std::string day = FormatDateUtc(options_.epoch_unix_s + start_s);
  // Latest price_date first: a later book supersedes an earlier one where both hold.
  std::vector<size_t> order(books_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return books_[a].price_date() > books_[b].price_date(); });
  std::string seen;
  for (size_t b : order) {
    const PriceBook& book = books_[b];
    const Pool* p = book.FindPool(pool);
    if (p == nullptr) continue;
    const ListPrice* lp = book.FindListPrice(kind);
    if (book.ValidOn(p->validity, day) && (lp == nullptr || book.ValidOn(lp->validity, day))) return b;
    const PriceValidity w = book.EffectiveWindow(p->validity);
    seen += fmt::format("{}book of {}: pool '{}' valid {} .. {}", seen.empty() ? "" : "; ", book.price_date(), pool,
                        w.valid_from.empty() ? "(open)" : w.valid_from, w.valid_until.empty() ? "(open)" : w.valid_until);
  }
  if (seen.empty()) return Status::Error(fmt::format("no loaded price book has pool '{}'", pool));
  return Status::Error(fmt::format("{} is outside the validity of every loaded price book ({}); load the book "
                                   "valid then with another --prices",
                                   FormatIsoUtc(options_.epoch_unix_s + start_s), seen));
}

Status CostModel::PriceUsage(const Ledger& ledger, CostReport* rep, std::map<std::string, PoolLine>* pools) const {
  const std::vector<UsageRecord>& usage = ledger.usage();
  const int64_t epoch = options_.epoch_unix_s;
  for (size_t i = 0; i < usage.size(); ++i) {
    const UsageRecord& r = usage[i];
    RecordCharge& c = rep->records[i];
    const std::string pool_key = PoolKey(r);
    auto where = [&] { return fmt::format("usage record #{} (job {}, team '{}', pool '{}')", i, r.job_id, r.team, pool_key); };
    const int64_t share = options_.charge_basis == ChargeBasis::kCompute ? r.compute_milli : r.memory_milli;
    c.milli_gpu_s = share * HeldSeconds(r);
    c.useful_milli_gpu_s = share * (HeldSeconds(r) - r.lost_s);
    const Pool* p = nullptr;
    if (r.usd_per_gpu_hour < 0 || r.list_usd_per_gpu_hour < 0) {
      Result<size_t> b = BookFor(pool_key, r.gpu_kind, r.start_s);
      if (!b.ok() && r.usd_per_gpu_hour < 0) return Status::Error(where() + ": " + b.error());
      if (b.ok()) c.book = *b;
      p = books_[c.book].FindPool(pool_key);
    } else if (options_.enforce_validity) {  // priced by the record: the book of its time gives list and date
      c.book = BookValidOn(books_, FormatDateUtc(epoch + r.start_s)).index;
    }
    if (r.usd_per_gpu_hour >= 0) c.price_micros = MicrosPerGpuHour(r.usd_per_gpu_hour);
    else if (p != nullptr) c.price_micros = MicrosPerGpuHour(p->usd_per_gpu_hour);
    else return Status::Error(where() + ": no price: the record gives none and the price book has no such pool");
    if (r.list_usd_per_gpu_hour >= 0) c.list_price_micros = MicrosPerGpuHour(r.list_usd_per_gpu_hour);
    else if (const ListPrice* lp = books_[c.book].FindListPrice(r.gpu_kind)) c.list_price_micros = MicrosPerGpuHour(lp->usd_per_gpu_hour);
    else if (r.tier == Tier::kOnDemand) c.list_price_micros = c.price_micros;
    else return Status::Error(where() + fmt::format(": no on-demand list price for GPU kind '{}'", r.gpu_kind));
    c.usd_per_gpu_hour = static_cast<double>(c.price_micros) / kMicrosPerUsd;
    c.list_usd_per_gpu_hour = static_cast<double>(c.list_price_micros) / kMicrosPerUsd;
    if (r.held_s >= 0 && r.end_s > NextMonthStartUnix(epoch + r.start_s) - epoch)
      return Status::Error(where() + ": a summed record spans a month's end");
    for (int64_t t = r.start_s; t < r.end_s;) {  // one invoice line per calendar month
      const int64_t t1 = std::min(r.end_s, NextMonthStartUnix(epoch + t) - epoch);
      ChargePiece piece{t, t1, r.held_s >= 0 ? c.milli_gpu_s : share * (t1 - t), 0, 0};
      piece.cost_cents = CentsHalfUp(CostAtoms(piece.milli_gpu_s, c.price_micros));
      piece.list_cost_cents = CentsHalfUp(CostAtoms(piece.milli_gpu_s, c.list_price_micros));
      c.cost_cents += piece.cost_cents;
      c.list_cost_cents += piece.list_cost_cents;
      c.pieces.push_back(piece);
      t = t1;
    }
    PoolLine& pl = PoolOf(*pools, pool_key, r.tier, r.gpu_kind);
    pl.allocated_milli_gpu_s += c.milli_gpu_s;
    pl.allocated_cents += c.cost_cents;
    rep->charged_cents += c.cost_cents;
    rep->list_cents += c.list_cost_cents;
  }
  return Status::Ok();
}

Status CostModel::PriceCapacity(const Ledger& ledger, std::map<std::string, PoolLine>* pools) const {
  for (size_t i = 0; i < ledger.capacity().size(); ++i) {
    const CapacityRecord& cap = ledger.capacity()[i];
    size_t book = 0;
    int64_t micros = cap.usd_per_gpu_hour >= 0 ? MicrosPerGpuHour(cap.usd_per_gpu_hour) : -1;
    if (micros < 0) {
      Result<size_t> b = BookFor(cap.pool, cap.gpu_kind, cap.start_s);
      const Pool* p = b.ok() ? books_[*b].FindPool(cap.pool) : nullptr;
      if (p == nullptr) {
        return Status::Error(fmt::format("capacity record #{} (pool '{}', node '{}'): no price: {}", i, cap.pool,
                                         cap.node, b.ok() ? "the price book has no such pool" : b.error()));
      }
      book = *b;
      micros = MicrosPerGpuHour(p->usd_per_gpu_hour);
    } else if (options_.enforce_validity) {
      book = BookValidOn(books_, FormatDateUtc(options_.epoch_unix_s + cap.start_s)).index;
    }
    PoolLine& pl = PoolOf(*pools, cap.pool, cap.tier, cap.gpu_kind);
    const int64_t mgs = int64_t{cap.gpus} * kMilliPerGpu * (cap.end_s - cap.start_s);
    if (pl.elastic) {
      pl.price_micros = micros;
      pl.book = book;
      pl.first_start_s = cap.start_s;
    }
    pl.first_start_s = std::min(pl.first_start_s, cap.start_s);
    pl.elastic = false;
    pl.capacity_milli_gpu_s += mgs;
    pl.capacity_atoms += CostAtoms(mgs, micros);
  }
  return Status::Ok();
}

namespace {

// Chargeback lines from the records' cents, the report's double figures (cents / 100) and its hours.
void Aggregate(const std::vector<UsageRecord>& usage, CostReport* out) {
  CostReport& rep = *out;
  std::map<std::string, CostLine> teams, projects, kinds, tiers;
  std::map<JobId, CostLine> jobs;
  std::map<std::pair<std::string, std::string>, TeamPoolLine> team_pools;
  Int128 useful_list = 0;
  int64_t t_min = std::numeric_limits<int64_t>::max(), t_max = std::numeric_limits<int64_t>::min();
  for (size_t i = 0; i < usage.size(); ++i) {
    const UsageRecord& r = usage[i];
    RecordCharge& c = rep.records[i];
    c.cost_usd = CentsToUsd(c.cost_cents);
    c.list_cost_usd = CentsToUsd(c.list_cost_cents);
    c.idle_share_usd = CentsToUsd(c.idle_share_cents);
    TeamPoolLine& tp = team_pools[{r.team, PoolKey(r)}];
    tp.team = r.team;
    tp.pool = PoolKey(r);
    tp.milli_gpu_s += c.milli_gpu_s;
    tp.usage_cost_cents += c.cost_cents;
    tp.idle_cost_cents += c.idle_share_cents;
    for (auto& [m, key] : {std::pair{&teams, r.team}, std::pair{&projects, r.team + "/" + r.project},
                           std::pair{&kinds, r.gpu_kind}, std::pair{&tiers, std::string(TierName(r.tier))}}) {
      CostLine& l = (*m)[key];
      l.key = key;
      AddTo(l, c);
    }
    CostLine& j = jobs[r.job_id];
    j.key = std::to_string(r.job_id);
    AddTo(j, c);
    useful_list += CostAtoms(c.useful_milli_gpu_s, c.list_price_micros);
    rep.allocated_gpu_hours += Hours(c.milli_gpu_s);
    rep.useful_gpu_hours += Hours(c.useful_milli_gpu_s);
    t_min = std::min(t_min, r.start_s);
    t_max = std::max(t_max, r.end_s);
  }
  rep.by_team = Lines(teams);
  rep.by_project = Lines(projects);
  rep.by_gpu_kind = Lines(kinds);
  rep.by_tier = Lines(tiers);
  rep.by_job = Lines(jobs);
  for (auto& [key, line] : team_pools) {
    line.usage_cost_usd = CentsToUsd(line.usage_cost_cents);
    line.idle_cost_usd = CentsToUsd(line.idle_cost_cents);
    rep.by_team_pool.push_back(std::move(line));
  }
  for (PoolLine& pl : rep.pools) {
    pl.capacity_usd = CentsToUsd(pl.capacity_cents);
    pl.allocated_usd = CentsToUsd(pl.allocated_cents);
    pl.idle_usd = CentsToUsd(pl.idle_cents);
    pl.idle_shared_usd = CentsToUsd(pl.idle_shared_cents);
    pl.idle_unshared_usd = CentsToUsd(pl.idle_unshared_cents);
    rep.capacity_gpu_hours += Hours(pl.capacity_milli_gpu_s);
    rep.idle_gpu_hours += Hours(pl.idle_milli_gpu_s);
  }
  rep.on_demand_only_cents = CentsHalfUp(useful_list);
  rep.total_cost = CentsToUsd(rep.total_cents);
  rep.charged_cost = CentsToUsd(rep.charged_cents);
  rep.idle_cost = CentsToUsd(rep.idle_cents);
  rep.idle_shared_cost = CentsToUsd(rep.idle_shared_cents);
  rep.idle_unshared_cost = CentsToUsd(rep.idle_unshared_cents);
  rep.list_cost = CentsToUsd(rep.list_cents);
  rep.on_demand_only_cost = CentsToUsd(rep.on_demand_only_cents);
  rep.cost_saving_vs_on_demand = CostSaving(rep.total_cost, rep.on_demand_only_cost);
  rep.cost_per_useful_gpu_hour = rep.useful_gpu_hours > 0 ? rep.total_cost / rep.useful_gpu_hours : 0;
  if (t_min <= t_max) {
    rep.billing_start_s = t_min;
    rep.billing_end_s = t_max;
  }
}

// Contracts 2 and 3, exactly in cents.
Result<CostReport> Check(CostReport rep) {
  if (rep.charged_cents + rep.idle_cents != rep.total_cents ||
      rep.idle_shared_cents + rep.idle_unshared_cents != rep.idle_cents) {
    return Status::Error(fmt::format("cost does not reconcile: charged {} + idle {} != total {}",
                                     FormatCents(rep.charged_cents), FormatCents(rep.idle_cents),
                                     FormatCents(rep.total_cents)));
  }
  int64_t team_pool_sum = rep.idle_unshared_cents;
  for (const TeamPoolLine& tp : rep.by_team_pool) team_pool_sum += tp.usage_cost_cents + tp.idle_cost_cents;
  if (team_pool_sum != rep.total_cents) {
    return Status::Error(fmt::format("chargeback by team and pool does not reconcile: {} != total {}",
                                     FormatCents(team_pool_sum), FormatCents(rep.total_cents)));
  }
  for (const auto& [lines, what] : {std::pair{&rep.by_team, "team"}, std::pair{&rep.by_project, "project"},
                                    std::pair{&rep.by_gpu_kind, "GPU kind"}, std::pair{&rep.by_tier, "tier"},
                                    std::pair{&rep.by_job, "job"}}) {
    Status st = CheckLines(*lines, rep, what);
    if (!st.ok()) return st;
  }
  return rep;
}

}  // namespace

Result<CostReport> CostModel::Evaluate(const Ledger& ledger) const {
  CostReport rep;
  rep.charge_basis = options_.charge_basis;
  rep.idle_policy = options_.idle_policy;
  const std::vector<UsageRecord>& usage = ledger.usage();
  rep.records.resize(usage.size());
  std::map<std::string, PoolLine> pools;
  Status st = PriceUsage(ledger, &rep, &pools);
  if (st.ok()) st = PriceCapacity(ledger, &pools);
  if (!st.ok()) return st;
  // Idle per pool (contract 1): exact in milli-GPU-seconds; in cents the capacity rounded once less the
  // records' cents.
  for (auto& [key, pl] : pools) {
    if (pl.elastic) pl.capacity_milli_gpu_s = pl.allocated_milli_gpu_s;
    pl.capacity_cents = pl.elastic ? pl.allocated_cents : CentsHalfUp(pl.capacity_atoms);
    pl.idle_milli_gpu_s = pl.capacity_milli_gpu_s - pl.allocated_milli_gpu_s;
    if (pl.idle_milli_gpu_s < 0) {
      return Status::Error(fmt::format("pool '{}': usage ({:.6g} GPU-h) exceeds its capacity ({:.6g} GPU-h)", key,
                                       Hours(pl.allocated_milli_gpu_s), Hours(pl.capacity_milli_gpu_s)));
    }
    pl.idle_cents = pl.capacity_cents - pl.allocated_cents;
    if (pl.idle_cents < -static_cast<int64_t>(usage.size())) {
      return Status::Error(fmt::format("pool '{}': usage charged ${}, more than its capacity cost ${} "
                                       "(records priced above the pool)", key, FormatCents(pl.allocated_cents),
                                       FormatCents(pl.capacity_cents)));
    }
    pl.idle_unshared_cents = pl.idle_cents;
    rep.pools.push_back(pl);
  }
  // Share each pool's idle among that pool's teams, then to each team's records in the pool.
  std::map<std::string, std::vector<size_t>> pool_records;
  for (size_t i = 0; i < usage.size(); ++i) pool_records[PoolKey(usage[i])].push_back(i);
  for (PoolLine& pl : rep.pools) {
    auto it = pool_records.find(pl.pool);
    if (options_.idle_policy != IdlePolicy::kNone && pl.idle_cents != 0 && it != pool_records.end()) {
      ShareIdle(pl.idle_cents, it->second, usage, options_.idle_policy, rep.records);
      pl.idle_shared_cents = pl.idle_cents;
      pl.idle_unshared_cents = 0;
    }
    rep.total_cents += pl.capacity_cents;
    rep.idle_cents += pl.idle_cents;
    rep.idle_shared_cents += pl.idle_shared_cents;
    rep.idle_unshared_cents += pl.idle_unshared_cents;
  }
  Aggregate(usage, &rep);
  return Check(rep);
}

namespace {

nlohmann::json LineJson(const CostLine& l, const char* key_name) {
  return nlohmann::json{{key_name, l.key},
                        {"milli_gpu_seconds", l.milli_gpu_s},
                        {"gpu_hours", l.GpuHours()},
                        {"useful_gpu_hours", l.UsefulGpuHours()},
                        {"cost", l.cost_usd},
                        {"list_cost", l.list_cost_usd},
                        {"idle_share", l.idle_share_usd},
                        {"total", l.TotalUsd()}};
}

nlohmann::json LinesJson(const std::vector<CostLine>& lines, const char* key_name) {
  nlohmann::json a = nlohmann::json::array();
  for (const CostLine& l : lines) a.push_back(LineJson(l, key_name));
  return a;
}

}  // namespace

nlohmann::json ToJson(const CostReport& r, bool with_records) {
  nlohmann::json j;
  j["total_cost"] = r.total_cost;
  j["on_demand_only_cost"] = r.on_demand_only_cost;
  j["cost_saving_vs_on_demand"] = r.cost_saving_vs_on_demand;
  j["charged_cost"] = r.charged_cost;
  j["idle_cost"] = r.idle_cost;
  j["idle_shared_cost"] = r.idle_shared_cost;
  j["idle_unshared_cost"] = r.idle_unshared_cost;
  j["list_cost"] = r.list_cost;
  j["capacity_gpu_hours"] = r.capacity_gpu_hours;
  j["allocated_gpu_hours"] = r.allocated_gpu_hours;
  j["useful_gpu_hours"] = r.useful_gpu_hours;
  j["idle_gpu_hours"] = r.idle_gpu_hours;
  j["cost_per_useful_gpu_hour"] = r.cost_per_useful_gpu_hour;
  j["charge_basis"] = ChargeBasisName(r.charge_basis);
  j["idle_policy"] = IdlePolicyName(r.idle_policy);
  j["billing_period_s"] = {r.billing_start_s, r.billing_end_s};
  j["by_team"] = LinesJson(r.by_team, "team");
  j["by_project"] = LinesJson(r.by_project, "project");
  j["by_gpu_kind"] = LinesJson(r.by_gpu_kind, "gpu_kind");
  j["by_tier"] = LinesJson(r.by_tier, "tier");
  j["by_job"] = LinesJson(r.by_job, "job");
  nlohmann::json pools = nlohmann::json::array();
  for (const PoolLine& p : r.pools) {
    pools.push_back({{"pool", p.pool},
                     {"tier", TierName(p.tier)},
                     {"gpu_kind", p.gpu_kind},
                     {"elastic", p.elastic},
                     {"capacity_gpu_hours", Hours(p.capacity_milli_gpu_s)},
                     {"allocated_gpu_hours", Hours(p.allocated_milli_gpu_s)},
                     {"idle_gpu_hours", Hours(p.idle_milli_gpu_s)},
                     {"capacity_cost", p.capacity_usd},
                     {"allocated_cost", p.allocated_usd},
                     {"idle_cost", p.idle_usd},
                     {"idle_shared_cost", p.idle_shared_usd},
                     {"idle_unshared_cost", p.idle_unshared_usd}});
  }
  j["pools"] = pools;
  nlohmann::json team_pools = nlohmann::json::array();
  for (const TeamPoolLine& tp : r.by_team_pool) {
    team_pools.push_back({{"team", tp.team},
                          {"pool", tp.pool},
                          {"gpu_hours", Hours(tp.milli_gpu_s)},
                          {"usage_cost", tp.usage_cost_usd},
                          {"idle_cost", tp.idle_cost_usd},
                          {"total", CentsToUsd(tp.usage_cost_cents + tp.idle_cost_cents)}});
  }
  j["by_team_pool"] = team_pools;
  if (with_records) {
    nlohmann::json recs = nlohmann::json::array();
    for (const RecordCharge& c : r.records) {
      recs.push_back({{"milli_gpu_seconds", c.milli_gpu_s},
                      {"useful_milli_gpu_seconds", c.useful_milli_gpu_s},
                      {"usd_per_gpu_hour", c.usd_per_gpu_hour},
                      {"list_usd_per_gpu_hour", c.list_usd_per_gpu_hour},
                      {"cost", c.cost_usd},
                      {"list_cost", c.list_cost_usd},
                      {"idle_share", c.idle_share_usd}});
    }
    j["records"] = recs;
  }
  return j;
}

}  // namespace tessera
