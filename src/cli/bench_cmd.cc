// `tessera bench place`: placement speed on a synthetic HGX cluster filled to about 80%.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/bench_cycle.h"
#include "cli/synthetic.h"
#include "cli/commands.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "sched/cluster_state.h"
#include "sched/fgd_policy.h"
#include "sched/policy.h"

namespace tessera::cli {
namespace {

struct BenchOptions {
  int nodes = 1024, gpus_per_node = 8;
  std::string policy = "tessera";
  int requests = 200000;
  uint64_t seed = 7;
  bool json = false;
};

// The realistic single-task size mix: half sub-GPU inference (memory from 5 to 40 GiB, 5-60% of a GPU),
// then 1, 2, 4 and 8 whole GPUs.
Request DrawRequest(std::mt19937_64& rng, JobId id) {
  std::uniform_real_distribution<double> u(0, 1);
  Request r;
  r.id = id;
  double x = u(rng);
  if (x < 0.5) {
    r.cls = WorkloadClass::kInference;
    r.gpus_per_task = 0;
    const int64_t mems[] = {6000, 9000, 15000, 19000, 30000, 38000};
    r.gpu_memory_mib = mems[std::uniform_int_distribution<int>(0, 5)(rng)];
    r.gpu_milli = std::uniform_int_distribution<int>(50, 300)(rng);
  } else {
    r.cls = WorkloadClass::kTraining;
    r.gpus_per_task = x < 0.8 ? 1 : x < 0.9 ? 2 : x < 0.97 ? 4 : 8;
    r.gpu_memory_mib = 40000;
  }
  r.cpu_milli = 4000 * std::max(1, r.gpus_per_task);
  r.host_memory_mib = 32768 * std::max(1, r.gpus_per_task);
  return r;
}

struct Held {
  Request r;
  std::vector<TaskPlacement> tasks;
};

// Each policy as it runs in production: the engine policies as the scheduling cycle builds them (no
// typical tasks), the FGD-harness baselines (single tasks only) as the harness does, with a sample of the
// same request mix as their typical tasks.
Result<std::unique_ptr<Policy>> BenchPolicy(const BenchOptions& o) {
  PolicyOptions popt;
  for (const PolicyInfo& info : Policies()) {
    if (info.name != o.policy || info.gangs) continue;
    std::vector<Request> sample;
    std::mt19937_64 srng(o.seed + 1);
    for (int i = 0; i < 2000; ++i) sample.push_back(DrawRequest(srng, i));
    popt.typical = TaskShapeDistribution::FromRequests(sample);
    popt.tie_seed = o.seed;
  }
  return MakePolicy(o.policy, popt);
}

// A 64-GPU gang (8 tasks x 8 GPUs) decided on `state` (not applied): median decision time of 101 runs.
struct GangTiming {
  double median_ms = 0;
  bool placed = false;
  std::string reason;
};
GangTiming TimeGang(const ClusterState& state, const Policy& policy, int gpus_per_node) {
  Request gang;
  gang.cls = WorkloadClass::kTraining;
  gang.tasks = 64 / std::min(8, gpus_per_node);
  gang.gpus_per_task = std::min(8, gpus_per_node);
  gang.gpu_memory_mib = 60000;
  gang.cpu_milli = 8000;
  gang.host_memory_mib = 65536;
  std::vector<double> ms;
  GangTiming out;
  for (int i = 0; i < 101; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    PlaceResult res = policy.Place(state, gang);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    out.placed = res.ok;
    out.reason = res.reason;
  }
  std::nth_element(ms.begin(), ms.begin() + 50, ms.end());
  out.median_ms = ms[50];
  return out;
}

int RunBenchPlace(const BenchOptions& o) {
  const Catalog& catalog = Catalog::Default();
  Cluster cluster = SyntheticHgxCluster(catalog, o.nodes, o.gpus_per_node, "h100-80gb",
                                        fmt::format("synthetic-{}x{}", o.nodes, o.gpus_per_node));
  auto state = ClusterState::Build(cluster, catalog);
  if (!state.ok()) return fmt::print(stderr, "error: {}\n", state.error()), 2;
  std::mt19937_64 rng(o.seed);
  auto policy = BenchPolicy(o);
  if (!policy.ok()) return fmt::print(stderr, "error: {}\n", policy.error()), 2;
  const int64_t capacity = int64_t{kMilliPerGpu} * state->num_gpus();
  std::vector<Held> held;
  JobId id = 1;
  int misses = 0;  // fill to about 80% of GPU capacity
  while (state->AllocatedMilli() < capacity * 8 / 10 && misses < 1000) {
    Request r = DrawRequest(rng, id++);
    PlaceResult res = PlaceAndApply(*state, **policy, r);
    if (res.ok) held.push_back({r, std::move(res.tasks)});
    else ++misses;
  }
  const double fill = static_cast<double>(state->AllocatedMilli()) / capacity;
  // Timed: place a request, apply it; then (untimed) release a random held one to stay near the fill.
  using Clock = std::chrono::steady_clock;
  std::vector<Request> reqs;
  for (int i = 0; i < o.requests; ++i) reqs.push_back(DrawRequest(rng, id++));
  Clock::duration timed{};
  int placed = 0;
  for (const Request& r : reqs) {
    auto t0 = Clock::now();
    PlaceResult res = PlaceAndApply(*state, **policy, r);
    timed += Clock::now() - t0;
    if (!res.ok) continue;
    ++placed;
    held.push_back({r, std::move(res.tasks)});
    size_t victim = std::uniform_int_distribution<size_t>(0, held.size() - 1)(rng);
    std::swap(held[victim], held.back());
    const Held& h = held.back();
    state->Release(h.tasks, h.r.cpu_milli, h.r.host_memory_mib, h.r.cls != WorkloadClass::kTraining);
    held.pop_back();
  }
  const double secs = std::chrono::duration<double>(timed).count();
  const GangTiming gang = TimeGang(*state, **policy, o.gpus_per_node);
  nlohmann::json out = {{"policy", o.policy},
                        {"nodes", o.nodes},
                        {"gpus_per_node", o.gpus_per_node},
                        {"fill", fill},
                        {"requests", o.requests},
                        {"placed", placed},
                        {"placements_per_second", secs > 0 ? o.requests / secs : 0.0},
                        {"gang64_ms", gang.median_ms},
                        {"gang64_placed", gang.placed},
                        {"gang64_reason", gang.reason}};
  if (o.json) fmt::print("{}\n", out.dump(2));
  else
    fmt::print("{}: {:.0f} placements/s ({} of {} placed at {:.0f}% fill); 64-GPU gang {:.3f} ms ({})\n", o.policy,
               out["placements_per_second"].get<double>(), placed, o.requests, fill * 100, gang.median_ms, gang.reason);
  return 0;
}

}  // namespace

void RegisterBench(CLI::App& app, int* exit_code) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks that print JSON");
  bench->require_subcommand(1);
  auto o = std::make_shared<BenchOptions>();
  CLI::App* place = bench->add_subcommand("place", "Placement speed on a synthetic cluster filled to ~80%");
  place->add_option("--nodes", o->nodes, "nodes")->check(CLI::Range(1, 100000));
  place->add_option("--gpus-per-node", o->gpus_per_node, "GPUs per node")->check(CLI::Range(1, 16));
  place->add_option("--policy", o->policy, "policy name");
  place->add_option("--requests", o->requests, "timed requests")->check(CLI::Range(1, 100000000));
  place->add_option("--seed", o->seed, "random seed");
  place->add_flag("--json", o->json, "JSON output");
  place->callback([o, exit_code] { *exit_code = RunBenchPlace(*o); });
  RegisterBenchCycle(*bench, exit_code);
  RegisterBenchApi(*bench, exit_code);
  RegisterBenchSoak(*bench, exit_code);
  RegisterBenchDra(*bench, exit_code);
  RegisterBenchRank(*bench, exit_code);
}

}  // namespace tessera::cli
