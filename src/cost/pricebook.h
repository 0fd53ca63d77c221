#pragma once
// Prices of GPU capacity: pools (a tier, a GPU kind, a price per GPU-hour, and the tier's dynamics:
// provisioning delay for on-demand, reclaim notice and rate for spot, amortised purchase plus running
// costs for owned hardware) and the on-demand list price per GPU kind used as the comparison baseline.
// Defaults are data (pricebook_data.cc, figures from hardware-facts.md section 4 with their dates);
// YAML overrides them. Pure: parses text handed in, reads no files and no clock.

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/cluster.h"

namespace tessera {

// Hours in a billing month (365 * 24 / 12), the convention of hardware-facts.md 4.4.
inline constexpr double kHoursPerMonth = 730.0;

// Spellings used by the cost layer: "reserved", "on-demand", "spot", "owned" (same as the model's
// TierName). Kept here so that the cost layer needs no model object code.
const char* TierKey(Tier t);
// Accepts the spellings above plus "on_demand"/"ondemand" (case-sensitive). Error names the value.
Result<Tier> ParseTierKey(std::string_view s);

// Owned hardware (one server or one purchase unit of `gpus` GPUs): capital cost amortised straight-line
// over `life_months`, plus monthly running costs.
struct OwnedCost {
  int gpus = 8;
  double capex_usd = 0;                 // purchase price of the unit
  double life_months = 48;              // amortisation period (3-5 years is usual)
  double avg_power_kw = 0;              // average electrical draw of the unit
  double usd_per_kwh = 0;               // electricity price
  double pue = 1.0;                     // power usage effectiveness (>= 1)
  double colo_kw = 0;                   // colocation power reserved (billed per kW whether drawn or not)
  double colo_usd_per_kw_month = 0;     // colocation price
  double other_ops_usd_per_month = 0;   // network, storage and operations share

  double PowerUsdPerMonth() const { return avg_power_kw * kHoursPerMonth * usd_per_kwh * pue; }
  double ColoUsdPerMonth() const { return colo_kw * colo_usd_per_kw_month; }
  // Running cost per month: power + colocation + other operations.
  double OpexUsdPerMonth() const { return PowerUsdPerMonth() + ColoUsdPerMonth() + other_ops_usd_per_month; }
  double AmortisationUsdPerMonth() const { return life_months > 0 ? capex_usd / life_months : 0; }
  // Price of one GPU-hour when the unit is held all month (idle time is the owner's idle cost).
  double UsdPerGpuHour() const {
    return gpus > 0 ? (AmortisationUsdPerMonth() + OpexUsdPerMonth()) / (kHoursPerMonth * gpus) : 0;
  }
};

struct Pool {
  std::string name;             // unique within a PriceBook
  Tier tier = Tier::kOnDemand;
  std::string gpu_kind;         // catalog kind id, e.g. "h100-80gb"
  std::string provider;         // informational: aws, gcp, azure, onprem, ...
  double usd_per_gpu_hour = 0;  // for owned pools derived from `owned` unless given
  double provisioning_delay_s = 0;     // on-demand: time from request to usable capacity
  double reclaim_notice_s = 0;         // spot: warning before a reclaim (AWS 120 s, GCP/Azure 30 s)
  double reclaim_rate_per_hour = 0;    // spot: reclaims per node-hour (Poisson); MTBF = 1 / rate
  OwnedCost owned;                     // owned pools only
  std::string source;                  // where the price comes from
  std::string date;                    // date of the source
};

// On-demand list price of a GPU kind: the "same work on on-demand only" baseline and FOCUS ListCost.
struct ListPrice {
  std::string gpu_kind;
  double usd_per_gpu_hour = 0;
  std::string source;
  std::string date;
};

class PriceBook {
 public:
  // The defaults compiled into the binary (hardware-facts.md section 4).
  static const PriceBook& Default();
  // The YAML text of the defaults (also shipped as examples/cost/prices.yaml).
  static std::string_view DefaultYaml();
  // Parses a price book. Schema: docs/cost.md. `source` names the text in errors.
  static Result<PriceBook> FromYaml(std::string_view text, std::string_view source);
  // Adds or replaces pools (by name) and list prices (by kind) from YAML.
  Status Merge(std::string_view text, std::string_view source);

  const std::vector<Pool>& pools() const { return pools_; }
  const std::vector<ListPrice>& list_prices() const { return list_prices_; }
  const Pool* FindPool(std::string_view name) const;
  // On-demand list price of a kind; error when the book has none.
  Result<double> OnDemandListPrice(std::string_view gpu_kind) const;
  const ListPrice* FindListPrice(std::string_view gpu_kind) const;

 private:
  std::vector<Pool> pools_;
  std::vector<ListPrice> list_prices_;
};

}  // namespace tessera
