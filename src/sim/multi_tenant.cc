#include "sim/multi_tenant.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <nlohmann/json.hpp>

#include "base/parallel.h"
#include "base/yaml_reader.h"
#include "model/cluster.h"
#include "sched/policy.h"
#include "sched/tenancy.h"
#include "sim/scenario.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace tessera {
namespace {

// `key`: a number or [low, high], both within [min, max]; `*lo`/`*hi` untouched when absent.
void Pair(FieldReader& r, std::string_view key, double* lo, double* hi, double min, double max) {
  if (r.Child(key).IsSequence()) return r.Range(key, lo, hi, false, min, max);
  double v = *lo;
  r.Double(key, &v, false, min, max);
  if (r.ok() && r.Has(key)) *lo = *hi = v;
}

void Pair(FieldReader& r, std::string_view key, int* lo, int* hi, int min, int max) {
  double a = *lo, b = *hi;
  Pair(r, key, &a, &b, min, max);
  if (r.ok() && (a != std::floor(a) || b != std::floor(b))) r.Fail(key, "expected whole numbers");
  if (r.ok()) *lo = static_cast<int>(a), *hi = static_cast<int>(b);  // within [min, max], both ints
}

Result<TeamMixEntry> ParseMix(const YAML::Node& node, std::string_view source, const std::string& path,
                              const TenancyConfig& t) {
  FieldReader m(node, source, path);
  TeamMixEntry e;
  e.cls_name = "training";
  m.String("class", &e.cls_name, false);
  const PriorityClass* pc = t.FindClass(e.cls_name);
  if (m.ok() && !pc) m.Fail("class", fmt::format("unknown priority class '{}'", e.cls_name));
  if (pc) e.priority = pc->value;
  m.Double("weight", &e.weight, false, 0, 1e9);
  m.Int("gpus", &e.gpus, false, 0, 8);
  Pair(m, "tasks", &e.tasks_lo, &e.tasks_hi, 1, 1024);
  Pair(m, "compute", &e.compute_lo, &e.compute_hi, 1e-3, 1);
  Pair(m, "memory_gib", &e.mem_lo_gib, &e.mem_hi_gib, 0, 1e4);
  Pair(m, "duration_min", &e.dur_lo_min, &e.dur_hi_min, 0, 1e7);
  double checkpoint_min = -1;
  m.Double("checkpoint_min", &checkpoint_min, false, 0, 1e7);
  e.checkpointable = checkpoint_min >= 0;
  if (Status st = m.Finish(); !st.ok()) return st;
  return e;
}

Result<TeamStream> ParseStream(const YAML::Node& node, std::string_view source, const std::string& path,
                               const TenancyConfig& t) {
  FieldReader r(node, source, path);
  TeamStream s;
  std::string team, queue;
  r.String("team", &team, false);
  r.String("queue", &queue, false);
  const int q = !queue.empty() ? t.FindQueue(queue) : t.LeafFor(team);
  if (r.ok() && (q < 0 || !t.IsLeaf(q)))
    r.Fail(queue.empty() ? "team" : "queue", fmt::format("no leaf queue '{}'", queue.empty() ? team : queue));
  if (r.ok()) s.queue = t.queues[q].name;
  r.Double("rate_per_h", &s.rate_per_h, false, 1e-6, 1e4);
  FieldReader b(r.Child("burst"), source, r.PathOf("burst"), /*absent_ok=*/true);
  b.Double("factor", &s.burst_factor, false, 0, 1e3);
  b.Double("on_h", &s.burst_on_h, false, 0, 1e5);
  b.Double("period_h", &s.burst_period_h, false, 0, 1e5);
  if (Status st = b.Finish(); !st.ok()) return st;
  const YAML::Node mix = r.Seq("mix", /*required=*/true);
  if (r.ok() && mix.size() == 0) r.Fail("mix", "expected a non-empty list");
  if (Status st = r.Finish(); !st.ok()) return st;
  for (size_t k = 0; k < mix.size(); ++k) {
    auto e = ParseMix(mix[k], source, fmt::format("{}.mix[{}]", path, k), t);
    if (!e.ok()) return e.status();
    s.mix.push_back(*e);
  }
  return s;
}

}  // namespace

Result<std::vector<TeamStream>> ParseTeamStreams(const YAML::Node& list, std::string_view source,
                                                 std::string_view path, const TenancyConfig& tenancy) {
  std::vector<TeamStream> out;
  for (size_t i = 0; i < list.size(); ++i) {
    auto s = ParseStream(list[i], source, fmt::format("{}[{}]", path, i), tenancy);
    if (!s.ok()) return s.status();
    out.push_back(std::move(s).value());
  }
  return out;
}

