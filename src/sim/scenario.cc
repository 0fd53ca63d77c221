#include "sim/scenario.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "base/parallel.h"
#include "sched/cluster_state.h"
#include "sched/policy.h"
#include "sim/cost_baselines.h"
#include "sim/dlrm.h"

namespace tessera {
namespace {

Result<std::string> Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status CheckKeys(const YAML::Node& n, const std::set<std::string>& allowed, const std::string& where) {
  if (!n.IsMap()) return Status::Error(where + ": expected a map");
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string k = it->first.as<std::string>();
    if (!allowed.count(k)) return Status::Error(fmt::format("{}: unknown field '{}'", where, k));
  }
  return Status::Ok();
}

template <typename T>
Status Read(const YAML::Node& n, const char* key, T* out, const std::string& where) {
  if (!n[key]) return Status::Ok();
  try {
    *out = n[key].as<T>();
  } catch (const YAML::Exception&) {
    return Status::Error(fmt::format("{} (line {}): field '{}': wrong type", where, n[key].Mark().line + 1, key));
  }
  return Status::Ok();
}

Status ReadRange(const YAML::Node& n, const char* key, double* lo, double* hi, const std::string& where) {
  if (!n[key]) return Status::Ok();
  std::vector<double> v;
  if (Status s = Read(n, key, &v, where); !s.ok()) return s;
  if (v.size() != 2 || v[0] > v[1])
    return Status::Error(fmt::format("{}: field '{}': expected [low, high]", where, key));
  *lo = v[0];
  *hi = v[1];
  return Status::Ok();
}

#define TRY(expr)              \
  do {                         \
    Status _s = (expr);        \
    if (!_s.ok()) return _s;   \
  } while (0)

Status ReadDuration(const YAML::Node& n, DurationDist* d, const std::string& where) {
  TRY(CheckKeys(n, {"short_p", "short_log10_min", "long_log10_min"}, where));
  TRY(Read(n, "short_p", &d->short_p, where));
  TRY(ReadRange(n, "short_log10_min", &d->short_lo, &d->short_hi, where));
  TRY(ReadRange(n, "long_log10_min", &d->long_lo, &d->long_hi, where));
  if (d->short_p < 0 || d->short_p > 1) return Status::Error(where + ": field 'short_p': must be in [0, 1]");
  return Status::Ok();
}

Status ReadGenerator(const YAML::Node& w, GeneratorConfig* g, std::string* traffic, const std::string& where) {
  TRY(CheckKeys(w, {"inference_share", "traffic", "light_compute", "busy_compute", "precisions", "models",
                    "kv_tokens_light", "kv_tokens_busy", "overhead_pct", "inference_duration", "training_gpus",
                    "training_duration", "training_compute", "gpus_per_pod", "single_gpu_pods", "training_params",
                    "tokens_per_gpu_step", "mfu", "step_tflops", "gpu_kinds", "max_sub_gpu_mib", "whole_gpu_mib",
                    "max_training_gib_per_gpu", "cpu_per_gpu", "host_memory_gib_per_gpu"},
                   where));
  TRY(Read(w, "inference_share", &g->inference_share, where));
  if (g->inference_share < 0 || g->inference_share > 1)
    return Status::Error(where + ": field 'inference_share': must be in [0, 1]");
  TRY(Read(w, "traffic", traffic, where));
  if (!traffic->empty()) {
    auto lf = LightFractionOf(*traffic);
    if (!lf.ok()) return Status::Error(where + ": field 'traffic': " + lf.error());
    g->light_fraction = *lf;
  }
  TRY(ReadRange(w, "light_compute", &g->light_lo, &g->light_hi, where));
  TRY(ReadRange(w, "busy_compute", &g->busy_lo, &g->busy_hi, where));
  if (w["precisions"]) {
    std::map<std::string, double> p;
    TRY(Read(w, "precisions", &p, where));
    for (auto& [k, v] : p)
      if (!ParsePrecision(k).ok()) return Status::Error(fmt::format("{}: field 'precisions': unknown '{}'", where, k));
    g->precisions = p;
  }
  if (w["models"]) {
    if (!w["models"].IsSequence()) return Status::Error(where + ": field 'models': expected a list");
    g->models.clear();
    for (size_t i = 0; i < w["models"].size(); ++i) {
      const YAML::Node m = w["models"][i];
      const std::string mw = fmt::format("{}: models[{}]", where, i);
      TRY(CheckKeys(m, {"name", "params_billion", "layers", "kv_heads", "head_dim", "weight"}, mw));
      InferenceModel im;
      TRY(Read(m, "name", &im.name, mw));
      TRY(Read(m, "params_billion", &im.params_billion, mw));
      TRY(Read(m, "layers", &im.layers, mw));
      TRY(Read(m, "kv_heads", &im.kv_heads, mw));
      TRY(Read(m, "head_dim", &im.head_dim, mw));
      TRY(Read(m, "weight", &im.weight, mw));
      if (im.params_billion <= 0 || im.layers <= 0 || im.kv_heads <= 0 || im.head_dim <= 0 || im.weight < 0)
        return Status::Error(mw + ": fields must be positive");
      g->models.push_back(im);
    }
  }
  TRY(Read(w, "kv_tokens_light", &g->kv_tokens_light, where));
  TRY(Read(w, "kv_tokens_busy", &g->kv_tokens_busy, where));
  TRY(Read(w, "overhead_pct", &g->overhead_pct, where));
  if (w["inference_duration"]) TRY(ReadDuration(w["inference_duration"], &g->inference_duration, where + ": inference_duration"));
  if (w["training_duration"]) TRY(ReadDuration(w["training_duration"], &g->training_duration, where + ": training_duration"));
  if (w["training_gpus"]) {
    std::map<int, double> tg;
    TRY(Read(w, "training_gpus", &tg, where));
    for (auto& [k, v] : tg)
      if (k < 1 || k > 4096 || v < 0) return Status::Error(where + ": field 'training_gpus': sizes 1..4096, weights >= 0");
    g->training_gpus = tg;
  }
  TRY(ReadRange(w, "training_compute", &g->train_lo, &g->train_hi, where));
  TRY(Read(w, "gpus_per_pod", &g->gpus_per_pod, where));
  TRY(Read(w, "single_gpu_pods", &g->single_gpu_pods, where));
  TRY(Read(w, "training_params", &g->training_params, where));
  TRY(Read(w, "tokens_per_gpu_step", &g->tokens_per_gpu_step, where));
  TRY(Read(w, "mfu", &g->mfu, where));
  TRY(Read(w, "step_tflops", &g->step_tflops, where));
  TRY(Read(w, "gpu_kinds", &g->gpu_kinds, where));
  TRY(Read(w, "max_sub_gpu_mib", &g->max_sub_gpu_mib, where));
  TRY(Read(w, "whole_gpu_mib", &g->whole_gpu_mib, where));
  TRY(Read(w, "max_training_gib_per_gpu", &g->max_training_gib_per_gpu, where));
  double cpu = -1, hm = -1;
  TRY(Read(w, "cpu_per_gpu", &cpu, where));
  TRY(Read(w, "host_memory_gib_per_gpu", &hm, where));
  if (cpu >= 0) g->cpu_milli_per_gpu = static_cast<int64_t>(cpu * 1000);
  if (hm >= 0) g->host_mib_per_gpu = static_cast<int64_t>(hm * 1024);
  return Status::Ok();
}

std::string JoinPath(const std::string& dir, const std::string& p) {
  if (p.empty() || p[0] == '/' || dir.empty()) return p;
  return (std::filesystem::path(dir) / p).lexically_normal().string();
}

}  // namespace

