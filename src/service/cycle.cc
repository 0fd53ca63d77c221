// The control loop: executor events, the scheduling cycle, applying its Plan, publishing the snapshot.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "cost/pricebook.h"
#include "service/service.h"

namespace tessera {
namespace {

std::vector<TaskPlacement> WithoutFlags(std::vector<TaskPlacement> tasks) {
  for (TaskPlacement& t : tasks)
    for (GpuGrant& g : t.gpus) {
      g.create_instance = g.enable_mig = g.disable_mig = false;
      g.destroy_mask = 0;
    }
  return tasks;
}

std::string LayoutText(const ClusterState& s, GpuId g) {
  const GpuState& gs = s.gpu(g);
  std::string out;
  if (!gs.mig_enabled) return out;
  for (int i = 0; i < gs.n_instances; ++i)
    out += fmt::format("{}{}@{}", out.empty() ? "" : ",", s.kind_of_gpu(g).profiles[gs.instances[i].profile].name,
                       static_cast<int>(gs.instances[i].start));
  return out;
}

}  // namespace

void Service::Notify() {
  std::lock_guard<std::mutex> lock(wake_mu_);
  wake_ = true;
  wake_cv_.notify_one();
}

void Service::CycleLoop() {
  using Wall = std::chrono::steady_clock;
  double last_cost_s = 0;
  auto last = Wall::now();
  for (;;) {
    double wait_s = config_.tick_s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const int64_t next = executor_->NextEventS();
      if (next >= 0) wait_s = std::min(wait_s, clock_->WallSecondsUntil(static_cast<double>(next)));
    }
    {
      std::unique_lock<std::mutex> lock(wake_mu_);
      wake_cv_.wait_for(lock, std::chrono::duration<double>(std::max(wait_s, 0.0)), [&] { return wake_ || stop_; });
      if (stop_) return;
      wake_ = false;
    }
    // Event-driven cycles are spaced by at least min_cycle_gap_s and four times the last cycle's cost, so
    // that a burst of submissions is batched into few cycles.
    const double gap = std::min(1.0, std::max(config_.min_cycle_gap_s, 4 * last_cost_s));
    const double since = std::chrono::duration<double>(Wall::now() - last).count();
    if (since < gap) {
      std::unique_lock<std::mutex> lock(wake_mu_);
      if (wake_cv_.wait_for(lock, std::chrono::duration<double>(gap - since), [&] { return stop_; })) return;
    }
    const auto t0 = Wall::now();
    RunOneCycle();
    last = Wall::now();
    last_cost_s = std::chrono::duration<double>(last - t0).count();
    ready_.store(true);
  }
}

void Service::RunCycleNow() { RunOneCycle(); }

std::vector<UsageRecord> Service::UsageOf(const JobRecord& j, int64_t end_s) const {
  std::vector<UsageRecord> out;
  if (j.started_at < 0 || end_s <= j.started_at) return out;
  const Catalog& cat = *config_.catalog;
  for (const TaskPlacement& t : j.placements) {
    const Node& node = config_.cluster.nodes[t.node];
    const GpuKind& kind = cat.kind(node.kind);
    auto list = PriceBook::Default().OnDemandListPrice(kind.id);
    for (const GpuGrant& g : t.gpus) {
      UsageRecord u;
      u.team = j.team;
      u.project = j.project;
      u.queue = config_.tenancy.queues[j.queue].name;
      u.job_id = j.id;
      u.gpu_kind = kind.id;
      u.tier = node.tier;
      u.pool = node.pool;
      u.node = node.name;
      if (g.mig_profile >= 0) {
        u.compute_milli = kind.ProfileComputeMilli(g.mig_profile);
        u.memory_milli = kind.profiles[g.mig_profile].memory_slices * 1000 / std::max(1, kind.mig_memory_slices);
      } else {
        u.compute_milli = u.memory_milli = std::min(g.milli, kMilliPerGpu);
      }
      u.start_s = j.started_at;
      u.end_s = end_s;
      u.list_usd_per_gpu_hour = list.ok() ? *list : 0;
      u.usd_per_gpu_hour = node.price_per_gpu_hour > 0 ? node.price_per_gpu_hour : u.list_usd_per_gpu_hour;
      out.push_back(u);
    }
  }
  return out;
}

