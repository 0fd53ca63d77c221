// The service's side of the control loop: executor events, the cycle (the core builds its input and
// applies its plan), what each applied action means for a job and the store, publishing the snapshot.
#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "base/thread_priority.h"
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
  // A wake posted and not yet taken covers this one: the cycle reads the job table after taking it. Without
  // this, every submission during a cycle's spacing woke the cycle thread for nothing (thousands a second).
  if (wake_posted_.exchange(true)) return;
  std::lock_guard<std::mutex> lock(wake_mu_);
  wake_ = true;
  wake_cv_.notify_one();
}

void Service::CycleLoop() {
  pthread_setname_np(pthread_self(), "tessera-cycle");  // what top -H and perf show
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
      wake_posted_ = false;  // under wake_mu_: a notifier that set it sets wake_ before it takes the lock
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
    const Node& node = loop_->state().cluster().nodes[t.node];  // the live cluster (nodes are added)
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

void Service::AddToLoopLocked(const JobRecord& j, bool queued) {
  Slot& slot = jobs_[j.id - 1];
  const PriorityClass* pc = config_.tenancy.FindClass(j.priority_class);
  for (int r = 0; r < j.replicas; ++r) {
    ControlJob cj;
    cj.request = j.request;
    cj.queue = j.queue;
    cj.preemptible = pc == nullptr || pc->preemptible;
    cj.remaining_work_s = j.duration_s > 0 ? static_cast<double>(j.duration_s) : -1;
    const JobSlot s = loop_->Add(std::move(cj));
    if (queued) loop_->Submit(s, j.submitted_at);
    slot.replicas.push_back(s);
    job_of_slot_.push_back(j.id);
  }
}

void Service::BuildInputLocked(int64_t now, std::unique_ptr<ClusterState>* working, CycleInput* in) {
  loop_->BuildInput(now, in);
  // Assigning into a kept state reuses its memory: a fresh copy of a large cluster costs milliseconds of
  // page faults, all of them under the lock that requests wait for.
  if (*working) **working = loop_->state();
  else *working = std::make_unique<ClusterState>(loop_->state());
  in->snapshot = working->get();
}

std::vector<int64_t> Service::RunningLocked() const {
  std::vector<int64_t> out;
  for (JobSlot s : loop_->jobs().holding()) out.push_back(job_of_slot_[s]);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
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
    executor_->Stop(j.id);
    state_changed_ = true;
  }
  for (JobSlot s : jobs_[j.id - 1].replicas) {
    const bool running = loop_->jobs()[s].phase == JobPhase::kRunning;
    if (running && state == JobState::kSucceeded) loop_->Complete(s, at);
    else if (running && state == JobState::kFailed) loop_->Fail(s, at);
    else loop_->Withdraw(s, at);
  }
  b->events.push_back({j.id, at, JobStateName(state), message});
  return next;
}

void Service::PreemptLocked(const JobRecord& j, const std::string& reason, int64_t now, WriteBatch* b,
                            std::vector<JobPtr>* changed) {
  for (JobSlot s : jobs_[j.id - 1].replicas) {  // the replicas the plan left running go too
    const JobPhase p = loop_->jobs()[s].phase;
    if (p != JobPhase::kBound && p != JobPhase::kRunning) continue;
    loop_->Interrupt(s);
    loop_->Requeue(s, now);
  }
  for (UsageRecord& u : UsageOf(j, now)) b->usage.push_back(std::move(u));
  executor_->Stop(j.id);
  auto next = std::make_shared<JobRecord>(j);
  next->version = NextVersion();
  next->state = JobState::kPending;
  next->started_at = -1;
  next->placements.clear();
  next->message = "preempted: " + reason;
  b->events.push_back({j.id, now, "Preempted", reason});
  changed->push_back(next);
  counters_.preemptions.fetch_add(1, std::memory_order_relaxed);
}

