#include "sim/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

namespace tessera {

using nlohmann::json;

Spread SpreadOf(const std::vector<double>& v) {
  Spread s;
  if (v.empty()) return s;
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  double t = 0;
  for (double x : v) t += x;
  s.mean = t / static_cast<double>(v.size());
  return s;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(std::clamp(q, 0.0, 1.0) * v.size()));
  return v[rank == 0 ? 0 : rank - 1];
}

double MixDeviation(const RunResult& r) {
  double arrived = 0, served = 0;
  for (const auto& [name, c] : r.by_class) {
    arrived += static_cast<double>(c.gpu_requests_arrived);
    served += static_cast<double>(c.gpu_requests_served);
  }
  if (arrived <= 0 || served <= 0) return 0;
  double dev = 0;
  for (const auto& [name, c] : r.by_class)
    dev = std::max(dev, std::abs(c.gpu_requests_arrived / arrived - c.gpu_requests_served / served));
  return dev;
}

namespace {

json SpreadJson(const std::vector<double>& v, int digits = 4) {
  Spread s = SpreadOf(v);
  auto r = [&](double x) { return std::round(x * std::pow(10, digits)) / std::pow(10, digits); };
  return json{{"mean", r(s.mean)}, {"min", r(s.min)}, {"max", r(s.max)}};
}

json DelayJson(const std::vector<double>& pooled, double scale) {
  double t = 0;
  for (double x : pooled) t += x;
  auto r = [](double x) { return std::round(x * 1000) / 1000; };
  return json{{"mean", r(pooled.empty() ? 0 : t / pooled.size() / scale)},
              {"p50", r(Percentile(pooled, 0.5) / scale)},
              {"p99", r(Percentile(pooled, 0.99) / scale)},
              {"count", pooled.size()}};
}

template <typename F>
std::vector<double> Collect(const std::vector<RunResult>& runs, F f) {
  std::vector<double> v;
  for (const RunResult& r : runs) v.push_back(f(r));
  return v;
}

json GroupJson(const std::vector<RunResult>& runs, bool teams) {
  std::set<std::string> names;
  for (const RunResult& r : runs)
    for (const auto& [n, c] : teams ? r.by_team : r.by_class) names.insert(n);
  json out = json::object();
  for (const std::string& n : names) {
    std::vector<double> alloc, util, dshare, sshare, delays, jct;
    for (const RunResult& r : runs) {
      const auto& m = teams ? r.by_team : r.by_class;
      auto it = m.find(n);
      ClassStats c = it == m.end() ? ClassStats{} : it->second;
      alloc.push_back(c.allocation);
      util.push_back(c.utilization);
      double arrived = 0, served = 0;
      for (const auto& [k, x] : m) {
        arrived += x.gpu_requests_arrived;
        served += x.gpu_requests_served;
      }
      dshare.push_back(arrived > 0 ? c.gpu_requests_arrived / arrived : 0);
      sshare.push_back(served > 0 ? c.gpu_requests_served / served : 0);
      delays.insert(delays.end(), c.queue_delays_s.begin(), c.queue_delays_s.end());
      jct.insert(jct.end(), c.jct_s.begin(), c.jct_s.end());
    }
    out[n] = json{{"gpu_allocation", SpreadJson(alloc)},
                  {"gpu_utilization", SpreadJson(util)},
                  {"demanded_share", SpreadJson(dshare)},
                  {"served_share", SpreadJson(sshare)},
                  {"queue_delay_s", DelayJson(delays, 1.0)},
                  {"jct_h", DelayJson(jct, 3600.0)}};
  }
  return out;
}

// Per inference class (production-inference and inference always; others when they ran): the fraction of
// its replica-hours spent above its SLO slowdown (real demand), null where the class had no replicas.
json SloJson(const std::vector<RunResult>& runs) {
  std::set<std::string> classes = {"production-inference", "inference"};
  for (const RunResult& r : runs)
    for (const auto& [n, v] : r.slo_replica_s) classes.insert(n);
  json out = json::object();
  for (const std::string& n : classes) {
    std::vector<double> frac, p99;
    for (const RunResult& r : runs) {
      auto t = r.slo_replica_s.find(n);
      if (t == r.slo_replica_s.end() || t->second <= 0) continue;
      auto v = r.slo_violation_s.find(n);
      frac.push_back(v == r.slo_violation_s.end() ? 0.0 : v->second / t->second);
      auto p = r.p99_slowdown.find(n);
      p99.push_back(p == r.p99_slowdown.end() ? 1.0 : p->second);
    }
    if (frac.empty()) out[n] = {{"violation_fraction", nullptr}, {"p99_slowdown", nullptr}};
    else out[n] = {{"violation_fraction", SpreadJson(frac, 6)}, {"p99_slowdown", SpreadJson(p99, 3)}};
  }
  return out;
}

// Which model of what is not known in advance the run used (docs/simulator.md).
json UncertaintyJson(const RunResult& r) {
  json demand = r.demand_sigma > 0
                    ? json{{"model", "lognormal"}, {"sigma", r.demand_sigma}, {"epoch_s", r.demand_epoch_s}}
                    : json{{"model", "declared"}};
  json limits = r.time_limit_factor_max > r.time_limit_factor_min || r.time_limit_factor_min != 1
                    ? json{{"model", "uniform-factor"}, {"factor", {r.time_limit_factor_min, r.time_limit_factor_max}}}
                    : json{{"model", "exact"}};
  return {{"demand", demand}, {"time_limits", limits}, {"sharing_mode", r.sharing_mode}};
}

// Allocation, utilisation, training throughput and OOM events, each a spread over seeds.
void AddUtilization(const std::vector<RunResult>& runs, json& o) {
  o["gpu_allocation"] = SpreadJson(Collect(runs, [](const RunResult& r) { return r.gpu_allocation; }));
  o["gpu_utilization"] = SpreadJson(Collect(runs, [](const RunResult& r) { return r.gpu_utilization; }));
  const std::vector<double> tput = Collect(runs, [](const RunResult& r) { return r.effective_training_throughput; });
  // A plain number (GPU-equivalents, mean over seeds) as well as its spread.
  o["effective_training_throughput"] = std::round(SpreadOf(tput).mean * 1000) / 1000;
  o["effective_training_throughput_gpus"] = SpreadJson(tput, 3);
  o["training_gpus_allocated"] = SpreadJson(Collect(runs, [](const RunResult& r) { return r.training_gpus_allocated; }), 3);
  o["training_efficiency"] = SpreadJson(Collect(runs, [](const RunResult& r) {
    return r.training_gpus_allocated > 0 ? r.effective_training_throughput / r.training_gpus_allocated : 0.0;
  }));
  o["oom_events"] = SpreadJson(Collect(runs, [](const RunResult& r) { return static_cast<double>(r.oom_events); }));
  // The opportunistic tier (sim/harvest.h): compute lost to evictions, checkpoint writes and restores (a
  // share of the fleet, never in gpu_utilization) and the harvested part of gpu_utilization.
  o["lost_compute"] = SpreadJson(Collect(runs, [](const RunResult& r) { return r.lost_compute; }));
  o["harvested_utilization"] =
      SpreadJson(Collect(runs, [](const RunResult& r) { return r.harvested_utilization; }));
  const auto count = [&](int64_t RunResult::*f) {
    return SpreadJson(Collect(runs, [&](const RunResult& r) { return static_cast<double>(r.*f); }), 1);
  };
  o["harvest"] = {{"enabled", runs.front().harvest_enabled},
                  {"starts", count(&RunResult::harvest_starts)},
                  {"evictions", count(&RunResult::harvest_evictions)},
                  {"completions", count(&RunResult::harvest_completions)},
                  {"checkpoints", count(&RunResult::harvest_checkpoints)}};
}

// Latency under sharing, per SLO class (docs/sharing.md): violations of the class's SLO and the p99 slowdown.
void AddSloFigures(const std::vector<RunResult>& runs, json& o) {
  std::set<std::string> slo_classes;
  for (const RunResult& r : runs)
    for (const auto& [n, v] : r.p99_slowdown) slo_classes.insert(n);
  json slo = json::object(), slowdown = json::object();
  for (const std::string& n : slo_classes) {
    slo[n] = SpreadJson(Collect(runs, [&](const RunResult& r) {
      auto it = r.slo_violations.find(n);
      return it == r.slo_violations.end() ? 0.0 : static_cast<double>(it->second);
    }), 1);
    slowdown[n] = SpreadJson(Collect(runs, [&](const RunResult& r) {
      auto it = r.p99_slowdown.find(n);
      return it == r.p99_slowdown.end() ? 1.0 : it->second;
    }), 3);
  }
  o["slo_violations"] = slo;
  o["p99_slowdown"] = slowdown;
  o["slo"] = SloJson(runs);
}

// The static-mig-best layout each seed chose (only when the runs searched one).
void AddStaticMigChoices(const std::vector<RunResult>& runs, json& o) {
  if (runs.front().static_mig_layout.empty()) return;
  json choices = json::array();
  for (const RunResult& r : runs)
    choices.push_back({{"seed", r.seed},
                       {"layout", r.static_mig_layout},
                       {"share", r.static_mig_share},
                       {"first_day_utilization", std::round(r.static_mig_first_day * 10000) / 10000}});
  o["static_mig_best"] = choices;
}

// Backfill into reservations: jobs let in, those that held reserved capacity past the start of the
// reservation they were let into (the only way backfill can delay a gang), and reserved gangs' starts
// against their first reservation's expected start (pooled over seeds).
json BackfillJson(const std::vector<RunResult>& runs) {
  const auto count = [&](int64_t RunResult::*f) {
    return SpreadJson(Collect(runs, [&](const RunResult& r) { return static_cast<double>(r.*f); }), 1);
  };
  std::vector<double> late;
  for (const RunResult& r : runs)
    late.insert(late.end(), r.reserved_gang_lateness_s.begin(), r.reserved_gang_lateness_s.end());
  return {
      {"backfills", count(&RunResult::backfills)},
      {"overruns", count(&RunResult::backfill_overruns)},
      {"overrun_gpu_hours",
       SpreadJson(Collect(runs, [](const RunResult& r) { return r.backfill_overrun_gpu_s / 3600.0; }), 2)},
      {"reserved_gangs_started", count(&RunResult::reserved_gangs_started)},
      {"reserved_gangs_late", count(&RunResult::reserved_gangs_late)},
      {"gang_lateness_s",
       {{"p50", Percentile(late, 0.5)},
        {"p99", Percentile(late, 0.99)},
        {"max", late.empty() ? 0.0 : *std::max_element(late.begin(), late.end())}}}};
}

// Event counts (repartitions, preemptions, failures, ...), the makespan and the class mix's deviation.
void AddCounts(const std::vector<RunResult>& runs, json& o) {
  o["mig_repartitions"] =
      SpreadJson(Collect(runs, [](const RunResult& r) { return static_cast<double>(r.mig_repartitions); }), 1);
  o["backfill"] = BackfillJson(runs);
  o["preemptions"] = SpreadJson(Collect(runs, [](const RunResult& r) { return static_cast<double>(r.preemptions); }), 1);
  o["job_failures"] = SpreadJson(Collect(runs, [](const RunResult& r) { return static_cast<double>(r.job_failures); }), 1);
  o["failure_lost_gpu_hours"] =
      SpreadJson(Collect(runs, [](const RunResult& r) { return r.failure_lost_gpu_s / 3600.0; }), 1);
  o["makespan_h"] = SpreadJson(Collect(runs, [](const RunResult& r) { return r.makespan_s / 3600.0; }), 2);
  o["jobs_completed"] = SpreadJson(Collect(runs, [](const RunResult& r) { return static_cast<double>(r.jobs_completed); }), 1);
  o["jobs_cancelled"] =
      SpreadJson(Collect(runs, [](const RunResult& r) { return static_cast<double>(r.jobs_cancelled); }), 1);
  o["unplaced_jobs"] = SpreadJson(Collect(runs, [](const RunResult& r) { return static_cast<double>(r.unplaced_jobs); }), 1);
  // Runs whose backlog stream ran out before the horizon (their utilisation measures the stream).
  o["backlog_ran_dry"] = std::count_if(runs.begin(), runs.end(), [](const RunResult& r) {
    return r.backlog_dry_s >= 0;
  });
  o["unplaced_gpu_requests"] =
      SpreadJson(Collect(runs, [](const RunResult& r) { return static_cast<double>(r.unplaced_gpu_requests); }), 1);
  const std::vector<double> dev = Collect(runs, MixDeviation);
  o["mix_deviation"] = SpreadJson(dev);
  o["no_class_starved"] = SpreadOf(dev).max <= 0.02;
  o["apply_conflicts"] = SpreadJson(Collect(runs, [](const RunResult& r) { return static_cast<double>(r.apply_conflicts); }), 1);
}

// Per class, per team (when teams differ from classes), and the queue delay pooled over classes.
void AddGroups(const std::vector<RunResult>& runs, json& o) {
  o["by_class"] = GroupJson(runs, false);
  std::set<std::string> teams;
  for (const RunResult& r : runs)
    for (const auto& [n, c] : r.by_team) teams.insert(n);
  std::set<std::string> classes;
  for (const RunResult& r : runs)
    for (const auto& [n, c] : r.by_class) classes.insert(n);
  if (teams != classes) o["by_team"] = GroupJson(runs, true);
  std::vector<double> delays;
  for (const RunResult& r : runs)
    for (const auto& [n, c] : r.by_class) delays.insert(delays.end(), c.queue_delays_s.begin(), c.queue_delays_s.end());
  o["queue_delay_s"] = DelayJson(delays, 1.0);
}

// Hook figures (issue 5 tiers: cost, spot reclaims, ...), each as a spread over seeds. A dotted name nests:
// "baselines.on_demand_only.total_cost" -> o["baselines"]["on_demand_only"][...].
void AddHookFigures(const std::vector<RunResult>& runs, json& o) {
  std::set<std::string> extra_keys;
  for (const RunResult& r : runs)
    for (const auto& [k, v] : r.extra) extra_keys.insert(k);
  for (const std::string& k : extra_keys) {
    json v = SpreadJson(Collect(runs, [&](const RunResult& r) {
      auto it = r.extra.find(k);
      return it == r.extra.end() ? 0.0 : it->second;
    }));
    std::string pointer = "/" + k;
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    o[json::json_pointer(pointer)] = std::move(v);
  }
}

}  // namespace

