// `tessera cost ...`: buy-versus-rent break-even, the price book, checkpoint intervals. Parsing and
// printing only; the figures come from src/cost.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/file.h"
#include "cli/commands.h"
#include "cost/breakeven.h"
#include "cost/checkpoint.h"
#include "cost/cost_model.h"
#include "base/utc_time.h"
#include "cost/ledger.h"
#include "cost/pricebook.h"

namespace tessera::cli {

namespace {

struct BreakEvenArgs {
  std::string config;
  std::vector<double> utilizations;
  std::string start;                   // overrides the config's start_date
  std::vector<std::string> rent_cuts;  // [NAME=]DATE:CUT
  bool json = false;
};

// Applies `--rent-cut [NAME=]DATE:CUT` (a cut of CUT, e.g. 0.45, from DATE, to every alternative whose name
// contains NAME, or to all).
Status ApplyRentCut(const std::string& arg, BreakEvenConfig* config) {
  const size_t eq = arg.find('='), colon = arg.rfind(':');
  const std::string match = eq == std::string::npos ? "" : arg.substr(0, eq);
  const size_t from = eq == std::string::npos ? 0 : eq + 1;
  if (colon == std::string::npos || colon < from) {
    return Status::Error(fmt::format("--rent-cut '{}': expected [NAME=]YYYY-MM-DD:CUT, e.g. 2025-06-01:0.45", arg));
  }
  char* end = nullptr;
  const std::string cut_text = arg.substr(colon + 1);
  const double cut = std::strtod(cut_text.c_str(), &end);
  if (cut_text.empty() || *end != '\0') {
    return Status::Error(fmt::format("--rent-cut '{}': '{}' is not a number", arg, cut_text));
  }
  return AddRentCut(config, match, arg.substr(from, colon - from), cut);
}

int RunBreakEven(const BreakEvenArgs& args) {
  Result<std::string> text = ReadFile(args.config);
  if (!text.ok()) {
    std::cerr << "error: " << text.error() << "\n";
    return 2;
  }
  Result<BreakEvenConfig> cfg = ParseBreakEvenYaml(*text, args.config);
  if (!cfg.ok()) {
    std::cerr << "error: " << cfg.error() << "\n";
    return 2;
  }
  BreakEvenConfig config = std::move(cfg).value();
  if (!args.utilizations.empty()) config.utilizations = args.utilizations;
  if (!args.start.empty()) config.start_date = args.start;
  for (const std::string& cut : args.rent_cuts) {
    if (Status st = ApplyRentCut(cut, &config); !st.ok()) {
      std::cerr << "error: " << st.message() << "\n";
      return 2;
    }
  }
  BreakEvenResult result = ComputeBreakEven(config);
  if (args.json) {
    std::cout << BreakEvenJson(config, result).dump(2) << "\n";
  } else {
    std::cout << FormatBreakEvenText(config, result);
  }
  return 0;
}

struct PricesArgs {
  std::string book;
  std::string config;
  bool json = false;
};

// The default book, or the book in `path` when given.
Result<PriceBook> LoadBook(const std::string& path) {
  if (path.empty()) return PriceBook::Default();
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return PriceBook::FromYaml(*text, path);
}

// "valid 2023-07-27 .. 2025-06-01", "carried forward: ...", or "undated".
std::string ValidityText(const PriceValidity& v) {
  if (!v.Dated()) return "undated";
  std::string out = fmt::format("valid {} .. {}", v.valid_from.empty() ? "?" : v.valid_from,
                                v.valid_until.empty() ? "" : v.valid_until);
  if (!v.carried_forward.empty()) out += "; carried forward: " + v.carried_forward;
  return out;
}

nlohmann::json ValidityJson(const PriceValidity& v) {
  return {{"valid_from", v.valid_from}, {"valid_until", v.valid_until}, {"carried_forward", v.carried_forward}};
}

int RunPrices(const PricesArgs& args) {
  Result<PriceBook> loaded = LoadBook(args.book);
  if (!loaded.ok()) {
    std::cerr << "error: " << loaded.error() << "\n";
    return 2;
  }
  PriceBook book = std::move(loaded).value();
  if (!args.config.empty()) {
    Result<std::string> text = ReadFile(args.config);
    if (!text.ok()) {
      std::cerr << "error: " << text.error() << "\n";
      return 2;
    }
    Status st = book.Merge(*text, args.config);
    if (!st.ok()) {
      std::cerr << "error: " << st.message() << "\n";
      return 2;
    }
  }
  if (args.json) {
    nlohmann::json j;
    j["price_date"] = book.price_date();
    j["title"] = book.title();
    j["allow_mixed_dates"] = book.allow_mixed_dates();
    j["pools"] = nlohmann::json::array();
    for (const Pool& p : book.pools()) {
      j["pools"].push_back({{"name", p.name}, {"tier", TierName(p.tier)}, {"gpu_kind", p.gpu_kind},
                            {"provider", p.provider}, {"usd_per_gpu_hour", p.usd_per_gpu_hour},
                            {"provisioning_delay_s", p.provisioning_delay_s}, {"reclaim_notice_s", p.reclaim_notice_s},
                            {"reclaim_rate_per_hour", p.reclaim_rate_per_hour}, {"source", p.source}, {"date", p.date},
                            {"validity", ValidityJson(p.validity)}});
    }
    j["on_demand_list"] = nlohmann::json::array();
    for (const ListPrice& lp : book.list_prices()) {
      j["on_demand_list"].push_back({{"gpu_kind", lp.gpu_kind}, {"usd_per_gpu_hour", lp.usd_per_gpu_hour},
                                     {"source", lp.source}, {"date", lp.date},
                                     {"validity", ValidityJson(lp.validity)}});
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("price book: {}\nprice date: {}{}\n\n", book.title().empty() ? "(untitled)" : book.title(),
                           book.price_date().empty() ? "none (undated book)" : book.price_date(),
                           book.allow_mixed_dates() ? " (mixed dates allowed)" : "");
  std::cout << fmt::format("{:<24} {:<10} {:<12} {:>10}  {}\n", "pool", "tier", "gpu kind", "$/GPU-h", "dynamics");
  for (const Pool& p : book.pools()) {
    std::string dyn;
    if (p.tier == Tier::kOnDemand) dyn = fmt::format("provisioning {:g} s", p.provisioning_delay_s);
    if (p.tier == Tier::kSpot) {
      dyn = fmt::format("notice {:g} s, {:g} reclaims/h", p.reclaim_notice_s, p.reclaim_rate_per_hour);
    }
    if (p.tier == Tier::kOwned) {
      const OwnedFinance f = OwnedFinanceAt(p.owned, p.owned.utilization);
      dyn = fmt::format("capex ${:g} over {:g} months at {:g}%/year, resale {:g}%: ${:.2f}/month + opex at {:g}% "
                        "${:.2f}/month, {} GPUs",
                        p.owned.capex_usd, p.owned.life_months, p.owned.discount_rate_per_year * 100,
                        p.owned.resale_fraction * 100, f.capital_per_month, p.owned.utilization * 100,
                        f.opex_per_month, p.owned.gpus);
    }
    std::cout << fmt::format("{:<24} {:<10} {:<12} {:>10.4f}  {}\n", p.name, TierName(p.tier), p.gpu_kind,
                             p.usd_per_gpu_hour, dyn);
    std::cout << fmt::format("    source: {} ({}; {})\n", p.source, p.date, ValidityText(p.validity));
  }
  std::cout << "\non-demand list (baseline):\n";
  for (const ListPrice& lp : book.list_prices()) {
    std::cout << fmt::format("  {:<12} {:>8.4f} $/GPU-h  source: {} ({}; {})\n", lp.gpu_kind, lp.usd_per_gpu_hour,
                             lp.source, lp.date, ValidityText(lp.validity));
  }
  return 0;
}

struct CheckpointArgs {
  double cost_s = 0;
  double rate = -1;
  std::string pool;
  double restart_s = 0;
};

int RunCheckpoint(const CheckpointArgs& args) {
  double rate = args.rate;
  double notice = 0;
  if (!args.pool.empty()) {
    const Pool* p = PriceBook::Default().FindPool(args.pool);
    if (p == nullptr) {
      std::cerr << "error: no pool '" << args.pool << "' in the default price book\n";
      return 2;
    }
    if (rate < 0) rate = p->reclaim_rate_per_hour;
    notice = p->reclaim_notice_s;
  }
  if (rate < 0) {
    std::cerr << "error: give --rate or --pool\n";
    return 2;
  }
  CheckpointCostModel m;
  m.checkpoint_cost_s = args.cost_s;
  m.restart_cost_s = args.restart_s;
  m.mtbf_s = rate > 0 ? 3600.0 / rate : INFINITY;
  m.notice_s = notice;
  m.interval_s = YoungDalyIntervalForRateS(args.cost_s, rate);
  std::cout << fmt::format("checkpoint cost {:g} s, reclaim rate {:g}/h (MTBF {:g} s), notice {:g} s\n", args.cost_s,
                           rate, m.mtbf_s, notice);
  std::cout << fmt::format("Young/Daly interval sqrt(2 C MTBF): {:.1f} s; Daly higher-order: {:.1f} s\n", m.interval_s,
                           DalyIntervalS(args.cost_s, m.mtbf_s));
  std::cout << fmt::format("expected lost work per reclaim: {:.1f} s; expected waste: {:.4f}%\n",
                           ExpectedLostWorkPerReclaimS(m), 100 * ExpectedWasteFraction(m));
  return 0;
}


struct ReportArgs {
  std::string ledger;
  std::string book;
  std::vector<std::string> prices;
  std::string idle_policy = "none";
  std::string charge_basis = "compute";
  std::string epoch;  // empty: the book's price_date at 00:00:00Z
  std::string focus;
  std::string billing_account = "tessera";
  std::string billing_account_name = "Tessera cluster";
  bool json = false;
};

void PrintLines(const std::vector<CostLine>& lines, const char* title) {
  std::cout << fmt::format("\nby {}:\n  {:<28} {:>12} {:>12} {:>12} {:>12} {:>12}\n", title, title, "GPU-hours",
                           "useful GPU-h", "cost", "idle share", "total");
  for (const CostLine& l : lines) {
    std::cout << fmt::format("  {:<28} {:>12.3f} {:>12.3f} {:>12} {:>12} {:>12}\n", l.key, l.GpuHours(),
                             l.UsefulGpuHours(), FormatCents(l.cost_cents), FormatCents(l.idle_share_cents),
                             FormatCents(l.TotalCents()));
  }
}

// The report's books: --price-book (or the default), then each --prices file merged into the loaded book of
// the same price_date (a file without one: into the first), or loaded as a book of its own.
Result<std::vector<PriceBook>> LoadBooks(const ReportArgs& args) {
  Result<PriceBook> first = LoadBook(args.book);
  if (!first.ok()) return first.status();
  std::vector<PriceBook> books{std::move(first).value()};
  for (const std::string& path : args.prices) {
    Result<std::string> text = ReadFile(path);
    if (!text.ok()) return text.status();
    Result<PriceBook> own = PriceBook::FromYaml(*text, path);
    if (!own.ok()) return own.status();
    auto same = std::find_if(books.begin(), books.end(), [&](const PriceBook& b) {
      return own->price_date().empty() || b.price_date() == own->price_date();
    });
    if (same == books.end()) {
      books.push_back(std::move(own).value());
      continue;
    }
    Status st = same->Merge(*text, path);
    if (!st.ok()) return st;
  }
  return books;
}

// The cost options of the flags (and the first book's date as the default epoch).
Result<CostOptions> ReportOptions(const ReportArgs& args, const std::vector<PriceBook>& books) {
  CostOptions opt;
  opt.enforce_validity = true;
  Result<IdlePolicy> policy = ParseIdlePolicy(args.idle_policy);
  if (!policy.ok()) return Status::Error("--idle-policy: " + policy.error());
  opt.idle_policy = *policy;
  Result<ChargeBasis> basis = ParseChargeBasis(args.charge_basis);
  if (!basis.ok()) return Status::Error("--charge-basis: " + basis.error());
  opt.charge_basis = *basis;
  const std::string epoch_text =
      !args.epoch.empty() ? args.epoch
                          : (books.front().price_date().empty() ? "2025-01-01" : books.front().price_date()) + "T00:00:00Z";
  Result<int64_t> epoch = ParseIsoUtc(epoch_text);
  if (!epoch.ok()) return Status::Error("--epoch: " + epoch.error());
  opt.epoch_unix_s = *epoch;
  opt.billing_account_id = args.billing_account;
  opt.billing_account_name = args.billing_account_name;
  return opt;
}

// The report as text: totals, then lines by team, project, kind and tier, team x pool and pools.
void PrintReport(const CostModel& model, const CostReport& r) {
  std::cout << fmt::format("price date             {} ({})\n", model.book().price_date(), model.book().title());
  for (size_t b = 1; b < model.books().size(); ++b)
    std::cout << fmt::format("also priced from       {} ({})\n", model.books()[b].price_date(), model.books()[b].title());
  std::cout << fmt::format("total cost             ${}  = charged ${} + idle ${}\n", FormatCents(r.total_cents),
                           FormatCents(r.charged_cents), FormatCents(r.idle_cents));
  std::cout << fmt::format("idle policy            {} (shared ${}, reported on its own ${})\n",
                           IdlePolicyName(r.idle_policy), FormatCents(r.idle_shared_cents),
                           FormatCents(r.idle_unshared_cents));
  std::cout << fmt::format("GPU-hours              capacity {:.3f}, held {:.3f}, useful {:.3f}, idle {:.3f}\n",
                           r.capacity_gpu_hours, r.allocated_gpu_hours, r.useful_gpu_hours, r.idle_gpu_hours);
  std::cout << fmt::format("useful work at list    ${:.2f}  (held minus lost, at on-demand list prices; priced, "
                           "not simulated): total is {:.1f}% below\n",
                           r.on_demand_only_cost, 100 * r.cost_saving_vs_on_demand);
  std::cout << fmt::format("cost per useful GPU-h  ${:.4f}   charge basis: {}\n", r.cost_per_useful_gpu_hour,
                           ChargeBasisName(r.charge_basis));
  PrintLines(r.by_team, "team");
  PrintLines(r.by_project, "project");
  PrintLines(r.by_gpu_kind, "gpu kind");
  PrintLines(r.by_tier, "tier");
  std::cout << fmt::format("\nby team and pool (idle is shared only among a pool's own users):\n"
                           "  {:<16} {:<24} {:>12} {:>12} {:>12} {:>12}\n",
                           "team", "pool", "GPU-hours", "usage cost", "idle cost", "total");
  for (const TeamPoolLine& tp : r.by_team_pool) {
    std::cout << fmt::format("  {:<16} {:<24} {:>12.3f} {:>12} {:>12} {:>12}\n", tp.team, tp.pool,
                             tp.milli_gpu_s / 3.6e6, FormatCents(tp.usage_cost_cents), FormatCents(tp.idle_cost_cents),
                             FormatCents(tp.usage_cost_cents + tp.idle_cost_cents));
  }
  std::cout << fmt::format("\npools:\n  {:<24} {:<10} {:>14} {:>12} {:>12} {:>12} {:>14}\n", "pool", "tier",
                           "capacity GPU-h", "held GPU-h", "idle GPU-h", "idle cost", "platform idle");
  for (const PoolLine& p : r.pools) {
    std::cout << fmt::format("  {:<24} {:<10} {:>14.3f} {:>12.3f} {:>12.3f} {:>12.2f} {:>14.2f}{}\n", p.pool,
                             TierName(p.tier), p.capacity_milli_gpu_s / 3.6e6, p.allocated_milli_gpu_s / 3.6e6,
                             p.idle_milli_gpu_s / 3.6e6, p.idle_usd, p.idle_unshared_usd,
                             p.elastic ? "  (elastic)" : "");
  }
}

int RunReport(const ReportArgs& args) {
  auto fail = [](const std::string& m) {
    std::cerr << "error: " << m << "\n";
    return 2;
  };
  Result<std::vector<PriceBook>> books = LoadBooks(args);
  if (!books.ok()) return fail(books.error());
  Result<CostOptions> opt = ReportOptions(args, *books);
  if (!opt.ok()) return fail(opt.error());
  Result<std::string> text = ReadFile(args.ledger);
  if (!text.ok()) return fail(text.error());
  Result<Ledger> ledger = ParseLedgerYaml(*text, args.ledger);
  if (!ledger.ok()) return fail(ledger.error());
  CostModel model(std::move(books).value(), *opt);
  Result<CostReport> rep = model.Evaluate(*ledger);
  if (!rep.ok()) return fail(rep.error());
  if (!args.focus.empty()) {
    Result<std::string> csv = model.FocusCsv(*ledger);
    if (!csv.ok()) return fail(csv.error());
    std::ofstream out(args.focus, std::ios::binary);
    out << *csv;
    if (!out) return fail("cannot write " + args.focus);
  }
  if (args.json) {
    nlohmann::json j = ToJson(*rep);
    j["price_date"] = model.book().price_date();
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  PrintReport(model, *rep);
  return 0;
}

}  // namespace

void RegisterCost(CLI::App& app, int* exit_code) {
  CLI::App* cost = app.add_subcommand("cost", "Prices, buy-versus-rent, checkpoint intervals");
  cost->require_subcommand(1);

  auto be = std::make_shared<BreakEvenArgs>();
  CLI::App* breakeven = cost->add_subcommand("breakeven", "Months until owned hardware breaks even against cloud tiers");
  breakeven->add_option("--config", be->config, "break-even YAML (see examples/cost/breakeven-h100.yaml)")
      ->required()
      ->check(CLI::ExistingFile);
  breakeven->add_option("--utilization", be->utilizations, "utilisation(s) in (0, 1]; default from config (1.0, 0.5)")
      ->check(CLI::Range(1e-9, 1.0));
  breakeven->add_option("--start", be->start, "month 0 of the comparison, YYYY-MM-DD (default: the config's start_date)");
  breakeven->add_option("--rent-cut", be->rent_cuts,
                        "[NAME=]YYYY-MM-DD:CUT: from that date the rent of every alternative (or those whose name "
                        "contains NAME) is cut by CUT (0.45 = 45%); committed ones at their next renewal");
  breakeven->add_flag("--json", be->json, "print JSON");
  breakeven->callback([be, exit_code] { *exit_code = RunBreakEven(*be); });

  auto pr = std::make_shared<PricesArgs>();
  CLI::App* prices = cost->add_subcommand("prices", "Print a price book with its price date and every source");
  prices->add_option("--price-book", pr->book, "price book YAML used instead of the default (2024) book, e.g. "
                     "examples/cost/prices-2025.yaml")->check(CLI::ExistingFile);
  prices->add_option("--config", pr->config, "price book YAML merged over the book (same price_date)")
      ->check(CLI::ExistingFile);
  prices->add_flag("--json", pr->json, "print JSON");
  prices->callback([pr, exit_code] { *exit_code = RunPrices(*pr); });

  auto ck = std::make_shared<CheckpointArgs>();
  CLI::App* checkpoint = cost->add_subcommand("checkpoint", "Young/Daly checkpoint interval for a reclaim rate");
  checkpoint->add_option("--cost", ck->cost_s, "seconds to write one checkpoint")->required()->check(CLI::NonNegativeNumber);
  checkpoint->add_option("--rate", ck->rate, "reclaims per hour")->check(CLI::NonNegativeNumber);
  checkpoint->add_option("--pool", ck->pool, "take rate and notice from a default pool (e.g. aws-p5-spot)");
  checkpoint->add_option("--restart", ck->restart_s, "seconds to restart from a checkpoint")
      ->check(CLI::NonNegativeNumber);
  checkpoint->callback([ck, exit_code] { *exit_code = RunCheckpoint(*ck); });

  auto rp = std::make_shared<ReportArgs>();
  CLI::App* report = cost->add_subcommand("report", "Chargeback report of a ledger (and a FOCUS CSV export)");
  report->add_option("--ledger", rp->ledger, "ledger YAML (capacity and usage records)")->required()->check(CLI::ExistingFile);
  report->add_option("--price-book", rp->book, "price book YAML used instead of the default (2024) book")
      ->check(CLI::ExistingFile);
  report->add_option("--prices", rp->prices,
                     "price book YAML, repeatable: merged into the loaded book of the same price_date, else loaded "
                     "as another book; each record is priced from the book valid at its start")
      ->check(CLI::ExistingFile);
  report->add_option("--idle-policy", rp->idle_policy,
                     "none | proportional | even: how a pool's idle is shared among that pool's users (never "
                     "across pools; a pool nobody used stays the platform's own)");
  report->add_option("--charge-basis", rp->charge_basis, "compute | memory (fraction a MIG slice is charged for)");
  report->add_option("--epoch", rp->epoch,
                     "UTC time of ledger second 0, YYYY-MM-DDTHH:MM:SSZ (default: the book's price_date, 00:00:00Z)");
  report->add_option("--focus", rp->focus, "write a FOCUS 1.0 CSV (with FOCUS 1.1 capacity-reservation columns)");
  report->add_option("--billing-account", rp->billing_account,
                     "FOCUS BillingAccountId prefix: one account per provider, PREFIX-aws, PREFIX-onprem, ... "
                     "(default tessera)");
  report->add_option("--billing-account-name", rp->billing_account_name,
                     "FOCUS BillingAccountName prefix (the provider's name is added)");
  report->add_flag("--json", rp->json, "print JSON");
  report->callback([rp, exit_code] { *exit_code = RunReport(*rp); });
}

}  // namespace tessera::cli