void Service::StartLocked(const JobRecord& j, const std::string& reason, int64_t now, WriteBatch* b,
                          std::vector<JobPtr>* changed) {
  const std::vector<JobSlot>& replicas = jobs_[j.id - 1].replicas;
  const bool all = std::all_of(replicas.begin(), replicas.end(),
                               [&](JobSlot s) { return loop_->jobs()[s].phase == JobPhase::kBound; });
  if (!all) {  // all or nothing: the replicas bound go back to the queue, at their place
    for (JobSlot s : replicas)
      if (loop_->jobs()[s].phase == JobPhase::kBound) loop_->Requeue(s, now);
    return;
  }
  std::vector<TaskPlacement> tasks;
  for (JobSlot s : replicas) {
    loop_->Start(s, now, 1.0);
    const auto& held = loop_->jobs()[s].tasks;
    tasks.insert(tasks.end(), held.begin(), held.end());
  }
  auto next = std::make_shared<JobRecord>(j);
  next->version = NextVersion();
  next->state = JobState::kRunning;
  next->started_at = now;
  next->placements = WithoutFlags(std::move(tasks));
  next->message.clear();
  executor_->Start(j.id, now, j.duration_s);
  b->events.push_back({j.id, now, "Started", reason});
  changed->push_back(next);
  counters_.placements.fetch_add(1, std::memory_order_relaxed);
}

void Service::ApplyPlanLocked(const Plan& plan, int64_t now, WriteBatch* b, std::vector<JobPtr>* changed) {
  const std::vector<Applied> applied = loop_->Apply(plan, now);
  std::map<int64_t, std::string> preempted, bound;  // job -> reason of its first action
  std::set<GpuId> relayout;                          // GPUs whose MIG layout may have changed
  for (size_t i = 0; i < applied.size(); ++i) {
    const Applied& r = applied[i];
    const Action& a = plan.actions[i];
    if (!r.done) continue;
    if (r.kind == ActionKind::kPreempt) preempted.emplace(job_of_slot_[r.job], a.reason);
    if (r.kind == ActionKind::kBind) {
      bound.emplace(job_of_slot_[r.job], a.reason);
      counters_.mig_repartitions.fetch_add(r.mig_mode_gpus + r.mig_instance_gpus, std::memory_order_relaxed);
    }
    if (r.kind == ActionKind::kBind || r.kind == ActionKind::kRepartition)
      for (const TaskPlacement& t : a.tasks)
        for (const GpuGrant& g : t.gpus)
          if (g.mig_profile >= 0 || g.enable_mig || g.disable_mig || g.destroy_mask) relayout.insert(g.gpu);
  }
  if (!applied.empty()) state_changed_ = true;
  auto current = [&](int64_t id) -> JobPtr {
    for (auto it = changed->rbegin(); it != changed->rend(); ++it)
      if ((*it)->id == id) return *it;
    return Lookup(id, false);
  };
  for (const auto& [id, reason] : preempted)
    if (JobPtr j = current(id); j && j->state == JobState::kRunning) PreemptLocked(*j, reason, now, b, changed);
  for (const auto& [id, reason] : bound)
    if (JobPtr j = current(id); j && j->state == JobState::kPending) StartLocked(*j, reason, now, b, changed);
  const ClusterState& st = loop_->state();
  for (GpuId g : relayout) {
    const NodeId n = st.gpu(g).node;
    b->layouts.push_back({st.cluster().nodes[n].name, g - st.node(n).first_gpu, LayoutText(st, g)});
  }
}

std::string Service::UsageMetaLocked() const {
  nlohmann::json by_queue = nlohmann::json::object();
  const QueueUsage& u = loop_->usage();
  for (size_t q = 0; q < u.usage().size() && q < loop_->queues().size(); ++q)
    by_queue[loop_->queues()[q].name] = u.usage()[q];
  return nlohmann::json{{"at", u.last_s()}, {"usage", by_queue}}.dump();
}