void Service::ReleaseLocked(const JobRecord& j) {
  if (j.state != JobState::kRunning) return;
  state_->Release(j.placements, j.request.cpu_milli, j.request.host_memory_mib, j.cls != WorkloadClass::kTraining);
  executor_->Stop(j.id);
  running_.erase(j.id);
}

JobPtr Service::FinishLocked(const JobRecord& j, JobState state, int64_t at, const std::string& message,
                             WriteBatch* b) {
  auto next = std::make_shared<JobRecord>(j);
  next->version = NextVersion();
  next->state = state;
  next->finished_at = at;
  next->message = message;
  if (j.state == JobState::kRunning) {
    for (UsageRecord& u : UsageOf(j, at)) b->usage.push_back(std::move(u));
    ReleaseLocked(j);
  }
  pending_.erase(j.id);
  b->events.push_back({j.id, at, JobStateName(state), message});
  return next;
}

void Service::ApplyPlanLocked(const Plan& plan, int64_t now, WriteBatch* b, std::vector<JobPtr>* changed) {
  auto current = [&](JobId id) -> JobPtr {
    for (auto it = changed->rbegin(); it != changed->rend(); ++it)
      if ((*it)->id == id) return *it;
    return Lookup(id, false);
  };
  for (const Action& a : plan.actions) {
    JobPtr j = current(a.job);
    if (a.kind == ActionKind::kPreempt) {
      if (!j || j->state != JobState::kRunning) continue;
      for (UsageRecord& u : UsageOf(*j, now)) b->usage.push_back(std::move(u));
      ReleaseLocked(*j);
      auto next = std::make_shared<JobRecord>(*j);
      next->version = NextVersion();
      next->state = JobState::kPending;
      next->started_at = -1;
      next->placements.clear();
      next->message = "preempted: " + a.reason;
      pending_.insert(j->id);
      b->events.push_back({j->id, now, "Preempted", a.reason});
      changed->push_back(next);
      counters_.preemptions.fetch_add(1, std::memory_order_relaxed);
    } else if (a.kind == ActionKind::kBind) {
      if (!j || j->state != JobState::kPending) continue;
      const Request& r = j->request;
      if (!state_->CanApply(a.tasks, r.cpu_milli, r.host_memory_mib).ok()) continue;  // changed since the plan
      for (const TaskPlacement& t : a.tasks)
        for (const GpuGrant& g : t.gpus)
          if (g.create_instance || g.enable_mig || g.disable_mig || g.destroy_mask)
            counters_.mig_repartitions.fetch_add(1, std::memory_order_relaxed);
      state_->Apply(a.tasks, r.cpu_milli, r.host_memory_mib, r.cls != WorkloadClass::kTraining);
      auto next = std::make_shared<JobRecord>(*j);
      next->version = NextVersion();
      next->state = JobState::kRunning;
      next->started_at = now;
      next->placements = WithoutFlags(a.tasks);
      next->message.clear();
      for (const TaskPlacement& t : a.tasks)
        for (const GpuGrant& g : t.gpus)
          if (g.mig_profile >= 0 || g.disable_mig) {
            const NodeState& ns = state_->node(t.node);
            b->layouts.push_back({config_.cluster.nodes[t.node].name, g.gpu - ns.first_gpu, LayoutText(*state_, g.gpu)});
          }
      executor_->Start(j->id, now, j->duration_s);
      pending_.erase(j->id);
      running_.insert(j->id);
      b->events.push_back({j->id, now, "Started", a.reason});
      changed->push_back(next);
      counters_.placements.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

void Service::RunOneCycle() {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t now = Now();
  CycleInput in;
  std::unique_ptr<ClusterState> working;
  std::vector<JobPtr> changed;
  WriteBatch b;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const ExecutorEvent& e : executor_->Poll(now)) {
      JobPtr j = Lookup(e.job, false);
      if (!j || j->state != JobState::kRunning) continue;
      const JobState st = e.failed ? JobState::kFailed : JobState::kSucceeded;
      changed.push_back(FinishLocked(*j, st, e.at, e.failed ? e.message : "completed", &b));
      counters_.finished.fetch_add(1, std::memory_order_relaxed);
      if (e.failed) counters_.failed.fetch_add(1, std::memory_order_relaxed);
    }
    if (!changed.empty()) PutLocked(changed, std::move(b), nullptr);
    changed.clear();
    b = WriteBatch();
    working = std::make_unique<ClusterState>(*state_);
    in.snapshot = working.get();
    in.queues = config_.tenancy.queues;
    in.options = config_.tenancy.options;
    in.now_s = now;
    historical_usage_.resize(in.queues.size(), 0.0);
    in.historical_usage = historical_usage_;
    in.pending.reserve(pending_.size());
    for (int64_t id : pending_) {
      const JobRecord& j = *jobs_[id - 1].current;
      PendingJob p{j.request, j.queue, j.submitted_at, j.submitted_at, false, j.duration_s};
      if (j.duration_s > 0) p.request.expected_end_s = now + j.duration_s;
      in.pending.push_back(std::move(p));
    }
    for (int64_t id : running_) {
      const JobRecord& j = *jobs_[id - 1].current;
      RunningJob r;
      r.id = id;
      r.queue = j.queue;
      r.priority = j.request.priority;
      const PriorityClass* pc = config_.tenancy.FindClass(j.priority_class);
      r.preemptible = pc == nullptr || pc->preemptible;
      r.cls = j.cls;
      r.tasks = j.placements;
      r.cpu_milli = j.request.cpu_milli;
      r.host_memory_mib = j.request.host_memory_mib;
      r.gpu_milli = UnitsOf(*working, j.placements, in.options.slice_units);
      r.start_time_s = j.started_at;
      r.expected_end_s = j.duration_s > 0 ? j.started_at + j.duration_s : -1;
      in.running.push_back(std::move(r));
    }
  }
  Plan plan = scheduler_.Decide(in);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ApplyPlanLocked(plan, now, &b, &changed);
    // Decayed historical usage per queue (GPU-milli-seconds), for the fair-share order of later cycles.
    const double dt = static_cast<double>(std::max<int64_t>(0, now - last_cycle_at_));
    for (size_t q = 0; q < plan.queues.size() && q < historical_usage_.size(); ++q)
      historical_usage_[q] = DecayUsage(historical_usage_[q], dt, in.options.usage_half_life_s,
                                        static_cast<double>(plan.queues[q].allocated_milli) * dt);
    last_cycle_at_ = now;
    if (!changed.empty() || ++cycle_seq_ % 16 == 0) {
      b.meta["clock_s"] = std::to_string(now);
      PutLocked(changed, std::move(b), nullptr);
    }
    PublishLocked(&plan, now);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  counters_.cycles.fetch_add(1, std::memory_order_relaxed);
  counters_.cycle_sum_us.fetch_add(static_cast<uint64_t>(s * 1e6), std::memory_order_relaxed);
  int bucket = 0;
  while (bucket < Counters::kNumBuckets && s > Counters::kCycleBuckets[bucket]) ++bucket;
  counters_.cycle_bucket[bucket].fetch_add(1, std::memory_order_relaxed);
}

void Service::PublishLocked(const Plan* plan, int64_t now) {
  auto snap = std::make_shared<Snapshot>();
  snap->at = now;
  snap->cycle = cycle_seq_;
  snap->cluster = std::make_shared<ClusterState>(*state_);
  for (const QueueConfig& q : config_.tenancy.queues) snap->queue_names.push_back(q.name);
  if (plan != nullptr) {
    snap->queues = plan->queues;
    std::vector<const PendingStatus*> order;
    for (const PendingStatus& p : plan->pending) {
      JobPtr j = Lookup(p.job, false);
      if (!j || j->state != JobState::kPending) continue;
      snap->pending[p.job] = PendingInfo{p.team_position, p.pool_position, p.code, p.message, p.estimated_start_s};
      order.push_back(&p);
    }
    std::sort(order.begin(), order.end(),
              [](const PendingStatus* a, const PendingStatus* b) { return a->pool_position < b->pool_position; });
    for (const PendingStatus* p : order) snap->queue.push_back({Lookup(p->job, false), snap->pending[p->job]});
  } else if (auto old = snapshot()) {
    snap->queues = old->queues;
  }
  std::lock_guard<std::mutex> lock(snap_mu_);
  snapshot_ = std::move(snap);
}

}  // namespace tessera
