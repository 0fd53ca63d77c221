#include "sim/spot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <queue>
#include <set>

#include "base/file.h"
#include "base/yaml_reader.h"
#include "cost/checkpoint.h"
#include "sched/cluster_state.h"
#include "sched/cycle.h"
#include "sim/autoscale.h"
#include "sim/generator.h"
#include "sim/ledger_bridge.h"
#include "sim/metrics.h"
#include "sim/tier_routing.h"

namespace tessera {
namespace {

constexpr int64_t kMaxDelayS = int64_t{1} << 40;

// The settings of `tiers:` other than pools and reclaims.
Status ReadTierSettings(FieldReader& t, const std::string& dir, TierConfig* c, int64_t* idle_release_s) {
  std::string prices;
  t.String("prices", &prices, false);
  if (!t.ok()) return t.status();
  if (!prices.empty()) {
    std::string path = prices;
    if (path[0] != '/' && !dir.empty()) path = (std::filesystem::path(dir) / prices).lexically_normal().string();
    Result<std::string> text = ReadFile(path);
    if (!text.ok()) return Status::Error(fmt::format("{}: {}", t.Where("prices"), text.error()));
    if (Status st = c->book.Merge(*text, path); !st.ok()) return st;
  }
  FieldReader k(t.Child("checkpoint"), t.source(), t.PathOf("checkpoint"), /*absent_ok=*/true);
  k.Double("cost_s", &c->checkpoint_cost_s, false, 0, 1e9);
  k.Double("restart_s", &c->restart_cost_s, false, 0, 1e9);
  k.Double("interval_s", &c->checkpoint_interval_s, false, 0, 1e9);
  k.Bool("periodic_when_notice_covers", &c->periodic_when_notice_covers);
  if (Status st = k.Finish(); !st.ok()) return st;
  FieldReader r(t.Child("routing"), t.source(), t.PathOf("routing"), true);
  r.Bool("non_checkpointable_on_spot", &c->non_checkpointable_on_spot);
  if (Status st = r.Finish(); !st.ok()) return st;
  FieldReader a(t.Child("autoscale"), t.source(), t.PathOf("autoscale"), true);
  std::string policy = "queue";
  a.Choice("policy", &policy, false, {"queue", "none"});
  c->autoscale = policy == "queue";
  a.Int("idle_release_s", idle_release_s, false, 0, kMaxDelayS);
  if (Status st = a.Finish(); !st.ok()) return st;
  FieldReader co(t.Child("cost"), t.source(), t.PathOf("cost"), true);
  co.Bool("baselines", &c->baselines);
  co.Double("inference_slo_p99_wait_s", &c->inference_slo_p99_wait_s, false, 0, 1e9);
  std::string ip = "none";
  co.String("idle_policy", &ip, false);
  if (co.ok()) {
    auto p = ParseIdlePolicy(ip);
    if (p.ok()) c->cost.idle_policy = *p;
    else co.Fail("idle_policy", p.error());
  }
  return co.Finish();
}

Status ReadPoolOverrides(const YAML::Node& ps, std::string_view source, const std::string& path,
                         const std::map<std::string, size_t>& index, TierConfig* c) {
  for (auto it = ps.begin(); it != ps.end(); ++it) {
    auto name = YamlString(it->first, source, path);
    if (!name.ok()) return name.status();
    const std::string w = path + "." + *name;
    auto f = index.find(*name);
    if (f == index.end())
      return Status::Error(YamlWhere(source, it->first, w) + ": no node of the cluster is in this pool");
    TierPoolConfig& p = c->pools[f->second];
    FieldReader r(it->second, source, w);
    r.Bool("elastic", &p.elastic);
    r.Int("provisioning_delay_s", &p.provisioning_delay_s, false, 0, kMaxDelayS);
    r.Int("reclaim_notice_s", &p.reclaim_notice_s, false, 0, kMaxDelayS);
    r.Double("reclaim_rate_per_hour", &p.reclaim_rate_per_hour, false, 0, 1e6);
    r.Int("idle_release_s", &p.idle_release_s, false, 0, kMaxDelayS);
    if (r.ok() && p.reclaim_rate_per_hour > 0 && p.tier != Tier::kSpot)
      r.Fail("reclaim_rate_per_hour", "only spot pools are reclaimed");
    if (r.ok() && p.elastic && (p.tier == Tier::kReserved || p.tier == Tier::kOwned))
      r.Fail("elastic", "reserved and owned pools are not elastic");
    if (Status st = r.Finish(); !st.ok()) return st;
  }
  return Status::Ok();
}

Status ReadReclaims(const YAML::Node& rs, std::string_view source, const std::string& path,
                    const std::map<std::string, size_t>& index, TierConfig* c) {
  for (size_t i = 0; i < rs.size(); ++i) {
    FieldReader r(rs[i], source, fmt::format("{}[{}]", path, i));
    double at_h = -1;
    ReclaimTraceEvent e;
    r.Double("at_h", &at_h, true, 0, 1e6);
    r.String("pool", &e.pool, true);
    if (r.ok()) {
      auto f = index.find(e.pool);
      if (f == index.end() || c->pools[f->second].tier != Tier::kSpot)
        r.Fail("pool", fmt::format("'{}' is not a spot pool of the cluster", e.pool));
    }
    if (Status st = r.Finish(); !st.ok()) return st;
    e.time_s = static_cast<int64_t>(std::llround(at_h * 3600));
    c->reclaim_trace.push_back(e);
  }
  return Status::Ok();
}

}  // namespace

Result<TierConfig> ParseTierConfig(const YAML::Node& n, const std::string& source, const std::string& dir,
                                   const Cluster& cluster) {
  FieldReader t(n, source, "tiers");
  TierConfig c;
  int64_t idle_release_s = 600;
  const YAML::Node ps = t.Map("pools");
  const YAML::Node rs = t.Seq("reclaims");
  if (Status st = ReadTierSettings(t, dir, &c, &idle_release_s); !st.ok()) return st;
  if (Status st = t.Finish(); !st.ok()) return st;
  const std::string where = YamlWhere(source, n, "tiers");
  // Pools: every distinct node pool, defaults from the price book, then the scenario's overrides.
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < cluster.nodes.size(); ++i) {
    const Node& node = cluster.nodes[i];
    if (node.gpu_count == 0) continue;
    auto [it, fresh] = index.emplace(node.pool, c.pools.size());
    if (fresh) {
      const Pool* bp = c.book.FindPool(node.pool);
      if (!bp)
        return Status::Error(fmt::format("{}: node {}: pool '{}' is not in the price book (add it under 'prices:')",
                                         where, node.name, node.pool));
      if (bp->tier != node.tier)
        return Status::Error(fmt::format("{}: node {}: tier {} differs from pool '{}' tier {}", where, node.name,
                                         TierName(node.tier), node.pool, TierName(bp->tier)));
      TierPoolConfig p;
      p.pool = node.pool;
      p.tier = node.tier;
      p.elastic = node.tier == Tier::kOnDemand || node.tier == Tier::kSpot;
      p.provisioning_delay_s = static_cast<int64_t>(std::llround(bp->provisioning_delay_s));
      p.reclaim_notice_s = static_cast<int64_t>(std::llround(bp->reclaim_notice_s));
      p.reclaim_rate_per_hour = node.tier == Tier::kSpot ? bp->reclaim_rate_per_hour : 0;
      p.idle_release_s = idle_release_s;
      c.pools.push_back(p);
    } else if (c.pools[it->second].tier != node.tier) {
      return Status::Error(fmt::format("{}: node {}: pool '{}' mixes tiers", where, node.name, node.pool));
    }
    c.pools[it->second].nodes.push_back(static_cast<NodeId>(i));
    if (node.price_per_gpu_hour > 0)  // would be ignored: a tiered run prices every node from the price book
      return Status::Error(fmt::format("{}: node {}: price_per_gpu_hour {:g} in the cluster file is not used by a "
                                       "tiered scenario (the price comes from the price book, pool '{}'); remove it",
                                       where, node.name, node.price_per_gpu_hour, node.pool));
  }
  if (ps.IsDefined())
    if (Status st = ReadPoolOverrides(ps, source, t.PathOf("pools"), index, &c); !st.ok()) return st;
  if (rs.IsDefined())
    if (Status st = ReadReclaims(rs, source, t.PathOf("reclaims"), index, &c); !st.ok()) return st;
  return c;
}

