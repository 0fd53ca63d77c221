// `tessera simulate run | generate | report`: time-based scenario runs (src/sim/scenario.h), the seeded
// trace generator and the HTML report. Parsing and printing only; the work lives in src/sim.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "base/file.h"
#include "cli/commands.h"
#include "cost/pricebook.h"
#include "model/catalog.h"
#include "sim/cost_baselines.h"
#include "sim/metrics.h"
#include "sim/multi_tenant.h"
#include "sim/report.h"
#include "sim/scenario.h"
#include "sim/trace.h"
#include "cli/list_args.h"

namespace tessera::cli {
namespace {

struct RunArgs {
  std::string scenario;
  std::string price_book;
  std::string policies;
  std::string seeds;
  int threads = 0;
  bool json = false;
  std::string csv;
  std::string cycle;  // "" = the scenario's; full | greedy for every policy
  std::string decisions;  // write the first run's decisions (JSON lines) here
};

// Writes decision lines (control/decisions.h) to `path`.
Status WriteDecisions(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream f(path);
  for (const std::string& l : lines) f << l << "\n";
  f.close();
  if (!f) return Status::Error("--decisions: cannot write " + path);
  return Status::Ok();
}

struct GenArgs {
  std::string scenario;
  uint64_t seed = 1;
  std::string out;
  double inference_share = -1;
  std::string traffic;
};

struct ReportArgs {
  std::string out;
  std::vector<std::string> scenarios;
  std::string policies;
  std::string seeds;
  std::string fgd_curves;
  std::string fgd_trace = "../shared/traces/alibaba-gpu-2023";
};

Result<Scenario> Prepare(const std::string& path, const std::string& seeds, int threads) {
  auto sc = LoadScenario(path, Catalog::Default());
  if (!sc.ok()) return sc.status();
  for (const std::string& w : sc->warnings) std::cerr << "warning: " << w << "\n";
  if (!seeds.empty()) {
    auto s = ParseSeeds(seeds, 1000);
    if (!s.ok()) return s.status();
    sc->seeds = *s;
  }
  if (threads > 0) sc->threads = threads;
  return sc;
}

// Replaces the scenario's price book by the book in `path` (every pool of its cluster must be there).
Status UsePriceBook(const std::string& path, Scenario* sc) {
  if (!sc->tiers) return Status::Error("--price-book: the scenario has no 'tiers:' section");
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  auto book = PriceBook::FromYaml(*text, path);
  if (!book.ok()) return book.status();
  TierConfig cfg = *sc->tiers;
  for (const TierPoolConfig& p : cfg.pools) {
    const Pool* bp = book->FindPool(p.pool);
    if (!bp || bp->tier != p.tier)
      return Status::Error(fmt::format("--price-book {}: no {} pool '{}' (the scenario's cluster uses it)", path,
                                       TierName(p.tier), p.pool));
  }
  cfg.book = std::move(book).value();
  sc->tiers = std::make_shared<const TierConfig>(std::move(cfg));
  return Status::Ok();
}

// Prints `error: message` and returns `code`.
int Fail(int code, const std::string& message) {
  std::cerr << "error: " << message << "\n";
  return code;
}

// Multi-tenant scenarios (issue 4, sim/multi_tenant.h) have their own runner and metrics (JSON only).
int RunMultiTenant(const RunArgs& a, Scenario* sc) {
  if (!a.cycle.empty() || !a.price_book.empty() || !a.csv.empty())
    return Fail(2, a.scenario +
                       ": --cycle, --price-book and --csv do not apply to a multi-tenant scenario (teams_workload)");
  std::vector<std::string> decisions;
  sc->sim.record_decisions = !a.decisions.empty();
  auto doc = RunMultiTenantScenario(*sc, a.policies.empty() ? sc->policies : SplitCommas(a.policies),
                                    Catalog::Default(), &decisions);
  if (!doc.ok()) return Fail(1, doc.error());
  if (Status st = a.decisions.empty() ? Status::Ok() : WriteDecisions(a.decisions, decisions); !st.ok())
    return Fail(1, st.message());
  std::cout << doc->dump(2) << "\n";
  return 0;
}

// --price-book and --cycle applied to the scenario.
Status ApplyRunFlags(const RunArgs& a, Scenario* sc) {
  if (!a.price_book.empty())
    if (Status st = UsePriceBook(a.price_book, sc); !st.ok()) return st;
  if (a.cycle.empty()) return Status::Ok();
  if (a.cycle != "backfill" && a.cycle != "greedy" && a.cycle != "full")
    return Status::Error("--cycle: expected backfill or greedy, got '" + a.cycle + "'");
  sc->gang_backfill = a.cycle != "greedy";  // `full`: the older name of backfill
  sc->asymmetric_cycle = false;  // one cycle for every policy
  return Status::Ok();
}

// The run's JSON document; every price of the run comes from one dated book: it says which.
nlohmann::json RunDocument(const ScenarioOutcome& out, const Scenario& sc) {
  nlohmann::json doc = OutcomeJson(out, sc.is_sweep);
  if (!sc.tiers) return doc;
  const std::string price_date = sc.tiers->book.price_date();
  doc["price_date"] = price_date;
  doc["price_book"] = sc.tiers->book.title();
  if (doc.contains("results"))
    for (auto& r : doc["results"]) r["price_date"] = price_date;
  return doc;
}

int RunScenarioCommand(const RunArgs& a, Scenario* sc) {
  if (Status st = ApplyRunFlags(a, sc); !st.ok()) return Fail(2, st.message());
  std::vector<std::string> policies = a.policies.empty() ? sc->policies : SplitCommas(a.policies);
  sc->sim.record_decisions = !a.decisions.empty();
  auto out = RunScenario(*sc, policies, Catalog::Default());
  if (!out.ok()) return Fail(1, out.error());
  if (!a.decisions.empty() && !out->variants.empty() && !out->variants[0].runs.empty() &&
      !out->variants[0].runs[0].empty())
    if (Status st = WriteDecisions(a.decisions, out->variants[0].runs[0][0].decisions); !st.ok())
      return Fail(1, st.message());
  if (!a.csv.empty()) {
    std::ofstream f(a.csv);
    f << OutcomeCsv(*out);
    if (!f) return Fail(1, "cannot write " + a.csv);
  }
  if (a.json) {
    std::cout << RunDocument(*out, *sc).dump(2) << "\n";
    return 0;
  }
  std::cout << TextSummary(*out, sc->is_sweep);
  if (sc->tiers) std::cout << CostTable(*out, sc->tiers->book.price_date());
  return 0;
}

void DoRun(const RunArgs& a, int* exit_code) {
  auto sc = Prepare(a.scenario, a.seeds, a.threads);
  if (!sc.ok()) {
    *exit_code = Fail(2, sc.error());
    return;
  }
  *exit_code = sc->IsMultiTenant() ? RunMultiTenant(a, &*sc) : RunScenarioCommand(a, &*sc);
}

// `simulate bound`: the upper bound on gpu_utilization of each (variant, seed) job stream (sim/bound.h).
void DoBound(const RunArgs& a, int* exit_code) {
  auto sc = Prepare(a.scenario, a.seeds, a.threads);
  if (!sc.ok()) {
    std::cerr << "error: " << sc.error() << "\n";
    *exit_code = 2;
    return;
  }
  ScenarioOutcome o;
  o.name = sc->name;
  o.seeds = sc->seeds;
  o.gpus = sc->cluster.TotalGpus();
  for (const ScenarioVariant& v : sc->variants) {
    VariantOutcome vo;
    vo.variant = v;
    for (uint64_t seed : sc->seeds) vo.bounds.push_back(BoundFor(*sc, Catalog::Default(), JobsFor(*sc, v, seed)));
    o.variants.push_back(std::move(vo));
  }
  nlohmann::json doc = {{"scenario", o.name}, {"gpus", o.gpus}, {"seeds", o.seeds}};
  if (sc->is_sweep) {
    doc["sweep"] = nlohmann::json::array();
    for (const VariantOutcome& v : o.variants)
      doc["sweep"].push_back({{"inference_share", v.variant.inference_share}, {"traffic", v.variant.traffic},
                              {"bound", BoundJson(v)}});
  } else {
    doc["bound"] = BoundJson(o.variants.front());
  }
  if (a.json) {
    std::cout << doc.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("scenario {} ({} GPUs, {} seeds): upper bound on gpu_utilization (fractional packing by "
                           "compute and memory; docs/simulator.md)\n", o.name, o.gpus, o.seeds.size());
  for (const VariantOutcome& v : o.variants) {
    const nlohmann::json b = BoundJson(v);
    std::string limits;
    for (auto it = b["limit"].begin(); it != b["limit"].end(); ++it)
      limits += fmt::format("{}{} ({} seeds)", limits.empty() ? "" : ", ", it.key(), it.value().get<int>());
    std::cout << fmt::format("  {}bound {:.3f} [{:.3f},{:.3f}]  offered compute {:.3f}  limit: {}\n",
                             v.variant.label.empty() ? "" : v.variant.label + ": ",
                             b["gpu_utilization"]["mean"].get<double>(), b["gpu_utilization"]["min"].get<double>(),
                             b["gpu_utilization"]["max"].get<double>(), b["offered_compute"]["mean"].get<double>(),
                             limits);
  }
}

void DoGenerate(const GenArgs& a, int* exit_code) {
  auto sc = LoadScenario(a.scenario, Catalog::Default());
  if (!sc.ok()) {
    std::cerr << "error: " << sc.error() << "\n";
    *exit_code = 2;
    return;
  }
  if (!sc->use_generator) {
    std::cerr << "error: " << a.scenario << ": the scenario has no 'workload' generator to draw from\n";
    *exit_code = 2;
    return;
  }
  ScenarioVariant v = sc->variants.front();
  if (a.inference_share >= 0) v.generator.inference_share = a.inference_share;
  if (!a.traffic.empty()) {
    auto lf = LightFractionOf(a.traffic);
    if (!lf.ok()) {
      std::cerr << "error: --traffic: " << lf.error() << "\n";
      *exit_code = 2;
      return;
    }
    v.generator.light_fraction = *lf;
  }
  const std::vector<TraceJob> jobs = JobsFor(*sc, v, a.seed);
  nlohmann::json prov = {{"scenario", sc->name},
                         {"seed", a.seed},
                         {"generator", "tessera simulate generate"},
                         {"arrivals", sc->arrivals.process},
                         {"inference_share", v.generator.inference_share}};
  const std::string text = WriteTrace(jobs, prov.dump());
  if (a.out.empty() || a.out == "-") {
    std::cout << text;
  } else {
    std::ofstream f(a.out, std::ios::binary);
    f << text;
    if (!f) {
      std::cerr << "error: cannot write " << a.out << "\n";
      *exit_code = 1;
      return;
    }
    std::cerr << fmt::format("wrote {} jobs to {}\n", jobs.size(), a.out);
  }
}

void DoReport(const ReportArgs& a, int* exit_code) {
  ReportInput in;
  in.out_dir = a.out;
  in.fgd_curves_csv = a.fgd_curves;
  if (!in.fgd_curves_csv.empty() && !std::ifstream(in.fgd_curves_csv)) {  // before hours of scenario runs
    std::cerr << "error: cannot read FGD curves from " << in.fgd_curves_csv << "\n";
    *exit_code = 2;
    return;
  }
  // The authors' curves come with the trace folder (fgd-baseline-results/); when that folder is there, the
  // file must be readable; without it the report plots ours only, and says so.
  const std::string authors_dir = a.fgd_trace + "/fgd-baseline-results";
  if (std::filesystem::is_directory(authors_dir)) in.authors_curves_csv = authors_dir + "/analysis_allo_discrete.csv";
  else if (std::filesystem::is_directory(a.fgd_trace))
    std::cerr << fmt::format("note: no {}: the report plots our FGD curves without the authors'\n", authors_dir);
  // Without a curves file, run the FGD harness on the openb trace when it is there.
  if (in.fgd_curves_csv.empty() && std::filesystem::exists(a.fgd_trace + "/openb_node_list_gpu_node.csv")) {
    std::error_code ec;
    std::filesystem::create_directories(a.out, ec);
    const std::string curves = a.out + "/fgd-curves.csv";
    std::cerr << fmt::format("running the FGD harness on {} (the paper's six policies and tessera; seeds 42-51)\n",
                             a.fgd_trace);
    if (int rc = WriteFgdCurves(a.fgd_trace, "fgd,bestfit,random,dotprod,gpuclustering,gpupacking,tessera", "42-51",
                                curves);
        rc != 0) {
      *exit_code = rc;
      return;
    }
    in.fgd_curves_csv = curves;
  }
  std::vector<std::string> scenarios = a.scenarios;
  if (scenarios.empty())
    scenarios = {"examples/scenarios/mixed-inference-training.yaml", "examples/scenarios/topology-training.yaml"};
  for (const std::string& path : scenarios) {
    auto sc = Prepare(path, a.seeds, 0);
    if (!sc.ok()) {
      std::cerr << "error: " << sc.error() << "\n";
      *exit_code = 2;
      return;
    }
    std::vector<std::string> policies = a.policies.empty() ? sc->policies : SplitCommas(a.policies);
    auto out = RunScenario(*sc, policies, Catalog::Default());
    if (!out.ok()) {
      std::cerr << "error: " << out.error() << "\n";
      *exit_code = 1;
      return;
    }
    in.outcomes.push_back({path, sc->is_sweep, std::move(out).value()});
  }
  Status st = WriteReport(in);
  if (!st.ok()) {
    std::cerr << "error: " << st.message() << "\n";
    *exit_code = 1;
    return;
  }
  std::cout << fmt::format("wrote {}/index.html\n", a.out);
}

}  // namespace

void RegisterSimulateRun(CLI::App& simulate, int* exit_code) {
  auto run_args = std::make_shared<RunArgs>();
  CLI::App* run = simulate.add_subcommand("run", "Run a time-based scenario over seeds and compare policies");
  run->add_option("--scenario", run_args->scenario, "scenario YAML (examples/scenarios/)")->required();
  run->add_option("--policy", run_args->policies, "comma-separated policies (default: the scenario's)");
  run->add_option("--seeds", run_args->seeds, "seeds, A-B or a list (default: the scenario's)");
  run->add_option("--threads", run_args->threads, "worker threads (default: the scenario's, 2)");
  run->add_option("--price-book", run_args->price_book,
                  "price book YAML replacing the scenario's (tiers scenarios), e.g. examples/cost/prices-2025.yaml");
  run->add_flag("--json", run_args->json, "print JSON");
  run->add_option("--cycle", run_args->cycle,
                  "backfill (gang reservations, backfill, time limits) or greedy (first fit in queue order): the "
                  "cycle every policy gets, replacing the scenario's (docs/simulator.md)");
  run->add_option("--csv", run_args->csv, "also write one CSV row per run to this file");
  run->add_option("--decisions", run_args->decisions,
                  "write the first run's decisions (first variant, policy and seed) as JSON lines to this file");
  run->callback([run_args, exit_code]() { DoRun(*run_args, exit_code); });

  auto bound_args = std::make_shared<RunArgs>();
  CLI::App* bound = simulate.add_subcommand(
      "bound", "Upper bound on gpu_utilization of a scenario's job streams that no scheduler can exceed");
  bound->add_option("--scenario", bound_args->scenario, "scenario YAML (examples/scenarios/)")->required();
  bound->add_option("--seeds", bound_args->seeds, "seeds, A-B or a list (default: the scenario's)");
  bound->add_flag("--json", bound_args->json, "print JSON");
  bound->callback([bound_args, exit_code]() { DoBound(*bound_args, exit_code); });

  auto gen_args = std::make_shared<GenArgs>();
  CLI::App* gen = simulate.add_subcommand("generate", "Write a Tessera trace (JSONL) from a scenario's generator");
  gen->add_option("--scenario", gen_args->scenario, "scenario YAML with a 'workload' generator")->required();
  gen->add_option("--seed", gen_args->seed, "seed (default 1)");
  gen->add_option("--out", gen_args->out, "output file (default: stdout)");
  gen->add_option("--inference-share", gen_args->inference_share, "override the inference share of GPU requests");
  gen->add_option("--traffic", gen_args->traffic, "override the traffic: light, mixed, busy");
  gen->callback([gen_args, exit_code]() { DoGenerate(*gen_args, exit_code); });

  auto rep_args = std::make_shared<ReportArgs>();
  CLI::App* rep = simulate.add_subcommand("report", "Run scenarios and write an HTML report with charts, JSON and CSV");
  rep->add_option("--out", rep_args->out, "output folder")->required();
  rep->add_option("--scenario", rep_args->scenarios, "scenario YAML (repeatable; default: mixed and topology)");
  rep->add_option("--policy", rep_args->policies, "comma-separated policies (default: each scenario's)");
  rep->add_option("--seeds", rep_args->seeds, "seeds, A-B or a list (default: each scenario's)");
  rep->add_option("--fgd-curves", rep_args->fgd_curves,
                  "curves CSV from `simulate fgd-harness --curves` to plot against the authors' FGD curves");
  rep->add_option("--fgd-trace", rep_args->fgd_trace,
                  "openb trace folder: without --fgd-curves, run the FGD harness there for the curves "
                  "(default ../shared/traces/alibaba-gpu-2023; skipped if absent)");
  rep->callback([rep_args, exit_code]() { DoReport(*rep_args, exit_code); });
}

}  // namespace tessera::cli
