#include "sim/multi_tenant.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "base/parallel.h"
#include "model/cluster.h"
#include "sched/policy.h"
#include "sched/tenancy.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace tessera {
namespace {

Result<std::string> ReadText(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::Error(fmt::format("cannot read '{}'", path));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string DirOf(const std::string& path) {
  const size_t k = path.find_last_of('/');
  return k == std::string::npos ? "." : path.substr(0, k);
}

struct MixEntry {
  std::string cls_name;
  int priority = 0;
  double weight = 1;
  int gpus = 1;
  int tasks_lo = 1, tasks_hi = 1;
  double compute_lo = 1, compute_hi = 1;
  double mem_lo_gib = 40, mem_hi_gib = 40;
  double dur_lo_min = 60, dur_hi_min = 60;
  bool checkpointable = false;
};

struct TeamStream {
  std::string queue;
  double rate_per_h = 1;
  double burst_factor = 1, burst_on_h = 0, burst_period_h = 0;
  std::vector<MixEntry> mix;
};

template <typename T>
Status Pair(const YAML::Node& n, const std::string& key, T* lo, T* hi, const std::string& where) {
  const YAML::Node v = n[key];
  if (!v) return Status::Ok();
  try {
    if (v.IsSequence() && v.size() == 2) {
      *lo = v[0].as<T>();
      *hi = v[1].as<T>();
    } else {
      *lo = *hi = v.as<T>();
    }
  } catch (const YAML::Exception&) {
    return Status::Error(fmt::format("{}: field '{}': a number or [low, high]", where, key));
  }
  if (*hi < *lo) return Status::Error(fmt::format("{}: field '{}': high below low", where, key));
  return Status::Ok();
}

Result<std::vector<TeamStream>> ParseStreams(const YAML::Node& list, const TenancyConfig& t, const std::string& src) {
  std::vector<TeamStream> out;
  if (!list.IsSequence()) return Status::Error(src + ": teams_workload: expected a list");
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node n = list[i];
    const std::string where = fmt::format("{}:{}: teams_workload[{}]", src, n.Mark().line + 1, i);
    TeamStream s;
    const std::string team = n["team"] ? n["team"].as<std::string>() : "";
    const std::string queue = n["queue"] ? n["queue"].as<std::string>() : "";
    int q = !queue.empty() ? t.FindQueue(queue) : t.LeafFor(team);
    if (q < 0 || !t.IsLeaf(q))
      return Status::Error(fmt::format("{}: field '{}': no leaf queue '{}'", where, queue.empty() ? "team" : "queue",
                                       queue.empty() ? team : queue));
    s.queue = t.queues[q].name;
    s.rate_per_h = n["rate_per_h"] ? n["rate_per_h"].as<double>() : 1.0;
    if (!(s.rate_per_h > 0)) return Status::Error(where + ": field 'rate_per_h': must be > 0");
    if (const YAML::Node b = n["burst"]) {
      s.burst_factor = b["factor"] ? b["factor"].as<double>() : 1;
      s.burst_on_h = b["on_h"] ? b["on_h"].as<double>() : 0;
      s.burst_period_h = b["period_h"] ? b["period_h"].as<double>() : 0;
    }
    const YAML::Node mix = n["mix"];
    if (!mix || !mix.IsSequence() || mix.size() == 0) return Status::Error(where + ": field 'mix': a non-empty list");
    for (size_t k = 0; k < mix.size(); ++k) {
      const YAML::Node m = mix[k];
      const std::string mw = fmt::format("{}.mix[{}]", where, k);
      MixEntry e;
      e.cls_name = m["class"] ? m["class"].as<std::string>() : "training";
      const PriorityClass* pc = t.FindClass(e.cls_name);
      if (!pc) return Status::Error(fmt::format("{}: field 'class': unknown priority class '{}'", mw, e.cls_name));
      e.priority = pc->value;
      e.weight = m["weight"] ? m["weight"].as<double>() : 1;
      e.gpus = m["gpus"] ? m["gpus"].as<int>() : 1;
      if (e.gpus < 0 || e.gpus > 8) return Status::Error(mw + ": field 'gpus': 0..8");
      if (Status st = Pair(m, "tasks", &e.tasks_lo, &e.tasks_hi, mw); !st.ok()) return st;
      if (Status st = Pair(m, "compute", &e.compute_lo, &e.compute_hi, mw); !st.ok()) return st;
      if (Status st = Pair(m, "memory_gib", &e.mem_lo_gib, &e.mem_hi_gib, mw); !st.ok()) return st;
      if (Status st = Pair(m, "duration_min", &e.dur_lo_min, &e.dur_hi_min, mw); !st.ok()) return st;
      e.checkpointable = static_cast<bool>(m["checkpoint_min"]);
      s.mix.push_back(e);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<TraceJob> Generate(const std::vector<TeamStream>& streams, int64_t horizon_s, uint64_t seed) {
  std::vector<TraceJob> jobs;
  std::mt19937_64 rng(seed * 7919 + 17);
  std::uniform_real_distribution<double> u(0, 1);
  for (const TeamStream& s : streams) {
    double total_w = 0;
    for (const MixEntry& e : s.mix) total_w += e.weight;
    const double peak = s.rate_per_h * std::max(1.0, s.burst_factor) / 3600.0;
    double t = 0;
    while (true) {  // thinning: Poisson at the peak rate, accepted at rate(t) / peak
      t += -std::log(1 - u(rng)) / peak;
      if (t >= horizon_s) break;
      double rate = s.rate_per_h / 3600.0;
      if (s.burst_period_h > 0 && std::fmod(t / 3600.0, s.burst_period_h) < s.burst_on_h) rate *= s.burst_factor;
      if (u(rng) * peak > rate) continue;
      double x = u(rng) * total_w;
      const MixEntry* e = &s.mix.back();
      for (const MixEntry& m : s.mix) {
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
      j.compute_milli = e->gpus == 0 ? static_cast<int>(1000 * (e->compute_lo + u(rng) * (e->compute_hi - e->compute_lo)))
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
  std::stable_sort(jobs.begin(), jobs.end(), [](const TraceJob& a, const TraceJob& b) { return a.submit_s < b.submit_s; });
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i].id = static_cast<int64_t>(i + 1);
  return jobs;
}

nlohmann::json Summary(const std::vector<double>& v) {
  if (v.empty()) return {{"mean", 0.0}, {"min", 0.0}, {"max", 0.0}};
  double s = 0;
  for (double x : v) s += x;
  return {{"mean", s / v.size()},
          {"min", *std::min_element(v.begin(), v.end())},
          {"max", *std::max_element(v.begin(), v.end())}};
}

}  // namespace

bool IsMultiTenantScenario(const std::string& text) {
  try {
    YAML::Node n = YAML::Load(text);
    return n.IsMap() && static_cast<bool>(n["teams_workload"]);
  } catch (const YAML::Exception&) {
    return false;
  }
}

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

Result<nlohmann::json> RunMultiTenantScenario(const std::string& path, const std::vector<std::string>& policies_in,
                                              const Catalog& catalog) {
  auto text = ReadText(path);
  if (!text.ok()) return text.status();
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return Status::Error(fmt::format("{}:{}: YAML: {}", path, e.mark.line + 1, e.msg));
  }
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string k = it->first.as<std::string>();
    static const std::set<std::string> known = {"name", "description", "cluster", "seeds", "first_seed", "threads",
                                                "policies", "horizon_h", "warmup_h", "sample_every_h", "tenancy",
                                                "teams_workload", "cycle_every_s"};
    if (!known.count(k)) return Status::Error(fmt::format("{}:{}: unknown field '{}'", path, it->first.Mark().line + 1, k));
  }
  if (!root["cluster"]) return Status::Error(path + ": field 'cluster': required");
  const std::string cfile = root["cluster"].as<std::string>();
  const std::string cpath = !cfile.empty() && cfile[0] == '/' ? cfile : DirOf(path) + "/" + cfile;
  auto ctext = ReadText(cpath);
  if (!ctext.ok()) return Status::Error(path + ": field 'cluster': " + ctext.error());
  auto cluster = LoadClusterYaml(*ctext, cpath, catalog);
  if (!cluster.ok()) return cluster.status();
  if (!root["tenancy"]) return Status::Error(path + ": field 'tenancy': required");
  YAML::Emitter em;
  em << root["tenancy"];
  auto ten = ParseTenancyYaml(em.c_str(), path + " (tenancy)", catalog);
  if (!ten.ok()) return ten.status();
  auto streams = ParseStreams(root["teams_workload"], *ten, path);
  if (!streams.ok()) return streams.status();
  const int nseeds = root["seeds"] ? root["seeds"].as<int>() : 3;
  const int threads = root["threads"] ? std::max(1, root["threads"].as<int>()) : 2;
  const uint64_t first_seed = root["first_seed"] ? root["first_seed"].as<uint64_t>() : 1;
  const double horizon_h = root["horizon_h"] ? root["horizon_h"].as<double>() : 24;
  const double warmup_h = root["warmup_h"] ? root["warmup_h"].as<double>() : 0;
  std::vector<std::string> policies = policies_in;
  if (policies.empty()) policies = root["policies"] ? root["policies"].as<std::vector<std::string>>()
                                                    : std::vector<std::string>{"tessera"};

  auto tenancy = std::make_shared<SimOptions::Tenancy>();
  tenancy->queues = ten->queues;
  for (size_t q = 0; q < ten->queues.size(); ++q) tenancy->queue_of_team[ten->queues[q].name] = static_cast<int>(q);
  for (const PriorityClass& pc : ten->priority_classes) tenancy->preemptible_by_priority[pc.value] = pc.preemptible;
  tenancy->cycle = ten->options;
  tenancy->cycle_every_s = root["cycle_every_s"] ? root["cycle_every_s"].as<int64_t>() : 10;
  auto no_borrow = std::make_shared<SimOptions::Tenancy>(*tenancy);
  no_borrow->cycle.allow_borrowing = false;
  const int prod = ten->FindClass("production-inference") ? ten->FindClass("production-inference")->value : 1000;

  // Fair entitlement per top-level team: guarantee plus a weight share of the unguaranteed capacity.
  const double gpus = cluster->TotalGpus();
  double guar_total = 0, weight_total = 0;
  for (const QueueConfig& q : ten->queues)
    if (q.parent.empty()) guar_total += q.guaranteed_milli / 1000.0, weight_total += q.over_quota_weight;

  nlohmann::json out = {{"scenario", root["name"] ? root["name"].as<std::string>() : path},
                        {"gpus", static_cast<int>(gpus)},
                        {"seeds", nseeds},
                        {"policies", nlohmann::json::array()}};
  for (const std::string& pname : policies) {
    auto policy = MakePolicy(pname);
    if (!policy.ok()) return policy.status();
    std::vector<double> prod_p99(nseeds), guar_p99(nseeds), jain(nseeds), util(nseeds), util_nb(nseeds),
        alloc(nseeds), alloc_nb(nseeds), preempt(nseeds), lost_h(nseeds), unplaced(nseeds);
    std::vector<std::string> errors(nseeds);
    // Seeds run in `threads` workers; each (seed) writes only its own slots, so results do not depend on timing.
    auto run_seed = [&](int k) {
      auto policy = MakePolicy(pname);  // one per run: runs share nothing mutable
      std::vector<TraceJob> jobs = Generate(*streams, static_cast<int64_t>(horizon_h * 3600), first_seed + k);
      SimOptions opt;
      opt.horizon_s = static_cast<int64_t>(horizon_h * 3600);
      opt.warmup_s = static_cast<int64_t>(warmup_h * 3600);
      opt.tenancy = tenancy;
      auto r = Simulate(*cluster, catalog, jobs, **policy, opt);
      if (!r.ok()) {
        errors[k] = r.error();
        return;
      }
      opt.tenancy = no_borrow;
      auto rn = Simulate(*cluster, catalog, jobs, **policy, opt);
      if (!rn.ok()) {
        errors[k] = rn.error();
        return;
      }
      std::vector<double> pw, gw;
      for (const SimJobRecord& j : r->job_records) {
        if (!j.in_window) continue;
        const double end = j.first_bind_s >= 0 ? j.first_bind_s : opt.horizon_s;  // unplaced: waited to the end
        if (j.priority >= prod) pw.push_back(end - j.submit_s);
        if (j.within_guarantee)
          gw.push_back((j.guarantee_met_s >= 0 && j.guarantee_met_s < end ? j.guarantee_met_s : end) - j.submit_s);
      }
      prod_p99[k] = NearestRankPercentile(pw, 99);
      guar_p99[k] = NearestRankPercentile(gw, 99);
      // Jain over top-level teams: allocation (sum of its queues) / entitlement.
      std::vector<double> ratio;
      for (const QueueConfig& t : ten->queues) {
        if (!t.parent.empty()) continue;
        double a = 0;
        for (const auto& [team, st] : r->by_team)
          if (team == t.name || team.rfind(t.name + "/", 0) == 0) a += st.allocation * gpus;
        const double ent = t.guaranteed_milli / 1000.0 +
                           (weight_total > 0 ? (gpus - guar_total) * t.over_quota_weight / weight_total : 0);
        ratio.push_back(ent > 0 ? a / ent : 0);
      }
      jain[k] = JainIndex(ratio);
      util[k] = r->gpu_utilization;
      util_nb[k] = rn->gpu_utilization;
      alloc[k] = r->gpu_allocation;
      alloc_nb[k] = rn->gpu_allocation;
      preempt[k] = static_cast<double>(r->preemptions);
      lost_h[k] = r->lost_gpu_s / 3600.0;
      unplaced[k] = static_cast<double>(r->unplaced_jobs);
    };
    ParallelFor(static_cast<size_t>(std::max(0, nseeds)), threads,
                [&](size_t k) { run_seed(static_cast<int>(k)); });
    for (const std::string& e : errors)
      if (!e.empty()) return Status::Error(e);
    auto mean = [](const std::vector<double>& v) {
      double s = 0;
      for (double x : v) s += x;
      return v.empty() ? 0.0 : s / v.size();
    };
    out["policies"].push_back({{"policy", pname},
                               {"production_inference_wait_p99_s", Summary(prod_p99)},
                               {"guarantee_wait_p99_s", Summary(guar_p99)},
                               {"jain_fairness", Summary(jain)},
                               {"gpu_utilization", Summary(util)},
                               {"gpu_utilization_no_borrowing", Summary(util_nb)},
                               {"gpu_allocation", Summary(alloc)},
                               {"gpu_allocation_no_borrowing", Summary(alloc_nb)},
                               {"borrowing_gain_points", 100 * (mean(alloc) - mean(alloc_nb))},
                               {"borrowing_gain_utilization_points", 100 * (mean(util) - mean(util_nb))},
                               {"preemptions", Summary(preempt)},
                               {"lost_gpu_hours", Summary(lost_h)},
                               {"unplaced_jobs_at_end", Summary(unplaced)}});
  }
  return out;
}

}  // namespace tessera
