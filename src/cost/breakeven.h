#pragma once
// Buy versus rent: months until owned hardware (capex plus monthly running costs) costs less than
// renting the same GPUs on a cloud tier, at a given utilisation u.
//
//   rent paid per month   R(u, t) = rent(t) * u for pay-as-you-go tiers (on-demand, spot, market), rent(t)
//                               for committed ones (a reserved Capacity Block is paid every hour, held or not)
//   owned opex per month  O(u) = power at u (linear between idle and busy draw) + colocation + other ops
//   net capex             K    = capex - resale * capex / (1 + i)^(life / 12)   (OwnedFinanceAt, the same
//                               finance as an owned pool's chargeback rate)
//   months m: the first m with  sum_{k=1..m} (R(u, k) - O(u)) / (1 + d)^k >= K,  d = (1 + i)^(1/12) - 1
//             = -ln(1 - K d / M) / ln(1 + d)  with M = R(u) - O(u)   (K / M when i = 0) for a constant rent
//
// rent(t) follows the alternative's price path (a cut at a date: rent x factor from then on); a committed
// alternative keeps the price of its term's start for the whole term (term_days: a Capacity Block 1-182
// days) and renews at the path's price then. With a path the margin is piecewise constant and each piece
// is discounted exactly (BreakEvenMonthsOnPath). "never" when the discounted margin never reaches K.
// Pure: parses text handed in.

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"
#include "cost/pricebook.h"

namespace tessera {

// One printed assumption: what, the figure with its unit, and where it comes from.
struct Assumption {
  std::string name;
  std::string value;
  std::string source;
};

// A change of an alternative's rent: from `from` (YYYY-MM-DD) on, rent = usd_per_hour x (1 - discount) x factor.
struct RentChange {
  std::string from;
  double factor = 1;
  double months = 0;               // from the config's start_date (set by the parser)
};

// A cloud alternative rented for the same number of GPUs as the owned unit.
struct RentAlternative {
  std::string name;
  std::string tier;              // on-demand, reserved, spot, or market
  double usd_per_hour = 0;       // for the whole unit (all of owned.gpus), before the discount
  double discount = 0;           // fraction off (0.45 = 45% cut)
  bool committed = false;        // paid every hour whether used (default: tier reserved)
  std::string commitment_type;   // e.g. "Capacity Block" (then term_days is 1-182)
  double term_days = 0;          // a committed price holds this long, then renews at the path's price;
                                 // 0 = the owned unit's life
  std::vector<RentChange> path;  // in date order; empty = constant rent
  std::string source;
  double EffectiveUsdPerHour() const { return usd_per_hour * (1.0 - discount); }
  // The factor of the path at month t (1 before its first change).
  double FactorAt(double t) const;
};

struct BreakEvenConfig {
  std::string name;                   // what is bought, e.g. "8x H100 server"
  OwnedCost owned;                    // with its finance: discount_rate_per_year, resale_fraction
  std::vector<RentAlternative> alternatives;
  std::string start_date;             // YYYY-MM-DD of month 0 (the purchase); needed by a price path
  std::vector<double> utilizations = {1.0, 0.5};
  std::vector<Assumption> assumptions;  // owned-side inputs with their sources, in file order
};

// Adds a rent change (a cut of `cut` = 0.45 from `date`) to every alternative whose name contains `match`
// (empty: all); months from the config's start_date. Error: no start_date, a bad date, a date before the
// start, nothing matched, or a cut outside [0, 1).
Status AddRentCut(BreakEvenConfig* config, const std::string& match, const std::string& date, double cut);

struct BreakEvenRow {
  std::string alternative;
  std::string tier;
  bool committed = false;
  double utilization = 0;
  double usd_per_hour = 0;        // effective, after discount
  double monthly_rent = 0;        // usd_per_hour * 730 (at 100%)
  double rent_paid = 0;           // R(u): monthly_rent * u, or monthly_rent when committed
  double opex = 0;                // O(u)
  double monthly_margin = 0;      // R(u) - O(u)
  double rent_paid_last = 0;      // R(u) after the path's last change (= rent_paid without a path)
  double term_months = 0;         // committed: the term the price is held for
  double months = 0;              // +inf when never
  bool never = false;
  bool beyond_life = false;       // breaks even only after the amortisation life
};

struct BreakEvenResult {
  double capex = 0;
  double net_capex = 0;           // K: capex less the discounted resale value
  double resale_value = 0;        // at the end of the life, undiscounted
  double monthly_discount_rate = 0;
  double opex_per_month = 0;      // at utilisation 1
  double power_per_month = 0;     // at utilisation 1
  double colo_per_month = 0;
  double other_ops_per_month = 0;
  double amortisation_per_month = 0;  // straight line, for comparison
  double capital_per_month = 0;       // C: capital recovery at the discount rate (OwnedFinance)
  std::vector<BreakEvenRow> rows;   // alternative-major, utilisation-minor
};

// Months until the discounted monthly margin repays `net_capex`; +inf when it never does. The monthly
// discount rate 0 gives net_capex / margin.
double BreakEvenMonths(double net_capex, double monthly_margin, double monthly_discount_rate);

// One piece of a margin path: `margin` per month from month `from` until the next piece (the last forever).
struct MarginPiece {
  double from = 0;
  double margin = 0;
};
// The same for a piecewise-constant margin (pieces in order, the first from 0): the first m with
// integral-free discounted sum  sum over pieces of margin x ((1+d)^-a - (1+d)^-min(b, m)) / d  >= K
// (margin x (min(b, m) - a) when d = 0). One piece gives BreakEvenMonths.
double BreakEvenMonthsOnPath(double net_capex, const std::vector<MarginPiece>& pieces, double monthly_discount_rate);

// Parses a break-even config (schema: docs/cost.md, example: examples/cost/breakeven-h100.yaml).
// Errors name the source, line and field.
Result<BreakEvenConfig> ParseBreakEvenYaml(std::string_view text, std::string_view source);

BreakEvenResult ComputeBreakEven(const BreakEvenConfig& config);

// Human-readable report: every assumption with its source, then months per alternative and utilisation.
std::string FormatBreakEvenText(const BreakEvenConfig& config, const BreakEvenResult& result);
nlohmann::json BreakEvenJson(const BreakEvenConfig& config, const BreakEvenResult& result);

}  // namespace tessera
