#include "sim/scenario.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <set>

#include "base/file.h"
#include "base/parallel.h"
#include "base/yaml_reader.h"
#include "sched/cluster_state.h"
#include "sched/policy.h"
#include "sched/tenancy.h"
#include "sim/cost_baselines.h"
#include "sim/dlrm.h"
#include "sim/static_mig_best.h"

namespace tessera {
namespace {

constexpr double kHugeCount = 1e9;

// A map of name -> weight (>= 0); the names checked by `valid`.
Status ReadWeights(FieldReader& r, std::string_view key, std::map<std::string, double>* out,
                   const std::function<bool(const std::string&)>& valid) {
  const YAML::Node m = r.Map(key);
  if (!r.ok() || !m.IsDefined()) return r.status();
  std::map<std::string, double> v;
  for (auto it = m.begin(); it != m.end(); ++it) {
    auto name = YamlString(it->first, r.source(), r.PathOf(key));
    if (!name.ok()) return name.status();
    if (!valid(*name))
      return Status::Error(
          fmt::format("{}: unknown name '{}'", YamlWhere(r.source(), it->first, r.PathOf(key)), *name));
    auto w = YamlDouble(it->second, r.source(), r.PathOf(key) + "." + *name, 0, kHugeCount);
    if (!w.ok()) return w.status();
    v[*name] = *w;
  }
  *out = std::move(v);
  return Status::Ok();
}

// `queue_weights`: team name -> its queue's integer weight in the fair share (SimOptions::queue_weights).
Status ReadQueueWeights(FieldReader& r, std::map<std::string, int>* out) {
  const YAML::Node m = r.Map("queue_weights");
  if (!r.ok() || !m.IsDefined()) return r.status();
  for (auto it = m.begin(); it != m.end(); ++it) {
    auto team = YamlString(it->first, r.source(), r.PathOf("queue_weights"));
    if (!team.ok()) return team.status();
    auto w = YamlInt(it->second, r.source(), r.PathOf("queue_weights") + "." + *team, 1, 1000000);
    if (!w.ok()) return w.status();
    (*out)[*team] = static_cast<int>(*w);
  }
  return Status::Ok();
}

// A map of integer -> number (`training_gpus`, `network_busbw_by_nodes`).
Status ReadIntMap(FieldReader& r, std::string_view key, int64_t key_min, int64_t key_max, double min,
                  double max, std::map<int, double>* out) {
  const YAML::Node m = r.Map(key);
  if (!r.ok() || !m.IsDefined()) return r.status();
  std::map<int, double> v;
  for (auto it = m.begin(); it != m.end(); ++it) {
    auto k = YamlInt(it->first, r.source(), r.PathOf(key), key_min, key_max);
    if (!k.ok()) return k.status();
    auto x = YamlDouble(it->second, r.source(), fmt::format("{}.{}", r.PathOf(key), *k), min, max);
    if (!x.ok()) return x.status();
    v[static_cast<int>(*k)] = *x;
  }
  *out = std::move(v);
  return Status::Ok();
}

Status ReadDuration(FieldReader& parent, std::string_view key, DurationDist* d) {
  const YAML::Node n = parent.Child(key);
  if (!parent.ok() || !n.IsDefined()) return parent.status();
  FieldReader r(n, parent.source(), parent.PathOf(key));
  r.Double("short_p", &d->short_p, false, 0, 1);
  r.Range("short_log10_min", &d->short_lo, &d->short_hi, false, -1, 7);
  r.Range("long_log10_min", &d->long_lo, &d->long_hi, false, -1, 7);
  return r.Finish();
}

Status ReadModels(FieldReader& parent, std::vector<InferenceModel>* out) {
  const YAML::Node list = parent.Seq("models");
  if (!parent.ok() || !list.IsDefined()) return parent.status();
  out->clear();
  for (size_t i = 0; i < list.size(); ++i) {
    FieldReader m(list[i], parent.source(), fmt::format("{}[{}]", parent.PathOf("models"), i));
    InferenceModel im;
    m.String("name", &im.name, false);
    m.Double("params_billion", &im.params_billion, false, 1e-3, 1e5);
    m.Int("layers", &im.layers, false, 1, 10000);
    m.Int("kv_heads", &im.kv_heads, false, 1, 10000);
    m.Int("head_dim", &im.head_dim, false, 1, 100000);
    m.Double("weight", &im.weight, false, 0, kHugeCount);
    if (Status st = m.Finish(); !st.ok()) return st;
    out->push_back(im);
  }
  return Status::Ok();
}

Status ReadGenerator(const YAML::Node& node, std::string_view source, GeneratorConfig* g,
                     std::string* traffic) {
  FieldReader w(node, source, "workload");
  w.Double("inference_share", &g->inference_share, false, 0, 1);
  w.Choice("traffic", traffic, false, {"light", "mixed", "busy"});
  if (!traffic->empty()) g->light_fraction = *LightFractionOf(*traffic);
  if (w.Has("light_fraction") && !traffic->empty()) w.Fail("light_fraction", "give either 'traffic' or 'light_fraction'");
  w.Double("light_fraction", &g->light_fraction, false, 0, 1);
  w.Double("production_share", &g->production_share, false, 0, 1);
  w.Double("overload", &g->overload, false, 0.01, 100);
  w.Bool("checkpointable", &g->checkpointable);
  w.Range("light_compute", &g->light_lo, &g->light_hi, false, 0, 1);
  w.Range("busy_compute", &g->busy_lo, &g->busy_hi, false, 0, 1);
  if (Status st = ReadWeights(w, "precisions", &g->precisions,
                              [](const std::string& k) { return ParsePrecision(k).ok(); });
      !st.ok())
    return st;
  if (Status st = ReadModels(w, &g->models); !st.ok()) return st;
  w.Double("kv_tokens_light", &g->kv_tokens_light, false, 0, 1e9);
  w.Double("kv_tokens_busy", &g->kv_tokens_busy, false, 0, 1e9);
  w.Int("overhead_pct", &g->overhead_pct, false, 0, 200);
  if (Status st = ReadDuration(w, "inference_duration", &g->inference_duration); !st.ok()) return st;
  if (Status st = ReadDuration(w, "training_duration", &g->training_duration); !st.ok()) return st;
  if (Status st = ReadIntMap(w, "training_gpus", 1, 4096, 0, kHugeCount, &g->training_gpus); !st.ok())
    return st;
  w.Range("training_compute", &g->train_lo, &g->train_hi, false, 0, 1);
  w.Int("gpus_per_pod", &g->gpus_per_pod, false, 1, 64);
  w.Double("single_gpu_pods", &g->single_gpu_pods, false, 0, 1);
  w.DoubleList("training_params", &g->training_params, false, 1e-3, 1e5, 1);
  w.Double("tokens_per_gpu_step", &g->tokens_per_gpu_step, false, 1, 1e9);
  w.Double("mfu", &g->mfu, false, 1e-3, 1);
  w.Double("step_tflops", &g->step_tflops, false, 1e-3, 1e6);
  w.StringList("gpu_kinds", &g->gpu_kinds, false);
  w.Int("max_sub_gpu_mib", &g->max_sub_gpu_mib, false, 0, int64_t{1} << 30);
  w.Int("whole_gpu_mib", &g->whole_gpu_mib, false, 1, int64_t{1} << 30);
  w.Double("max_training_gib_per_gpu", &g->max_training_gib_per_gpu, false, 1e-3, 1e6);
  double cpu = -1, hm = -1;
  w.Double("cpu_per_gpu", &cpu, false, 0, 1e4);
  w.Double("host_memory_gib_per_gpu", &hm, false, 0, 1e6);
  if (cpu >= 0) g->cpu_milli_per_gpu = static_cast<int64_t>(cpu * 1000);
  if (hm >= 0) g->host_mib_per_gpu = static_cast<int64_t>(hm * 1024);
  return w.Finish();
}

// `policies` / `gang_backfill`: lists of registered policy names or the scenario's variants.
void ReadPolicies(FieldReader& r, std::string_view key, const std::map<std::string, PolicyVariant>& variants,
                  std::vector<std::string>* out) {
  r.StringList(key, out, false, 1);
  for (const std::string& p : *out)
    if (r.ok() && !variants.count(p) && !MakePolicy(p).ok()) r.Fail(key, fmt::format("unknown policy '{}'", p));
}

// A variant's features off without `harvest` (a simulator feature, not the engine's).
std::vector<std::string> EngineOff(const std::vector<std::string>& off) {
  std::vector<std::string> out;
  for (const std::string& f : off)
    if (f != kHarvestFeature) out.push_back(f);
  return out;
}

// `policy_variants: {NAME: {policy: BASE, static_mig: {share, layout}, off: [feature, ...], harvest: B}}`.
Status ReadPolicyVariants(FieldReader& top, std::map<std::string, PolicyVariant>* out) {
  const YAML::Node m = top.Map("policy_variants");
  if (!top.ok() || !m.IsDefined()) return top.status();
  for (auto it = m.begin(); it != m.end(); ++it) {
    auto name = YamlString(it->first, top.source(), "policy_variants");
    if (!name.ok()) return name.status();
    const std::string path = "policy_variants." + *name;
    if (MakePolicy(*name).ok())
      return Status::Error(fmt::format("{}: '{}' is a registered policy; give the variant another name",
                                       YamlWhere(top.source(), it->first, "policy_variants"), *name));
    FieldReader r(it->second, top.source(), path);
    PolicyVariant v;
    r.String("policy", &v.base, true);
    if (r.ok() && !MakePolicy(v.base).ok()) r.Fail("policy", fmt::format("unknown policy '{}'", v.base));
    r.StringList("off", &v.off, false);
    r.Bool("harvest", &v.harvest, false);
    if (r.ok() && v.harvest && v.base != "tessera") r.Fail("harvest", "only for policy tessera");
    if (r.ok() && !EngineOff(v.off).empty()) {
      PolicyOptions o;
      o.off = EngineOff(v.off);
      if (auto p = MakePolicy(v.base, o); !p.ok()) r.Fail("off", p.error());
    }
    if (r.ok() && r.Has("static_mig")) {
      if (v.base != "static-mig") {
        r.Fail("static_mig", "only for policy static-mig");
        return r.status();
      }
      FieldReader sm(r.Child("static_mig"), top.source(), path + ".static_mig");
      sm.Double("share", &v.static_mig.share, false, 0, 1);
      sm.String("layout", &v.static_mig.layout, false);
      if (Status st = sm.Finish(); !st.ok()) return st;
      v.has_static_mig = true;
    }
    if (Status st = r.Finish(); !st.ok()) return st;
    (*out)[*name] = std::move(v);
  }
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
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseScenario(*text, path, std::filesystem::path(path).parent_path().string(), catalog);
}

namespace {

// The run settings of a scenario: seeds, threads, policies, horizon, failures, MIG delays, fabric.
// `seeds`: a list, or a count from `first_seed`.
Status ReadSeeds(FieldReader& top, Scenario* s) {
  if (top.Child("seeds").IsSequence()) {
    const YAML::Node list = top.Child("seeds");
    if (list.size() < 1 || list.size() > 1000) top.Fail("seeds", "expected 1 to 1000 seeds");
    for (size_t i = 0; top.ok() && i < list.size(); ++i) {
      auto v = YamlInt(list[i], top.source(), fmt::format("seeds[{}]", i), 0, int64_t{1} << 62);
      if (!v.ok()) return v.status();
      s->seeds.push_back(static_cast<uint64_t>(*v));
    }
    top.Allow("first_seed");
  } else {
    int nseeds = 10;
    int64_t first_seed = 1;
    top.Int("seeds", &nseeds, false, 1, 1000);
    top.Int("first_seed", &first_seed, false, 0, int64_t{1} << 62);
    for (int i = 0; i < nseeds; ++i) s->seeds.push_back(static_cast<uint64_t>(first_seed + i));
  }
  return Status::Ok();
}

// `cycle`, `asymmetric_cycle` and `gang_backfill`, which must agree.
void ReadCycleSettings(FieldReader& top, Scenario* s) {
  // `backfill` (gang reservations, backfill, time limits) or `greedy`; `full` is the older name of backfill.
  std::string cycle = "backfill";
  top.Choice("cycle", &cycle, false, {"backfill", "greedy", "full"});
  s->gang_backfill = cycle != "greedy";
  top.Bool("asymmetric_cycle", &s->asymmetric_cycle, false);
  top.Bool("backfill_into_reservations", &s->sim.backfill_into_reservations, false);
  ReadPolicies(top, "gang_backfill", s->policy_variants, &s->gang_backfill_policies);
  if (top.ok() && top.Has("gang_backfill") && !s->asymmetric_cycle)
    top.Fail("gang_backfill", "gives only the listed policies the full cycle: set 'asymmetric_cycle: true' to ask "
                              "for that, or 'cycle: backfill|greedy' for every policy");
  if (top.ok() && s->asymmetric_cycle && !top.Has("gang_backfill"))
    top.Fail("asymmetric_cycle", "needs 'gang_backfill: [policy, ...]' (the policies with the full cycle)");
  if (top.ok() && s->asymmetric_cycle && top.Has("cycle"))
    top.Fail("cycle", "is for every policy; an asymmetric run names its full-cycle policies in 'gang_backfill'");
}

void ReadHorizon(FieldReader& top, Scenario* s) {
  double horizon_h = 0, warmup_h = 0, sample_h = 1;
  top.Double("horizon_h", &horizon_h, false, 0, 1e5);
  top.Double("warmup_h", &warmup_h, false, 0, 1e5);
  top.Double("sample_every_h", &sample_h, false, 1e-3, 1e5);
  if (top.ok() && horizon_h > 0 && warmup_h >= horizon_h) top.Fail("warmup_h", "must be below horizon_h");
  s->sim.horizon_s = static_cast<int64_t>(horizon_h * 3600);
  s->sim.warmup_s = static_cast<int64_t>(warmup_h * 3600);
  s->sim.sample_every_s = std::max<int64_t>(60, static_cast<int64_t>(sample_h * 3600));
}

// The optional sections `failures`, `mig`, `static_mig` and `sharing`.
Status ReadSimSections(FieldReader& top, Scenario* s) {
  FieldReader f(top.Child("failures"), top.source(), "failures", /*absent_ok=*/true);
  f.Double("gpu_mtbf_h", &s->sim.gpu_mtbf_h, false, 0, 1e9);
  if (Status st = f.Finish(); !st.ok()) return st;
  FieldReader m(top.Child("mig"), top.source(), "mig", true);
  m.Int("instance_delay_s", &s->sim.mig_instance_delay_s, false, 0, 86400);
  m.Int("mode_switch_delay_s", &s->sim.mig_mode_delay_s, false, 0, 86400);
  if (Status st = m.Finish(); !st.ok()) return st;
  FieldReader sm(top.Child("static_mig"), top.source(), "static_mig", true);
  sm.Double("share", &s->static_mig.share, false, 0, 1);
  sm.String("layout", &s->static_mig.layout, false);
  if (Status st = sm.Finish(); !st.ok()) return st;
  FieldReader hv(top.Child("harvest"), top.source(), "harvest", true);
  HarvestOptions& ho = s->sim.harvest;
  ho.enabled = false;  // `harvest: {enabled: true}`: every tessera run; else per variant (HarvestsFor)
  hv.Bool("enabled", &ho.enabled, false);
  hv.Int("grace_s", &ho.grace_s, false, 0, 86400);
  hv.Int("checkpoint_every_s", &ho.checkpoint_every_s, false, 60, 86400 * 7);
  hv.Int("checkpoint_cost_s", &ho.checkpoint_cost_s, false, 0, 86400);
  hv.Int("restore_s", &ho.restore_s, false, 0, 86400);
  hv.Int("react_s", &ho.react_s, false, 0, 86400);
  hv.Double("slo_margin", &ho.slo_margin, false, 0.1, 1);
  int64_t min_cap = ho.min_cap_milli;
  hv.Int("min_cap_milli", &min_cap, false, 1, 1000);
  ho.min_cap_milli = static_cast<int>(min_cap);
  hv.Bool("sensitive_units", &ho.sensitive_units, false);
  hv.Bool("free_compute", &ho.free_compute, false);
  hv.Int("gang_max_gpus", &ho.gang_max_gpus, false, 1, 64);
  if (Status st = hv.Finish(); !st.ok()) return st;
  FieldReader sh(top.Child("sharing"), top.source(), "sharing", true);
  SharingOptions& so = s->sim.sharing;
  std::string mode;
  sh.Choice("mode", &mode, false, {"time-slicing", "mps"});
  if (!mode.empty()) so.mode = *ParseSharingMode(mode);
  sh.Double("switch_overhead", &so.switch_overhead, false, 0, 1);
  sh.Double("switch_throughput_loss", &so.switch_throughput_loss, false, 0, 1);
  sh.Double("mps_contention", &so.mps_contention, false, 0, 10);
  sh.Double("sensitive_headroom", &so.sensitive_headroom, false, 1, 10);
  sh.Double("standard_headroom", &so.standard_headroom, false, 1, 10);
  sh.Bool("learn_headroom", &so.learn_headroom, false);
  sh.Double("sensitive_headroom_quantile", &s->sim.demand_learning.sensitive_quantile, false, 0.5, 1);
  sh.Double("standard_headroom_quantile", &s->sim.demand_learning.standard_quantile, false, 0.5, 1);
  sh.Double("production_slo", &so.sensitive_slo, false, 1, 1000);
  sh.Double("standard_slo", &so.standard_slo, false, 1, 1000);
  sh.Int("context_mib", &so.context_mib, false, 0, int64_t{1} << 20);
  if (Status st = sh.Finish(); !st.ok()) return st;
  FieldReader d(top.Child("demand"), top.source(), "demand", true);
  d.Double("sigma", &s->sim.demand_sigma, false, 0, 3);
  d.Int("epoch_s", &s->sim.demand_epoch_s, false, 1, 86400);
  return d.Finish();
}

Status ReadFabric(FieldReader& top, Scenario* s) {
  FieldReader fr(top.Child("fabric"), top.source(), "fabric", true);
  FabricParams& p = s->sim.fabric;
  fr.Double("nvswitch_busbw_gbs", &p.nvswitch_busbw_gbs, false, 1e-3, 1e6);
  fr.Double("nvlink_pair_busbw_gbs", &p.nvlink_pair_busbw_gbs, false, 1e-3, 1e6);
  fr.Double("pcie_busbw_gbs", &p.pcie_busbw_gbs, false, 1e-3, 1e6);
  if (fr.Has("network_busbw_by_nodes")) {
    std::map<int, double> bw;
    if (Status st = ReadIntMap(fr, "network_busbw_by_nodes", 1, 1 << 20, 1e-3, 1e6, &bw); !st.ok()) return st;
    p.network_busbw_by_nodes.assign(bw.begin(), bw.end());
  }
  fr.Double("injection_factor", &p.injection_factor, false, 1e-3, 1e3);
  if (fr.Has("leaf_oversubscription")) {
    fr.Double("leaf_oversubscription", &p.leaf_oversubscription, false, 1e-3, 1e6);
    s->sim.fabric_oversubscription_from_cluster = false;
  }
  fr.Double("cross_spine_oversubscription", &p.cross_spine_oversubscription, false, 1e-3, 1e6);
  fr.Double("overlap", &p.overlap, false, 0, 1);
  return fr.Finish();
}

constexpr double kDefaultTimeLimitFactor[2] = {1.0, 4.0};

Status ReadRunSettings(FieldReader& top, Scenario* s) {
  if (Status st = ReadSeeds(top, s); !st.ok()) return st;
  top.Int("threads", &s->threads, false, 1, 256);
  // The loop learns the workload's typical tasks from submissions (control/workload_learner.h) unless off.
  top.Bool("learn_workload", &s->sim.workload_learning.enabled, false);
  s->policies = {"tessera", "static-mig", "k8s-default"};
  if (Status st = ReadPolicyVariants(top, &s->policy_variants); !st.ok()) return st;
  ReadPolicies(top, "policies", s->policy_variants, &s->policies);
  ReadCycleSettings(top, s);
  // Users' time limits are estimates (docs/simulator.md "What is not known in advance"): by default each job's
  // limit is its duration times a factor uniform in [1, 4] (the f-model of Mu'alem and Feitelson, IEEE TPDS
  // 12(6), 2001, with F = 4 an assumption); [1, 1] makes limits exact; a minimum below 1 under-estimates.
  s->sim.time_limit_factor_min = kDefaultTimeLimitFactor[0];
  s->sim.time_limit_factor_max = kDefaultTimeLimitFactor[1];
  if (top.Has("time_limit_factor")) {
    std::vector<double> f;
    top.DoubleList("time_limit_factor", &f, true, 0.1, 1000);
    if (top.ok() && (f.size() != 2 || f[1] < f[0]))
      top.Fail("time_limit_factor", "expected [min, max] with 0.1 <= min <= max");
    if (top.ok()) {
      s->sim.time_limit_factor_min = f[0];
      s->sim.time_limit_factor_max = f[1];
    }
  }
  if (Status st = ReadQueueWeights(top, &s->sim.queue_weights); !st.ok()) return st;
  ReadHorizon(top, s);
  if (!top.ok()) return top.status();
  if (Status st = ReadSimSections(top, s); !st.ok()) return st;
  return ReadFabric(top, s);
}

Status ReadArrivals(FieldReader& top, ArrivalConfig* a) {
  FieldReader r(top.Child("arrivals"), top.source(), "arrivals", /*absent_ok=*/true);
  r.Choice("process", &a->process, false, {"backlog", "poisson"});
  r.Int("depth", &a->depth, false, 1, 100000);
  r.Double("load", &a->load, false, 1e-3, 100);
  r.Bool("warm_start", &a->warm_start, false);
  if (r.ok() && a->warm_start && a->process != "poisson") r.Fail("warm_start", "needs process: poisson");
  return r.Finish();
}

Status ReadSweep(const YAML::Node& node, std::string_view source, const ScenarioVariant& base, Scenario* s) {
  FieldReader sw(node, source, "sweep");
  std::vector<double> shares = {base.generator.inference_share};
  // Without `traffic` anywhere the base's light_fraction stays (a sweep over shares only).
  const bool keep_light = base.traffic.empty() && !sw.Has("traffic");
  std::vector<std::string> traffics = {keep_light ? std::string() : base.traffic.empty() ? "mixed" : base.traffic};
  sw.DoubleList("inference_share", &shares, false, 0, 1, 1);
  sw.StringList("traffic", &traffics, false, 1);
  if (shares.size() * traffics.size() > 1000) sw.Fail("inference_share", "more than 1000 sweep points");
  if (Status st = sw.Finish(); !st.ok()) return st;
  for (double sh : shares) {
    for (const std::string& t : traffics) {
      ScenarioVariant v = base;
      v.inference_share = sh;
      v.traffic = t;
      v.generator.inference_share = sh;
      v.label = fmt::format("inference_share={} light_fraction={}", sh, base.generator.light_fraction);
      if (!keep_light) {
        auto lf = LightFractionOf(t);
        if (!lf.ok()) return Status::Error(YamlWhere(source, node, "sweep.traffic") + ": " + lf.error());
        v.generator.light_fraction = *lf;
        v.label = fmt::format("inference_share={} traffic={}", sh, t);
      }
      s->variants.push_back(std::move(v));
    }
  }
  s->is_sweep = true;
  return Status::Ok();
}

// Reads a file named by a field (cluster, trace, dlrm file): an unreadable file is an error at that field.
Result<std::string> ReadNamedFile(FieldReader& r, std::string_view key, const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return Status::Error(r.Where(key) + ": " + text.error());
  return text;
}

// Multi-tenant workload: the `tenancy` section and per-team streams (`teams_workload`) over the horizon.
Status ReadTeamsWorkload(FieldReader& top, const Catalog& catalog, Scenario* s) {
  const YAML::Node tenancy = top.Map("tenancy");
  const YAML::Node streams = top.Seq("teams_workload", /*required=*/true);
  top.Int("cycle_every_s", &s->cycle_every_s, false, 1, 86400);
  if (top.ok() && !tenancy.IsDefined()) top.Fail("tenancy", "required with 'teams_workload'");
  if (top.ok() && top.Has("sweep")) top.Fail("sweep", "needs a 'workload' generator");
  if (top.ok() && s->tiers) top.Fail("tiers", "not used with 'teams_workload'");
  // The tenancy's `backfill` section sets reservations and backfill for every policy of a multi-tenant run.
  for (const char* key : {"cycle", "asymmetric_cycle", "gang_backfill"})
    if (top.ok() && top.Has(key)) top.Fail(key, "not used with 'teams_workload' (the tenancy's 'backfill' applies)");
  if (top.ok() && top.Has("queue_weights"))
    top.Fail("queue_weights", "not used with 'teams_workload' (the tenancy's queues carry their weights)");
  if (!top.ok()) return top.status();
  auto ten = ParseTenancyNode(tenancy, top.source(), "tenancy", catalog);
  if (!ten.ok()) return ten.status();
  auto team_streams = ParseTeamStreams(streams, top.source(), "teams_workload", *ten);
  if (!team_streams.ok()) return team_streams.status();
  if (s->sim.horizon_s <= 0) top.Fail("horizon_h", "required (> 0) with 'teams_workload'");
  s->tenancy = std::make_shared<const TenancyConfig>(std::move(ten).value());
  s->team_streams = std::move(team_streams).value();
  s->variants.push_back(ScenarioVariant{});  // one job stream per seed (JobsFor)
  return top.status();
}

Status ReadWorkloadSource(FieldReader& top, const std::string& dir, const Catalog& catalog, Scenario* s) {
  const YAML::Node workload = top.Child("workload");
  const YAML::Node sweep = top.Child("sweep");
  const YAML::Node dlrm = top.Child("dlrm");
  std::string trace;
  top.String("trace", &trace, false);
  if (!top.ok()) return top.status();
  const bool teams = top.Has("teams_workload");
  const int sources = (workload.IsDefined() ? 1 : 0) + (top.Has("trace") ? 1 : 0) +
                      (dlrm.IsDefined() ? 1 : 0) + (teams ? 1 : 0);
  if (sources == 0 && top.Has("tenancy")) {
    top.Fail("teams_workload", "required with 'tenancy'");
    return top.status();
  }
  if (sources != 1) {
    top.Fail("workload", "exactly one of 'workload', 'trace', 'dlrm', 'teams_workload' is required");
    return top.status();
  }
  if (teams) return ReadTeamsWorkload(top, catalog, s);
  if (top.Has("tenancy")) {
    top.Fail("tenancy", "only used with 'teams_workload'");
    return top.status();
  }
  if (workload.IsDefined()) {
    s->use_generator = true;
    s->sim.arrivals = s->arrivals.process == "backlog" ? "backlog" : "trace";
    s->sim.backlog_depth = s->arrivals.depth;
    if (s->sim.horizon_s <= 0) top.Fail("horizon_h", "required (> 0) with a generator");
    if (!top.ok()) return top.status();
    ScenarioVariant base;
    if (Status st = ReadGenerator(workload, top.source(), &base.generator, &base.traffic); !st.ok())
      return st;
    base.inference_share = base.generator.inference_share;
    if (sweep.IsDefined()) return ReadSweep(sweep, top.source(), base, s);
    s->variants.push_back(base);
    return Status::Ok();
  }
  if (sweep.IsDefined()) top.Fail("sweep", "needs a 'workload' generator");
  if (top.Has("trace")) {
    const std::string tp = JoinPath(dir, trace);
    auto tt = ReadNamedFile(top, "trace", tp);
    if (!tt.ok()) return tt.status();
    auto jobs = ReadTrace(*tt, tp);
    if (!jobs.ok()) return jobs.status();
    s->trace_jobs = std::move(jobs).value();
    s->variants.push_back(ScenarioVariant{});
    return top.status();
  }
  FieldReader d(dlrm, top.source(), "dlrm");
  std::string fp;
  double compute = 0.3, mem_gib = 0;
  d.String("file", &fp, true);
  d.Double("compute", &compute, false, 1e-3, 1);
  d.Double("gpu_memory_gib", &mem_gib, false, 0, 1e6);
  if (Status st = d.Finish(); !st.ok()) return st;
  fp = JoinPath(dir, fp);
  auto tt = ReadNamedFile(d, "file", fp);
  if (!tt.ok()) return tt.status();
  DlrmOptions o;
  o.compute_milli = static_cast<int>(std::lround(compute * 1000));
  o.gpu_memory_mib = static_cast<int64_t>(mem_gib * 1024);
  auto t = ParseDlrmTrace(*tt, fp, o);
  if (!t.ok()) return t.status();
  s->trace_jobs = std::move(t->jobs);
  s->variants.push_back(ScenarioVariant{});
  return Status::Ok();
}

// Without `tiers:` the run has no cost model: a node's price_per_gpu_hour is not used.
void WarnIgnoredPrices(Scenario* s) {
  std::vector<std::string> nodes;
  for (const Node& n : s->cluster.nodes)
    if (n.price_per_gpu_hour > 0) nodes.push_back(n.name);
  if (nodes.empty()) return;
  s->warnings.push_back(fmt::format(
      "{}: price_per_gpu_hour (on {} node(s), e.g. {}) is ignored: the scenario has no `tiers:` section, so the "
      "simulator prices nothing (add `tiers:` to price the run from a price book)",
      s->cluster_path, nodes.size(), nodes.front()));
}

}  // namespace

Result<Scenario> ParseScenario(std::string_view text, const std::string& source, const std::string& dir,
                               const Catalog& catalog) {
  auto parsed = ParseYaml(text, source);
  if (!parsed.ok()) return parsed.status();
  FieldReader top(*parsed, source, "");
  top.Allow("description");
  Scenario s;
  s.source = source;
  top.String("name", &s.name, false);
  std::string cluster;
  top.String("cluster", &cluster, true);
  if (top.ok() && cluster.empty()) top.Fail("cluster", "required (a cluster YAML file)");
  if (!top.ok()) return top.status();
  s.cluster_path = JoinPath(dir, cluster);
  auto ctext = ReadNamedFile(top, "cluster", s.cluster_path);
  if (!ctext.ok()) return ctext.status();
  auto c = LoadClusterYaml(*ctext, s.cluster_path, catalog);
  if (!c.ok()) return c.status();
  s.cluster = std::move(c).value();
  for (const Node& n : s.cluster.nodes)
    if (n.kind != kNone && n.gpu_count > 0)
      s.largest_gpu_memory_mib = std::max(s.largest_gpu_memory_mib, catalog.kind(n.kind).memory_mib);
  if (const YAML::Node tiers = top.Child("tiers"); tiers.IsDefined()) {  // capacity tiers (sim/spot.h)
    auto t = ParseTierConfig(tiers, source, dir, s.cluster);
    if (!t.ok()) return t.status();
    s.tiers = std::make_shared<const TierConfig>(std::move(t).value());
  } else {
    WarnIgnoredPrices(&s);
  }
  if (Status st = ReadRunSettings(top, &s); !st.ok()) return st;
  if (Status st = ReadArrivals(top, &s.arrivals); !st.ok()) return st;
  if (Status st = ReadWorkloadSource(top, dir, catalog, &s); !st.ok()) return st;
  if (Status st = top.Finish(); !st.ok()) return st;
  return s;
}

Result<std::unique_ptr<Policy>> MakeScenarioPolicy(const Scenario& s, const std::string& name) {
  PolicyOptions popt;
  popt.sharing = s.sim.sharing;
  auto it = s.policy_variants.find(name);
  if (it == s.policy_variants.end()) return MakePolicy(name, popt);
  const PolicyVariant& v = it->second;
  if (!v.off.empty()) {  // an ablation: the engine with features off, reporting the variant's name
    popt.off = EngineOff(v.off);
    popt.name = name;
  }
  return MakePolicy(v.base, popt);
}

Cluster ClusterForScenarioPolicy(const Scenario& s, const Catalog& catalog, const std::string& name) {
  auto it = s.policy_variants.find(name);
  if (it == s.policy_variants.end()) return ClusterForPolicy(s.cluster, catalog, name, s.static_mig);
  return ClusterForPolicy(s.cluster, catalog, it->second.base,
                          it->second.has_static_mig ? it->second.static_mig : s.static_mig);
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
  if (s.IsMultiTenant()) return GenerateTeamJobs(s.team_streams, s.sim.horizon_s, seed);
  if (!s.use_generator) return s.trace_jobs;
  return GenerateJobs(v.generator, s.arrivals, s.cluster.TotalGpus(), s.sim.horizon_s, seed, v.generator.overload,
                      s.largest_gpu_memory_mib);
}

bool HarvestsFor(const Scenario& s, const std::string& policy) {
  auto v = s.policy_variants.find(policy);
  if (v == s.policy_variants.end()) return policy == "tessera" && s.sim.harvest.enabled;
  return v->second.base == "tessera" && (s.sim.harvest.enabled || v->second.harvest) &&
         std::find(v->second.off.begin(), v->second.off.end(), kHarvestFeature) == v->second.off.end();
}

CycleSpec CycleFor(const Scenario& s, std::string_view policy) {
  CycleSpec c;
  c.gang_backfill = s.asymmetric_cycle ? std::find(s.gang_backfill_policies.begin(), s.gang_backfill_policies.end(),
                                                   policy) != s.gang_backfill_policies.end()
                                       : s.gang_backfill;
  c.gang_reservations = c.gang_backfill ? s.sim.gang_reservations : 0;
  c.backfill_into_reservations = c.gang_backfill && s.sim.backfill_into_reservations;
  c.time_limit_factor_min = s.sim.time_limit_factor_min;
  c.time_limit_factor_max = s.sim.time_limit_factor_max;
  return c;
}

bool SameCycle(const ScenarioOutcome& o) {
  return std::all_of(o.cycles.begin(), o.cycles.end(), [&](const CycleSpec& c) { return c == o.cycles.front(); });
}

UtilizationBound BoundFor(const Scenario& s, const Catalog& catalog, const std::vector<TraceJob>& jobs) {
  const bool repeat = s.sim.gpu_mtbf_h > 0 || s.tiers != nullptr || s.sim.tenancy != nullptr;
  return BoundUtilization(s.cluster, catalog, jobs, s.sim, repeat);
}

namespace {

// One (variant, seed) of RunScenario: its job stream, run once per policy.
struct SeedTask {
  size_t v, seed;
};

// The outcome's header (name, policies with their cycles and bases, seeds, GPUs), no runs yet.
ScenarioOutcome OutcomeHeader(const Scenario& s, const std::vector<std::string>& policies) {
  ScenarioOutcome out;
  out.name = s.name;
  out.policies = policies;
  for (const std::string& p : policies) {
    out.cycles.push_back(CycleFor(s, p));
    auto v = s.policy_variants.find(p);
    out.bases.push_back(v == s.policy_variants.end() ? p : v->second.base);
  }
  out.seeds = s.seeds;
  out.gpus = s.cluster.TotalGpus();
  return out;
}

// Each policy's cluster, once every policy has been checked to build and each cluster to load.
Result<std::vector<Cluster>> PolicyClusters(const Scenario& s, const std::vector<std::string>& policies,
                                            const Catalog& catalog) {
  for (const std::string& p : policies)
    if (auto made = MakeScenarioPolicy(s, p); !made.ok()) return made.status();
  std::vector<Cluster> clusters;
  for (const std::string& p : policies) {
    clusters.push_back(ClusterForScenarioPolicy(s, catalog, p));
    if (auto st = ClusterState::Build(clusters.back(), catalog); !st.ok())
      return Status::Error(fmt::format("policy {}: {}", p, st.error()));
  }
  return clusters;
}

// Sizes out->variants (runs per policy and seed, bounds per seed) and lists the (variant, seed) tasks.
std::vector<SeedTask> PrepareVariants(const Scenario& s, size_t npolicies, ScenarioOutcome* out) {
  out->variants.resize(s.variants.size());
  std::vector<SeedTask> tasks;
  for (size_t v = 0; v < s.variants.size(); ++v) {
    out->variants[v].variant = s.variants[v];
    out->variants[v].runs.assign(npolicies, std::vector<RunResult>(s.seeds.size()));
    out->variants[v].bounds.assign(s.seeds.size(), UtilizationBound{});
    for (size_t k = 0; k < s.seeds.size(); ++k) tasks.push_back({v, k});
  }
  return tasks;
}

// Runs policy p on task t's `jobs` (on `cluster`, or the layout static-mig-best picks) into
// out->variants[t.v].runs[p][t.seed]; writes nothing else of *out, so tasks may run concurrently.
Status RunPolicyTask(const Scenario& s, const std::vector<std::string>& policies, const Catalog& catalog,
                     const Cluster& cluster, const std::vector<TraceJob>& jobs, const SeedTask& t, size_t p,
                     ScenarioOutcome* out) {
  auto pol = MakeScenarioPolicy(s, policies[p]);
  SimOptions o = s.sim;
  o.time_limit_seed = s.seeds[t.seed];
  o.demand_seed = s.seeds[t.seed];
  o.sharing = SharingFor(out->bases[p], o.sharing);
  o.failure_seed = s.seeds[t.seed];
  o.gang_backfill = out->cycles[p].gang_backfill;
  o.harvest.enabled = HarvestsFor(s, policies[p]);
  o.record_decisions = s.sim.record_decisions && t.v == 0 && t.seed == 0 && p == 0;  // the first run only
  std::unique_ptr<SimHook> hook;  // issue 5: one tiers hook per run
  if (s.tiers) hook = MakeTierHook(s.tiers, cluster, catalog, jobs, s.seeds[t.seed]);
  o.hook = hook.get();
  StaticMigChoice choice;
  if (out->bases[p] == "static-mig-best") {
    auto c = BestStaticMig(s, catalog, jobs, s.seeds[t.seed]);
    if (!c.ok()) return c.status();
    choice = *c;
  }
  const Cluster searched =
      choice.candidates > 0 ? ClusterForPolicy(s.cluster, catalog, "static-mig", choice.setup) : Cluster{};
  auto r = Simulate(choice.candidates > 0 ? searched : cluster, catalog, jobs, **pol, o);
  if (!r.ok()) return r.status();
  if (choice.candidates > 0) {
    r->static_mig_layout = choice.setup.layout;
    r->static_mig_share = choice.setup.share;
    r->static_mig_first_day = choice.first_day_utilization;
  }
  r->seed = s.seeds[t.seed];
  r->policy = policies[p];  // a variant's name (static-mig variants share their base's policy object)
  out->variants[t.v].runs[p][t.seed] = std::move(r).value();
  return Status::Ok();
}

}  // namespace

Result<ScenarioOutcome> RunScenario(const Scenario& s, const std::vector<std::string>& policies,
                                    const Catalog& catalog) {
  if (s.IsMultiTenant())
    return Status::Error(s.source + ": a multi-tenant scenario ('teams_workload') runs with its own runner");
  const auto t0 = std::chrono::steady_clock::now();
  ScenarioOutcome out = OutcomeHeader(s, policies);
  Result<std::vector<Cluster>> clusters = PolicyClusters(s, policies, catalog);
  if (!clusters.ok()) return clusters.status();
  const std::vector<SeedTask> tasks = PrepareVariants(s, policies.size(), &out);
  std::vector<std::string> errors(tasks.size());
  ParallelFor(tasks.size(), s.threads, [&](size_t i) {
    const SeedTask& t = tasks[i];
    const std::vector<TraceJob> jobs = JobsFor(s, s.variants[t.v], s.seeds[t.seed]);
    out.variants[t.v].bounds[t.seed] = BoundFor(s, catalog, jobs);
    for (size_t p = 0; p < policies.size(); ++p) {
      if (Status st = RunPolicyTask(s, policies, catalog, (*clusters)[p], jobs, t, p, &out); !st.ok()) {
        errors[i] = st.message();
        return;
      }
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