json PolicySummary(const std::vector<RunResult>& runs) {
  json o;
  if (runs.empty()) return o;
  o["policy"] = runs.front().policy;
  o["runs"] = runs.size();
  AddUtilization(runs, o);
  AddSloFigures(runs, o);
  AddStaticMigChoices(runs, o);
  o["uncertainty"] = UncertaintyJson(runs.front());
  AddCounts(runs, o);
  AddGroups(runs, o);
  AddHookFigures(runs, o);
  double wall = 0;
  for (const RunResult& r : runs) wall += r.wall_ms;
  o["sim_wall_ms_per_run"] = std::round(wall / runs.size());
  return o;
}

json CycleJson(const CycleSpec& c) {
  json o = {{"gang_backfill", c.gang_backfill},
            {"gang_reservations", c.gang_reservations},
            {"backfill_into_reservations", c.backfill_into_reservations},
            {"time_limit_factor", {c.time_limit_factor_min, c.time_limit_factor_max}}};
  o["name"] = c.gang_backfill ? "backfill" : "greedy";
  return o;
}

json BoundJson(const VariantOutcome& v) {
  std::vector<double> u, offered;
  std::map<std::string, int> limits;
  for (const UtilizationBound& b : v.bounds) {
    u.push_back(b.gpu_utilization);
    offered.push_back(b.offered_compute);
    ++limits[b.limit];
  }
  return json{{"gpu_utilization", SpreadJson(u)}, {"offered_compute", SpreadJson(offered)}, {"limit", limits}};
}

