#include "cost/focus.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>

#include "cost/cost_model.h"

namespace tessera {

const std::vector<std::string>& FocusColumns() {
  static const std::vector<std::string> kColumns = {
      "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd", "BillingCurrency",
      "BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "ListUnitPrice", "ContractedUnitPrice",
      "ConsumedQuantity", "ConsumedUnit", "PricingQuantity", "PricingUnit", "PricingCategory", "ChargeCategory",
      "ChargeDescription", "ProviderName", "ServiceName", "ServiceCategory", "ResourceId", "ResourceName",
      "ResourceType", "SubAccountId", "SubAccountName", "Tags", "x_GpuKind", "x_Tier", "x_Pool", "x_JobId",
      "x_GpuShareMilli", "x_ChargeBasis", "x_AllocatedGpuHours", "x_UsefulGpuHours", "x_AllocationCost",
      "x_IdleShareCost", "x_IdlePolicy"};
  return kColumns;
}

const char* FocusPricingCategory(Tier t) {
  switch (t) {
    case Tier::kOnDemand: return "Standard";
    case Tier::kReserved: return "Committed";
    case Tier::kSpot: return "Dynamic";
    case Tier::kOwned: return "Committed";
  }
  return "Other";
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

std::string Num(double v) { return fmt::format("{}", v); }

void Row(std::string& out, const std::vector<std::string>& fields) {
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ',';
    out += CsvField(fields[i]);
  }
  out += "\r\n";
}

}  // namespace

Result<std::string> CostModel::FocusCsv(const Ledger& ledger) const {
  Result<CostReport> evaluated = Evaluate(ledger);
  if (!evaluated.ok()) return evaluated.status();
  const CostReport& rep = *evaluated;
  const int64_t epoch = options_.epoch_unix_s;
  const std::string bill_start = FormatIsoUtc(epoch + rep.billing_start_s);
  const std::string bill_end = FormatIsoUtc(epoch + rep.billing_end_s);
  const char* basis = ChargeBasisName(options_.charge_basis);
  const char* policy = IdlePolicyName(options_.idle_policy);
  std::string out;
  Row(out, FocusColumns());
  const std::vector<UsageRecord>& usage = ledger.usage();
  for (size_t i = 0; i < usage.size(); ++i) {
    const UsageRecord& r = usage[i];
    const RecordCharge& c = rep.records[i];
    const double hours = static_cast<double>(c.milli_gpu_s) / 3.6e6;
    const int share = options_.charge_basis == ChargeBasis::kCompute ? r.compute_milli : r.memory_milli;
    const nlohmann::json tags = {{"project", r.project}, {"queue", r.queue}};
    const std::string resource = r.node.empty() ? PoolKey(r) : r.node;
    Row(out, {bill_start, bill_end, FormatIsoUtc(epoch + r.start_s), FormatIsoUtc(epoch + r.end_s), "USD",
              Num(c.cost_usd + c.idle_share_usd), Num(c.cost_usd + c.idle_share_usd), Num(c.list_cost_usd),
              Num(c.cost_usd), Num(c.list_usd_per_gpu_hour), Num(c.usd_per_gpu_hour), Num(hours), "GPU-Hours",
              Num(hours), "GPU-Hours", FocusPricingCategory(r.tier), "Usage",
              fmt::format("{} GPU-hours, {}/1000 of a GPU ({}), job {}", r.gpu_kind, share, basis, r.job_id),
              "Tessera", "Tessera GPU", "AI and Machine Learning", resource, resource,
              share == kMilliPerGpu ? "GPU" : "GPU slice", r.team, r.team, tags.dump(), r.gpu_kind,
              TierKey(r.tier), PoolKey(r), std::to_string(r.job_id), std::to_string(share), basis, Num(hours),
              Num(static_cast<double>(c.useful_milli_gpu_s) / 3.6e6), Num(c.cost_usd), Num(c.idle_share_usd), policy});
  }
  // Idle capacity nobody held, when it is not shared out: one row per pool, no SubAccount.
  if (rep.idle_unshared_cost != 0 || rep.idle_shared_cost == 0) {
    for (const PoolLine& p : rep.pools) {
      if (p.idle_milli_gpu_s == 0 && p.idle_usd == 0) continue;
      const double hours = static_cast<double>(p.idle_milli_gpu_s) / 3.6e6;
      const ListPrice* lp = book_.FindListPrice(p.gpu_kind);
      const double list_unit = lp ? lp->usd_per_gpu_hour : 0.0;
      const double unit = p.capacity_milli_gpu_s > 0 ? p.capacity_usd * 3.6e6 / static_cast<double>(p.capacity_milli_gpu_s) : 0;
      Row(out, {bill_start, bill_end, bill_start, bill_end, "USD", Num(p.idle_usd), Num(p.idle_usd),
                Num(hours * list_unit), Num(p.idle_usd), Num(list_unit), Num(unit), Num(hours), "GPU-Hours", Num(hours),
                "GPU-Hours", FocusPricingCategory(p.tier), "Usage", "idle capacity nobody held", "Tessera",
                "Tessera GPU", "AI and Machine Learning", p.pool, p.pool, "Idle GPU capacity", "", "", "{}",
                p.gpu_kind, TierKey(p.tier), p.pool, "", "", basis, "0", "0", "0", "0", policy});
    }
  }
  return out;
}

}  // namespace tessera
