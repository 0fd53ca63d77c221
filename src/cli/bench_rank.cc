// `tessera bench rank-nodes`: the question kube-scheduler's extender asks, answered from the loop's view
// (Service::RankNodes): one task judged on every node of a synthetic cluster whose GPUs are partly taken by
// running jobs, then the policy's first choices ranked. Prints the median and the slowest call.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "base/stats.h"
#include "cli/bench_cycle.h"
#include "cli/synthetic.h"
#include "service/service.h"
#include "service/simulated_backend.h"
#include "service/workload_json.h"
#include "store/store.h"

namespace tessera::cli {
namespace {

struct RankBenchOptions {
  int nodes = 1024;
  int gpus_per_node = 8;
  int fill_percent = 50;  // of the GPUs, taken by running jobs of 1, 2, 4 or 8 GPUs before the timed calls
  int calls = 20;
  int ranked = 10;
  uint64_t seed = 1;
  bool json = false;
};

JobSpec TrainingSpec(const std::string& name, int gpus) {
  return ParseJobSpec({{"name", name},
                       {"team", "bench"},
                       {"class", "training"},
                       {"workers", 1},
                       {"gpus_per_worker", gpus},
                       {"duration_s", 86400}})
      .value();
}

// Running jobs until about `fill_percent` of the GPUs are taken; returns the GPUs asked for.
int64_t Fill(Service& svc, const Caller& admin, const RankBenchOptions& o) {
  std::mt19937_64 rng(o.seed);
  const int64_t target = int64_t{o.nodes} * o.gpus_per_node * o.fill_percent / 100;
  std::vector<JobSpec> specs;
  int64_t asked = 0;
  for (int i = 0; asked < target; ++i) {
    const int gpus = std::min<int>(o.gpus_per_node, 1 << std::uniform_int_distribution<int>(0, 3)(rng));
    specs.push_back(TrainingSpec(fmt::format("fill-{}", i), gpus));
    asked += gpus;
  }
  for (const auto& r : svc.SubmitAll(admin, specs))
    if (!r.ok())
      fmt::print(stderr, "tessera bench rank-nodes: a filler was refused: {}\n", r.error().message);
  svc.RunCycleNow();
  return asked;
}

int RunBenchRank(const RankBenchOptions& o) {
  const Catalog& catalog = Catalog::Default();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("tessera-bench-rank-{}", ::getpid());
  std::filesystem::create_directories(dir);
  ServiceConfig cfg;
  cfg.catalog = &catalog;
  cfg.cluster = SyntheticHgxCluster(catalog, o.nodes, o.gpus_per_node, "h100-80gb", "bench-rank");
  cfg.background_cycles = false;
  auto store = OpenSqliteStore((dir / "bench.db").string());
  if (!store.ok()) return fmt::print(stderr, "tessera bench rank-nodes: {}\n", store.error()), 2;
  ScaledClock clock(static_cast<double>(std::time(nullptr)), 1.0);
  SimulatedBackend backend(&clock);
  auto svc = Service::Start(std::move(cfg), std::move(store).value(), &clock, &backend);
  if (!svc.ok()) return fmt::print(stderr, "tessera bench rank-nodes: {}\n", svc.error()), 2;
  const Caller admin{"admin", "", Role::kAdmin};
  (void)(*svc)->CreateTeam(admin, TeamRow{"bench", int64_t{o.nodes} * o.gpus_per_node * 1000, -1, 1, 0});
  const int64_t filled = Fill(**svc, admin, o);
  std::vector<std::string> names;
  auto views = (*svc)->ListNodes(admin);
  for (const NodeView& v : views.value()) names.push_back(v.name);
  const JobSpec ask = TrainingSpec("ask", 1);
  std::vector<double> ms;
  int fits = 0;
  for (int i = 0; i < o.calls; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = (*svc)->RankNodes(admin, ask, names, o.ranked);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!r.ok()) return fmt::print(stderr, "tessera bench rank-nodes: {}\n", r.error().message), 2;
    fits = static_cast<int>(std::count_if(r->begin(), r->end(), [](const NodeRank& n) { return n.fits; }));
  }
  svc->reset();
  std::filesystem::remove_all(dir);
  const nlohmann::json out = {{"nodes", o.nodes},
                              {"gpus_per_node", o.gpus_per_node},
                              {"gpus_taken", filled},
                              {"calls", o.calls},
                              {"ranked", o.ranked},
                              {"nodes_fitting", fits},
                              {"median_ms", tessera::Median(ms)},
                              {"max_ms", *std::max_element(ms.begin(), ms.end())}};
  if (o.json)
    fmt::print("{}\n", out.dump(2));
  else
    fmt::print("RankNodes over {} nodes ({} fit): median {:.2f} ms, slowest {:.2f} ms over {} calls\n",
               o.nodes, fits, out["median_ms"].get<double>(), out["max_ms"].get<double>(), o.calls);
  return 0;
}

}  // namespace

void RegisterBenchRank(CLI::App& bench, int* exit_code) {
  auto o = std::make_shared<RankBenchOptions>();
  CLI::App* c = bench.add_subcommand(
      "rank-nodes", "The extender's /filter and /prioritize from the loop's view: one task on every node");
  c->add_option("--nodes", o->nodes, "nodes")->check(CLI::Range(1, 100000))->capture_default_str();
  c->add_option("--gpus-per-node", o->gpus_per_node, "GPUs per node")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  c->add_option("--fill", o->fill_percent, "percent of the GPUs taken by running jobs first")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  c->add_option("--calls", o->calls, "timed calls")->check(CLI::Range(1, 100000))->capture_default_str();
  c->add_option("--ranked", o->ranked, "first choices ranked")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  c->add_option("--seed", o->seed, "random seed of the fillers")->capture_default_str();
  c->add_flag("--json", o->json, "JSON output");
  c->callback([o, exit_code] { *exit_code = RunBenchRank(*o); });
}

}  // namespace tessera::cli
