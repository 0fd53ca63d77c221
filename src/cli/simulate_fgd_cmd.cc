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
#include "cli/list_args.h"

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

// What one run of the harness needs, read and checked before anything runs.
struct FgdInputs {
  std::vector<uint64_t> seeds;
  std::vector<std::string> policies;
  Cluster cluster;
  OpenbPods pods;
};

Result<FgdInputs> LoadInputs(const FgdOptions& o, const Catalog& catalog) {
  FgdInputs in;
  Result<std::vector<uint64_t>> seeds = ParseSeeds(o.seeds, 100000);
  if (!seeds.ok()) return seeds.status();
  in.seeds = *seeds;
  in.policies = SplitCommas(o.policies);
  if (in.policies.empty()) return Status::Error("--policy: no policy named");
  Result<std::string> node_text = ReadFile(o.nodes);
  if (!node_text.ok()) return node_text.status();
  Result<Cluster> cluster = ParseOpenbNodes(*node_text, o.nodes, catalog);
  if (!cluster.ok()) return cluster.status();
  in.cluster = std::move(*cluster);
  Result<std::string> pod_text = ReadFile(o.pods);
  if (!pod_text.ok()) return pod_text.status();
  Result<OpenbPods> pods = ParseOpenbPods(*pod_text, o.pods, catalog);
  if (!pods.ok()) return pods.status();
  in.pods = std::move(*pods);
  for (const std::string& p : in.policies)
    if (Result<std::unique_ptr<Policy>> made = MakePolicy(p); !made.ok()) return Status::Error("--policy: " + made.error());
  return in;
}

// Opens `path` for writing unless it is empty (opened before the runs so that an unwritable path fails fast).
Status OpenOutput(const std::string& path, std::ofstream* out) {
  if (path.empty()) return Status::Ok();
  out->open(path);
  return *out ? Status::Ok() : Status::Error("cannot write " + path);
}

struct FgdJob {
  size_t policy = 0;
  uint64_t seed = 0;
  Result<FgdRunResult> result = Status::Error("not run");
  double seconds = 0;
};