Result<double> LightFractionOf(std::string_view t) {
  if (t == "light") return 1.0;
  if (t == "mixed") return 0.5;
  if (t == "busy") return 0.0;
  return Status::Error(fmt::format("'{}' is not one of light, mixed, busy", t));
}

Result<Scenario> LoadScenario(const std::string& path, const Catalog& catalog) {
  auto text = Slurp(path);
  if (!text.ok()) return text.status();
  return ParseScenario(*text, path, std::filesystem::path(path).parent_path().string(), catalog);
}

Result<Scenario> ParseScenario(std::string_view text, const std::string& source, const std::string& dir,
                               const Catalog& catalog) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    return Status::Error(fmt::format("{}:{}: YAML syntax error: {}", source, e.mark.line + 1, e.msg));
  }
  const std::string where = source;
  TRY(CheckKeys(root, {"name", "description", "cluster", "seeds", "first_seed", "threads", "policies", "horizon_h",
                       "warmup_h", "arrivals", "mig", "static_mig", "fabric", "workload", "trace", "dlrm", "sweep",
                       "sample_every_h", "tiers", "gang_backfill", "time_limit_factor", "failures"},
                where));
  Scenario s;
  s.source = source;
  TRY(Read(root, "name", &s.name, where));
  std::string cluster;
  TRY(Read(root, "cluster", &cluster, where));
  if (cluster.empty()) return Status::Error(where + ": field 'cluster': required (a cluster YAML file)");
  s.cluster_path = JoinPath(dir, cluster);
  auto ctext = Slurp(s.cluster_path);
  if (!ctext.ok()) return Status::Error(where + ": field 'cluster': " + ctext.error());
  auto c = LoadClusterYaml(*ctext, s.cluster_path, catalog);
  if (!c.ok()) return c.status();
  s.cluster = std::move(c).value();
  if (root["tiers"]) {  // issue 5: capacity tiers (sim/spot.h)
    auto t = ParseTierConfig(root["tiers"], where, dir, s.cluster);
    if (!t.ok()) return t.status();
    s.tiers = std::make_shared<const TierConfig>(std::move(t).value());
  }
  int nseeds = 10;
  uint64_t first_seed = 1;
  if (root["seeds"] && root["seeds"].IsSequence()) {
    TRY(Read(root, "seeds", &s.seeds, where));
  } else {
    TRY(Read(root, "seeds", &nseeds, where));
    TRY(Read(root, "first_seed", &first_seed, where));
    if (nseeds < 1 || nseeds > 1000) return Status::Error(where + ": field 'seeds': must be 1..1000");
    for (int i = 0; i < nseeds; ++i) s.seeds.push_back(first_seed + i);
  }
  TRY(Read(root, "threads", &s.threads, where));
  s.policies = {"tessera", "static-mig", "k8s-default"};
  TRY(Read(root, "policies", &s.policies, where));
  for (const std::string& p : s.policies)
    if (!MakePolicy(p).ok()) return Status::Error(fmt::format("{}: field 'policies': unknown policy '{}'", where, p));
  TRY(Read(root, "gang_backfill", &s.gang_backfill_policies, where));
  for (const std::string& p : s.gang_backfill_policies)
    if (!MakePolicy(p).ok())
      return Status::Error(fmt::format("{}: field 'gang_backfill': unknown policy '{}'", where, p));
  if (root["time_limit_factor"]) {
    std::vector<double> f;
    TRY(Read(root, "time_limit_factor", &f, where));
    if (f.size() != 2 || f[0] < 1 || f[1] < f[0])
      return Status::Error(where + ": field 'time_limit_factor': expected [min, max] with 1 <= min <= max");
    s.sim.time_limit_factor_min = f[0];
    s.sim.time_limit_factor_max = f[1];
  }
  if (root["failures"]) {
    const YAML::Node f = root["failures"];
    TRY(CheckKeys(f, {"gpu_mtbf_h"}, where + ": failures"));
    TRY(Read(f, "gpu_mtbf_h", &s.sim.gpu_mtbf_h, where + ": failures"));
    if (s.sim.gpu_mtbf_h < 0) return Status::Error(where + ": failures: field 'gpu_mtbf_h': must be >= 0");
  }
  double horizon_h = 0, warmup_h = 0, sample_h = 1;
  TRY(Read(root, "horizon_h", &horizon_h, where));
  TRY(Read(root, "warmup_h", &warmup_h, where));
  TRY(Read(root, "sample_every_h", &sample_h, where));
  if (horizon_h < 0 || warmup_h < 0 || (horizon_h > 0 && warmup_h >= horizon_h))
    return Status::Error(where + ": fields 'horizon_h'/'warmup_h': need 0 <= warmup_h < horizon_h");
  s.sim.horizon_s = static_cast<int64_t>(horizon_h * 3600);
  s.sim.warmup_s = static_cast<int64_t>(warmup_h * 3600);
  s.sim.sample_every_s = std::max<int64_t>(60, static_cast<int64_t>(sample_h * 3600));
  if (root["arrivals"]) {
    const YAML::Node a = root["arrivals"];
    TRY(CheckKeys(a, {"process", "depth", "load"}, where + ": arrivals"));
    TRY(Read(a, "process", &s.arrivals.process, where + ": arrivals"));
    TRY(Read(a, "depth", &s.arrivals.depth, where + ": arrivals"));
    TRY(Read(a, "load", &s.arrivals.load, where + ": arrivals"));
    if (s.arrivals.process != "backlog" && s.arrivals.process != "poisson")
      return Status::Error(where + ": arrivals: field 'process': must be backlog or poisson");
    if (s.arrivals.depth < 1) return Status::Error(where + ": arrivals: field 'depth': must be >= 1");
    if (s.arrivals.load <= 0) return Status::Error(where + ": arrivals: field 'load': must be > 0");
  }
  if (root["mig"]) {
    const YAML::Node m = root["mig"];
    TRY(CheckKeys(m, {"instance_delay_s", "mode_switch_delay_s"}, where + ": mig"));
    TRY(Read(m, "instance_delay_s", &s.sim.mig_instance_delay_s, where + ": mig"));
    TRY(Read(m, "mode_switch_delay_s", &s.sim.mig_mode_delay_s, where + ": mig"));
    if (s.sim.mig_instance_delay_s < 0 || s.sim.mig_mode_delay_s < 0)
      return Status::Error(where + ": mig: delays must not be negative");
  }
  if (root["static_mig"]) {
    const YAML::Node m = root["static_mig"];
    TRY(CheckKeys(m, {"share", "layout"}, where + ": static_mig"));
    TRY(Read(m, "share", &s.static_mig.share, where + ": static_mig"));
    TRY(Read(m, "layout", &s.static_mig.layout, where + ": static_mig"));
    if (s.static_mig.share < 0 || s.static_mig.share > 1)
      return Status::Error(where + ": static_mig: field 'share': must be in [0, 1]");
  }
  if (root["fabric"]) {
    const YAML::Node f = root["fabric"];
    const std::string fw = where + ": fabric";
    TRY(CheckKeys(f, {"nvswitch_busbw_gbs", "nvlink_pair_busbw_gbs", "pcie_busbw_gbs", "network_busbw_by_nodes",
                      "injection_factor", "leaf_oversubscription", "cross_spine_oversubscription", "overlap"},
                  fw));
    FabricParams& p = s.sim.fabric;
    TRY(Read(f, "nvswitch_busbw_gbs", &p.nvswitch_busbw_gbs, fw));
    TRY(Read(f, "nvlink_pair_busbw_gbs", &p.nvlink_pair_busbw_gbs, fw));
    TRY(Read(f, "pcie_busbw_gbs", &p.pcie_busbw_gbs, fw));
    if (f["network_busbw_by_nodes"]) {
      std::map<int, double> m;
      TRY(Read(f, "network_busbw_by_nodes", &m, fw));
      p.network_busbw_by_nodes.assign(m.begin(), m.end());
    }
    TRY(Read(f, "injection_factor", &p.injection_factor, fw));
    if (f["leaf_oversubscription"]) {
      TRY(Read(f, "leaf_oversubscription", &p.leaf_oversubscription, fw));
      s.sim.fabric_oversubscription_from_cluster = false;
    }
    TRY(Read(f, "cross_spine_oversubscription", &p.cross_spine_oversubscription, fw));
    TRY(Read(f, "overlap", &p.overlap, fw));
    if (p.overlap < 0 || p.overlap > 1) return Status::Error(fw + ": field 'overlap': must be in [0, 1]");
  }
  const int sources = (root["workload"] ? 1 : 0) + (root["trace"] ? 1 : 0) + (root["dlrm"] ? 1 : 0);
  if (sources != 1) return Status::Error(where + ": exactly one of 'workload', 'trace', 'dlrm' is required");
  if (root["workload"]) {
    s.use_generator = true;
    s.sim.arrivals = s.arrivals.process == "backlog" ? "backlog" : "trace";
    s.sim.backlog_depth = s.arrivals.depth;
    if (s.sim.horizon_s <= 0) return Status::Error(where + ": field 'horizon_h': required with a generator");
    ScenarioVariant base;
    TRY(ReadGenerator(root["workload"], &base.generator, &base.traffic, where + ": workload"));
    base.inference_share = base.generator.inference_share;
    if (root["sweep"]) {
      const YAML::Node sw = root["sweep"];
      TRY(CheckKeys(sw, {"inference_share", "traffic"}, where + ": sweep"));
      std::vector<double> shares = {base.generator.inference_share};
      std::vector<std::string> traffics = {base.traffic.empty() ? "mixed" : base.traffic};
      TRY(Read(sw, "inference_share", &shares, where + ": sweep"));
      TRY(Read(sw, "traffic", &traffics, where + ": sweep"));
      for (double sh : shares) {
        if (sh < 0 || sh > 1) return Status::Error(where + ": sweep: field 'inference_share': values in [0, 1]");
        for (const std::string& t : traffics) {
          auto lf = LightFractionOf(t);
          if (!lf.ok()) return Status::Error(where + ": sweep: field 'traffic': " + lf.error());
          ScenarioVariant v = base;
          v.inference_share = sh;
          v.traffic = t;
          v.generator.inference_share = sh;
          v.generator.light_fraction = *lf;
          v.label = fmt::format("inference_share={} traffic={}", sh, t);
          s.variants.push_back(std::move(v));
        }
      }
      s.is_sweep = true;
    } else {
      s.variants.push_back(base);
    }
  } else if (root["trace"]) {
    std::string tp;
    TRY(Read(root, "trace", &tp, where));
    tp = JoinPath(dir, tp);
    auto tt = Slurp(tp);
    if (!tt.ok()) return Status::Error(where + ": field 'trace': " + tt.error());
    auto jobs = ReadTrace(*tt, tp);
    if (!jobs.ok()) return jobs.status();
    s.trace_jobs = std::move(jobs).value();
    s.variants.push_back(ScenarioVariant{});
  } else {
    const YAML::Node d = root["dlrm"];
    TRY(CheckKeys(d, {"file", "compute", "gpu_memory_gib"}, where + ": dlrm"));
    std::string fp;
    double compute = 0.3, mem_gib = 0;
    TRY(Read(d, "file", &fp, where + ": dlrm"));
    TRY(Read(d, "compute", &compute, where + ": dlrm"));
    TRY(Read(d, "gpu_memory_gib", &mem_gib, where + ": dlrm"));
    fp = JoinPath(dir, fp);
    auto tt = Slurp(fp);
    if (!tt.ok()) return Status::Error(where + ": dlrm: field 'file': " + tt.error());
    DlrmOptions o;
    o.compute_milli = static_cast<int>(std::lround(compute * 1000));
    o.gpu_memory_mib = static_cast<int64_t>(mem_gib * 1024);
    auto t = ParseDlrmTrace(*tt, fp, o);
    if (!t.ok()) return t.status();
    s.trace_jobs = std::move(t->jobs);
    s.variants.push_back(ScenarioVariant{});
  }
  return s;
}

