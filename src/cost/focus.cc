#include "cost/focus.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

#include "cost/cost_model.h"

namespace tessera {

const std::vector<std::string>& FocusColumns() {
  static const std::vector<std::string> kColumns = {
      "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd",
      "BillingPeriodStart", "CapacityReservationId", "CapacityReservationStatus", "ChargeCategory", "ChargeClass",
      "ChargeDescription", "ChargeFrequency", "ChargePeriodEnd", "ChargePeriodStart", "ConsumedQuantity",
      "ConsumedUnit", "ContractedCost", "ContractedUnitPrice", "EffectiveCost", "InvoiceIssuerName", "ListCost",
      "ListUnitPrice", "PricingCategory", "PricingQuantity", "PricingUnit", "ProviderName", "PublisherName",
      "ResourceId", "ResourceName", "ResourceType", "ServiceCategory", "ServiceName", "SubAccountId",
      "SubAccountName", "Tags", "x_GpuKind", "x_Tier", "x_Pool", "x_JobId", "x_GpuShareMilli", "x_ChargeBasis",
      "x_AllocatedGpuHours", "x_UsefulGpuHours", "x_AllocationCost", "x_IdleShareCost", "x_IdlePolicy"};
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

std::string FormatIsoUtc(int64_t unix_s) {
  using namespace std::chrono;
  const sys_seconds t{seconds{unix_s}};
  const sys_days day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss<seconds> hms{t - day};
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}Z", static_cast<int>(ymd.year()),
                     static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()), hms.hours().count(),
                     hms.minutes().count(), hms.seconds().count());
}

Result<int64_t> ParseIsoUtc(std::string_view text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  char z = 0;
  const std::string str(text);
  if (str.size() != 20 || std::sscanf(str.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &y, &mo, &d, &h, &mi, &s, &z) != 7 ||
      z != 'Z') {
    return Status::Error(fmt::format("'{}' is not a UTC time of the form YYYY-MM-DDTHH:MM:SSZ", text));
  }
  using namespace std::chrono;
  const year_month_day ymd{year{y}, month{static_cast<unsigned>(mo)}, day{static_cast<unsigned>(d)}};
  if (!ymd.ok() || h > 23 || mi > 59 || s > 59) return Status::Error(fmt::format("'{}' is not a valid date/time", text));
  const int64_t unix_s = sys_days{ymd}.time_since_epoch().count() * 86400LL + h * 3600LL + mi * 60LL + s;
  if (FormatIsoUtc(unix_s) != str) return Status::Error(fmt::format("'{}' is not a valid date/time", text));
  return unix_s;
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

std::string Cents(int64_t c) { return fmt::format("{}{}.{:02d}", c < 0 ? "-" : "", std::abs(c) / 100, std::abs(c) % 100); }

// One FOCUS row before its costs are rounded to cents.
struct FocusRow {
  std::string charge_start, charge_end, category, frequency, description;
  double billed = 0, effective = 0, list = 0, contracted = 0, alloc = 0, idle_share = 0;
  double quantity_h = 0;
  std::string consumed_h;                         // empty: null (not a usage row)
  double list_unit = 0, contracted_unit = 0;
  std::string pricing_category, provider, resource_id, resource_type, sub_account, tags = "{}";
  std::string reservation_id, reservation_status;
  std::string gpu_kind, tier, pool, job_id, share, alloc_h, useful_h;
};

void Row(std::string& out, const std::vector<std::string>& fields) {
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ',';
    out += CsvField(fields[i]);
  }
  out += "\r\n";
}

}  // namespace

