#include "cost/breakeven.h"

#include <yaml-cpp/yaml.h>

#include <fmt/format.h>

#include <cmath>
#include <algorithm>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/yaml_reader.h"
#include "base/utc_time.h"
#include "base/stats.h"

namespace tessera {

namespace {


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

}  // namespace

double BreakEvenMonths(double net_capex, double monthly_margin, double monthly_discount_rate) {
  if (!(monthly_margin > 0)) return kInfinity;
  if (net_capex <= 0) return 0;
  const double d = monthly_discount_rate;
  if (d <= 0) return net_capex / monthly_margin;
  const double x = 1 - net_capex * d / monthly_margin;
  if (!(x > 0)) return kInfinity;
  return -std::log(x) / std::log1p(d);
}

double BreakEvenMonthsOnPath(double net_capex, const std::vector<MarginPiece>& pieces, double monthly_discount_rate) {
  if (net_capex <= 0) return 0;
  const double d = monthly_discount_rate;
  double left = net_capex;  // K not yet repaid, in today's money
  for (size_t k = 0; k < pieces.size(); ++k) {
    const double a = pieces[k].from, m = pieces[k].margin;
    const double b = k + 1 < pieces.size() ? pieces[k + 1].from : kInfinity;
    if (!(m > 0)) {  // a non-positive piece adds to what is left (repaid later, or never)
      if (std::isinf(b)) return kInfinity;
      left += d > 0 ? -m * (std::pow(1 + d, -a) - std::pow(1 + d, -b)) / d : -m * (b - a);
      continue;
    }
    // Discounted margin of the whole piece; the break-even falls inside it when that covers `left`.
    const double whole = std::isinf(b) ? (d > 0 ? m * std::pow(1 + d, -a) / d : kInfinity)
                                       : (d > 0 ? m * (std::pow(1 + d, -a) - std::pow(1 + d, -b)) / d : m * (b - a));
    if (whole >= left) {
      if (d <= 0) return a + left / m;
      const double x = std::pow(1 + d, -a) - left * d / m;  // (1 + d)^-t at the break-even t
      return x > 0 ? -std::log(x) / std::log1p(d) : kInfinity;
    }
    left -= whole;
  }
  return kInfinity;
}

double RentAlternative::FactorAt(double t) const {
  double f = 1;
  for (const RentChange& c : path)
    if (c.months <= t) f = c.factor;
  return f;
}

namespace {

constexpr double kDaysPerMonth = 365.0 / 12.0;

// Months from `start` to `date` (both YYYY-MM-DD); error names the field.
Result<double> MonthsBetween(const std::string& start, const std::string& date, const std::string& field) {
  auto a = ParseIsoUtc(start + "T00:00:00Z");
  auto b = ParseIsoUtc(date + "T00:00:00Z");
  if (!a.ok()) return Status::Error(fmt::format("start_date: '{}' is not a date YYYY-MM-DD", start));
  if (!b.ok()) return Status::Error(fmt::format("{}: '{}' is not a date YYYY-MM-DD", field, date));
  if (*b < *a) return Status::Error(fmt::format("{}: {} is before start_date {}", field, date, start));
  return static_cast<double>(*b - *a) / 86400.0 / kDaysPerMonth;
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

Status ParseOwnedSection(const YAML::Node& owned, std::string_view source, BreakEvenConfig* out) {
  BreakEvenConfig& cfg = *out;
  FieldReader r(owned, source, "owned");
  r.String("name", &cfg.name, false);
  int64_t gpus = 8;
  r.Int("gpus", &gpus, true, 1, 1 << 20);
  cfg.owned.gpus = static_cast<int>(gpus);
  if (r.status().ok()) cfg.assumptions.push_back({"GPUs per unit", std::to_string(gpus), "given"});
  OwnedCost& o = cfg.owned;
  auto usd = [](double v) { return Money(v, false); };
  auto num = [](const char* unit) { return [unit](double v) { return fmt::format("{:g}{}", v, unit); }; };
  Read(r, cfg, "capex_usd", &o.capex_usd, true, 0, kInfinity, "capex (purchase price)", usd);
  Read(r, cfg, "life_months", &o.life_months, true, 1e-9, kInfinity, "amortisation life", num(" months"));
  Read(r, cfg, "avg_power_kw", &o.avg_power_kw, false, 0, kInfinity, "average power draw", num(" kW"));
  Read(r, cfg, "idle_power_kw", &o.idle_power_kw, false, 0, kInfinity, "idle power draw",
       [](double v) { return v < 0 ? std::string("as busy (flat)") : fmt::format("{:g} kW", v); });
  Read(r, cfg, "usd_per_kwh", &o.usd_per_kwh, false, 0, kInfinity, "electricity price",
       [](double v) { return fmt::format("${:g}/kWh", v); });
  Read(r, cfg, "pue", &o.pue, false, 1.0, 10.0, "PUE", num(""));
  Read(r, cfg, "colo_kw", &o.colo_kw, false, 0, kInfinity, "colocation power reserved", num(" kW"));
  Read(r, cfg, "colo_usd_per_kw_month", &o.colo_usd_per_kw_month, false, 0, kInfinity, "colocation price",
       [](double v) { return fmt::format("${:g}/kW/month", v); });
  Read(r, cfg, "other_ops_usd_per_month", &o.other_ops_usd_per_month, false, 0, kInfinity,
       "network, storage and ops share", [](double v) { return Money(v) + "/month"; });
  Read(r, cfg, "discount_rate_per_year", &o.discount_rate_per_year, false, 0, 1, "discount rate (cost of capital)",
       [](double v) { return fmt::format("{:g}%/year", v * 100); });
  Read(r, cfg, "resale_fraction", &o.resale_fraction, false, 0, 1, "resale value at end of life",
       [](double v) { return fmt::format("{:g}% of capex", v * 100); });
  Status st = r.Finish();
  if (!st.ok()) return st;
  if (o.idle_power_kw > o.avg_power_kw) {
    return Status::Error(fmt::format("{}: idle_power_kw ({:g}) exceeds avg_power_kw, the busy draw ({:g})",
                                     YamlWhere(source, owned, "owned"), o.idle_power_kw, o.avg_power_kw));
  }
  return Status::Ok();
}

Status ParseUtilizations(const YAML::Node& utils, std::string_view source, BreakEvenConfig* cfg) {
  if (!utils) return Status::Ok();
  if (!utils.IsSequence() || utils.size() == 0) {
    return Status::Error(YamlWhere(source, utils, "utilizations") + ": expected a non-empty list of numbers");
  }
  cfg->utilizations.clear();
  for (size_t i = 0; i < utils.size(); ++i) {
    auto u = YamlDouble(utils[i], source, fmt::format("utilizations[{}]", i), 0, 1);
    if (!u.ok() || !(*u > 0))
      return Status::Error(YamlWhere(source, utils[i], fmt::format("utilizations[{}]", i)) +
                           ": expected a number in (0, 1]");
    cfg->utilizations.push_back(*u);
  }
  return Status::Ok();
}

// `price_path: [{from: DATE, factor: F | cut: C}]` of alternative `path`; months from `start`.
Status ParsePath(const YAML::Node& node, std::string_view source, const std::string& path, const std::string& start,
                 RentAlternative* alt) {
  if (!node) return Status::Ok();
  if (!node.IsSequence()) return Status::Error(YamlWhere(source, node, path) + ": expected a list of {from, factor}");
  for (size_t k = 0; k < node.size(); ++k) {
    const std::string where = fmt::format("{}[{}]", path, k);
    FieldReader r(node[k], source, where);
    RentChange c;
    double cut = -1;
    r.String("from", &c.from, true);
    r.Double("factor", &c.factor, false, 0, kInfinity);
    r.Double("cut", &cut, false, 0, 0.999);
    if (r.status().ok() && r.Has("factor") == r.Has("cut")) r.Fail("factor", "give exactly one of factor and cut");
    if (r.status().ok() && start.empty()) r.Fail("from", "a price path needs a top-level start_date (YYYY-MM-DD)");
    if (r.status().ok()) {
      auto m = MonthsBetween(start, c.from, "from");
      if (!m.ok()) r.Fail("from", m.error());
      else c.months = *m;
    }
    if (cut >= 0) c.factor = 1 - cut;
    if (r.status().ok() && !alt->path.empty() && c.months < alt->path.back().months) {
      r.Fail("from", "changes must be in date order");
    }
    if (Status st = r.Finish(); !st.ok()) return st;
    alt->path.push_back(c);
  }
  return Status::Ok();
}

Result<RentAlternative> ParseAlternative(const YAML::Node& node, std::string_view source, size_t i, int gpus,
                                         const std::string& start) {
  const std::string path = fmt::format("alternatives[{}]", i);
  FieldReader a(node, source, path);
  RentAlternative alt;
  a.String("name", &alt.name, true);
  a.String("tier", &alt.tier, true);
  if (a.status().ok() && alt.tier != "on-demand" && alt.tier != "reserved" && alt.tier != "spot" && alt.tier != "market") {
    a.Fail("tier", fmt::format("'{}' is not one of on-demand, reserved, spot, market", alt.tier));
  }
  double per_gpu = -1;
  a.Double("usd_per_hour", &alt.usd_per_hour, false, 0, kInfinity);
  a.Double("usd_per_gpu_hour", &per_gpu, false, 0, kInfinity);
  if (a.status().ok() && a.Has("usd_per_hour") == a.Has("usd_per_gpu_hour")) {
    a.Fail("usd_per_hour", "give exactly one of usd_per_hour (whole unit) and usd_per_gpu_hour");
  }
  if (per_gpu >= 0) alt.usd_per_hour = per_gpu * gpus;
  a.Double("discount", &alt.discount, false, 0, 0.999);
  alt.committed = alt.tier == "reserved";
  if (a.Has("committed")) {
    std::string c;
    a.String("committed", &c, false);
    if (a.status().ok() && c != "true" && c != "false") a.Fail("committed", "expected true or false");
    alt.committed = c == "true";
  }
  a.String("commitment_type", &alt.commitment_type, false);
  a.Double("term_days", &alt.term_days, false, 1, 3650);
  const bool block = alt.commitment_type == "Capacity Block";
  if (a.status().ok() && block && !(alt.term_days >= 1 && alt.term_days <= 182)) {
    a.Fail("term_days", "a Capacity Block lasts 1-182 days: give its term_days");
  }
  if (a.status().ok() && a.Has("term_days") && !alt.committed) a.Fail("term_days", "only committed alternatives have a term");
  a.String("source", &alt.source, false);
  YAML::Node price_path = a.Child("price_path");
  if (Status st = a.Finish(); !st.ok()) return st;
  if (Status st = ParsePath(price_path, source, path + ".price_path", start, &alt); !st.ok()) return st;
  return alt;
}

}  // namespace

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
  top.Double("hours_per_month", &hours, false, 0, kInfinity);
  top.String("start_date", &cfg.start_date, false);
  if (top.status().ok() && !cfg.start_date.empty() && !ParseIsoUtc(cfg.start_date + "T00:00:00Z").ok())
    top.Fail("start_date", fmt::format("'{}' is not a date YYYY-MM-DD", cfg.start_date));
  if (top.status().ok() && hours != kHoursPerMonth) top.Fail("hours_per_month", "only 730 (365 * 24 / 12) is supported");
  if (top.status().ok() && !owned) top.Fail("owned", "missing (required)");
  if (top.status().ok() && !alts) top.Fail("alternatives", "missing (required)");
  if (Status st = top.Finish(); !st.ok()) return st;
  if (Status st = ParseOwnedSection(owned, source, &cfg); !st.ok()) return st;
  if (Status st = ParseUtilizations(utils, source, &cfg); !st.ok()) return st;
  if (!alts.IsSequence() || alts.size() == 0) {
    return Status::Error(YamlWhere(source, alts, "alternatives") + ": expected a non-empty list");
  }
  for (size_t i = 0; i < alts.size(); ++i) {
    auto alt = ParseAlternative(alts[i], source, i, cfg.owned.gpus, cfg.start_date);
    if (!alt.ok()) return alt.status();
    cfg.alternatives.push_back(std::move(alt).value());
  }
  return cfg;
}

Status AddRentCut(BreakEvenConfig* config, const std::string& match, const std::string& date, double cut) {
  if (!(cut >= 0 && cut < 1)) return Status::Error(fmt::format("--rent-cut: the cut {:g} is not in [0, 1)", cut));
  if (config->start_date.empty()) {
    return Status::Error("--rent-cut: the config has no start_date (give --start YYYY-MM-DD)");
  }
  auto months = MonthsBetween(config->start_date, date, "--rent-cut");
  if (!months.ok()) return months.status();
  int matched = 0;
  for (RentAlternative& a : config->alternatives) {
    if (!match.empty() && a.name.find(match) == std::string::npos) continue;
    ++matched;
    const double before = a.FactorAt(*months);
    a.path.push_back({date, before * (1 - cut), *months});
    std::stable_sort(a.path.begin(), a.path.end(),
                     [](const RentChange& x, const RentChange& y) { return x.months < y.months; });
  }
  if (matched == 0) return Status::Error(fmt::format("--rent-cut: no alternative's name contains '{}'", match));
  return Status::Ok();
}

namespace {

// The margin pieces of `alt` at utilisation u: the rent follows the path (a committed alternative at the
// price of its term's start), less the opex at u.
std::vector<MarginPiece> MarginPieces(const RentAlternative& alt, double u, double opex, double life_months) {
  const double rent = alt.EffectiveUsdPerHour() * kHoursPerMonth * (alt.committed ? 1.0 : u);
  std::vector<double> starts = {0};
  if (!alt.committed) {
    for (const RentChange& c : alt.path) starts.push_back(c.months);
  } else if (!alt.path.empty()) {
    const double term = alt.term_days > 0 ? alt.term_days / kDaysPerMonth : life_months;
    for (double t = term; t <= alt.path.back().months + term; t += term) starts.push_back(t);
  }
  std::vector<MarginPiece> out;
  for (double t : starts) {
    const double m = rent * alt.FactorAt(t) - opex;
    if (out.empty() || out.back().margin != m) out.push_back({t, m});
  }
  return out;
}

}  // namespace

BreakEvenResult ComputeBreakEven(const BreakEvenConfig& config) {
  BreakEvenResult res;
  const OwnedCost& o = config.owned;
  const OwnedFinance f = OwnedFinanceAt(o, 1.0);
  res.capex = o.capex_usd;
  res.resale_value = f.resale_value;
  res.net_capex = f.net_capex;
  res.monthly_discount_rate = f.monthly_discount_rate;
  res.capital_per_month = f.capital_per_month;
  res.power_per_month = o.PowerUsdPerMonth();
  res.colo_per_month = o.ColoUsdPerMonth();
  res.other_ops_per_month = o.other_ops_usd_per_month;
  res.opex_per_month = f.opex_per_month;
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
      row.opex = OwnedFinanceAt(o, u).opex_per_month;
      const std::vector<MarginPiece> pieces = MarginPieces(alt, u, row.opex, o.life_months);
      row.rent_paid = pieces.front().margin + row.opex;
      row.rent_paid_last = pieces.back().margin + row.opex;
      row.term_months = alt.committed ? (alt.term_days > 0 ? alt.term_days / kDaysPerMonth : o.life_months) : 0;
      row.monthly_margin = pieces.front().margin;
      row.months = BreakEvenMonthsOnPath(res.net_capex, pieces, res.monthly_discount_rate);
      row.never = std::isinf(row.months);
      row.beyond_life = !row.never && row.months > o.life_months;
      res.rows.push_back(row);
    }
  }
  return res;
}

