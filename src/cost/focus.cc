#include "cost/focus.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "base/utc_time.h"
#include "cost/cost_model.h"

namespace tessera {

const std::vector<std::string>& FocusColumns() {
  static const std::vector<std::string> kColumns = {
      "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd",
      "BillingPeriodStart", "CapacityReservationId", "CapacityReservationStatus", "ChargeCategory", "ChargeClass",
      "ChargeDescription", "ChargeFrequency", "ChargePeriodEnd", "ChargePeriodStart", "CommitmentDiscountCategory",
      "CommitmentDiscountId", "CommitmentDiscountName", "CommitmentDiscountStatus", "CommitmentDiscountType",
      "ConsumedQuantity", "ConsumedUnit", "ContractedCost", "ContractedUnitPrice", "EffectiveCost",
      "InvoiceIssuerName", "ListCost", "ListUnitPrice", "PricingCategory", "PricingQuantity", "PricingUnit",
      "ProviderName", "PublisherName", "RegionId", "RegionName", "ResourceId", "ResourceName", "ResourceType",
      "ServiceCategory", "ServiceName", "SkuId", "SkuPriceId", "SubAccountId", "SubAccountName", "Tags",
      "x_GpuKind", "x_Tier", "x_Pool", "x_JobId", "x_GpuShareMilli", "x_ChargeBasis", "x_AllocatedGpuHours",
      "x_UsefulGpuHours", "x_AllocationCost", "x_IdleShareCost", "x_IdlePolicy", "x_PriceBookDate"};
  return kColumns;
}

const char* FocusPricingCategory(Tier t) {
  switch (t) {
    case Tier::kOnDemand: return "Standard";
    case Tier::kReserved: return "Committed";
    case Tier::kSpot: return "Dynamic";
    case Tier::kOwned: return "Other";
  }
  return "Other";
}

std::string FocusProviderName(std::string_view provider) {
  if (provider == "aws") return "Amazon Web Services";
  if (provider == "gcp") return "Google Cloud";
  if (provider == "azure") return "Microsoft Azure";
  if (provider == "onprem") return "On-premises";
  if (provider.empty()) return "Unknown";
  return std::string(provider);
}

std::string FocusServiceName(std::string_view provider) {
  if (provider == "aws") return "Amazon EC2";
  if (provider == "gcp") return "Compute Engine";
  if (provider == "azure") return "Virtual Machines";
  return "GPU servers";
}

std::string CsvField(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  out += '"';
  return out;
}

namespace {

// Fixed-point with at most `places` decimals, trailing zeros dropped ("4.916", "0.5", "12").
std::string Dec(double v, int places = 6) {
  std::string t = fmt::format("{:.{}f}", v, places);
  if (t.find('.') != std::string::npos) {
    while (t.back() == '0') t.pop_back();
    if (t.back() == '.') t.pop_back();
  }
  return t == "-0" ? "0" : t;
}

std::string Micros(int64_t m) { return Dec(static_cast<double>(m) / kMicrosPerUsd); }

void Row(std::string& out, const std::vector<std::string>& fields) {
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ',';
    out += CsvField(fields[i]);
  }
  out += "\r\n";
}

// A reserved pool's commitment columns: category, name, type.
struct Commitment {
  std::string category, name, type;
};

Commitment CommitmentOf(const Pool* p, const std::string& pool, const std::string& kind) {
  Commitment c{"Usage", fmt::format("{} ({})", pool, kind), "Capacity Reservation"};
  if (p != nullptr && !p->commitment_type.empty()) c.type = p->commitment_type;
  if (p != nullptr && !p->commitment_category.empty()) c.category = p->commitment_category;
  if (p != nullptr && p->commitment_term_days > 0) c.name += fmt::format(", {}-day term", p->commitment_term_days);
  return c;
}

// Months (start, unix) a pool's capacity spans, each with its exact idle cost weight (capacity less usage,
// atoms, >= 0) and idle milli-GPU-seconds.
struct IdleMonth {
  int64_t month = 0;
  Int128 weight = 0;
  int64_t idle_mgs = 0;
};

std::vector<IdleMonth> IdleMonths(const PoolLine& p, const Ledger& ledger, const CostReport& rep, int64_t epoch) {
  std::map<int64_t, std::pair<Int128, int64_t>> m;  // month -> (atoms, mgs), capacity less usage
  for (const CapacityRecord& c : ledger.capacity()) {
    if (c.pool != p.pool) continue;
    for (int64_t t = c.start_s; t < c.end_s;) {
      const int64_t t1 = std::min(c.end_s, NextMonthStartUnix(epoch + t) - epoch);
      const int64_t mgs = int64_t{c.gpus} * kMilliPerGpu * (t1 - t);
      auto& [atoms, q] = m[MonthStartUnix(epoch + t)];
      atoms += CostAtoms(mgs, p.price_micros);
      q += mgs;
      t = t1;
    }
  }
  const std::vector<UsageRecord>& usage = ledger.usage();
  for (size_t i = 0; i < usage.size(); ++i) {
    if (PoolKey(usage[i]) != p.pool) continue;
    for (const ChargePiece& piece : rep.records[i].pieces) {
      auto& [atoms, q] = m[MonthStartUnix(epoch + piece.start_s)];
      atoms -= CostAtoms(piece.milli_gpu_s, p.price_micros);
      q -= piece.milli_gpu_s;
    }
  }
  std::vector<IdleMonth> out;
  for (const auto& [month, v] : m) out.push_back({month, v.first < 0 ? Int128{0} : v.first, std::max<int64_t>(v.second, 0)});
  return out;
}

// Splits a pool's idle cents over months (by their idle) and teams (their shares), so that every month's
// row cents sum to the month's part and every team's to its share: months in order, each month's part split
// over the teams' remaining shares by largest remainder. Returns (month index, team, cents).
std::vector<std::tuple<size_t, std::string, int64_t>> IdleCells(int64_t idle_cents, const std::vector<IdleMonth>& months,
                                                                std::vector<std::pair<std::string, int64_t>> teams) {
  std::vector<Int128> w;
  for (const IdleMonth& m : months) w.push_back(m.weight);
  const std::vector<int64_t> per_month = LargestRemainder(idle_cents, w);
  std::vector<std::tuple<size_t, std::string, int64_t>> cells;
  for (size_t k = 0; k < months.size(); ++k) {
    std::vector<Int128> rem;
    for (const auto& t : teams) rem.push_back(t.second < 0 ? -Int128{t.second} : Int128{t.second});
    const std::vector<int64_t> parts = k + 1 == months.size() ? std::vector<int64_t>() : LargestRemainder(per_month[k], rem);
    for (size_t t = 0; t < teams.size(); ++t) {
      const int64_t x = k + 1 == months.size() ? teams[t].second : parts[t];
      teams[t].second -= x;
      cells.emplace_back(k, teams[t].first, x);
    }
  }
  return cells;
}

}  // namespace