namespace {

enum class Ev : uint8_t { kReady, kNotice, kReclaim, kIdle, kCheckpoint, kTraceNotice };

struct HookEvent {
  int64_t t = 0;
  Ev type = Ev::kReady;
  int32_t id = 0;        // node, job, or reclaim-trace index
  uint32_t epoch = 0;
  uint64_t seq = 0;
  bool operator>(const HookEvent& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

struct JobTrack {
  RouteClass route = RouteClass::kLatencySensitive;
  std::vector<TaskPlacement> tasks;
  int64_t bind_s = -1;
  double factor = 1;         // progress factor of the current run (checkpoint overhead)
  int64_t interval_s = 0;    // periodic checkpoint period (work + write), 0 = none
  uint32_t run_epoch = 0;
  bool ran_before = false;   // resumes pay the restart cost
  bool reclaimed = false;    // the current hold ends by a spot reclaim
};

class TierHook : public SimHook {
 public:
  TierHook(std::shared_ptr<const TierConfig> cfg, const Cluster& cluster, const Catalog& catalog,
           const std::vector<TraceJob>& jobs, uint64_t seed)
      : cfg_(std::move(cfg)), cluster_(cluster), catalog_(catalog), jobs_(jobs), bridge_(cluster, catalog) {
    std::vector<ElasticPoolSpec> specs;
    pool_of_node_.assign(cluster.nodes.size(), -1);
    for (size_t p = 0; p < cfg_->pools.size(); ++p) {
      const TierPoolConfig& pc = cfg_->pools[p];
      for (NodeId n : pc.nodes) pool_of_node_[n] = static_cast<int>(p);
      if (!pc.elastic) continue;
      elastic_index_[static_cast<int>(p)] = static_cast<int>(specs.size());
      specs.push_back({pc.pool, pc.tier, pc.nodes, pc.provisioning_delay_s, pc.idle_release_s});
      config_of_elastic_.push_back(static_cast<int>(p));
    }
    scaler_ = std::make_unique<Autoscaler>(std::move(specs), static_cast<int>(cluster.nodes.size()));
    // Elastic pools to acquire from, per route: spot pools first for checkpointable training, then on-demand.
    for (int e = 0; e < static_cast<int>(config_of_elastic_.size()); ++e) {
      const Tier t = cfg_->pools[config_of_elastic_[e]].tier;
      if (t == Tier::kSpot) spot_elastic_.push_back(e);
      if (t == Tier::kOnDemand) od_elastic_.push_back(e);
    }
    for (size_t p = 0; p < cfg_->pools.size(); ++p)
      rngs_.emplace_back(seed * 0x9E3779B97F4A7C15ull + 7919ull * (p + 1));
    track_.resize(jobs.size());
    std::vector<RouteClass> routes(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      const TraceJob& j = jobs[i];
      routes[i] = j.cls != WorkloadClass::kTraining ? RouteClass::kLatencySensitive
                  : j.checkpointable              ? RouteClass::kCheckpointable
                                                  : RouteClass::kOther;
      track_[i].route = routes[i];
      if (j.cls == WorkloadClass::kTraining) ++training_jobs_;
    }
    routes_ = std::move(routes);
    node_jobs_.assign(cluster.nodes.size(), 0);
    node_epoch_.assign(cluster.nodes.size(), 0);
    cap_start_.assign(cluster.nodes.size(), -1);
    trace_node_.assign(cfg_->reclaim_trace.size(), kNone);
  }

  const Policy& Route(const Policy& inner) override {
    routing_ = std::make_unique<TierRoutingPolicy>(inner, routes_, cfg_->non_checkpointable_on_spot,
                                                   cfg_->latency_sensitive_on_demand);
    return *routing_;
  }

  Status Begin(ClusterState& state) override {
    if (Status st = scaler_->Begin(state); !st.ok()) return st;
    for (size_t n = 0; n < cluster_.nodes.size(); ++n)
      if (pool_of_node_[n] >= 0 && scaler_->phase(static_cast<NodeId>(n)) == NodePhase::kStatic) cap_start_[n] = 0;
    for (size_t i = 0; i < cfg_->reclaim_trace.size(); ++i) {
      const ReclaimTraceEvent& e = cfg_->reclaim_trace[i];
      const int64_t notice = cfg_->pools[PoolIndex(e.pool)].reclaim_notice_s;
      Push(std::max<int64_t>(0, e.time_s - notice), Ev::kTraceNotice, static_cast<int32_t>(i), 0);
    }
    return Status::Ok();
  }

  int64_t NextTimeS() const override {
    while (!events_.empty() && Stale(events_.top())) events_.pop();
    return events_.empty() ? INT64_MAX : events_.top().t;
  }

  void OnTime(int64_t now, ClusterState& state, Plan* plan, bool* changed) override {
    // Nodes reclaimed in the previous call: their jobs have been preempted by now.
    for (NodeId n : to_remove_) {
      if (node_jobs_[n] != 0) continue;  // cannot happen: every job on it was preempted
      Remove(n, now, state);
    }
    to_remove_.clear();
    while (!events_.empty() && events_.top().t <= now) {
      const HookEvent e = events_.top();
      events_.pop();
      if (Stale(e)) continue;
      switch (e.type) {
        case Ev::kReady:
          OnReady(e.id, now, state, changed);
          break;
        case Ev::kNotice:
          Notice(e.id, now, state, plan);
          Push(reclaim_at_[e.id], Ev::kReclaim, e.id, node_epoch_[e.id]);
          break;
        case Ev::kTraceNotice:
          OnTraceNotice(e.id, now, state, plan);
          break;
        case Ev::kReclaim:
          OnReclaim(e.id, now, state, plan);
          break;
        case Ev::kIdle:
          if (scaler_->phase(e.id) == NodePhase::kUp && node_jobs_[e.id] == 0 &&
              now - last_busy_[e.id] >= PoolOf(e.id).idle_release_s)
            Remove(e.id, now, state);
          break;
        case Ev::kCheckpoint:
          OnCheckpoint(e, now, plan);
          break;
      }
    }
  }

  void AfterCycles(int64_t now, ClusterState& state, const std::vector<JobSlot>& pending) override {
    if (!cfg_->autoscale || pending.empty()) return;
    std::vector<ElasticDemand> demand;
    for (JobSlot slot : pending) {
      const int32_t idx = slot.value();  // its trace index
      const JobTrack& jt = track_[idx];
      if (jt.route == RouteClass::kLatencySensitive && !cfg_->latency_sensitive_on_demand) continue;
      ElasticDemand d;
      const TraceJob& j = jobs_[idx];
      d.gpus_per_task = j.gpus_per_task == 0 ? 1 : j.gpus_per_task;
      d.tasks = j.tasks;
      for (const std::string& k : j.gpu_kinds) {
        const KindId id = catalog_.Find(k);
        if (id != kNone && id < 64) d.kind_mask |= uint64_t{1} << id;
      }
      if (jt.route == RouteClass::kCheckpointable) d.pools = spot_elastic_;
      d.pools.insert(d.pools.end(), od_elastic_.begin(), od_elastic_.end());
      if (jt.route == RouteClass::kOther && cfg_->non_checkpointable_on_spot)
        d.pools.insert(d.pools.end(), spot_elastic_.begin(), spot_elastic_.end());
      if (!d.pools.empty()) demand.push_back(std::move(d));
    }
    for (const auto& [pool, count] : scaler_->PlanAcquisitions(demand, state))
      for (int k = 0; k < count; ++k) {
        const NodeId n = scaler_->Acquire(pool, now);
        if (n == kNone) break;
        cap_start_[n] = now;
        Push(scaler_->ready_at(n), Ev::kReady, n, node_epoch_[n]);
      }
  }

  int64_t OnBind(JobSlot slot, const std::vector<TaskPlacement>& tasks, int64_t now) override {
    JobTrack& jt = track_[slot.value()];
    jt.tasks = tasks;
    jt.bind_s = now;
    jt.reclaimed = false;
    std::set<NodeId> nodes;
    for (const TaskPlacement& t : tasks) nodes.insert(t.node);
    for (NodeId n : nodes) {
      ++node_jobs_[n];
      last_busy_[n] = now;
      if (jt.route == RouteClass::kLatencySensitive) {
        const Tier tier = cluster_.nodes[n].tier;
        if (tier == Tier::kSpot) ++inference_on_spot_;
        if (tier != Tier::kReserved && tier != Tier::kOwned) ++inference_off_stable_;
      }
    }
    return jt.ran_before ? static_cast<int64_t>(std::llround(cfg_->restart_cost_s)) : 0;
  }

  double OnRun(JobSlot slot, int64_t now) override {
    const int32_t job = slot.value();  // its trace index
    JobTrack& jt = track_[job];
    jt.ran_before = true;
    ++jt.run_epoch;
    jt.factor = 1;
    jt.interval_s = 0;
    if (jobs_[job].checkpointable && jobs_[job].cls == WorkloadClass::kTraining) {
      std::set<NodeId> nodes;
      for (const TaskPlacement& t : jt.tasks) nodes.insert(t.node);
      std::vector<NodeReclaim> reclaims;
      for (NodeId n : nodes)
        if (pool_of_node_[n] >= 0)
          reclaims.push_back({PoolOf(n).reclaim_rate_per_hour, static_cast<double>(PoolOf(n).reclaim_notice_s)});
      const double c = cfg_->checkpoint_cost_s;
      const double rate = GangLossRatePerHour(reclaims, c, cfg_->periodic_when_notice_covers);
      const double work = cfg_->checkpoint_interval_s > 0 ? cfg_->checkpoint_interval_s
                                                          : YoungDalyIntervalForRateS(c, rate);
      if (std::isfinite(work) && work > 0) {
        jt.factor = work / (work + c);
        jt.interval_s = std::max<int64_t>(1, std::llround(work + c));
        Push(now + jt.interval_s, Ev::kCheckpoint, job, jt.run_epoch);
      }
    }
    return jt.factor;
  }

  void OnRelease(JobSlot slot, int64_t now, bool completed, int64_t start_s, int64_t last_ckpt) override {
    const int32_t job = slot.value();  // its trace index
    JobTrack& jt = track_[job];
    if (jt.bind_s < 0) return;
    const TraceJob& spec = jobs_[job];
    // Seconds of the hold that were not useful work.
    HoldLoss loss;
    loss.restart_s = (start_s >= 0 ? start_s : now) - jt.bind_s;  // restart / repartition wait
    if (start_s >= 0) {
      const double run = static_cast<double>(now - start_s);
      if (completed || spec.duration_s < 0) {
        loss.checkpoint_s = std::llround(run * (1 - jt.factor));
      } else if (spec.checkpointable && last_ckpt >= start_s) {
        loss.checkpoint_s = std::llround((last_ckpt - start_s) * (1 - jt.factor));
        loss.discarded_s = now - last_ckpt;
        discarded_s_ += static_cast<double>(now - last_ckpt) * GpuCount(jt.tasks);
      } else {
        loss.discarded_s = now - start_s;
        discarded_s_ += run * GpuCount(jt.tasks);
      }
    }
    if (Status st = bridge_.AddHold(job, spec, jt.tasks, jt.bind_s, now, loss); !st.ok() && error_.empty())
      error_ = st.message();
    std::set<NodeId> nodes;
    for (const TaskPlacement& t : jt.tasks) nodes.insert(t.node);
    for (NodeId n : nodes) {
      --node_jobs_[n];
      last_busy_[n] = now;
      if (node_jobs_[n] == 0 && scaler_->pool_of(n) >= 0 && scaler_->phase(n) == NodePhase::kUp)
        Push(now + PoolOf(n).idle_release_s, Ev::kIdle, n, node_epoch_[n]);
    }
    if (completed && spec.cls == WorkloadClass::kTraining) ++training_completed_;
    jt.tasks.clear();
    jt.bind_s = -1;
    ++jt.run_epoch;
  }

  void End(int64_t end, RunResult* res) override {
    for (size_t n = 0; n < cluster_.nodes.size(); ++n)
      if (cap_start_[n] >= 0) AddCapacity(static_cast<NodeId>(n), end);
    auto& x = res->extra;
    CostModel model(cfg_->book, cfg_->cost);
    Result<CostReport> rep = model.Evaluate(bridge_.ledger());
    if (!rep.ok() && error_.empty()) error_ = rep.error();
    if (rep.ok()) {
      if (Status st = bridge_.Reconcile(*rep); !st.ok() && error_.empty()) error_ = st.message();
      x["total_cost"] = rep->total_cost;
      // Useful work at list prices (the former priced baseline); the simulated baselines are
      // sim/cost_baselines.h.
      x["useful_work_at_list_cost"] = rep->on_demand_only_cost;
      const CostBreakdown b = bridge_.Breakdown(*rep);
      if (std::abs(b.Total() - rep->total_cost) > 1e-6 * std::max(1.0, rep->total_cost) && error_.empty())
        error_ = fmt::format("cost breakdown {} != total {}", b.Total(), rep->total_cost);
      x["cost_breakdown.useful_at_list"] = b.useful_at_list;
      x["cost_breakdown.discount_committed"] = b.discount_committed;
      x["cost_breakdown.discount_spot"] = b.discount_spot;
      x["cost_breakdown.discount_on_demand"] = b.discount_on_demand;
      x["cost_breakdown.checkpoints"] = b.checkpoints;
      x["cost_breakdown.lost_work"] = b.lost_work;
      x["cost_breakdown.restarts"] = b.restarts;
      x["cost_breakdown.paid_idle"] = b.paid_idle;
      x["cost_breakdown.rounding"] = b.rounding;
      x["cost_per_useful_gpu_hour"] = rep->cost_per_useful_gpu_hour;
      x["idle_cost"] = rep->idle_cost;
      x["capacity_gpu_hours"] = rep->capacity_gpu_hours;
      x["useful_gpu_hours"] = rep->useful_gpu_hours;
      x["lost_gpu_hours"] = rep->allocated_gpu_hours - rep->useful_gpu_hours;
      for (const CostLine& l : rep->by_tier) {
        std::string key = l.key;
        std::replace(key.begin(), key.end(), '-', '_');
        x["cost_" + key] = l.TotalUsd();
        x["gpu_hours_" + key] = l.GpuHours();
      }
      for (const PoolLine& p : rep->pools) {
        std::string key = TierName(p.tier);
        std::replace(key.begin(), key.end(), '-', '_');
        x["idle_cost_" + key] += p.idle_usd;
      }
    }
    x["ledger_reconciled"] = error_.empty() ? 1 : 0;
    x["spot_reclaims"] = static_cast<double>(reclaims_);
    x["spot_reclaim_preemptions"] = static_cast<double>(reclaim_preemptions_);
    x["checkpoints_on_notice"] = static_cast<double>(notice_checkpoints_);
    x["checkpoints_periodic"] = static_cast<double>(periodic_checkpoints_);
    x["reclaim_discarded_gpu_hours"] = discarded_s_ / 3600.0;
    x["node_acquisitions"] = static_cast<double>(scaler_->acquisitions());
    x["inference_replicas_on_spot"] = static_cast<double>(inference_on_spot_);
    x["inference_replicas_off_reserved"] = static_cast<double>(inference_off_stable_);
    x["training_jobs"] = static_cast<double>(training_jobs_);
    x["training_jobs_completed"] = static_cast<double>(training_completed_);
    x["all_training_completed"] = training_completed_ == training_jobs_ ? 1 : 0;
    if (!cfg_->reclaim_trace.empty()) x["trace_reclaims_missed"] = static_cast<double>(trace_reclaims_missed_);
    auto inf = res->by_class.find("inference");
    const std::vector<double> none;
    const std::vector<double>& d = inf == res->by_class.end() ? none : inf->second.queue_delays_s;
    double sum = 0;
    for (double v : d) sum += v;
    x["inference_queue_delay_mean_s"] = d.empty() ? 0 : sum / d.size();
    x["inference_queue_delay_p50_s"] = Percentile(d, 0.5);
    x["inference_queue_delay_p99_s"] = Percentile(d, 0.99);
    ledger_ = bridge_.ledger();
    if (!error_.empty()) res->extra["ledger_error"] = 1;
  }

  // For tests.
  const std::string& error() const { return error_; }

 private:
  const TierPoolConfig& PoolOf(NodeId n) const { return cfg_->pools[pool_of_node_[n]]; }
  int PoolIndex(const std::string& name) const {
    for (size_t p = 0; p < cfg_->pools.size(); ++p)
      if (cfg_->pools[p].pool == name) return static_cast<int>(p);
    return 0;
  }
  static int GpuCount(const std::vector<TaskPlacement>& tasks) {
    int g = 0;
    for (const TaskPlacement& t : tasks) g += static_cast<int>(t.gpus.size());
    return g;
  }
  void Push(int64_t t, Ev type, int32_t id, uint32_t epoch) { events_.push({t, type, id, epoch, seq_++}); }
  bool Stale(const HookEvent& e) const {
    switch (e.type) {
      case Ev::kCheckpoint: return track_[e.id].run_epoch != e.epoch || track_[e.id].bind_s < 0;
      case Ev::kTraceNotice: return false;
      default: return node_epoch_[e.id] != e.epoch;
    }
  }
  void Notice(NodeId n, int64_t now, ClusterState& state, Plan* plan) {
    if (scaler_->phase(n) != NodePhase::kUp) return;
    scaler_->Drain(n, state);
    const TierPoolConfig& pc = PoolOf(n);
    if (static_cast<double>(pc.reclaim_notice_s) < cfg_->checkpoint_cost_s) return;  // too short to save
    for (size_t j = 0; j < track_.size(); ++j) {
      if (track_[j].bind_s < 0 || !jobs_[j].checkpointable) continue;
      bool on = false;
      for (const TaskPlacement& t : track_[j].tasks) on = on || t.node == n;
      if (!on) continue;
      Action a;
      a.kind = ActionKind::kCheckpoint;
      a.job = EngineId(JobSlot(static_cast<int32_t>(j)));
      a.reason = "spot reclaim notice";
      plan->actions.push_back(a);
      ++notice_checkpoints_;
    }
  }
  // Node n came up: it may go idle, and a spot node draws its reclaim time (notice first).
  void OnReady(NodeId n, int64_t now, ClusterState& state, bool* changed) {
    scaler_->MakeReady(n, state);
    *changed = true;
    const TierPoolConfig& pc = PoolOf(n);
    Push(now + pc.idle_release_s, Ev::kIdle, n, node_epoch_[n]);
    if (pc.tier == Tier::kSpot && pc.reclaim_rate_per_hour > 0) {
      const double mean_s = 3600.0 / pc.reclaim_rate_per_hour;
      const int64_t at =
          now + std::max<int64_t>(1, std::llround(rngs_[pool_of_node_[n]].Exponential(mean_s)));
      Push(std::max(now, at - pc.reclaim_notice_s), Ev::kNotice, n, node_epoch_[n]);
      reclaim_at_[n] = at;
    }
  }
  // Reclaim-trace event `index`: notice to the pool's longest-up node (none up: the event finds nothing to
  // take and counts as missed), reclaimed at the event's time.
  void OnTraceNotice(int32_t index, int64_t now, ClusterState& state, Plan* plan) {
    const ReclaimTraceEvent& r = cfg_->reclaim_trace[index];
    NodeId pick = kNone;
    for (NodeId n : cfg_->pools[PoolIndex(r.pool)].nodes)
      if (scaler_->phase(n) == NodePhase::kUp &&
          (pick == kNone || scaler_->ready_at(n) < scaler_->ready_at(pick)))
        pick = n;
    if (pick == kNone) {
      ++trace_reclaims_missed_;
      return;
    }
    Notice(pick, now, state, plan);
    Push(std::max(now, r.time_s), Ev::kReclaim, pick, node_epoch_[pick]);
  }
  // Node n is reclaimed (if up or draining): its jobs are preempted, and it goes once they are gone.
  void OnReclaim(NodeId n, int64_t now, ClusterState& state, Plan* plan) {
    const NodePhase ph = scaler_->phase(n);
    if (ph != NodePhase::kUp && ph != NodePhase::kDraining) return;
    ++reclaims_;
    std::set<int32_t> victims;
    for (size_t j = 0; j < track_.size(); ++j)
      if (track_[j].bind_s >= 0)
        for (const TaskPlacement& t : track_[j].tasks)
          if (t.node == n) victims.insert(static_cast<int32_t>(j));
    for (int32_t j : victims) {
      Action a;
      a.kind = ActionKind::kPreempt;
      a.job = EngineId(JobSlot(j));
      a.reason = fmt::format("spot reclaim of node {}", cluster_.nodes[n].name);
      plan->actions.push_back(a);
      track_[j].reclaimed = true;
      ++reclaim_preemptions_;
    }
    if (victims.empty())
      Remove(n, now, state);
    else
      to_remove_.push_back(n);
  }
  // A periodic checkpoint of job e.id, if still running the same run; the next one is scheduled.
  void OnCheckpoint(const HookEvent& e, int64_t now, Plan* plan) {
    JobTrack& jt = track_[e.id];
    if (jt.bind_s < 0 || jt.run_epoch != e.epoch || jt.interval_s <= 0) return;
    Action a;
    a.kind = ActionKind::kCheckpoint;
    a.job = EngineId(JobSlot(e.id));
    a.reason = "periodic checkpoint";
    plan->actions.push_back(a);
    ++periodic_checkpoints_;
    Push(now + jt.interval_s, Ev::kCheckpoint, e.id, jt.run_epoch);
  }
  void AddCapacity(NodeId n, int64_t end) {
    if (Status st = bridge_.AddNodeCapacity(n, cap_start_[n], end); !st.ok() && error_.empty()) error_ = st.message();
    cap_start_[n] = -1;
  }
  void Remove(NodeId n, int64_t now, ClusterState& state) {
    scaler_->MakeAbsent(n, state);
    ++node_epoch_[n];
    if (cap_start_[n] >= 0) AddCapacity(n, now);
  }

  std::shared_ptr<const TierConfig> cfg_;
  const Cluster& cluster_;
  const Catalog& catalog_;
  const std::vector<TraceJob>& jobs_;
  LedgerBridge bridge_;
  std::unique_ptr<Autoscaler> scaler_;
  std::unique_ptr<TierRoutingPolicy> routing_;
  std::vector<RouteClass> routes_;
  std::map<int, int> elastic_index_;      // config pool -> autoscaler pool
  std::vector<int> config_of_elastic_;    // autoscaler pool -> config pool
  std::vector<int> spot_elastic_, od_elastic_;
  std::vector<int> pool_of_node_;
  std::vector<Rng> rngs_;
  std::vector<JobTrack> track_;
  std::vector<int> node_jobs_;
  std::vector<uint32_t> node_epoch_;
  std::vector<int64_t> cap_start_;
  std::map<NodeId, int64_t> last_busy_;
  std::map<NodeId, int64_t> reclaim_at_;
  std::vector<NodeId> trace_node_;
  std::vector<NodeId> to_remove_;
  mutable std::priority_queue<HookEvent, std::vector<HookEvent>, std::greater<HookEvent>> events_;
  uint64_t seq_ = 0;
  int64_t reclaims_ = 0, reclaim_preemptions_ = 0, notice_checkpoints_ = 0, periodic_checkpoints_ = 0;
  int64_t inference_on_spot_ = 0, inference_off_stable_ = 0;
  int64_t training_jobs_ = 0, training_completed_ = 0, trace_reclaims_missed_ = 0;
  double discarded_s_ = 0;
  std::string error_;
  Ledger ledger_;
};

}  // namespace

std::unique_ptr<SimHook> MakeTierHook(std::shared_ptr<const TierConfig> config, const Cluster& cluster,
                                      const Catalog& catalog, const std::vector<TraceJob>& jobs, uint64_t seed) {
  return std::make_unique<TierHook>(std::move(config), cluster, catalog, jobs, seed);
}

}  // namespace tessera