std::vector<TraceJob> GenerateTeamJobs(const std::vector<TeamStream>& streams, int64_t horizon_s,
                                       uint64_t seed) {
  std::vector<TraceJob> jobs;
  std::mt19937_64 rng(seed * 7919 + 17);
  std::uniform_real_distribution<double> u(0, 1);
  for (const TeamStream& s : streams) {
    double total_w = 0;
    for (const TeamMixEntry& e : s.mix) total_w += e.weight;
    const double peak = s.rate_per_h * std::max(1.0, s.burst_factor) / 3600.0;
    double t = 0;
    while (true) {  // thinning: Poisson at the peak rate, accepted at rate(t) / peak
      t += -std::log(1 - u(rng)) / peak;
      if (t >= horizon_s) break;
      double rate = s.rate_per_h / 3600.0;
      if (s.burst_period_h > 0 && std::fmod(t / 3600.0, s.burst_period_h) < s.burst_on_h)
        rate *= s.burst_factor;
      if (u(rng) * peak > rate) continue;
      double x = u(rng) * total_w;
      const TeamMixEntry* e = &s.mix.back();
      for (const TeamMixEntry& m : s.mix) {
        if (x < m.weight) {
          e = &m;
          break;
        }
        x -= m.weight;
      }
      TraceJob j;
      j.submit_s = static_cast<int64_t>(t);
      j.team = s.queue;
      j.priority = e->priority;
      const bool inference = e->cls_name.find("inference") != std::string::npos;
      j.cls = inference ? WorkloadClass::kInference : WorkloadClass::kTraining;
      j.gpus_per_task = e->gpus;
      j.tasks = e->gpus == 0 ? 1 : e->tasks_lo + static_cast<int>(u(rng) * (e->tasks_hi - e->tasks_lo + 1));
      j.compute_milli =
          e->gpus == 0 ? static_cast<int>(1000 * (e->compute_lo + u(rng) * (e->compute_hi - e->compute_lo)))
                       : 1000;
      j.compute_milli = std::clamp(j.compute_milli, 1, 1000);
      j.memory_mib = static_cast<int64_t>(1024 * (e->mem_lo_gib + u(rng) * (e->mem_hi_gib - e->mem_lo_gib)));
      j.cpu_milli = 4000 * std::max(1, e->gpus);
      j.host_memory_mib = 32768 * std::max(1, e->gpus);
      j.duration_s = static_cast<int64_t>(60 * (e->dur_lo_min + u(rng) * (e->dur_hi_min - e->dur_lo_min)));
      j.checkpointable = e->checkpointable;
      jobs.push_back(j);
    }
  }
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.submit_s < b.submit_s; });
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i].id = static_cast<int64_t>(i + 1);
  return jobs;
}

namespace {

nlohmann::json Summary(const std::vector<double>& v) {
  if (v.empty()) return {{"mean", 0.0}, {"min", 0.0}, {"max", 0.0}};
  double s = 0;
  for (double x : v) s += x;
  return {{"mean", s / v.size()},
          {"min", *std::min_element(v.begin(), v.end())},
          {"max", *std::max_element(v.begin(), v.end())}};
}

}  // namespace

double JainIndex(const std::vector<double>& x) {
  double s = 0, s2 = 0;
  for (double v : x) s += v, s2 += v * v;
  if (x.empty() || s2 <= 0) return 1.0;
  return s * s / (static_cast<double>(x.size()) * s2);
}

double NearestRankPercentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * v.size()));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}
namespace {

// Fair entitlement per top-level team: guarantee plus a weight share of the unguaranteed capacity.
struct Entitlement {
  double gpus = 0;          // the cluster's GPUs
  double guar_total = 0;    // guaranteed GPUs, summed over top-level teams
  double weight_total = 0;  // over-quota weights, summed over top-level teams

