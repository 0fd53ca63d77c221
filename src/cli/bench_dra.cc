// `tessera bench dra`: large DRA claims placed after small-MIG churn, by Tessera's allocator, by first-fit in
// device-name order (the upstream allocator's order) and by an exact packing (k8s/dra_bench.h).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/bench_cycle.h"
#include "k8s/dra/dra_bench.h"

namespace tessera::cli {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

nlohmann::json Summary(const std::vector<DraReplayResult>& rs) {
  int offered = 0, tessera = 0, first_fit = 0, bound = 0, exhaustive = 0, beat = 0, lost = 0;
  std::vector<double> tessera_ratio, ff_ratio;
  for (const DraReplayResult& r : rs) {
    offered += r.large;
    tessera += r.tessera;
    first_fit += r.first_fit;
    bound += std::max(r.bound, 0);
    exhaustive += r.bound_exhaustive;
    beat += r.tessera > r.first_fit;
    lost += r.tessera < r.first_fit;
    if (r.bound > 0) {
      tessera_ratio.push_back(static_cast<double>(r.tessera) / r.bound);
      ff_ratio.push_back(static_cast<double>(r.first_fit) / r.bound);
    }
  }
  return {{"scenarios", rs.size()},
          {"large_offered", offered},
          {"placed_tessera", tessera},
          {"placed_first_fit", first_fit},
          {"placed_bound", bound},
          {"bounds_exhaustive", exhaustive},
          {"scenarios_tessera_ahead", beat},
          {"scenarios_first_fit_ahead", lost},
          {"median_ratio_to_bound_tessera", Median(tessera_ratio)},
          {"median_ratio_to_bound_first_fit", Median(ff_ratio)}};
}

int RunBenchDra(const DraBenchOptions& o, bool json_out) {
  std::string error;
  const std::vector<DraReplayResult> rs = RunDraBench(o, &error);
  if (!error.empty()) {
    fmt::print(stderr, "tessera bench dra: {}\n", error);
    return 2;
  }
  const nlohmann::json sum = Summary(rs);
  if (json_out) {
    nlohmann::json runs = nlohmann::json::array();
    for (const DraReplayResult& r : rs)
      runs.push_back({{"scenario", r.scenario},
                      {"large", r.large},
                      {"kept_small", r.kept},
                      {"placed_tessera", r.tessera},
                      {"placed_first_fit", r.first_fit},
                      {"bound", r.bound},
                      {"bound_exhaustive", r.bound_exhaustive},
                      {"small_refused_tessera", r.small_refused_tessera},
                      {"small_refused_first_fit", r.small_refused_first_fit}});
    fmt::print("{}\n",
               nlohmann::json{{"gpu", o.gpu}, {"gpus", o.gpus}, {"summary", sum}, {"runs", runs}}.dump(2));
    return 0;
  }
  fmt::print("{:<14} {:>5} {:>4} {:>8} {:>9} {:>6}\n", "scenario", "large", "kept", "tessera", "first-fit",
             "bound");
  for (const DraReplayResult& r : rs)
    fmt::print("{:<14} {:>5} {:>4} {:>8} {:>9} {:>5}{}\n", r.scenario, r.large, r.kept, r.tessera,
               r.first_fit, r.bound, r.bound_exhaustive ? " " : "+");
  fmt::print(
      "large placed: tessera {} ({:.3f} of the bound, median), first-fit {} ({:.3f}), exact packing {} of {} "
      "offered; tessera ahead in {} scenarios, first-fit in {}{}\n",
      sum["placed_tessera"].get<int>(), sum["median_ratio_to_bound_tessera"].get<double>(),
      sum["placed_first_fit"].get<int>(), sum["median_ratio_to_bound_first_fit"].get<double>(),
      sum["placed_bound"].get<int>(), sum["large_offered"].get<int>(),
      sum["scenarios_tessera_ahead"].get<int>(), sum["scenarios_first_fit_ahead"].get<int>(),
      sum["bounds_exhaustive"].get<int>() == static_cast<int>(rs.size())
          ? ""
          : " (+: search budget hit, lower bound)");
  return 0;
}

}  // namespace

void RegisterBenchDra(CLI::App& bench, int* exit_code) {
  auto o = std::make_shared<DraBenchOptions>();
  auto json_out = std::make_shared<bool>(false);
  CLI::App* cmd =
      bench.add_subcommand("dra", "DRA claims: large MIG/GPU requests placed after small-MIG churn");
  cmd->add_option("--gpu", o->gpu, "catalog GPU kind (MIG-capable)");
  cmd->add_option("--gpus", o->gpus, "GPUs on the node")->check(CLI::Range(1, 16));
  cmd->add_option("--seeds", o->seeds, "random scenarios besides the check's sequence")
      ->check(CLI::Range(0, 10000));
  cmd->add_option("--first-seed", o->first_seed, "seed of the first random scenario");
  cmd->add_option("--arrivals", o->arrivals, "small MIG claims per random scenario")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--bound-budget", o->bound_budget, "search steps for the exact packing per scenario")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000000}));
  cmd->add_flag("--json", *json_out, "JSON output");
  cmd->callback([o, json_out, exit_code] { *exit_code = RunBenchDra(*o, *json_out); });
}

}  // namespace tessera::cli
