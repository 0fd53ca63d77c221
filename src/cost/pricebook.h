#pragma once
// Prices of GPU capacity: pools (a tier, a GPU kind, a price per GPU-hour, and the tier's dynamics:
// provisioning delay for on-demand, reclaim notice and rate for spot, amortised purchase plus running
// costs for owned hardware) and the on-demand list price per GPU kind used as the comparison baseline.
// Defaults are data (pricebook_data.cc, figures from hardware-facts.md section 4 with their dates);
// YAML overrides them. A book is a snapshot at one `price_date`: every dated entry must hold at it
// (PriceValidity), and merging a text of another price_date is an error unless `allow_mixed_dates`. Pure: parses text handed in, reads no files and no clock.

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/cluster.h"

namespace tessera {

// Hours in a billing month (365 * 24 / 12), the convention of hardware-facts.md 4.4.
inline constexpr double kHoursPerMonth = 730.0;

// Owned hardware (one server or one purchase unit of `gpus` GPUs): its capital cost, recovered over
// `life_months` at the owner's cost of capital less the resale value at the end of the life, plus monthly
// running costs with power at the utilisation. The chargeback rate (UsdPerGpuHour) and the break-even
// (cost/breakeven.h) use the same finance: OwnedFinance below.
struct OwnedCost {
  int gpus = 8;
  double capex_usd = 0;                 // purchase price of the unit
  double life_months = 48;              // amortisation period (3-5 years is usual)
  double avg_power_kw = 0;              // electrical draw of the unit when busy (utilisation 1)
  double idle_power_kw = -1;            // draw when idle; < 0 = the same as busy (flat draw)
  double usd_per_kwh = 0;               // electricity price
  double pue = 1.0;                     // power usage effectiveness (>= 1)
  double colo_kw = 0;                   // colocation power reserved (billed per kW whether drawn or not)
  double colo_usd_per_kw_month = 0;     // colocation price
  double other_ops_usd_per_month = 0;   // network, storage and operations share
  double discount_rate_per_year = 0;    // the owner's cost of capital, i
  double resale_fraction = 0;           // resale value at the end of the life, fraction of capex
  double utilization = 1.0;             // planned utilisation in (0, 1]: the power the chargeback rate prices

  // Draw at utilisation u in [0, 1]: linear between the idle and the busy draw.
  double PowerKwAt(double u) const {
    const double idle = idle_power_kw < 0 ? avg_power_kw : idle_power_kw;
    return idle + (avg_power_kw - idle) * u;
  }
  double PowerUsdPerMonthAt(double u) const { return PowerKwAt(u) * kHoursPerMonth * usd_per_kwh * pue; }
  double PowerUsdPerMonth() const { return PowerUsdPerMonthAt(1.0); }
  double ColoUsdPerMonth() const { return colo_kw * colo_usd_per_kw_month; }
  // Running cost per month at utilisation u: power + colocation (reserved kW, paid whatever the draw) +
  // other operations. OpexUsdPerMonth() is the busy figure.
  double OpexUsdPerMonthAt(double u) const {
    return PowerUsdPerMonthAt(u) + ColoUsdPerMonth() + other_ops_usd_per_month;
  }
  double OpexUsdPerMonth() const { return OpexUsdPerMonthAt(1.0); }
  // Straight-line capex / life (shown for comparison; the rate uses OwnedFinance::capital_per_month).
  double AmortisationUsdPerMonth() const { return life_months > 0 ? capex_usd / life_months : 0; }
  // Chargeback price of one GPU-hour of the unit's capacity (held all month; idle time is the owner's idle
  // cost): (capital recovery + opex at the planned utilisation) / (730 h x gpus). See OwnedFinance.
  double UsdPerGpuHour() const;
};

// The finance of an owned unit, one function for the chargeback rate and the break-even:
//   d  = (1 + i)^(1/12) - 1                                  monthly discount rate
//   K  = capex - resale x capex / (1 + i)^(life / 12)         net capex (resale received at the end of life)
//   C  = K d / (1 - (1 + d)^-life)   (K / life when i = 0)    capital recovery per month: the level monthly
//                                                            charge whose discounted sum over the life is K
//   rate(u) = (C + opex at u) / (730 h x gpus)               $/GPU-hour of capacity
// A renter paying C + opex every month therefore breaks even with the owner exactly at the end of the life.
struct OwnedFinance {
  double monthly_discount_rate = 0;   // d
  double resale_value = 0;            // resale x capex, undiscounted
  double net_capex = 0;               // K
  double capital_per_month = 0;       // C
  double opex_per_month = 0;          // at the utilisation asked for
  double usd_per_gpu_hour = 0;        // (C + opex) / (730 x gpus)
};
OwnedFinance OwnedFinanceAt(const OwnedCost& o, double utilization);

// When a price holds: [valid_from, valid_until) as YYYY-MM-DD (empty: unknown / open). A book's entries
// must all hold at its price_date; an entry whose window ended before it may stay only when marked
// `carried_forward` with the reason (no later figure is known), and is shown as such.
struct PriceValidity {
  std::string valid_from;
  std::string valid_until;
  std::string carried_forward;
  bool Dated() const { return !valid_from.empty() || !valid_until.empty(); }
};

struct Pool {
  std::string name;             // unique within a PriceBook
  Tier tier = Tier::kOnDemand;
  std::string gpu_kind;         // catalog kind id, e.g. "h100-80gb"
  std::string provider;         // aws, gcp, azure, onprem, ...: the FOCUS provider and billing account
  std::string region;           // FOCUS RegionId (e.g. us-east-1); empty = unknown
  std::string region_name;      // FOCUS RegionName; empty = the id
  std::string sku;              // FOCUS SkuId: the provider's product (e.g. p5.48xlarge); empty = unknown
  // A commitment (reserved tier): its FOCUS CommitmentDiscountType (e.g. "Capacity Block", "Savings Plan",
  // "Reserved Instance", "Committed Use Discount"), category (Usage: a quantity; Spend: an amount per hour)
  // and term in days (a Capacity Block 1-182, a 1-year commitment 365, a 3-year 1095). 0 = not set.
  std::string commitment_type;
  std::string commitment_category;
  int64_t commitment_term_days = 0;
  double usd_per_gpu_hour = 0;  // for owned pools derived from `owned` unless given
  double provisioning_delay_s = 0;     // on-demand: time from request to usable capacity
  double reclaim_notice_s = 0;         // spot: warning before a reclaim (AWS 120 s, GCP/Azure 30 s)
  double reclaim_rate_per_hour = 0;    // spot: reclaims per node-hour (Poisson); MTBF = 1 / rate
  OwnedCost owned;                     // owned pools only
  std::string source;                  // where the price comes from
  std::string date;                    // date of the source
  PriceValidity validity;
};

// On-demand list price of a GPU kind: the "same work on on-demand only" baseline and FOCUS ListCost.
struct ListPrice {
  std::string gpu_kind;
  double usd_per_gpu_hour = 0;
  std::string source;
  std::string date;
  PriceValidity validity;
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