std::string FocusBillingAccountId(const CostOptions& o, std::string_view provider) {
  return fmt::format("{}-{}", o.billing_account_id, provider.empty() ? "unknown" : provider);
}

// One FOCUS row; costs in cents.
struct FocusRow {
  int64_t start_unix = 0, end_unix = 0;           // charge period
  std::string category, frequency, description;
  int64_t billed = 0, effective = 0, list = 0, contracted = 0, alloc = 0, idle_share = 0;
  double quantity_h = 0;
  std::string consumed_h;                         // empty: null (not a usage row)
  std::string list_unit, contracted_unit;
  std::string pricing_category, resource_id, resource_type, sub_account, tags = "{}";
  std::string commitment_id, commitment_status;   // a reserved pool's commitment (= capacity reservation)
  bool capacity_reservation = false;
  std::string gpu_kind, tier, pool, job_id, share, alloc_h, useful_h;
  size_t book = 0;
};

Result<std::string> CostModel::FocusCsv(const Ledger& ledger, std::string_view sub_account) const {
  Result<CostReport> evaluated = Evaluate(ledger);
  if (!evaluated.ok()) return evaluated.status();
  const CostReport& rep = *evaluated;
  const int64_t epoch = options_.epoch_unix_s;
  std::vector<FocusRow> rows = PurchaseAndUsageRows(ledger, rep);
  IdleRows(ledger, rep, &rows);
  if (!sub_account.empty())  // one team's view: its usage rows and its share of idle, nothing of the platform's
    rows.erase(std::remove_if(rows.begin(), rows.end(), [&](const FocusRow& f) { return f.sub_account != sub_account; }),
               rows.end());
  std::string out;
  Row(out, FocusColumns());
  const char* policy = IdlePolicyName(options_.idle_policy);
  const char* basis = ChargeBasisName(options_.charge_basis);
  for (const FocusRow& f : rows) {
    const PriceBook& book = books_[f.book];
    const Pool* bp = book.FindPool(f.pool);
    const std::string provider_key = bp ? bp->provider : std::string();
    const std::string provider = FocusProviderName(provider_key);
    const bool usage_row = f.category == "Usage";
    const bool committed = !f.commitment_id.empty();
    const Commitment cm = committed ? CommitmentOf(bp, f.pool, f.gpu_kind) : Commitment{};
    const int64_t month = MonthStartUnix(f.start_unix);
    const std::string region = bp ? bp->region : "", sku = bp ? bp->sku : "";
    Row(out, {FormatCents(f.billed), FocusBillingAccountId(options_, provider_key),
              fmt::format("{} ({})", options_.billing_account_name, provider), "USD",
              FormatIsoUtc(NextMonthStartUnix(month)), FormatIsoUtc(month),
              f.capacity_reservation ? f.commitment_id : "", f.capacity_reservation ? f.commitment_status : "",
              f.category, "", f.description, f.frequency, FormatIsoUtc(f.end_unix), FormatIsoUtc(f.start_unix),
              cm.category, f.commitment_id, cm.name, f.commitment_status, cm.type,
              f.consumed_h, usage_row ? "GPU-Hours" : "", FormatCents(f.contracted), f.contracted_unit,
              FormatCents(f.effective), provider, FormatCents(f.list), f.list_unit, f.pricing_category,
              Dec(f.quantity_h), "GPU-Hours", provider, provider, region,
              region.empty() ? "" : (bp->region_name.empty() ? region : bp->region_name), f.resource_id,
              f.resource_id, f.resource_type, "Compute", FocusServiceName(provider_key), sku,
              sku.empty() ? "" : fmt::format("{}:{}:{}", sku, f.tier, book.price_date()), f.sub_account,
              f.sub_account, f.tags, f.gpu_kind, f.tier, f.pool, f.job_id, f.share, f.share.empty() ? "" : basis,
              f.alloc_h, f.useful_h, FormatCents(f.alloc), FormatCents(f.idle_share), policy, book.price_date()});
  }
  return out;
}