namespace {

std::string FormatOwning(const BreakEvenConfig& cfg, const BreakEvenResult& res) {
  const OwnedCost& o = cfg.owned;
  std::string out = "\nMonthly cost of owning:\n";
  out += fmt::format("  {:<32} {:>12}  ({:g} kW x {:g} h x ${:g}/kWh x PUE {:g}; at utilisation u the draw is\n"
                     "  {:<32} {:>12}   idle + (busy - idle) x u = {:g} + {:g} x u kW)\n",
                     "power when busy", Money(res.power_per_month), o.avg_power_kw, kHoursPerMonth, o.usd_per_kwh,
                     o.pue, "", "", o.PowerKwAt(0), o.avg_power_kw - o.PowerKwAt(0));
  out += fmt::format("  {:<32} {:>12}  ({:g} kW x ${:g}/kW/month)\n", "colocation", Money(res.colo_per_month),
                     o.colo_kw, o.colo_usd_per_kw_month);
  out += fmt::format("  {:<32} {:>12}\n", "network, storage, ops", Money(res.other_ops_per_month));
  out += fmt::format("  {:<32} {:>12}\n", "opex total when busy", Money(res.opex_per_month));
  out += fmt::format("  {:<32} {:>12}  (capex / {:g} months, straight line; not part of the break-even margin)\n",
                     "amortisation", Money(res.amortisation_per_month), o.life_months);
  out += fmt::format("  {:<32} {:>12}  (net capex K repaid over {:g} months at the discount rate)\n",
                     "capital recovery C", Money(res.capital_per_month), o.life_months);
  for (double u : cfg.utilizations) {
    const OwnedFinance f = OwnedFinanceAt(o, u);
    out += fmt::format("  chargeback rate at {:g}% utilisation: {}/GPU-h of capacity, {}/used GPU-h"
                       " ((C + opex at u) / (730 h x {} GPUs))\n",
                       u * 100, Money(f.usd_per_gpu_hour), Money(f.usd_per_gpu_hour / u), o.gpus);
  }
  out += fmt::format("\nFinance: discount rate {:g}%/year ({:.4f}%/month); resale {} at month {:g}, worth {} today;\n"
                     "net capex K = {}\n",
                     o.discount_rate_per_year * 100, res.monthly_discount_rate * 100, Money(res.resale_value, false),
                     o.life_months, Money(res.capex - res.net_capex, false), Money(res.net_capex, false));
  return out;
}

std::string FormatAlternatives(const BreakEvenConfig& cfg) {
  std::string out = "\nRented alternatives (same GPU count; committed ones are paid every hour, used or not):\n";
  for (const RentAlternative& a : cfg.alternatives) {
    std::string price = fmt::format("{}/h", Money(a.usd_per_hour));
    if (a.discount > 0) price += fmt::format(" - {:g}% = {}/h", a.discount * 100, Money(a.EffectiveUsdPerHour()));
    std::string committed;
    if (a.committed)
      committed = a.term_days > 0 ? fmt::format(" (committed, {:g}-day term)", a.term_days) : " (committed)";
    out += fmt::format("  {:<44} {:<10} {}{}  source: {}\n", a.name, a.tier, price, committed,
                       a.source.empty() ? "given" : a.source);
    for (const RentChange& c : a.path)
      out += fmt::format("  {:<44} {:<10} from {}: x {:g} = {}/h{}\n", "", "", c.from, c.factor,
                         Money(a.EffectiveUsdPerHour() * c.factor), a.committed ? " (from the next renewal)" : "");
  }
  return out;
}

}  // namespace

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
  out += fmt::format("Buy versus rent: {} ({} GPUs), {:g} hours per month{}\n\n", name, o.gpus, kHoursPerMonth,
                     cfg.start_date.empty() ? "" : ", month 0 = " + cfg.start_date);
  out += "Assumptions (owned):\n";
  for (const Assumption& a : cfg.assumptions) {
    out += fmt::format("  {:<32} {:<16} source: {}\n", a.name, a.value, a.source);
  }
  out += FormatOwning(cfg, res) + FormatAlternatives(cfg);
  out += "\nMonths to break even: first month whose discounted margin (rent paid - opex at u) adds up to K;\n"
         "rent paid = rent x u, or all of it when committed (-> the rent after the price path's last change):\n";
  out += fmt::format("  {:<44} {:>5} {:>14} {:>14} {:>14}  {}\n", "alternative", "util", "rent paid/mo", "opex/mo",
                     "margin/month", "break-even");
  for (const BreakEvenRow& row : res.rows) {
    std::string verdict;
    if (row.never) {
      verdict = row.monthly_margin > 0 || row.rent_paid_last > row.opex ? "never (discounted margin never repays K)"
                                                                        : "never (rent paid <= opex)";
    } else {
      verdict = fmt::format("{:.1f} months", row.months);
      if (row.beyond_life) verdict += fmt::format(" (beyond the {:g}-month life: never within life)", o.life_months);
    }
    if (row.rent_paid_last != row.rent_paid) verdict += fmt::format(" (rent -> {}/mo)", Money(row.rent_paid_last));
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
  j["capital_per_month"] = res.capital_per_month;
  j["start_date"] = cfg.start_date;
  nlohmann::json rates = nlohmann::json::array();
  for (double u : cfg.utilizations)
    rates.push_back({{"utilisation", u}, {"usd_per_gpu_hour", OwnedFinanceAt(cfg.owned, u).usd_per_gpu_hour}});
  j["chargeback_rates"] = rates;
  j["discount_rate_per_year"] = cfg.owned.discount_rate_per_year;
  j["resale_fraction"] = cfg.owned.resale_fraction;
  j["resale_value"] = res.resale_value;
  j["net_capex"] = res.net_capex;
  j["power_kw"] = {{"busy", cfg.owned.PowerKwAt(1)}, {"idle", cfg.owned.PowerKwAt(0)}};
  nlohmann::json as = nlohmann::json::array();
  for (const Assumption& a : cfg.assumptions) as.push_back({{"name", a.name}, {"value", a.value}, {"source", a.source}});
  j["assumptions"] = as;
  nlohmann::json alts = nlohmann::json::array();
  for (const RentAlternative& a : cfg.alternatives) {
    nlohmann::json path = nlohmann::json::array();
    for (const RentChange& c : a.path) path.push_back({{"from", c.from}, {"factor", c.factor}, {"months", c.months}});
    alts.push_back({{"name", a.name}, {"tier", a.tier}, {"usd_per_hour", a.usd_per_hour}, {"discount", a.discount},
                    {"effective_usd_per_hour", a.EffectiveUsdPerHour()}, {"committed", a.committed},
                    {"term_days", a.term_days}, {"price_path", path}, {"source", a.source}});
  }
  j["alternatives"] = alts;
  nlohmann::json rows = nlohmann::json::array();
  for (const BreakEvenRow& r : res.rows) {
    nlohmann::json row = {{"alternative", r.alternative}, {"tier", r.tier}, {"committed", r.committed},
                          {"utilisation", r.utilization}, {"usd_per_hour", r.usd_per_hour},
                          {"monthly_rent", r.monthly_rent}, {"rent_paid", r.rent_paid}, {"opex", r.opex},
                          {"monthly_margin", r.monthly_margin},
                          {"rent_paid_last", r.rent_paid_last}, {"term_months", r.term_months}, {"never", r.never}, {"beyond_life", r.beyond_life}};
    row["months"] = r.never ? nlohmann::json(nullptr) : nlohmann::json(r.months);
    rows.push_back(row);
  }
  j["rows"] = rows;
  return j;
}

}  // namespace tessera