void Service::RestoreUsageLocked(const std::string& meta) {
  const auto j = nlohmann::json::parse(meta, nullptr, false);
  if (!j.is_object() || !j.contains("at") || !j["at"].is_number_integer() || !j.contains("usage") ||
      !j["usage"].is_object())
    return;  // not kept by this version: history starts again
  std::vector<double> usage(loop_->queues().size(), 0.0);
  for (size_t q = 0; q < usage.size(); ++q) {
    auto it = j["usage"].find(loop_->queues()[q].name);
    if (it != j["usage"].end() && it->is_number()) usage[q] = std::max(0.0, it->get<double>());
  }
  loop_->RestoreUsage(usage, j["at"].get<int64_t>());
}

// The decision is pure and holds no lock, so it may run at a lower CPU priority than the request threads
// and the store's writer without delaying them (Linux: nice values are per thread, and threads the engine
// starts inherit it); the lock-holding parts of the cycle keep the process's priority.
Plan Service::DecideInBackground(const CycleInput& in) const {
  if (config_.decide_nice <= 0) return scheduler_.Decide(in);
  Plan plan;
  std::thread t([&] {
    pthread_setname_np(pthread_self(), "tessera-decide");
    LowerThreadPriority(config_.decide_nice);
    plan = scheduler_.Decide(in);
  });
  t.join();
  return plan;
}

std::vector<size_t> Service::SliceCuts(const Plan& plan) const {
  constexpr size_t kSlice = 256;  // actions applied under one hold of the lock (about a millisecond)
  std::vector<size_t> cuts = {0};
  std::unordered_map<int64_t, size_t> last;  // job -> index of its last action
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < plan.actions.size(); ++i) {
      const JobId slot = plan.actions[i].job;
      if (slot >= 0 && slot < static_cast<JobId>(job_of_slot_.size())) last[job_of_slot_[slot]] = i;
    }
    size_t reach = 0;  // the furthest action of a job seen in this slice
    for (size_t i = 0; i < plan.actions.size(); ++i) {
      const JobId slot = plan.actions[i].job;
      if (slot >= 0 && slot < static_cast<JobId>(job_of_slot_.size())) reach = std::max(reach, last[job_of_slot_[slot]]);
      if (i + 1 - cuts.back() >= kSlice && reach <= i) cuts.push_back(i + 1);
    }
  }
  if (cuts.back() != plan.actions.size()) cuts.push_back(plan.actions.size());
  if (cuts.size() == 1) cuts.push_back(0);  // an empty plan: one empty slice
  return cuts;
}

void Service::RunOneCycle() {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t now = Now();
  std::lock_guard<std::mutex> one_cycle(cycle_mu_);
  CycleInput& in = cycle_in_;
  std::unique_ptr<ClusterState>& working = cycle_working_;
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
    BuildInputLocked(now, &working, &in);
  }
  Plan plan = DecideInBackground(in);
  std::shared_ptr<Snapshot> snap;
  std::vector<JobPtr> snap_jobs;
  // A large plan is applied in slices, the lock released between them, so that requests wait for one
  // slice at most; a slice ends only where no job has actions left further on (a job starts whole).
  const std::vector<size_t> cuts = SliceCuts(plan);
  // Each slice's writes commit before the next slice is applied, so that a submission waits behind one
  // slice's rows in the store, not behind the whole plan's.
  for (size_t k = 0; k + 1 < cuts.size(); ++k) {
    Plan part;
    part.actions.assign(plan.actions.begin() + cuts[k], plan.actions.begin() + cuts[k + 1]);
    const bool last = k + 2 == cuts.size();
    bool wrote = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ApplyPlanLocked(part, now, &b, &changed);
      if (!changed.empty() || (last && ++cycle_seq_ % 16 == 0)) {
        b.meta["clock_s"] = std::to_string(now);
        b.meta["queue_usage"] = UsageMetaLocked();
        PutLocked(changed, std::move(b), nullptr);
        wrote = true;
      }
      changed.clear();
      b = WriteBatch();
      if (last) snap = BeginSnapshotLocked(&plan, now, &snap_jobs);
    }
    if (wrote && !last) (void)store_->WriteAndWait(WriteBatch());
  }
  FinishSnapshot(std::move(snap), &plan, snap_jobs);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  counters_.cycles.fetch_add(1, std::memory_order_relaxed);
  ready_.store(true);
  counters_.cycle_sum_us.fetch_add(static_cast<uint64_t>(s * 1e6), std::memory_order_relaxed);
  int bucket = 0;
  while (bucket < Counters::kNumBuckets && s > Counters::kCycleBuckets[bucket]) ++bucket;
  counters_.cycle_bucket[bucket].fetch_add(1, std::memory_order_relaxed);
}