// Every (policy, seed) run on `threads` threads; the first failed run's error.
Status RunJobs(const FgdOptions& o, const FgdInputs& in, const TaskShapeDistribution& dist, int threads,
               std::vector<FgdJob>* jobs) {
  for (size_t p = 0; p < in.policies.size(); ++p)
    for (uint64_t s : in.seeds) jobs->push_back(FgdJob{p, s});
  FgdHarnessOptions hopt;
  hopt.inflation = o.inflation;
  hopt.record_curve = !o.curves.empty();
  hopt.record_placements = !o.placements.empty();
  ParallelFor(jobs->size(), threads, [&](size_t j) {
    FgdJob& job = (*jobs)[j];
    const auto t0 = std::chrono::steady_clock::now();
    job.result = RunFgdHarness(in.cluster, Catalog::Default(), in.pods.requests, dist, in.policies[job.policy],
                               job.seed, hopt);
    job.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  for (const FgdJob& j : *jobs)
    if (!j.result.ok()) return Status::Error(fmt::format("{} seed {}: {}", in.policies[j.policy], j.seed, j.result.error()));
  return Status::Ok();
}

Status WriteCurves(const FgdOptions& o, const FgdInputs& in, const std::vector<FgdJob>& jobs, std::ofstream& out) {
  out << "policy,seed,pod_index,arrived_pct,allocated_pct,frag_pct_of_capacity,frag_pct_of_idle\n";
  for (const FgdJob& j : jobs)
    for (size_t k = 0; k < j.result->curve.size(); ++k) {
      const CurvePoint& c = j.result->curve[k];
      if (o.binned && k + 1 < j.result->curve.size() &&
          std::floor(j.result->curve[k + 1].arrived_pct) == std::floor(c.arrived_pct))
        continue;
      out << fmt::format("{},{},{},{:.4f},{:.4f},{:.4f},{:.4f}\n", in.policies[j.policy], j.seed, c.pod_index,
                         c.arrived_pct, c.allocated_pct, c.frag_pct_of_capacity, c.frag_pct_of_idle);
    }
  out.close();
  return out ? Status::Ok() : Status::Error("writing " + o.curves + " failed");
}

Status WritePlacements(const FgdOptions& o, const FgdInputs& in, const std::vector<FgdJob>& jobs,
                       std::ofstream& out) {
  out << "policy,seed,pod_index,pod_row,status,node,gpus\n";
  for (const FgdJob& j : jobs)
    for (const PodDecision& d : j.result->decisions) WritePlacementRow(out, in.policies[j.policy], j.seed, d, in.cluster);
  out.close();
  return out ? Status::Ok() : Status::Error("writing " + o.placements + " failed");
}

// One policy's figures over its seeds.
nlohmann::json PolicyResult(const std::string& policy, size_t p, const std::vector<FgdJob>& jobs) {
  std::vector<double> unalloc, frag, idle;
  double secs = 0, max_secs = 0;
  int64_t failed = 0, n = 0;
  for (const FgdJob& j : jobs) {
    if (j.policy != p) continue;
    unalloc.push_back(j.result->unallocated_gpu_pct_at_100);
    frag.push_back(j.result->fragmentation_pct_at_100);
    idle.push_back(j.result->frag_pct_of_idle_at_100);
    secs += j.seconds;
    max_secs = std::max(max_secs, j.seconds);
    failed += j.result->failed;
    n += j.result->pods;
  }
  return {{"policy", policy},
          {"unallocated_gpu_pct_at_100", Spread(unalloc)},
          {"fragmentation_pct_at_100", Spread(frag)},
          {"fragmentation_pct_of_idle_at_100", Spread(idle)},
          {"pods_per_run_mean", Round4(static_cast<double>(n) / unalloc.size())},
          {"failed_per_run_mean", Round4(static_cast<double>(failed) / unalloc.size())},
          {"seconds", Round4(secs)},
          {"seconds_per_run_max", Round4(max_secs)}};
}

void PrintTable(const FgdOptions& o, const FgdInputs& in, size_t shapes, const nlohmann::json& results,
                double wall, int threads) {
  std::cout << fmt::format("FGD harness: {} nodes, {} pods, {} typical shapes, seeds {}, inflation {}\n",
                           in.cluster.nodes.size(), in.pods.requests.size(), shapes, o.seeds, o.inflation);
  std::cout << fmt::format("{:<14} {:>22} {:>22} {:>9}\n", "policy", "unallocated@100 med", "[min, max]", "seconds");
  for (const auto& r : results) {
    const auto& u = r["unallocated_gpu_pct_at_100"];
    std::cout << fmt::format("{:<14} {:>21.2f}% {:>22} {:>9.2f}\n", r["policy"].get<std::string>(),
                             u["median"].get<double>(),
                             fmt::format("[{:.2f}, {:.2f}]", u["min"].get<double>(), u["max"].get<double>()),
                             r["seconds"].get<double>());
  }
  std::cout << fmt::format("wall {:.2f}s on {} threads\n", wall, threads);
}

// Runs the harness and writes its outputs; the error of the first step that fails.
Status RunAndReport(const FgdOptions& o) {
  Result<FgdInputs> in = LoadInputs(o, Catalog::Default());
  if (!in.ok()) return in.status();
  const TaskShapeDistribution dist = TaskShapeDistribution::FromRequests(in->pods.requests);
  std::ofstream curves, placements;
  if (Status st = OpenOutput(o.curves, &curves); !st.ok()) return st;
  if (Status st = OpenOutput(o.placements, &placements); !st.ok()) return st;
  std::vector<FgdJob> jobs;
  const auto t_all = std::chrono::steady_clock::now();
  const size_t runs = in->policies.size() * in->seeds.size();
  const int threads = std::max(1, std::min<int>(o.threads, static_cast<int>(runs)));
  if (Status st = RunJobs(o, *in, dist, threads, &jobs); !st.ok()) return st;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_all).count();
  if (Status st = o.curves.empty() ? Status::Ok() : WriteCurves(o, *in, jobs, curves); !st.ok()) return st;
  if (Status st = o.placements.empty() ? Status::Ok() : WritePlacements(o, *in, jobs, placements); !st.ok())
    return st;
  nlohmann::json results = nlohmann::json::array();
  for (size_t p = 0; p < in->policies.size(); ++p) results.push_back(PolicyResult(in->policies[p], p, jobs));
  if (o.quiet) return Status::Ok();
  if (!o.json) {
    PrintTable(o, *in, dist.shapes.size(), results, wall, threads);
    return Status::Ok();
  }
  nlohmann::json doc = {{"nodes", o.nodes},        {"pods", o.pods},          {"seeds", in->seeds},
                        {"inflation", o.inflation}, {"typical_shapes", dist.shapes.size()},
                        {"threads", threads},       {"wall_seconds", Round4(wall)}, {"results", results}};
  std::cout << doc.dump(2) << "\n";
  return Status::Ok();
}

int Run(const FgdOptions& o) {
  const Status st = RunAndReport(o);
  if (st.ok()) return 0;
  std::cerr << "error: " << st.message() << "\n";
  return 2;
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