  // The date every price of the book holds at (YYYY-MM-DD; empty only for a book without dated entries),
  // and its title.
  const std::string& price_date() const { return price_date_; }
  const std::string& title() const { return title_; }
  bool allow_mixed_dates() const { return allow_mixed_dates_; }
  // The book's own window (top-level valid_from / valid_until): where its undated-window entries (point-in-
  // time snapshots with a `date`) and carried-forward entries are used.
  const PriceValidity& window() const { return window_; }
  // The window an entry is used in: its own, else (no window, or carried forward) the book's.
  PriceValidity EffectiveWindow(const PriceValidity& v) const;
  // Whether an entry may price usage on `day` (YYYY-MM-DD): valid_from <= day < valid_until of its
  // effective window (an open end is open).
  bool ValidOn(const PriceValidity& v, const std::string& day) const;

  const std::vector<Pool>& pools() const { return pools_; }
  const std::vector<ListPrice>& list_prices() const { return list_prices_; }
  const Pool* FindPool(std::string_view name) const;
  // Adds a pool, or replaces the one of the same name (a derived pool of a baseline; no date checks).
  void AddPool(Pool p);
  // On-demand list price of a kind; error when the book has none.
  Result<double> OnDemandListPrice(std::string_view gpu_kind) const;
  const ListPrice* FindListPrice(std::string_view gpu_kind) const;

 private:
  std::vector<Pool> pools_;
  std::vector<ListPrice> list_prices_;
  std::string price_date_;
  std::string title_;
  bool allow_mixed_dates_ = false;
  PriceValidity window_;
};

// The book to price something on `day` (YYYY-MM-DD) with: among the books whose own window() covers the day,
// the one of the latest price_date (a later book supersedes an earlier one where both hold); `covered` false
// when none does, and then the nearest: the book whose window starts first when the day is before them all,
// else the one whose window ends last. Books must be non-empty.
struct BookChoice {
  size_t index = 0;
  bool covered = false;
};
BookChoice BookValidOn(const std::vector<PriceBook>& books, const std::string& day);

// Why `v` does not hold at `price_date` ("" when it does, or when either is undated).
std::string PriceDateConflict(const PriceValidity& v, const std::string& price_date);

}  // namespace tessera