std::shared_ptr<Snapshot> Service::BeginSnapshotLocked(const Plan* plan, int64_t now, std::vector<JobPtr>* jobs) {
  auto snap = std::make_shared<Snapshot>();
  snap->at = now;
  snap->cycle = cycle_seq_;
  auto old = snapshot();
  if (state_changed_ || !old) snap->cluster = RecycledClusterLocked();
  else snap->cluster = old->cluster;
  state_changed_ = false;
  for (const QueueConfig& q : config_.tenancy.queues) snap->queue_names.push_back(q.name);
  if (plan == nullptr) {
    if (old) snap->queues = old->queues;
    return snap;
  }
  snap->queues = plan->queues;
  jobs->reserve(plan->pending.size());
  for (const PendingStatus& p : plan->pending) jobs->push_back(Lookup(job_of_slot_[p.job], false));
  return snap;
}

std::shared_ptr<const ClusterState> Service::RecycledClusterLocked() {
  // A buffer no snapshot or reader holds any more is overwritten in place (see BuildInputLocked).
  for (std::shared_ptr<ClusterState>& c : spare_clusters_)
    if (c.use_count() == 1) {
      *c = loop_->state();
      return c;
    }
  auto c = std::make_shared<ClusterState>(loop_->state());
  if (spare_clusters_.size() < kSpareClusters) spare_clusters_.push_back(c);
  return c;
}

void Service::FinishSnapshot(std::shared_ptr<Snapshot> snap, const Plan* plan, const std::vector<JobPtr>& jobs) {
  if (plan != nullptr) {
    std::unordered_map<int64_t, JobPtr> by_id;
    for (size_t i = 0; i < plan->pending.size(); ++i) {
      const PendingStatus& p = plan->pending[i];
      const JobPtr& j = jobs[i];
      if (!j || j->state != JobState::kPending) continue;
      auto [it, fresh] = snap->pending.try_emplace(j->id);
      if (!fresh && it->second.pool_position <= p.pool_position) continue;
      it->second = PendingInfo{p.team_position, p.pool_position, p.code, p.message, p.estimated_start_s};
      by_id[j->id] = j;
    }
    std::vector<std::pair<int, int64_t>> order;  // (pool position of the job's first replica, job)
    order.reserve(snap->pending.size());
    for (const auto& [id, info] : snap->pending) order.push_back({info.pool_position, id});
    std::sort(order.begin(), order.end());
    int pos = 0;
    std::map<int, int> team_pos;
    snap->queue.reserve(order.size());
    for (const auto& [p, id] : order) {
      PendingInfo& info = snap->pending[id];
      const JobPtr& j = by_id[id];
      info.pool_position = ++pos;  // positions count jobs, not replicas
      info.team_position = ++team_pos[j->queue];
      snap->queue.push_back({j, info});
    }
  }
  std::lock_guard<std::mutex> lock(snap_mu_);
  snapshot_ = std::move(snap);
}

void Service::PublishLocked(const Plan* plan, int64_t now) {
  std::vector<JobPtr> jobs;
  FinishSnapshot(BeginSnapshotLocked(plan, now, &jobs), plan, jobs);
}

}  // namespace tessera