  // GPUs team `t` (top-level) is entitled to.
  double Of(const QueueConfig& t) const {
    return t.guaranteed_milli / 1000.0 +
           (weight_total > 0 ? (gpus - guar_total) * t.over_quota_weight / weight_total : 0);
  }
};

// What every run of a multi-tenant scenario shares; read-only while seeds run.
struct TenantRunContext {
  const Scenario& s;
  const Catalog& catalog;
  std::shared_ptr<SimOptions::Tenancy> tenancy;    // as the scenario configures it
  std::shared_ptr<SimOptions::Tenancy> no_borrow;  // the same with borrowing off
  int prod = 1000;                                 // production-inference's priority
  Entitlement entitlement;
};

// The simulator's tenancy settings for `s`, and the entitlements over its top-level teams.
TenantRunContext MakeTenantRunContext(const Scenario& s, const Catalog& catalog) {
  const TenancyConfig* ten = s.tenancy.get();
  auto tenancy = std::make_shared<SimOptions::Tenancy>();
  tenancy->queues = ten->queues;
  for (size_t q = 0; q < ten->queues.size(); ++q)
    tenancy->queue_of_team[ten->queues[q].name] = static_cast<int>(q);
  for (const PriorityClass& pc : ten->priority_classes) tenancy->class_by_priority[pc.value] = pc;
  tenancy->cycle = ten->options;
  tenancy->cycle_every_s = s.cycle_every_s;
  auto no_borrow = std::make_shared<SimOptions::Tenancy>(*tenancy);
  no_borrow->cycle.allow_borrowing = false;
  const int prod =
      ten->FindClass("production-inference") ? ten->FindClass("production-inference")->value : 1000;
  Entitlement e;
  e.gpus = s.cluster.TotalGpus();
  for (const QueueConfig& q : ten->queues)
    if (q.parent.empty()) e.guar_total += q.guaranteed_milli / 1000.0, e.weight_total += q.over_quota_weight;
  return TenantRunContext{s, catalog, std::move(tenancy), std::move(no_borrow), prod, e};
}

// One policy's figures, one slot per seed: seed k writes only slot k, so results do not depend on timing.
struct PolicySeries {
  std::vector<double> prod_p99, guar_p99, jain, util, util_nb, alloc, alloc_nb, preempt, lost_h, unplaced;
  std::vector<std::string> errors;
  // Per leaf queue (jobs' `team` is their queue): share of the cluster held and mean wait to first bind,
  // over the measured window, one value per seed.
  std::map<std::string, std::vector<double>> queue_alloc, queue_wait;

  PolicySeries(const TenancyConfig& ten, int nseeds)
      : prod_p99(nseeds),
        guar_p99(nseeds),
        jain(nseeds),
        util(nseeds),
        util_nb(nseeds),
        alloc(nseeds),
        alloc_nb(nseeds),
        preempt(nseeds),
        lost_h(nseeds),
        unplaced(nseeds),
        errors(nseeds) {
    for (int q = 0; q < static_cast<int>(ten.queues.size()); ++q)
      if (ten.IsLeaf(q)) {
        queue_alloc[ten.queues[q].name].assign(nseeds, 0);
        queue_wait[ten.queues[q].name].assign(nseeds, 0);
      }
  }
};

// Jain's index over top-level teams of allocation (sum of its queues) / entitlement.
double TeamJain(const TenantRunContext& c, const RunResult& r) {
  const Entitlement& e = c.entitlement;
  std::vector<double> ratio;
  for (const QueueConfig& t : c.s.tenancy->queues) {
    if (!t.parent.empty()) continue;
    double a = 0;
    for (const auto& [team, st] : r.by_team)
      if (team == t.name || team.rfind(t.name + "/", 0) == 0) a += st.allocation * e.gpus;
    const double ent = e.Of(t);
    ratio.push_back(ent > 0 ? a / ent : 0);
  }
  return JainIndex(ratio);
}

// Fills seed k's slots of `out` from its run with borrowing (`r`) and without (`rn`).
void RecordTenantSeed(const TenantRunContext& c, const RunResult& r, const RunResult& rn, int64_t horizon_s,
                      int k, PolicySeries* out) {
  std::vector<double> pw, gw;
  std::map<std::string, std::pair<double, int>> waits;
  for (const SimJobRecord& j : r.job_records) {
    if (!j.in_window) continue;
    const double end = j.first_bind_s >= 0 ? j.first_bind_s : horizon_s;  // unplaced: waited to the end
    waits[j.team].first += end - j.submit_s;
    ++waits[j.team].second;
    if (j.priority >= c.prod) pw.push_back(end - j.submit_s);
    if (j.within_guarantee)
      gw.push_back((j.guarantee_met_s >= 0 && j.guarantee_met_s < end ? j.guarantee_met_s : end) -
                   j.submit_s);
  }
  out->prod_p99[k] = NearestRankPercentile(pw, 99);
  out->guar_p99[k] = NearestRankPercentile(gw, 99);
  out->jain[k] = TeamJain(c, r);
  for (auto& [name, v] : out->queue_alloc) {
    auto it = r.by_team.find(name);
    v[k] = it == r.by_team.end() ? 0.0 : it->second.allocation;
    auto w = waits.find(name);
    out->queue_wait.find(name)->second[k] = w == waits.end() ? 0.0 : w->second.first / w->second.second;
  }
  out->util[k] = r.gpu_utilization;
  out->util_nb[k] = rn.gpu_utilization;
  out->alloc[k] = r.gpu_allocation;
  out->alloc_nb[k] = rn.gpu_allocation;
  out->preempt[k] = static_cast<double>(r.preemptions);
  out->lost_h[k] = r.lost_gpu_s / 3600.0;
  out->unplaced[k] = static_cast<double>(r.unplaced_jobs);
}

// Runs seed k of policy `pname` on `cluster` with borrowing and without, and records it in `out`. With
// `decisions`, the run with borrowing records its decisions there.
Status RunTenantSeed(const TenantRunContext& c, const Cluster& cluster, const std::string& pname, int k,
                     std::vector<std::string>* decisions, PolicySeries* out) {
  const Scenario& s = c.s;
  auto policy = MakeScenarioPolicy(s, pname);  // one per run: runs share nothing mutable
  const uint64_t seed = s.seeds[k];
  std::vector<TraceJob> jobs = JobsFor(s, s.variants.front(), seed);
  SimOptions opt = s.sim;
  opt.time_limit_seed = seed;
  opt.demand_seed = seed;
  opt.failure_seed = seed;
  opt.gang_backfill = false;  // reservations and backfill come from the tenancy (`backfill:`)
  opt.tenancy = c.tenancy;
  opt.record_decisions = decisions != nullptr;
  auto r = Simulate(cluster, c.catalog, jobs, **policy, opt);
  if (!r.ok()) return r.status();
  if (opt.record_decisions) *decisions = std::move(r->decisions);
  opt.record_decisions = false;
  opt.tenancy = c.no_borrow;
  auto rn = Simulate(cluster, c.catalog, jobs, **policy, opt);
  if (!rn.ok()) return rn.status();
  RecordTenantSeed(c, *r, *rn, opt.horizon_s, k, out);
  return Status::Ok();
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / v.size();
}

// The report of one policy: summaries over seeds, borrowing gains, and per-queue figures.
nlohmann::json PolicyJson(const std::string& pname, const PolicySeries& v) {
  nlohmann::json p = {{"policy", pname},
                      {"production_inference_wait_p99_s", Summary(v.prod_p99)},
                      {"guarantee_wait_p99_s", Summary(v.guar_p99)},
                      {"jain_fairness", Summary(v.jain)},
                      {"gpu_utilization", Summary(v.util)},
                      {"gpu_utilization_no_borrowing", Summary(v.util_nb)},
                      {"gpu_allocation", Summary(v.alloc)},
                      {"gpu_allocation_no_borrowing", Summary(v.alloc_nb)},
                      {"borrowing_gain_points", 100 * (Mean(v.alloc) - Mean(v.alloc_nb))},
                      {"borrowing_gain_utilization_points", 100 * (Mean(v.util) - Mean(v.util_nb))},
                      {"preemptions", Summary(v.preempt)},
                      {"lost_gpu_hours", Summary(v.lost_h)},
                      {"unplaced_jobs_at_end", Summary(v.unplaced)}};
  nlohmann::json& queues = p["queues"];  // null when there are no leaf queues
  for (const auto& [name, a] : v.queue_alloc)
    queues[name] = {{"gpu_allocation", Summary(a)}, {"wait_mean_s", Summary(v.queue_wait.at(name))}};
  return p;
}

}  // namespace

