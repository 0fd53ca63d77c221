#include "cost/breakeven.h"

#include <yaml-cpp/yaml.h>

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <limits>

#include "base/yaml_reader.h"

namespace tessera {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// "$1,234.56" (or without cents when `cents` is false).
std::string Money(double v, bool cents = true) {
  std::string digits = cents ? fmt::format("{:.2f}", std::fabs(v)) : fmt::format("{:.0f}", std::fabs(v));
  size_t dot = digits.find('.');
  if (dot == std::string::npos) dot = digits.size();
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && i < dot && (dot - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (v < 0 ? "-$" : "$") + out;
}

void Read(FieldReader& r, BreakEvenConfig& cfg, const char* key, double* field, bool required, double min,
          double max, const char* label, const std::function<std::string(double)>& show) {
  SourcedNumber s{*field, ""};
  bool present = r.Has(key);
  r.SourcedDouble(key, &s, required, min, max);
  if (!r.status().ok()) return;
  *field = s.value;
  cfg.assumptions.push_back({label, show(s.value), present ? (s.source.empty() ? "given" : s.source) : "default"});
}

}  // namespace

double BreakEvenMonths(double net_capex, double monthly_margin, double monthly_discount_rate) {
  if (!(monthly_margin > 0)) return kInf;
  if (net_capex <= 0) return 0;
  const double d = monthly_discount_rate;
  if (d <= 0) return net_capex / monthly_margin;
  const double x = 1 - net_capex * d / monthly_margin;
  if (!(x > 0)) return kInf;
  return -std::log(x) / std::log1p(d);
}

Result<BreakEvenConfig> ParseBreakEvenYaml(std::string_view text, std::string_view source) {
  auto parsed = ParseYaml(text, source);
  if (!parsed.ok()) return parsed.status();
  const YAML::Node root = *parsed;
  BreakEvenConfig cfg;
  FieldReader top(root, source, "");
  YAML::Node owned = top.Child("owned");
  YAML::Node alts = top.Child("alternatives");
  YAML::Node utils = top.Child("utilizations");
  double hours = kHoursPerMonth;
  top.Double("hours_per_month", &hours, false, 0, kInf);
  if (top.status().ok() && hours != kHoursPerMonth) top.Fail("hours_per_month", "only 730 (365 * 24 / 12) is supported");
  if (top.status().ok() && !owned) top.Fail("owned", "missing (required)");
  if (top.status().ok() && !alts) top.Fail("alternatives", "missing (required)");
  Status st = top.Finish();
  if (!st.ok()) return st;

  FieldReader r(owned, source, "owned");
  r.String("name", &cfg.name, false);
  int64_t gpus = 8;
  r.Int("gpus", &gpus, true, 1, 1 << 20);
  cfg.owned.gpus = static_cast<int>(gpus);
  if (r.status().ok()) cfg.assumptions.push_back({"GPUs per unit", std::to_string(gpus), "given"});
  OwnedCost& o = cfg.owned;
  auto usd = [](double v) { return Money(v, false); };
  Read(r, cfg, "capex_usd", &o.capex_usd, true, 0, kInf, "capex (purchase price)", usd);
  Read(r, cfg, "life_months", &o.life_months, true, 1e-9, kInf, "amortisation life",
       [](double v) { return fmt::format("{:g} months", v); });
  Read(r, cfg, "avg_power_kw", &o.avg_power_kw, false, 0, kInf, "average power draw",
       [](double v) { return fmt::format("{:g} kW", v); });
  Read(r, cfg, "idle_power_kw", &o.idle_power_kw, false, 0, kInf, "idle power draw",
       [](double v) { return v < 0 ? std::string("as busy (flat)") : fmt::format("{:g} kW", v); });
  Read(r, cfg, "usd_per_kwh", &o.usd_per_kwh, false, 0, kInf, "electricity price",
       [](double v) { return fmt::format("${:g}/kWh", v); });
  Read(r, cfg, "pue", &o.pue, false, 1.0, 10.0, "PUE", [](double v) { return fmt::format("{:g}", v); });
  Read(r, cfg, "colo_kw", &o.colo_kw, false, 0, kInf, "colocation power reserved",
       [](double v) { return fmt::format("{:g} kW", v); });
  Read(r, cfg, "colo_usd_per_kw_month", &o.colo_usd_per_kw_month, false, 0, kInf, "colocation price",
       [](double v) { return fmt::format("${:g}/kW/month", v); });
  Read(r, cfg, "other_ops_usd_per_month", &o.other_ops_usd_per_month, false, 0, kInf,
       "network, storage and ops share", [](double v) { return Money(v) + "/month"; });
  Read(r, cfg, "discount_rate_per_year", &cfg.discount_rate_per_year, false, 0, 1, "discount rate (cost of capital)",
       [](double v) { return fmt::format("{:g}%/year", v * 100); });
  Read(r, cfg, "resale_fraction", &cfg.resale_fraction, false, 0, 1, "resale value at end of life",
       [](double v) { return fmt::format("{:g}% of capex", v * 100); });
  st = r.Finish();
  if (!st.ok()) return st;
  if (o.idle_power_kw > o.avg_power_kw) {
    return Status::Error(fmt::format("{}: idle_power_kw ({:g}) exceeds avg_power_kw, the busy draw ({:g})",
                                     YamlWhere(source, owned, "owned"), o.idle_power_kw, o.avg_power_kw));
  }

  if (utils) {
    if (!utils.IsSequence() || utils.size() == 0) {
      return Status::Error(YamlWhere(source, utils, "utilizations") + ": expected a non-empty list of numbers");
    }
    cfg.utilizations.clear();
    for (size_t i = 0; i < utils.size(); ++i) {
      auto u = YamlDouble(utils[i], source, fmt::format("utilizations[{}]", i), 0, 1);
      if (!u.ok() || !(*u > 0))
        return Status::Error(YamlWhere(source, utils[i], fmt::format("utilizations[{}]", i)) +
                             ": expected a number in (0, 1]");
      cfg.utilizations.push_back(*u);
    }
  }

  if (!alts.IsSequence() || alts.size() == 0) {
    return Status::Error(YamlWhere(source, alts, "alternatives") + ": expected a non-empty list");
  }
  for (size_t i = 0; i < alts.size(); ++i) {
    FieldReader a(alts[i], source, fmt::format("alternatives[{}]", i));
    RentAlternative alt;
    a.String("name", &alt.name, true);
    a.String("tier", &alt.tier, true);
    if (a.status().ok() && alt.tier != "on-demand" && alt.tier != "reserved" && alt.tier != "spot" &&
        alt.tier != "market") {
      a.Fail("tier", fmt::format("'{}' is not one of on-demand, reserved, spot, market", alt.tier));
    }
    double per_gpu = -1;
    a.Double("usd_per_hour", &alt.usd_per_hour, false, 0, kInf);
    a.Double("usd_per_gpu_hour", &per_gpu, false, 0, kInf);
    if (a.status().ok() && a.Has("usd_per_hour") == a.Has("usd_per_gpu_hour")) {
      a.Fail("usd_per_hour", "give exactly one of usd_per_hour (whole unit) and usd_per_gpu_hour");
    }
    if (per_gpu >= 0) alt.usd_per_hour = per_gpu * cfg.owned.gpus;
    a.Double("discount", &alt.discount, false, 0, 0.999);
    alt.committed = alt.tier == "reserved";
    if (a.Has("committed")) {
      std::string c;
      a.String("committed", &c, false);
      if (a.status().ok() && c != "true" && c != "false") a.Fail("committed", "expected true or false");
      alt.committed = c == "true";
    }
    a.String("source", &alt.source, false);
    st = a.Finish();
    if (!st.ok()) return st;
    cfg.alternatives.push_back(std::move(alt));
  }
  return cfg;
}

BreakEvenResult ComputeBreakEven(const BreakEvenConfig& config) {
  BreakEvenResult res;
  const OwnedCost& o = config.owned;
  const double i = config.discount_rate_per_year;
  res.capex = o.capex_usd;
  res.resale_value = config.resale_fraction * o.capex_usd;
  res.net_capex = o.capex_usd - res.resale_value / std::pow(1 + i, o.life_months / 12.0);
  res.monthly_discount_rate = std::pow(1 + i, 1.0 / 12.0) - 1;
  res.power_per_month = o.PowerUsdPerMonth();
  res.colo_per_month = o.ColoUsdPerMonth();
  res.other_ops_per_month = o.other_ops_usd_per_month;
  res.opex_per_month = o.OpexUsdPerMonth();
  res.amortisation_per_month = o.AmortisationUsdPerMonth();
  for (const RentAlternative& alt : config.alternatives) {
    for (double u : config.utilizations) {
      BreakEvenRow row;
      row.alternative = alt.name;
      row.tier = alt.tier;
      row.committed = alt.committed;
      row.utilization = u;
      row.usd_per_hour = alt.EffectiveUsdPerHour();
      row.monthly_rent = row.usd_per_hour * kHoursPerMonth;
      row.rent_paid = alt.committed ? row.monthly_rent : row.monthly_rent * u;
      row.opex = o.OpexUsdPerMonthAt(u);
      row.monthly_margin = row.rent_paid - row.opex;
      row.months = BreakEvenMonths(res.net_capex, row.monthly_margin, res.monthly_discount_rate);
      row.never = std::isinf(row.months);
      row.beyond_life = !row.never && row.months > o.life_months;
      res.rows.push_back(row);
    }
  }
  return res;
}

std::string FormatBreakEvenText(const BreakEvenConfig& cfg, const BreakEvenResult& res) {
  const OwnedCost& o = cfg.owned;
  std::string out;
  const std::string name = cfg.name.empty() ? "owned unit" : cfg.name;
  // Headline: the first row (first alternative at the first utilisation), then the full table below.
  if (!res.rows.empty()) {
    const BreakEvenRow& first = res.rows.front();
    out += fmt::format("Break-even of {} vs {} at {:g}% utilisation: {}\n", name, first.alternative,
                       first.utilization * 100,
                       first.never ? std::string("never") : fmt::format("{:.1f} months", first.months));
  }
  out += fmt::format("Buy versus rent: {} ({} GPUs), {:g} hours per month\n\n", name, o.gpus, kHoursPerMonth);
  out += "Assumptions (owned):\n";
  for (const Assumption& a : cfg.assumptions) {
    out += fmt::format("  {:<32} {:<16} source: {}\n", a.name, a.value, a.source);
  }
  out += "\nMonthly cost of owning:\n";
  out += fmt::format("  {:<32} {:>12}  ({:g} kW x {:g} h x ${:g}/kWh x PUE {:g}; at utilisation u the draw is\n"
                     "  {:<32} {:>12}   idle + (busy - idle) x u = {:g} + {:g} x u kW)\n",
                     "power when busy", Money(res.power_per_month), o.avg_power_kw, kHoursPerMonth, o.usd_per_kwh,
                     o.pue, "", "", o.PowerKwAt(0), o.avg_power_kw - o.PowerKwAt(0));
  out += fmt::format("  {:<32} {:>12}  ({:g} kW x ${:g}/kW/month)\n", "colocation", Money(res.colo_per_month),
                     o.colo_kw, o.colo_usd_per_kw_month);
  out += fmt::format("  {:<32} {:>12}\n", "network, storage, ops", Money(res.other_ops_per_month));
  out += fmt::format("  {:<32} {:>12}\n", "opex total when busy", Money(res.opex_per_month));
  out += fmt::format("  {:<32} {:>12}  (capex / {:g} months; not part of the break-even margin)\n",
                     "amortisation", Money(res.amortisation_per_month), o.life_months);
  for (double u : cfg.utilizations) {
    const double used_gpu_hours = kHoursPerMonth * o.gpus * u;
    out += fmt::format("  owned cost per used GPU-hour at {:g}% utilisation: {}\n", u * 100,
                       Money((res.amortisation_per_month + o.OpexUsdPerMonthAt(u)) / used_gpu_hours));
  }
  out += fmt::format("\nFinance: discount rate {:g}%/year ({:.4f}%/month); resale {} at month {:g}, worth {} today;\n"
                     "net capex K = {}\n",
                     cfg.discount_rate_per_year * 100, res.monthly_discount_rate * 100, Money(res.resale_value, false),
                     o.life_months, Money(res.capex - res.net_capex, false), Money(res.net_capex, false));
  out += "\nRented alternatives (same GPU count; committed ones are paid every hour, used or not):\n";
  for (const RentAlternative& a : cfg.alternatives) {
    std::string price = fmt::format("{}/h", Money(a.usd_per_hour));
    if (a.discount > 0) price += fmt::format(" - {:g}% = {}/h", a.discount * 100, Money(a.EffectiveUsdPerHour()));
    out += fmt::format("  {:<44} {:<10} {}{}  source: {}\n", a.name, a.tier, price, a.committed ? " (committed)" : "",
                       a.source.empty() ? "given" : a.source);
  }
  out += "\nMonths to break even: first month whose discounted margin (rent paid - opex at u) adds up to K;\n"
         "rent paid = rent x u, or all of it when committed:\n";
  out += fmt::format("  {:<44} {:>5} {:>14} {:>14} {:>14}  {}\n", "alternative", "util", "rent paid/mo", "opex/mo",
                     "margin/month", "break-even");
  for (const BreakEvenRow& row : res.rows) {
    std::string verdict;
    if (row.never) {
      verdict = row.monthly_margin > 0 ? "never (discounted margin never repays K)" : "never (rent paid <= opex)";
    } else {
      verdict = fmt::format("{:.1f} months", row.months);
      if (row.beyond_life) verdict += fmt::format(" (beyond the {:g}-month life: never within life)", o.life_months);
    }
    out += fmt::format("  {:<44} {:>4g}% {:>14} {:>14} {:>14}  {}\n", row.alternative, row.utilization * 100,
                       Money(row.rent_paid), Money(row.opex), Money(row.monthly_margin), verdict);
  }
  return out;
}

nlohmann::json BreakEvenJson(const BreakEvenConfig& cfg, const BreakEvenResult& res) {
  nlohmann::json j;
  j["name"] = cfg.name;
  j["gpus"] = cfg.owned.gpus;
  j["hours_per_month"] = kHoursPerMonth;
  j["capex"] = res.capex;
  j["life_months"] = cfg.owned.life_months;
  j["opex_per_month"] = {{"power", res.power_per_month},
                         {"colocation", res.colo_per_month},
                         {"other_ops", res.other_ops_per_month},
                         {"total", res.opex_per_month}};
  j["amortisation_per_month"] = res.amortisation_per_month;
  j["discount_rate_per_year"] = cfg.discount_rate_per_year;
  j["resale_fraction"] = cfg.resale_fraction;
  j["resale_value"] = res.resale_value;
  j["net_capex"] = res.net_capex;
  j["power_kw"] = {{"busy", cfg.owned.PowerKwAt(1)}, {"idle", cfg.owned.PowerKwAt(0)}};
  nlohmann::json as = nlohmann::json::array();
  for (const Assumption& a : cfg.assumptions) as.push_back({{"name", a.name}, {"value", a.value}, {"source", a.source}});
  j["assumptions"] = as;
  nlohmann::json alts = nlohmann::json::array();
  for (const RentAlternative& a : cfg.alternatives) {
    alts.push_back({{"name", a.name}, {"tier", a.tier}, {"usd_per_hour", a.usd_per_hour}, {"discount", a.discount},
                    {"effective_usd_per_hour", a.EffectiveUsdPerHour()}, {"committed", a.committed},
                    {"source", a.source}});
  }
  j["alternatives"] = alts;
  nlohmann::json rows = nlohmann::json::array();
  for (const BreakEvenRow& r : res.rows) {
    nlohmann::json row = {{"alternative", r.alternative}, {"tier", r.tier}, {"committed", r.committed},
                          {"utilisation", r.utilization}, {"usd_per_hour", r.usd_per_hour},
                          {"monthly_rent", r.monthly_rent}, {"rent_paid", r.rent_paid}, {"opex", r.opex},
                          {"monthly_margin", r.monthly_margin}, {"never", r.never}, {"beyond_life", r.beyond_life}};
    row["months"] = r.never ? nlohmann::json(nullptr) : nlohmann::json(r.months);
    rows.push_back(row);
  }
  j["rows"] = rows;
  return j;
}

}  // namespace tessera