Cluster ClusterForPolicy(const Cluster& cluster, const Catalog& catalog, std::string_view policy,
                         const StaticMigSetup& setup) {
  if (policy != "static-mig") return cluster;
  Cluster c = cluster;
  // Spread the MIG nodes evenly: node i (among MIG-capable nodes) is MIG when floor((i+1)*share) grows.
  int k = 0;
  for (Node& n : c.nodes) {
    if (n.kind == kNone || !catalog.kind(n.kind).mig_capable || n.gpu_count == 0) continue;
    const bool mig = std::floor((k + 1) * setup.share + 1e-9) > std::floor(k * setup.share + 1e-9);
    ++k;
    if (mig) {
      n.mig_enabled = true;
      n.mig_config = setup.layout;
    }
  }
  return c;
}

std::vector<TraceJob> JobsFor(const Scenario& s, const ScenarioVariant& v, uint64_t seed) {
  if (!s.use_generator) return s.trace_jobs;
  return GenerateJobs(v.generator, s.arrivals, s.cluster.TotalGpus(), s.sim.horizon_s, seed);
}

Result<ScenarioOutcome> RunScenario(const Scenario& s, const std::vector<std::string>& policies,
                                    const Catalog& catalog) {
  const auto t0 = std::chrono::steady_clock::now();
  ScenarioOutcome out;
  out.name = s.name;
  out.policies = policies;
  out.seeds = s.seeds;
  out.gpus = s.cluster.TotalGpus();
  for (const std::string& p : policies)
    if (!MakePolicy(p).ok()) return Status::Error(fmt::format("unknown policy '{}'", p));
  std::vector<Cluster> clusters;
  for (const std::string& p : policies) {
    clusters.push_back(ClusterForPolicy(s.cluster, catalog, p, s.static_mig));
    if (auto st = ClusterState::Build(clusters.back(), catalog); !st.ok())
      return Status::Error(fmt::format("policy {}: {}", p, st.error()));
  }
  out.variants.resize(s.variants.size());
  struct Task {
    size_t v, seed;
  };
  std::vector<Task> tasks;
  for (size_t v = 0; v < s.variants.size(); ++v) {
    out.variants[v].variant = s.variants[v];
    out.variants[v].runs.assign(policies.size(), std::vector<RunResult>(s.seeds.size()));
    for (size_t k = 0; k < s.seeds.size(); ++k) tasks.push_back({v, k});
  }
  std::vector<std::string> errors(tasks.size());
  ParallelFor(tasks.size(), s.threads, [&](size_t i) {
    const Task& t = tasks[i];
    const std::vector<TraceJob> jobs = JobsFor(s, s.variants[t.v], s.seeds[t.seed]);
    for (size_t p = 0; p < policies.size(); ++p) {
      auto pol = MakePolicy(policies[p]);
      SimOptions o = s.sim;
      o.time_limit_seed = s.seeds[t.seed];
      o.failure_seed = s.seeds[t.seed];
      o.gang_backfill = std::find(s.gang_backfill_policies.begin(), s.gang_backfill_policies.end(), policies[p]) !=
                        s.gang_backfill_policies.end();
      std::unique_ptr<SimHook> hook;  // issue 5: one tiers hook per run
      if (s.tiers) hook = MakeTierHook(s.tiers, clusters[p], catalog, jobs, s.seeds[t.seed]);
      o.hook = hook.get();
      auto r = Simulate(clusters[p], catalog, jobs, **pol, o);
      if (!r.ok()) {
        errors[i] = r.error();
        return;
      }
      r->seed = s.seeds[t.seed];
      out.variants[t.v].runs[p][t.seed] = std::move(r).value();
    }
  });
  for (const std::string& e : errors)
    if (!e.empty()) return Status::Error(e);
  // Capacity tiers: the same job stream on the cost baselines (sim/cost_baselines.h).
  if (Status st = AddCostBaselines(s, policies, catalog, &out); !st.ok()) return st;
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace tessera
