#pragma once
// Buy versus rent: months until owned hardware (capex plus monthly running costs) costs less than
// renting the same GPUs on a cloud tier, at a given utilisation.
//
//   months = capex / (monthly_rent * utilisation - opex),  monthly_rent = usd_per_hour * 730
//
// "never" when monthly_rent * utilisation <= opex. Utilisation scales the rent: a rented alternative
// is only paid for the hours the owned server would have been busy. Pure: parses text handed in.

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
  std::string source;
  double EffectiveUsdPerHour() const { return usd_per_hour * (1.0 - discount); }
};

struct BreakEvenConfig {
  std::string name;                   // what is bought, e.g. "8x H100 server"
  OwnedCost owned;
  std::vector<RentAlternative> alternatives;
  std::vector<double> utilizations = {1.0, 0.5};
  std::vector<Assumption> assumptions;  // owned-side inputs with their sources, in file order
};

struct BreakEvenRow {
  std::string alternative;
  std::string tier;
  double utilization = 0;
  double usd_per_hour = 0;        // effective, after discount
  double monthly_rent = 0;        // usd_per_hour * 730 (at 100%)
  double monthly_margin = 0;      // monthly_rent * utilisation - opex
  double months = 0;              // +inf when never
  bool never = false;             // monthly_rent * utilisation <= opex
  bool beyond_life = false;       // breaks even only after the amortisation life
};

struct BreakEvenResult {
  double capex = 0;
  double opex_per_month = 0;
  double power_per_month = 0;
  double colo_per_month = 0;
  double other_ops_per_month = 0;
  double amortisation_per_month = 0;
  std::vector<BreakEvenRow> rows;   // alternative-major, utilisation-minor
};

// Months to break even; +inf when monthly_rent * utilization <= opex.
double BreakEvenMonths(double capex, double monthly_rent, double utilization, double opex_per_month);

// Parses a break-even config (schema: docs/cost.md, example: examples/cost/breakeven-h100.yaml).
// Errors name the source, line and field.
Result<BreakEvenConfig> ParseBreakEvenYaml(std::string_view text, std::string_view source);

BreakEvenResult ComputeBreakEven(const BreakEvenConfig& config);

// Human-readable report: every assumption with its source, then months per alternative and utilisation.
std::string FormatBreakEvenText(const BreakEvenConfig& config, const BreakEvenResult& result);
nlohmann::json BreakEvenJson(const BreakEvenConfig& config, const BreakEvenResult& result);

}  // namespace tessera
