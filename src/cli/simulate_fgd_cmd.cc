// `tessera simulate fgd-harness`: the FGD paper's evaluation harness on an openb node list and pod list
// (src/sim/fgd_harness.h). Runs every (policy, seed) pair on --threads threads and prints, per policy,
// the median / min / max over seeds of the unallocated GPU share and the fragmentation at 100% arrived
// load; optionally every decision (--placements). Exit codes: 0 ok, 2 bad input (unreadable or malformed
// files, unknown policy, bad seed range, unwritable output).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/file.h"
#include "base/parallel.h"
#include "base/stats.h"
#include "cli/commands.h"
#include "model/catalog.h"
#include "sched/policy.h"
#include "sim/fgd_harness.h"
#include "sim/openb.h"

namespace tessera::cli {
namespace {

struct FgdOptions {
  std::string nodes;
  std::string pods;
  std::string policies = "fgd";
  std::string seeds = "42-51";
  std::string curves;
  std::string placements;  // CSV: one row per pod, policy and seed
  bool json = false;
  int threads = 2;
  double inflation = 1.3;
  bool binned = false;  // curves: only the last point of each 1% arrived-load bin (what the report plots)
  bool quiet = false;   // print nothing on success
};

// "42-51", "42", "42,45,50-51".
Result<std::vector<uint64_t>> ParseSeeds(const std::string& text) {
  std::vector<uint64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? text.size() + 1 : comma + 1;
    try {
      size_t dash = item.find('-');
      size_t used = 0;
      if (dash == std::string::npos) {
        uint64_t v = std::stoull(item, &used);
        if (used != item.size()) throw std::invalid_argument(item);
        out.push_back(v);
      } else {
        uint64_t a = std::stoull(item.substr(0, dash), &used);
        if (used != dash) throw std::invalid_argument(item);
        uint64_t b = std::stoull(item.substr(dash + 1), &used);
        if (used != item.size() - dash - 1 || b < a || b - a > 100000) throw std::invalid_argument(item);
        for (uint64_t s = a; s <= b; ++s) out.push_back(s);
      }
    } catch (const std::exception&) {
      return Status::Error(fmt::format("--seeds: '{}' is not a seed or range like 42-51", item));
    }
  }
  if (out.empty()) return Status::Error("--seeds: no seeds");
  return out;
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t c = s.find(',', pos);
    std::string item = s.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
    if (!item.empty()) out.push_back(item);
    pos = c == std::string::npos ? s.size() + 1 : c + 1;
  }
  return out;
}

double Round4(double x) { return std::round(x * 1e4) / 1e4; }

nlohmann::json Spread(const std::vector<double>& v) {
  nlohmann::json seeds = nlohmann::json::array();
  for (double x : v) seeds.push_back(Round4(x));
  return {{"median", Round4(Median(v))},
          {"min", Round4(*std::min_element(v.begin(), v.end()))},
          {"max", Round4(*std::max_element(v.begin(), v.end()))},
          {"seeds", seeds}};
}

// One --placements row: `gpus` is `localidx:milli` per granted GPU joined by `|` (empty for CPU-only pods
// and failures), `node` the node's `sn` (empty for failures).
void WritePlacementRow(std::ostream& out, const std::string& policy, uint64_t seed, const PodDecision& d,
                       const Cluster& cluster) {
  std::string gpus;
  for (const auto& [idx, milli] : d.gpus) gpus += fmt::format("{}{}:{}", gpus.empty() ? "" : "|", idx, milli);
  out << fmt::format("{},{},{},{},{},{},{}\n", policy, seed, d.pod_index, d.pod_row, d.placed ? "placed" : "failed",
                     d.placed ? cluster.nodes[d.node].name : std::string(), gpus);
}

