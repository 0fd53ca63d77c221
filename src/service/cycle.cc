// The control loop: executor events, the scheduling cycle, applying its Plan, publishing the snapshot.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>

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
    const double gap = std::min(1.0, std::max(config_.min_cycle_gap_s, 8 * last_cost_s));
    const double since = std::chrono::duration<double>(Wall::now() - last).count();
    if (since < gap) {
      std::unique_lock<std::mutex> lock(wake_mu_);
      if (wake_cv_.wait_for(lock, std::chrono::duration<double>(gap - since), [&] { return stop_; })) return;
    }
    const auto t0 = Wall::now();
    RunOneCycle();
    last = Wall::now();
    last_cost_s = std::chrono::duration<double>(last - t0).count();
  }
}

void Service::RunCycleNow() {
  RunOneCycle();
  // Batches commit (and their effects apply) in order: once an empty one is done, the cycle's are too.
  (void)store_->WriteAndWait(WriteBatch());
}

std::vector<UsageRecord> Service::UsageOf(const JobRecord& j, int64_t end_s) const {
  std::vector<UsageRecord> out;
  if (j.started_at < 0 || end_s <= j.started_at) return out;
  const Catalog& cat = *config_.catalog;
  for (const TaskPlacement& t : j.placements) {
    const Node& node = config_.cluster.nodes[t.node];
    const GpuKind& kind = cat.kind(node.kind);
    auto list = PriceBook::Default().OnDemandListPrice(kind.id);
    for (const GpuGrant& g : t.gpus) {
      UsageRecord u = GrantUsage(node, kind, g);
      u.team = j.team;
      u.project = j.project;
      u.queue = config_.tenancy.queues[j.queue].name;
      u.job_id = j.id;
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
  state_changed_ = true;
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
  auto current = [&](int64_t id) -> JobPtr {
    for (auto it = changed->rbegin(); it != changed->rend(); ++it)
      if ((*it)->id == id) return *it;
    return Lookup(id, false);
  };
  // Preemptions first (the plan orders them before the binds they make room for); a preempted replica
  // preempts its whole job.
  for (const Action& a : plan.actions) {
    if (a.kind != ActionKind::kPreempt) continue;
    JobPtr j = current(JobOfEngineId(a.job));
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
  }
  // Binds, grouped by job: a job starts only when every replica got a place in this plan.
  std::map<int64_t, std::map<int, const Action*>> binds;
  for (const Action& a : plan.actions)
    if (a.kind == ActionKind::kBind) binds[JobOfEngineId(a.job)][static_cast<int>(a.job % kMaxReplicas)] = &a;
  for (const auto& [id, by_replica] : binds) {
    JobPtr j = current(id);
    if (!j || j->state != JobState::kPending || static_cast<int>(by_replica.size()) != j->replicas) continue;
    const Request& r = j->request;
    const bool inference = r.cls != WorkloadClass::kTraining;
    std::vector<TaskPlacement> tasks;
    std::vector<const Action*> applied;
    for (const auto& [rep, a] : by_replica) {
      if (!state_->CanApply(a->tasks, r.cpu_milli, r.host_memory_mib).ok()) break;  // changed since the plan
      state_->Apply(a->tasks, r.cpu_milli, r.host_memory_mib, inference);
      applied.push_back(a);
      tasks.insert(tasks.end(), a->tasks.begin(), a->tasks.end());
    }
    if (applied.size() != by_replica.size()) {  // all or nothing: undo the replicas applied
      for (const Action* a : applied) state_->Release(WithoutFlags(a->tasks), r.cpu_milli, r.host_memory_mib, inference);
      continue;
    }
    for (const TaskPlacement& t : tasks)
      for (const GpuGrant& g : t.gpus) {
        if (g.create_instance || g.enable_mig || g.disable_mig || g.destroy_mask)
          counters_.mig_repartitions.fetch_add(1, std::memory_order_relaxed);
        if (g.mig_profile >= 0 || g.disable_mig)
          b->layouts.push_back({config_.cluster.nodes[t.node].name, g.gpu - state_->node(t.node).first_gpu,
                                LayoutText(*state_, g.gpu)});
      }
    auto next = std::make_shared<JobRecord>(*j);
    next->version = NextVersion();
    next->state = JobState::kRunning;
    next->started_at = now;
    next->placements = WithoutFlags(std::move(tasks));
    next->units_milli = UnitsOf(*state_, next->placements, config_.tenancy.options.slice_units);
    state_changed_ = true;
    next->message.clear();
    executor_->Start(id, now, j->duration_s);
    pending_.erase(id);
    running_.insert(id);
    b->events.push_back({id, now, "Started", by_replica.begin()->second->reason});
    changed->push_back(next);
    counters_.placements.fetch_add(1, std::memory_order_relaxed);
  }
}

// The cycle's input for the current state (`working` is the caller's copy of the allocation).
void Service::FillCycleInputLocked(int64_t now, ClusterState* working, CycleInput* in) {
  in->snapshot = working;
  in->queues = config_.tenancy.queues;
  in->options = config_.tenancy.options;
  in->now_s = now;
  historical_usage_.resize(in->queues.size(), 0.0);
  in->historical_usage = historical_usage_;
  in->pending.reserve(pending_.size());
  for (int64_t id : pending_) {
    const JobRecord& j = *jobs_[id - 1].current;
    for (int r = 0; r < j.replicas; ++r) {
      PendingJob p{j.request, j.queue, j.submitted_at, j.submitted_at, false, j.duration_s};
      p.request.id = EngineId(id, r);
      if (j.duration_s > 0) p.request.expected_end_s = now + j.duration_s;
      in->pending.push_back(std::move(p));
    }
  }
  for (int64_t id : running_) {
    const JobRecord& j = *jobs_[id - 1].current;
    const PriorityClass* pc = config_.tenancy.FindClass(j.priority_class);
    const int groups = j.replicas;  // a gang is one group of all its tasks; replicas one task each
    for (int r = 0; r < groups; ++r) {
      RunningJob rj;
      rj.id = EngineId(id, r);
      rj.queue = j.queue;
      rj.priority = j.request.priority;
      rj.preemptible = pc == nullptr || pc->preemptible;
      rj.cls = j.cls;
      if (groups == 1) rj.tasks = j.placements;
      else if (r < static_cast<int>(j.placements.size())) rj.tasks = {j.placements[r]};
      rj.cpu_milli = j.request.cpu_milli;
      rj.host_memory_mib = j.request.host_memory_mib;
      rj.gpu_milli = groups == 1 ? j.units_milli : UnitsOf(*working, rj.tasks, in->options.slice_units);
      rj.start_time_s = j.started_at;
      rj.expected_end_s = j.duration_s > 0 ? j.started_at + j.duration_s : -1;
      in->running.push_back(std::move(rj));
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
    FillCycleInputLocked(now, working.get(), &in);
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
  ready_.store(true);
  counters_.cycle_sum_us.fetch_add(static_cast<uint64_t>(s * 1e6), std::memory_order_relaxed);
  int bucket = 0;
  while (bucket < Counters::kNumBuckets && s > Counters::kCycleBuckets[bucket]) ++bucket;
  counters_.cycle_bucket[bucket].fetch_add(1, std::memory_order_relaxed);
}

void Service::PublishLocked(const Plan* plan, int64_t now) {
  auto snap = std::make_shared<Snapshot>();
  snap->at = now;
  snap->cycle = cycle_seq_;
  auto old = snapshot();
  if (state_changed_ || !old) snap->cluster = std::make_shared<ClusterState>(*state_);
  else snap->cluster = old->cluster;
  state_changed_ = false;
  for (const QueueConfig& q : config_.tenancy.queues) snap->queue_names.push_back(q.name);
  if (plan != nullptr) {
    snap->queues = plan->queues;
    std::vector<std::pair<int, int64_t>> order;  // (pool position of the job's first replica, job)
    for (const PendingStatus& p : plan->pending) {
      const int64_t id = JobOfEngineId(p.job);
      JobPtr j = Lookup(id, false);
      if (!j || j->state != JobState::kPending) continue;
      auto [it, fresh] = snap->pending.try_emplace(id);
      if (!fresh && it->second.pool_position <= p.pool_position) continue;
      it->second = PendingInfo{p.team_position, p.pool_position, p.code, p.message, p.estimated_start_s};
    }
    for (const auto& [id, info] : snap->pending) order.push_back({info.pool_position, id});
    std::sort(order.begin(), order.end());
    int pos = 0;
    for (const auto& [p, id] : order) {
      PendingInfo& info = snap->pending[id];
      info.pool_position = ++pos;  // positions count jobs, not replicas
      snap->queue.push_back({Lookup(id, false), info});
    }
    std::map<int, int> team_pos;
    for (QueueEntry& e : snap->queue) {
      e.info.team_position = ++team_pos[e.job->queue];
      snap->pending[e.job->id].team_position = e.info.team_position;
    }
  } else if (old) {
    snap->queues = old->queues;
  }
  std::lock_guard<std::mutex> lock(snap_mu_);
  snapshot_ = std::move(snap);
}

}  // namespace tessera