std::vector<FocusRow> CostModel::PurchaseAndUsageRows(const Ledger& ledger, const CostReport& rep) const {
  const int64_t epoch = options_.epoch_unix_s;
  const char* basis = ChargeBasisName(options_.charge_basis);
  // A reserved pool with capacity records is a capacity reservation bought up front: one Purchase row bills
  // it in the month it starts; its usage and unused rows carry the amortised cost in EffectiveCost only.
  std::map<std::string, const PoolLine*> reservations;
  std::vector<FocusRow> rows;
  for (const PoolLine& p : rep.pools) {
    if (p.tier != Tier::kReserved || p.elastic) continue;
    reservations[p.pool] = &p;
    FocusRow f;
    f.start_unix = epoch + p.first_start_s;
    f.end_unix = NextMonthStartUnix(f.start_unix);
    f.category = "Purchase";
    f.frequency = "One-Time";
    f.description = fmt::format("capacity reservation {}: {} GPU-hours of {}", p.pool, Dec(p.capacity_milli_gpu_s / 3.6e6), p.gpu_kind);
    f.billed = f.list = f.contracted = p.capacity_cents;
    f.quantity_h = p.capacity_milli_gpu_s / 3.6e6;
    f.list_unit = f.contracted_unit = f.quantity_h > 0 ? Dec(CentsToUsd(p.capacity_cents) / f.quantity_h) : "0";
    f.pricing_category = "Standard";
    f.resource_id = f.commitment_id = p.pool;
    f.resource_type = "Capacity reservation";
    f.capacity_reservation = true;
    f.gpu_kind = p.gpu_kind;
    f.tier = TierName(p.tier);
    f.pool = p.pool;
    f.book = p.book;
    rows.push_back(f);
  }
  const std::vector<UsageRecord>& usage = ledger.usage();
  for (size_t i = 0; i < usage.size(); ++i) {
    const UsageRecord& r = usage[i];
    const RecordCharge& c = rep.records[i];
    const std::string pool = PoolKey(r);
    const bool reserved = reservations.count(pool) > 0;
    const int share = options_.charge_basis == ChargeBasis::kCompute ? r.compute_milli : r.memory_milli;
    for (size_t k = 0; k < c.pieces.size(); ++k) {
      const ChargePiece& piece = c.pieces[k];
      FocusRow f;
      f.start_unix = epoch + piece.start_s;
      f.end_unix = epoch + piece.end_s;
      f.category = "Usage";
      f.frequency = "Usage-Based";
      f.description = fmt::format("{} GPU-hours, {}/1000 of a GPU ({}), job {}", r.gpu_kind, share, basis, r.job_id);
      f.effective = f.contracted = f.alloc = piece.cost_cents;
      f.billed = reserved ? 0 : piece.cost_cents;
      f.list = piece.list_cost_cents;
      f.idle_share = k == 0 ? c.idle_share_cents : 0;  // the record's idle share, on its first line
      f.quantity_h = piece.milli_gpu_s / 3.6e6;
      f.consumed_h = Dec(f.quantity_h);
      f.list_unit = Micros(c.list_price_micros);
      f.contracted_unit = Micros(c.price_micros);
      f.pricing_category = FocusPricingCategory(r.tier);
      f.resource_id = r.node.empty() ? pool : r.node;
      f.resource_type = share == kMilliPerGpu ? "GPU" : "GPU slice";
      f.sub_account = r.team;
      f.tags = nlohmann::json{{"project", r.project}, {"queue", r.queue}}.dump();
      if (r.tier == Tier::kReserved) {
        f.commitment_id = pool;
        f.commitment_status = "Used";
        f.capacity_reservation = reserved;
      }
      f.gpu_kind = r.gpu_kind;
      f.tier = TierName(r.tier);
      f.pool = pool;
      f.job_id = std::to_string(r.job_id);
      f.share = std::to_string(share);
      f.alloc_h = Dec(f.quantity_h);
      f.useful_h = k == 0 ? Dec(c.useful_milli_gpu_s / 3.6e6) : "0";
      f.book = c.book;
      rows.push_back(f);
    }
  }
  return rows;
}