int Run(const FgdOptions& o) {
  Result<std::vector<uint64_t>> seeds = ParseSeeds(o.seeds);
  if (!seeds.ok()) {
    std::cerr << "error: " << seeds.error() << "\n";
    return 2;
  }
  const std::vector<std::string> policies = SplitCommas(o.policies);
  if (policies.empty()) {
    std::cerr << "error: --policy: no policy named\n";
    return 2;
  }
  const Catalog& catalog = Catalog::Default();
  Result<std::string> node_text = ReadFile(o.nodes);
  if (!node_text.ok()) {
    std::cerr << "error: " << node_text.error() << "\n";
    return 2;
  }
  Result<Cluster> cluster = ParseOpenbNodes(*node_text, o.nodes, catalog);
  if (!cluster.ok()) {
    std::cerr << "error: " << cluster.error() << "\n";
    return 2;
  }
  Result<std::string> pod_text = ReadFile(o.pods);
  if (!pod_text.ok()) {
    std::cerr << "error: " << pod_text.error() << "\n";
    return 2;
  }
  Result<OpenbPods> pods = ParseOpenbPods(*pod_text, o.pods, catalog);
  if (!pods.ok()) {
    std::cerr << "error: " << pods.error() << "\n";
    return 2;
  }
  const TaskShapeDistribution dist = TaskShapeDistribution::FromRequests(pods->requests);
  for (const std::string& p : policies) {
    if (Result<std::unique_ptr<Policy>> made = MakePolicy(p); !made.ok()) {
      std::cerr << "error: --policy: " << made.error() << "\n";
      return 2;
    }
  }

  // Opened before the runs so that an unwritable path fails fast.
  std::ofstream out;
  if (!o.curves.empty()) {
    out.open(o.curves);
    if (!out) {
      std::cerr << "error: cannot write " << o.curves << "\n";
      return 2;
    }
  }
  std::ofstream placements_out;
  if (!o.placements.empty()) {
    placements_out.open(o.placements);
    if (!placements_out) {
      std::cerr << "error: cannot write " << o.placements << "\n";
      return 2;
    }
  }

  struct Job {
    size_t policy = 0;
    uint64_t seed = 0;
    Result<FgdRunResult> result = Status::Error("not run");
    double seconds = 0;
  };
  std::vector<Job> jobs;
  for (size_t p = 0; p < policies.size(); ++p)
    for (uint64_t s : *seeds) jobs.push_back(Job{p, s});
  FgdHarnessOptions hopt;
  hopt.inflation = o.inflation;
  hopt.record_curve = !o.curves.empty();
  hopt.record_placements = !o.placements.empty();
  const auto t_all = std::chrono::steady_clock::now();
  const int nthreads = std::max(1, std::min<int>(o.threads, static_cast<int>(jobs.size())));
  ParallelFor(jobs.size(), nthreads, [&](size_t j) {
    const auto t0 = std::chrono::steady_clock::now();
    jobs[j].result = RunFgdHarness(*cluster, catalog, pods->requests, dist, policies[jobs[j].policy], jobs[j].seed, hopt);
    jobs[j].seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_all).count();
  for (const Job& j : jobs) {
    if (!j.result.ok()) {
      std::cerr << fmt::format("error: {} seed {}: {}\n", policies[j.policy], j.seed, j.result.error());
      return 2;
    }
  }

  if (!o.curves.empty()) {
    out << "policy,seed,pod_index,arrived_pct,allocated_pct,frag_pct_of_capacity,frag_pct_of_idle\n";
    for (const Job& j : jobs)
      for (size_t k = 0; k < j.result->curve.size(); ++k) {
        const CurvePoint& c = j.result->curve[k];
        if (o.binned && k + 1 < j.result->curve.size() &&
            std::floor(j.result->curve[k + 1].arrived_pct) == std::floor(c.arrived_pct))
          continue;
        out << fmt::format("{},{},{},{:.4f},{:.4f},{:.4f},{:.4f}\n", policies[j.policy], j.seed, c.pod_index,
                           c.arrived_pct, c.allocated_pct, c.frag_pct_of_capacity, c.frag_pct_of_idle);
      }
    out.close();
    if (!out) {
      std::cerr << "error: writing " << o.curves << " failed\n";
      return 2;
    }
  }

  if (!o.placements.empty()) {
    placements_out << "policy,seed,pod_index,pod_row,status,node,gpus\n";
    for (const Job& j : jobs)
      for (const PodDecision& d : j.result->decisions) WritePlacementRow(placements_out, policies[j.policy], j.seed, d, *cluster);
    placements_out.close();
    if (!placements_out) {
      std::cerr << "error: writing " << o.placements << " failed\n";
      return 2;
    }
  }

  nlohmann::json results = nlohmann::json::array();
  for (size_t p = 0; p < policies.size(); ++p) {
    std::vector<double> unalloc, frag, idle;
    double secs = 0, max_secs = 0;
    int64_t placed = 0, failed = 0, n = 0;
    for (const Job& j : jobs) {
      if (j.policy != p) continue;
      unalloc.push_back(j.result->unallocated_gpu_pct_at_100);
      frag.push_back(j.result->fragmentation_pct_at_100);
      idle.push_back(j.result->frag_pct_of_idle_at_100);
      secs += j.seconds;
      max_secs = std::max(max_secs, j.seconds);
      placed += j.result->placed;
      failed += j.result->failed;
      n += j.result->pods;
    }
    results.push_back({{"policy", policies[p]},
                       {"unallocated_gpu_pct_at_100", Spread(unalloc)},
                       {"fragmentation_pct_at_100", Spread(frag)},
                       {"fragmentation_pct_of_idle_at_100", Spread(idle)},
                       {"pods_per_run_mean", Round4(static_cast<double>(n) / unalloc.size())},
                       {"failed_per_run_mean", Round4(static_cast<double>(failed) / unalloc.size())},
                       {"seconds", Round4(secs)},
                       {"seconds_per_run_max", Round4(max_secs)}});
  }
  nlohmann::json seeds_json = *seeds;
  nlohmann::json doc = {{"nodes", o.nodes},      {"pods", o.pods},     {"seeds", seeds_json},
                        {"inflation", o.inflation}, {"typical_shapes", dist.shapes.size()},
                        {"threads", nthreads},   {"wall_seconds", Round4(wall)}, {"results", results}};
  if (o.quiet) return 0;
  if (o.json) {
    std::cout << doc.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("FGD harness: {} nodes, {} pods, {} typical shapes, seeds {}, inflation {}\n",
                           cluster->nodes.size(), pods->requests.size(), dist.shapes.size(), o.seeds, o.inflation);
  std::cout << fmt::format("{:<14} {:>22} {:>22} {:>9}\n", "policy", "unallocated@100 med", "[min, max]", "seconds");
  for (const auto& r : results) {
    const auto& u = r["unallocated_gpu_pct_at_100"];
    std::cout << fmt::format("{:<14} {:>21.2f}% {:>22} {:>9.2f}\n", r["policy"].get<std::string>(),
                             u["median"].get<double>(),
                             fmt::format("[{:.2f}, {:.2f}]", u["min"].get<double>(), u["max"].get<double>()),
                             r["seconds"].get<double>());
  }
  std::cout << fmt::format("wall {:.2f}s on {} threads\n", wall, nthreads);
  return 0;
}

}  // namespace

int WriteFgdCurves(const std::string& trace_dir, const std::string& policies, const std::string& seeds,
                   const std::string& curves_path) {
  FgdOptions o;
  o.nodes = trace_dir + "/openb_node_list_gpu_node.csv";
  o.pods = trace_dir + "/openb_pod_list_default.csv";
  o.policies = policies;
  o.seeds = seeds;
  o.curves = curves_path;
  o.binned = true;
  o.quiet = true;
  return Run(o);
}

void RegisterFgdHarness(CLI::App& simulate, int* exit_code) {
  auto opt = std::make_shared<FgdOptions>();
  CLI::App* cmd = simulate.add_subcommand(
      "fgd-harness", "Replay the FGD paper's harness (shuffle, inflate to 1.3x, place once) on an openb trace");
  cmd->add_option("--nodes", opt->nodes, "openb node list CSV")->required();
  cmd->add_option("--pods", opt->pods, "openb pod list CSV")->required();
  cmd->add_option("--policy", opt->policies, "policies, comma-separated: fgd, tessera, bestfit, random, dotprod, gpuclustering, gpupacking, k8s-default, static-mig");
  cmd->add_option("--seeds", opt->seeds, "seeds: 42-51, 42 or 42,45");
  cmd->add_option("--curves", opt->curves, "write per-pod curves as CSV to this file");
  cmd->add_option("--placements", opt->placements,
                  "write every decision as CSV (policy,seed,pod_index,pod_row,status,node,gpus) to this file");
  cmd->add_option("--threads", opt->threads, "runs in parallel (default 2)");
  cmd->add_option("--inflation", opt->inflation, "GPU request target as a multiple of capacity (default 1.3)");
  cmd->add_flag("--json", opt->json, "print JSON");
  cmd->callback([opt, exit_code] { *exit_code = Run(*opt); });
}

}  // namespace tessera::cli