Result<nlohmann::json> RunMultiTenantScenario(const Scenario& s, const std::vector<std::string>& policies,
                                              const Catalog& catalog, std::vector<std::string>* decisions) {
  if (!s.IsMultiTenant())
    return Status::Error(s.source + ": not a multi-tenant scenario (no 'teams_workload')");
  const int nseeds = static_cast<int>(s.seeds.size());
  const TenantRunContext ctx = MakeTenantRunContext(s, catalog);
  nlohmann::json out = {{"scenario", s.name.empty() ? s.source : s.name},
                        {"gpus", static_cast<int>(ctx.entitlement.gpus)},
                        {"seeds", nseeds},
                        {"policies", nlohmann::json::array()}};
  for (const std::string& pname : policies) {
    auto policy = MakeScenarioPolicy(s, pname);
    if (!policy.ok()) return policy.status();
    PolicySeries series(*s.tenancy, nseeds);
    // Seeds run in `threads` workers, each writing only its own slots of `series`.
    const Cluster cluster = ClusterForScenarioPolicy(s, catalog, pname);
    ParallelFor(static_cast<size_t>(std::max(0, nseeds)), s.threads, [&](size_t k) {
      const bool record = decisions != nullptr && k == 0 && pname == policies.front();  // the first run
      Status st =
          RunTenantSeed(ctx, cluster, pname, static_cast<int>(k), record ? decisions : nullptr, &series);
      if (!st.ok()) series.errors[k] = st.message();
    });
    for (const std::string& e : series.errors)
      if (!e.empty()) return Status::Error(e);
    out["policies"].push_back(PolicyJson(pname, series));
  }
  return out;
}

}  // namespace tessera
