#pragma once
// Buy versus rent: months until owned hardware (capex plus monthly running costs) costs less than
// renting the same GPUs on a cloud tier, at a given utilisation u.
//
//   rent paid per month   R(u) = rent * u for pay-as-you-go tiers (on-demand, spot, market), rent for
//                               committed ones (a reserved Capacity Block is paid every hour, held or not)
//   owned opex per month  O(u) = power at u (linear between idle and busy draw) + colocation + other ops
//   net capex             K    = capex - resale * capex / (1 + i)^(life / 12)   (resale at end of life)
//   months m: the first m with  sum_{k=1..m} (R(u) - O(u)) / (1 + d)^k >= K,  d = (1 + i)^(1/12) - 1
//             = -ln(1 - K d / M) / ln(1 + d)  with M = R(u) - O(u)   (K / M when i = 0)
//
// "never" when M <= 0 or the discounted margin never reaches K (K d >= M). Pure: parses text handed in.

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "cost/pricebook.h"

namespace tessera {

// One printed assumption: what, the figure with its unit, and where it comes from.
struct Assumption {
  std::string name;
  std::string value;
  std::string source;
};

// A cloud alternative rented for the same number of GPUs as the owned unit.
struct RentAlternative {
  std::string name;
  std::string tier;              // on-demand, reserved, spot, or market
  double usd_per_hour = 0;       // for the whole unit (all of owned.gpus), before the discount
  double discount = 0;           // fraction off (0.45 = 45% cut)
  bool committed = false;        // paid every hour whether used (default: tier reserved)
  std::string source;
  double EffectiveUsdPerHour() const { return usd_per_hour * (1.0 - discount); }
};

struct BreakEvenConfig {
  std::string name;                   // what is bought, e.g. "8x H100 server"
  OwnedCost owned;
  std::vector<RentAlternative> alternatives;
  double discount_rate_per_year = 0;  // owner's cost of capital, i
  double resale_fraction = 0;         // resale value at the end of the life, fraction of capex
  std::vector<double> utilizations = {1.0, 0.5};
  std::vector<Assumption> assumptions;  // owned-side inputs with their sources, in file order
};

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
  double amortisation_per_month = 0;
  std::vector<BreakEvenRow> rows;   // alternative-major, utilisation-minor
};

// Months until the discounted monthly margin repays `net_capex`; +inf when it never does. The monthly
// discount rate 0 gives net_capex / margin.
double BreakEvenMonths(double net_capex, double monthly_margin, double monthly_discount_rate);

// Parses a break-even config (schema: docs/cost.md, example: examples/cost/breakeven-h100.yaml).
// Errors name the source, line and field.
Result<BreakEvenConfig> ParseBreakEvenYaml(std::string_view text, std::string_view source);

BreakEvenResult ComputeBreakEven(const BreakEvenConfig& config);

// Human-readable report: every assumption with its source, then months per alternative and utilisation.
std::string FormatBreakEvenText(const BreakEvenConfig& config, const BreakEvenResult& result);
nlohmann::json BreakEvenJson(const BreakEvenConfig& config, const BreakEvenResult& result);

}  // namespace tessera
