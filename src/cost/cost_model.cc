#include "cost/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

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

double Usd(int64_t milli_gpu_s, double usd_per_gpu_hour) {
  return static_cast<double>(milli_gpu_s) * usd_per_gpu_hour / kMilliSecondsPerGpuHour;
}

double Hours(int64_t milli_gpu_s) { return static_cast<double>(milli_gpu_s) / kMilliSecondsPerGpuHour; }

bool Close(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::max(std::fabs(a), std::fabs(b))); }

void AddTo(CostLine& line, const RecordCharge& c) {
  line.milli_gpu_s += c.milli_gpu_s;
  line.useful_milli_gpu_s += c.useful_milli_gpu_s;
  line.cost_usd += c.cost_usd;
  line.list_cost_usd += c.list_cost_usd;
  line.idle_share_usd += c.idle_share_usd;
}

template <typename K>
std::vector<CostLine> Lines(const std::map<K, CostLine>& m) {
  std::vector<CostLine> out;
  out.reserve(m.size());
  for (const auto& [k, v] : m) out.push_back(v);
  return out;
}

Status CheckLines(const std::vector<CostLine>& lines, const CostReport& rep, const char* what) {
  double sum = rep.idle_unshared_cost;
  int64_t held = 0;
  for (const CostLine& l : lines) {
    sum += l.TotalUsd();
    held += l.milli_gpu_s;
  }
  int64_t allocated = 0;
  for (const PoolLine& p : rep.pools) allocated += p.allocated_milli_gpu_s;
  if (held != allocated) {
    return Status::Error(fmt::format("chargeback by {}: {} milli-GPU-s held, pools say {}", what, held, allocated));
  }
  if (!Close(sum, rep.total_cost)) {
    return Status::Error(fmt::format("chargeback by {} does not reconcile: lines + unshared idle = {:.12g}, total = {:.12g}",
                                     what, sum, rep.total_cost));
  }
  return Status::Ok();
}

