// The finance of owned hardware (cost/pricebook.h, OwnedFinance): one computation for the chargeback rate of
// an owned pool and for the break-even (cost/breakeven.cc).
#include <cmath>

#include "cost/pricebook.h"

namespace tessera {

OwnedFinance OwnedFinanceAt(const OwnedCost& o, double utilization) {
  OwnedFinance f;
  const double i = o.discount_rate_per_year;
  f.monthly_discount_rate = std::pow(1 + i, 1.0 / 12.0) - 1;
  f.resale_value = o.resale_fraction * o.capex_usd;
  f.net_capex = o.capex_usd - f.resale_value / std::pow(1 + i, o.life_months / 12.0);
  const double d = f.monthly_discount_rate;
  if (o.life_months <= 0) {
    f.capital_per_month = 0;
  } else if (d <= 0) {
    f.capital_per_month = f.net_capex / o.life_months;
  } else {
    f.capital_per_month = f.net_capex * d / (1 - std::pow(1 + d, -o.life_months));
  }
  f.opex_per_month = o.OpexUsdPerMonthAt(utilization);
  f.usd_per_gpu_hour = o.gpus > 0 ? (f.capital_per_month + f.opex_per_month) / (kHoursPerMonth * o.gpus) : 0;
  return f;
}

double OwnedCost::UsdPerGpuHour() const { return OwnedFinanceAt(*this, utilization).usd_per_gpu_hour; }

}  // namespace tessera