// Capacity nobody held: per pool and calendar month, split among the pool's teams when the idle policy shares
// it, else one row without a sub-account (the platform's own).
void CostModel::IdleRows(const Ledger& ledger, const CostReport& rep, std::vector<FocusRow>* rows) const {
  const int64_t epoch = options_.epoch_unix_s;
  for (const PoolLine& p : rep.pools) {
    if (p.elastic || (p.idle_milli_gpu_s == 0 && p.idle_cents == 0)) continue;
    const bool reserved = p.tier == Tier::kReserved;
    std::vector<std::pair<std::string, int64_t>> teams;
    if (p.idle_shared_cents != 0) {
      for (const TeamPoolLine& tp : rep.by_team_pool)
        if (tp.pool == p.pool && tp.idle_cost_cents != 0) teams.push_back({tp.team, tp.idle_cost_cents});
    } else {
      teams.push_back({"", p.idle_cents});
    }
    const std::vector<IdleMonth> months = IdleMonths(p, ledger, rep, epoch);
    std::vector<int64_t> month_cents(months.size(), 0);
    const auto cells = IdleCells(p.idle_cents, months, teams);
    for (const auto& [k, team, x] : cells) month_cents[k] += x;
    const ListPrice* lp = books_[p.book].FindListPrice(p.gpu_kind);
    const int64_t list_micros = lp ? MicrosPerGpuHour(lp->usd_per_gpu_hour) : p.price_micros;
    for (const auto& [k, team, x] : cells) {
      const IdleMonth& m = months[k];
      if (x == 0) continue;
      FocusRow f;
      f.start_unix = std::max(m.month, epoch + p.first_start_s);
      f.end_unix = NextMonthStartUnix(m.month);
      f.category = "Usage";
      f.frequency = "Usage-Based";
      f.description = reserved ? "unused capacity reservation (paid whether held or not)"
                               : "capacity nobody held (acquired and paid, no job on it)";
      const double frac = month_cents[k] != 0 ? static_cast<double>(x) / static_cast<double>(month_cents[k])
                                              : 1.0 / static_cast<double>(teams.size());
      f.quantity_h = static_cast<double>(m.idle_mgs) / 3.6e6 * frac;
      f.consumed_h = "0";
      f.contracted_unit = Micros(p.price_micros);
      f.list_unit = Micros(list_micros);
      f.effective = x;
      f.billed = reserved ? 0 : x;
      const double q = std::stod(Dec(f.quantity_h));
      f.contracted = std::llround(q * static_cast<double>(p.price_micros) / 1e4);
      f.list = std::llround(q * static_cast<double>(list_micros) / 1e4);
      f.idle_share = team.empty() ? 0 : x;
      f.pricing_category = FocusPricingCategory(p.tier);
      f.resource_id = p.pool;
      f.resource_type = "Idle GPU capacity";
      f.sub_account = team;
      if (reserved) {
        f.commitment_id = p.pool;
        f.commitment_status = "Unused";
        f.capacity_reservation = true;
      }
      f.gpu_kind = p.gpu_kind;
      f.tier = TierName(p.tier);
      f.pool = p.pool;
      f.alloc_h = "0";
      f.useful_h = "0";
      f.book = p.book;
      rows->push_back(f);
    }
  }
}

}  // namespace tessera