// Shares `idle_usd` among the teams of `records` (indices into `usage`, all in one pool) by `policy`,
// then to each team's records in proportion to their weight; adds to RecordCharge::idle_share_usd.
void ShareIdle(double idle_usd, const std::vector<size_t>& records, const std::vector<UsageRecord>& usage,
               IdlePolicy policy, std::vector<RecordCharge>& charges) {
  double all_cost = 0;
  int64_t all_mgs = 0;
  for (size_t i : records) {
    all_cost += charges[i].cost_usd;
    all_mgs += charges[i].milli_gpu_s;
  }
  const bool by_cost = all_cost > 0;
  const bool by_mgs = !by_cost && all_mgs > 0;
  auto weight = [&](size_t i) {
    return by_cost ? charges[i].cost_usd : by_mgs ? static_cast<double>(charges[i].milli_gpu_s) : 1.0;
  };
  std::map<std::string, std::vector<size_t>> teams;
  double all_weight = 0;
  for (size_t i : records) {
    teams[usage[i].team].push_back(i);
    all_weight += weight(i);
  }
  for (const auto& [team, idx] : teams) {
    double team_weight = 0;
    for (size_t i : idx) team_weight += weight(i);
    const double team_share = policy == IdlePolicy::kEven ? idle_usd / static_cast<double>(teams.size())
                                                          : idle_usd * team_weight / all_weight;
    for (size_t i : idx) {
      charges[i].idle_share_usd += team_weight > 0 ? team_share * weight(i) / team_weight
                                                   : team_share / static_cast<double>(idx.size());
    }
  }
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

Result<CostReport> CostModel::Evaluate(const Ledger& ledger) const {
  CostReport rep;
  rep.charge_basis = options_.charge_basis;
  rep.idle_policy = options_.idle_policy;
  const std::vector<UsageRecord>& usage = ledger.usage();
  rep.records.resize(usage.size());
  std::map<std::string, PoolLine> pools;
  int64_t t_min = std::numeric_limits<int64_t>::max();
  int64_t t_max = std::numeric_limits<int64_t>::min();

  // 1. Price every usage record.
  for (size_t i = 0; i < usage.size(); ++i) {
    const UsageRecord& r = usage[i];
    RecordCharge& c = rep.records[i];
    const std::string pool_key = PoolKey(r);
    auto where = [&] { return fmt::format("usage record #{} (job {}, team '{}', pool '{}')", i, r.job_id, r.team, pool_key); };
    const int64_t share = options_.charge_basis == ChargeBasis::kCompute ? r.compute_milli : r.memory_milli;
    const int64_t dur = r.end_s - r.start_s;
    c.milli_gpu_s = share * dur;
    c.useful_milli_gpu_s = share * (dur - r.lost_s);
    if (r.usd_per_gpu_hour >= 0) {
      c.usd_per_gpu_hour = r.usd_per_gpu_hour;
    } else if (const Pool* p = book_.FindPool(pool_key)) {
      c.usd_per_gpu_hour = p->usd_per_gpu_hour;
    } else {
      return Status::Error(where() + ": no price: the record gives none and the price book has no such pool");
    }
    if (r.list_usd_per_gpu_hour >= 0) {
      c.list_usd_per_gpu_hour = r.list_usd_per_gpu_hour;
    } else if (const ListPrice* lp = book_.FindListPrice(r.gpu_kind)) {
      c.list_usd_per_gpu_hour = lp->usd_per_gpu_hour;
    } else if (r.tier == Tier::kOnDemand) {
      c.list_usd_per_gpu_hour = c.usd_per_gpu_hour;
    } else {
      return Status::Error(where() + fmt::format(": no on-demand list price for GPU kind '{}'", r.gpu_kind));
    }
    c.cost_usd = Usd(c.milli_gpu_s, c.usd_per_gpu_hour);
    c.list_cost_usd = Usd(c.milli_gpu_s, c.list_usd_per_gpu_hour);
    PoolLine& pl = pools[pool_key];
    if (pl.pool.empty()) {
      pl.pool = pool_key;
      pl.tier = r.tier;
      pl.gpu_kind = r.gpu_kind;
    }
    pl.allocated_milli_gpu_s += c.milli_gpu_s;
    pl.allocated_usd += c.cost_usd;
    t_min = std::min(t_min, r.start_s);
    t_max = std::max(t_max, r.end_s);
  }

  // 2. Capacity of non-elastic pools.
  for (size_t i = 0; i < ledger.capacity().size(); ++i) {
    const CapacityRecord& cap = ledger.capacity()[i];
    double price = cap.usd_per_gpu_hour;
    if (price < 0) {
      const Pool* p = book_.FindPool(cap.pool);
      if (p == nullptr) {
        return Status::Error(fmt::format("capacity record #{} (pool '{}', node '{}'): no price: the record gives none "
                                         "and the price book has no such pool", i, cap.pool, cap.node));
      }
      price = p->usd_per_gpu_hour;
    }
    PoolLine& pl = pools[cap.pool];
    if (pl.pool.empty()) {
      pl.pool = cap.pool;
      pl.tier = cap.tier;
      pl.gpu_kind = cap.gpu_kind;
    }
    const int64_t mgs = int64_t{cap.gpus} * kMilliPerGpu * (cap.end_s - cap.start_s);
    pl.elastic = false;
    pl.capacity_milli_gpu_s += mgs;
    pl.capacity_usd += Usd(mgs, price);
    t_min = std::min(t_min, cap.start_s);
    t_max = std::max(t_max, cap.end_s);
  }

  // 3. Idle per pool (contract 1).
  for (auto& [key, pl] : pools) {
    if (pl.elastic) {
      pl.capacity_milli_gpu_s = pl.allocated_milli_gpu_s;
      pl.capacity_usd = pl.allocated_usd;
    }
    pl.idle_milli_gpu_s = pl.capacity_milli_gpu_s - pl.allocated_milli_gpu_s;
    if (pl.idle_milli_gpu_s < 0) {
      return Status::Error(fmt::format("pool '{}': usage ({:.6g} GPU-h) exceeds its capacity ({:.6g} GPU-h)", key,
                                       Hours(pl.allocated_milli_gpu_s), Hours(pl.capacity_milli_gpu_s)));
    }
    pl.idle_usd = pl.elastic ? 0.0 : pl.capacity_usd - pl.allocated_usd;
    if (pl.idle_usd < -1e-9 * std::max(1.0, pl.capacity_usd)) {
      return Status::Error(fmt::format("pool '{}': usage charged ${:.2f}, more than its capacity cost ${:.2f} "
                                       "(records priced above the pool)", key, pl.allocated_usd, pl.capacity_usd));
    }
    rep.total_cost += pl.capacity_usd;
    rep.idle_cost += pl.idle_usd;
    rep.capacity_gpu_hours += Hours(pl.capacity_milli_gpu_s);
    rep.idle_gpu_hours += Hours(pl.idle_milli_gpu_s);
    rep.pools.push_back(pl);
  }

  // 4. Share each pool's idle among that pool's teams, then to each team's records in the pool.
  std::map<std::string, std::vector<size_t>> pool_records;
  for (size_t i = 0; i < usage.size(); ++i) pool_records[PoolKey(usage[i])].push_back(i);
  for (PoolLine& pl : rep.pools) {
    pl.idle_unshared_usd = pl.idle_usd;
    auto it = pool_records.find(pl.pool);
    if (options_.idle_policy == IdlePolicy::kNone || pl.idle_usd == 0 || it == pool_records.end()) continue;
    ShareIdle(pl.idle_usd, it->second, usage, options_.idle_policy, rep.records);
    pl.idle_shared_usd = pl.idle_usd;
    pl.idle_unshared_usd = 0;
  }
  for (const PoolLine& pl : rep.pools) {
    rep.idle_shared_cost += pl.idle_shared_usd;
    rep.idle_unshared_cost += pl.idle_unshared_usd;
  }

  // 5. Aggregate.
  std::map<std::string, CostLine> teams, projects, kinds, tiers;
  std::map<JobId, CostLine> jobs;
  std::map<std::pair<std::string, std::string>, TeamPoolLine> team_pools;
  for (size_t i = 0; i < usage.size(); ++i) {
    const UsageRecord& r = usage[i];
    const RecordCharge& c = rep.records[i];
    TeamPoolLine& tp = team_pools[{r.team, PoolKey(r)}];
    tp.team = r.team;
    tp.pool = PoolKey(r);
    tp.milli_gpu_s += c.milli_gpu_s;
    tp.usage_cost_usd += c.cost_usd;
    tp.idle_cost_usd += c.idle_share_usd;
    CostLine& t = teams[r.team];
    t.key = r.team;
    AddTo(t, c);
    CostLine& p = projects[r.team + "/" + r.project];
    p.key = r.team + "/" + r.project;
    AddTo(p, c);
    CostLine& k = kinds[r.gpu_kind];
    k.key = r.gpu_kind;
    AddTo(k, c);
    CostLine& tl = tiers[TierName(r.tier)];
    tl.key = TierName(r.tier);
    AddTo(tl, c);
    CostLine& j = jobs[r.job_id];
    j.key = std::to_string(r.job_id);
    AddTo(j, c);
    rep.charged_cost += c.cost_usd;
    rep.list_cost += c.list_cost_usd;
    rep.on_demand_only_cost += Usd(c.useful_milli_gpu_s, c.list_usd_per_gpu_hour);
    rep.allocated_gpu_hours += Hours(c.milli_gpu_s);
    rep.useful_gpu_hours += Hours(c.useful_milli_gpu_s);
  }
  rep.by_team = Lines(teams);
  rep.by_project = Lines(projects);
  rep.by_gpu_kind = Lines(kinds);
  rep.by_tier = Lines(tiers);
  rep.by_job = Lines(jobs);
  for (auto& [key, line] : team_pools) rep.by_team_pool.push_back(std::move(line));
  rep.cost_saving_vs_on_demand = CostSaving(rep.total_cost, rep.on_demand_only_cost);
  rep.cost_per_useful_gpu_hour = rep.useful_gpu_hours > 0 ? rep.total_cost / rep.useful_gpu_hours : 0;
  if (options_.billing_end_s > options_.billing_start_s) {
    rep.billing_start_s = options_.billing_start_s;
    rep.billing_end_s = options_.billing_end_s;
  } else if (t_min <= t_max) {
    rep.billing_start_s = t_min;
    rep.billing_end_s = t_max;
  }

  // 6. Contract 2 and 3.
  if (!Close(rep.charged_cost + rep.idle_cost, rep.total_cost)) {
    return Status::Error(fmt::format("cost does not reconcile: charged {:.12g} + idle {:.12g} != total {:.12g}",
                                     rep.charged_cost, rep.idle_cost, rep.total_cost));
  }
  double team_pool_sum = rep.idle_unshared_cost;
  for (const TeamPoolLine& tp : rep.by_team_pool) team_pool_sum += tp.usage_cost_usd + tp.idle_cost_usd;
  if (!Close(team_pool_sum, rep.total_cost)) {
    return Status::Error(fmt::format("chargeback by team and pool does not reconcile: {:.12g} != total {:.12g}",
                                     team_pool_sum, rep.total_cost));
  }
  for (const auto& [lines, what] : {std::pair{&rep.by_team, "team"}, std::pair{&rep.by_project, "project"},
                                    std::pair{&rep.by_gpu_kind, "GPU kind"}, std::pair{&rep.by_tier, "tier"},
                                    std::pair{&rep.by_job, "job"}}) {
    Status st = CheckLines(*lines, rep, what);
    if (!st.ok()) return st;
  }
  return rep;
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
                          {"total", tp.usage_cost_usd + tp.idle_cost_usd}});
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