Result<std::string> CostModel::FocusCsv(const Ledger& ledger, std::string_view sub_account) const {
  Result<CostReport> evaluated = Evaluate(ledger);
  if (!evaluated.ok()) return evaluated.status();
  const CostReport& rep = *evaluated;
  const int64_t epoch = options_.epoch_unix_s;
  const std::string bill_start = FormatIsoUtc(epoch + rep.billing_start_s);
  const std::string bill_end = FormatIsoUtc(epoch + rep.billing_end_s);
  const char* basis = ChargeBasisName(options_.charge_basis);
  auto provider_of = [&](const std::string& pool) {
    const Pool* p = book_.FindPool(pool);
    return p ? p->provider : std::string();
  };
  auto list_unit_of = [&](const std::string& kind) {
    const ListPrice* lp = book_.FindListPrice(kind);
    return lp ? lp->usd_per_gpu_hour : 0.0;
  };
  // A reserved pool with capacity records is a capacity reservation bought up front: one Purchase row
  // bills it, and its usage and unused rows carry the amortised cost in EffectiveCost only.
  std::map<std::string, const PoolLine*> reservations;
  for (const PoolLine& p : rep.pools)
    if (p.tier == Tier::kReserved && !p.elastic) reservations[p.pool] = &p;
  std::vector<FocusRow> rows;
  for (const auto& [name, p] : reservations) {
    FocusRow f;
    f.charge_start = bill_start;
    f.charge_end = bill_end;
    f.category = "Purchase";
    f.frequency = "One-Time";
    f.description = fmt::format("capacity reservation {}: {} GPU-hours of {}", name, Dec(p->capacity_milli_gpu_s / 3.6e6), p->gpu_kind);
    f.billed = f.list = f.contracted = p->capacity_usd;
    f.quantity_h = p->capacity_milli_gpu_s / 3.6e6;
    f.list_unit = f.contracted_unit = f.quantity_h > 0 ? p->capacity_usd / f.quantity_h : 0;
    f.pricing_category = "Standard";
    f.provider = provider_of(name);
    f.resource_id = name;
    f.resource_type = "Capacity reservation";
    f.reservation_id = name;
    f.gpu_kind = p->gpu_kind;
    f.tier = TierName(p->tier);
    f.pool = name;
    rows.push_back(f);
  }
  const std::vector<UsageRecord>& usage = ledger.usage();
  for (size_t i = 0; i < usage.size(); ++i) {
    const UsageRecord& r = usage[i];
    const RecordCharge& c = rep.records[i];
    const std::string pool = PoolKey(r);
    const bool reserved = reservations.count(pool) > 0;
    const int share = options_.charge_basis == ChargeBasis::kCompute ? r.compute_milli : r.memory_milli;
    FocusRow f;
    f.charge_start = FormatIsoUtc(epoch + r.start_s);
    f.charge_end = FormatIsoUtc(epoch + r.end_s);
    f.category = "Usage";
    f.frequency = "Usage-Based";
    f.description = fmt::format("{} GPU-hours, {}/1000 of a GPU ({}), job {}", r.gpu_kind, share, basis, r.job_id);
    f.effective = f.contracted = f.alloc = c.cost_usd;
    f.billed = reserved ? 0.0 : c.cost_usd;
    f.list = c.list_cost_usd;
    f.idle_share = c.idle_share_usd;
    f.quantity_h = c.milli_gpu_s / 3.6e6;
    f.consumed_h = Dec(f.quantity_h);
    f.list_unit = c.list_usd_per_gpu_hour;
    f.contracted_unit = c.usd_per_gpu_hour;
    f.pricing_category = FocusPricingCategory(r.tier);
    f.provider = provider_of(pool);
    f.resource_id = r.node.empty() ? pool : r.node;
    f.resource_type = share == kMilliPerGpu ? "GPU" : "GPU slice";
    f.sub_account = r.team;
    f.tags = nlohmann::json{{"project", r.project}, {"queue", r.queue}}.dump();
    if (reserved) {
      f.reservation_id = pool;
      f.reservation_status = "Used";
    }
    f.gpu_kind = r.gpu_kind;
    f.tier = TierName(r.tier);
    f.pool = pool;
    f.job_id = std::to_string(r.job_id);
    f.share = std::to_string(share);
    f.alloc_h = Dec(f.quantity_h);
    f.useful_h = Dec(c.useful_milli_gpu_s / 3.6e6);
    rows.push_back(f);
  }
  // Capacity nobody held: per pool, split among the pool's teams when the idle policy shares it, else one
  // row without a sub-account (the platform's own).
  for (const PoolLine& p : rep.pools) {
    if (p.idle_milli_gpu_s == 0 && p.idle_usd == 0) continue;
    const bool reserved = reservations.count(p.pool) > 0;
    const double idle_h = p.idle_milli_gpu_s / 3.6e6;
    std::vector<std::pair<std::string, double>> parts;
    if (p.idle_shared_usd != 0) {
      for (const TeamPoolLine& tp : rep.by_team_pool)
        if (tp.pool == p.pool && tp.idle_cost_usd != 0) parts.push_back({tp.team, tp.idle_cost_usd});
    } else {
      parts.push_back({"", p.idle_usd});
    }
    for (const auto& [team, usd] : parts) {
      FocusRow f;
      f.charge_start = bill_start;
      f.charge_end = bill_end;
      f.category = "Usage";
      f.frequency = "Usage-Based";
      f.description = reserved ? "unused capacity reservation (paid whether held or not)"
                               : "capacity nobody held (acquired and paid, no job on it)";
      f.quantity_h = p.idle_usd != 0 ? idle_h * usd / p.idle_usd : idle_h;
      f.consumed_h = "0";
      f.contracted_unit = p.capacity_milli_gpu_s > 0 ? p.capacity_usd * 3.6e6 / p.capacity_milli_gpu_s : 0;
      f.list_unit = list_unit_of(p.gpu_kind);
      f.effective = f.contracted = usd;
      f.billed = reserved ? 0.0 : usd;
      f.list = f.quantity_h * f.list_unit;
      f.idle_share = team.empty() ? 0.0 : usd;
      f.pricing_category = FocusPricingCategory(p.tier);
      f.provider = provider_of(p.pool);
      f.resource_id = p.pool;
      f.resource_type = "Idle GPU capacity";
      f.sub_account = team;
      if (reserved) {
        f.reservation_id = p.pool;
        f.reservation_status = "Unused";
      }
      f.gpu_kind = p.gpu_kind;
      f.tier = TierName(p.tier);
      f.pool = p.pool;
      f.alloc_h = "0";
      f.useful_h = "0";
      rows.push_back(f);
    }
  }
  if (!sub_account.empty())  // one team's view: its usage rows and its share of idle, nothing of the platform's
    rows.erase(std::remove_if(rows.begin(), rows.end(), [&](const FocusRow& f) { return f.sub_account != sub_account; }),
               rows.end());
  // Each cost cell rounded to cents on its own (half away from zero): rounding keeps BilledCost <= ListCost
  // wherever it held, and a column's sum is within half a cent per row of the report's total.
  auto cents = [](double usd) { return std::llround(usd * 100); };
  std::string out;
  Row(out, FocusColumns());
  const char* policy = IdlePolicyName(options_.idle_policy);
  for (const FocusRow& f : rows) {
    const std::string provider = FocusProviderName(f.provider);
    const bool usage_row = f.category == "Usage";
    Row(out, {Cents(cents(f.billed)), options_.billing_account_id, options_.billing_account_name, "USD", bill_end, bill_start,
              f.reservation_id, f.reservation_status, f.category, "", f.description, f.frequency, f.charge_end,
              f.charge_start, f.consumed_h, usage_row ? "GPU-Hours" : "", Cents(cents(f.contracted)), Dec(f.contracted_unit),
              Cents(cents(f.effective)), provider, Cents(cents(f.list)), Dec(f.list_unit), f.pricing_category, Dec(f.quantity_h),
              "GPU-Hours", provider, provider, f.resource_id, f.resource_id, f.resource_type, "Compute",
              FocusServiceName(f.provider), f.sub_account, f.sub_account, f.tags, f.gpu_kind, f.tier, f.pool, f.job_id,
              f.share, f.share.empty() ? "" : basis, f.alloc_h, f.useful_h, Cents(cents(f.alloc)), Cents(cents(f.idle_share)),
              policy});
  }
  return out;
}

}  // namespace tessera