std::vector<double> DistanceToBound(const VariantOutcome& v, const std::vector<RunResult>& runs) {
  std::vector<double> d;
  for (size_t k = 0; k < runs.size() && k < v.bounds.size(); ++k)
    d.push_back(v.bounds[k].gpu_utilization - runs[k].gpu_utilization);
  return d;
}

json OutcomeJson(const ScenarioOutcome& o, bool is_sweep) {
  json doc;
  doc["scenario"] = o.name;
  doc["gpus"] = o.gpus;
  doc["seeds"] = o.seeds;
  doc["same_cycle"] = SameCycle(o);
  auto results = [&](const VariantOutcome& v) {
    json arr = json::array();
    for (size_t p = 0; p < v.runs.size(); ++p) {
      json r = PolicySummary(v.runs[p]);
      if (p < o.cycles.size()) r["cycle"] = CycleJson(o.cycles[p]);
      if (!v.bounds.empty()) r["distance_to_bound"] = SpreadJson(DistanceToBound(v, v.runs[p]));
      arr.push_back(std::move(r));
    }
    return arr;
  };
  if (is_sweep) {
    json sw = json::array();
    for (const VariantOutcome& v : o.variants) {
      json e;
      e["inference_share"] = v.variant.inference_share;
      e["traffic"] = v.variant.traffic;
      if (!v.bounds.empty()) e["bound"] = BoundJson(v);
      e["light_fraction"] = v.variant.generator.light_fraction;
      e["results"] = results(v);
      sw.push_back(e);
    }
    doc["sweep"] = sw;
  } else if (!o.variants.empty()) {
    if (!o.variants.front().bounds.empty()) doc["bound"] = BoundJson(o.variants.front());
    doc["results"] = results(o.variants.front());
  }
  doc["wall_s"] = std::round(o.wall_s * 100) / 100;
  return doc;
}

std::string OutcomeCsv(const ScenarioOutcome& o) {
  std::string out =
      "variant,policy,seed,gpu_allocation,gpu_utilization,inference_allocation,inference_utilization,"
      "training_allocation,training_utilization,effective_training_throughput,oom_events,mig_repartitions,"
      "unplaced_jobs,mix_deviation,makespan_h\n";
  for (const VariantOutcome& v : o.variants)
    for (const auto& runs : v.runs)
      for (const RunResult& r : runs) {
        auto cls = [&](const char* n) {
          auto it = r.by_class.find(n);
          return it == r.by_class.end() ? ClassStats{} : it->second;
        };
        const ClassStats inf = cls("inference"), tr = cls("training");
        out += fmt::format("\"{}\",{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.3f},{},{},{},{:.4f},{:.2f}\n",
                           v.variant.label, r.policy, r.seed, r.gpu_allocation, r.gpu_utilization, inf.allocation,
                           inf.utilization, tr.allocation, tr.utilization, r.effective_training_throughput,
                           r.oom_events, r.mig_repartitions, r.unplaced_jobs, MixDeviation(r), r.makespan_s / 3600.0);
      }
  return out;
}

}  // namespace tessera
