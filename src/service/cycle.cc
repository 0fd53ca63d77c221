// The service's side of the control loop: the driver rules (control/driver.h) over its loop, the cycle
// (decided without the lock, applied in slices), what each report of the driver means for a job and the
// store, publishing the snapshot.
#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "base/thread_priority.h"
#include "control/decisions.h"
#include "base/utc_time.h"
#include "cost/pricebook.h"
#include "service/service_driver.h"

namespace tessera {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::vector<TaskPlacement> WithoutFlags(std::vector<TaskPlacement> tasks) {
  for (TaskPlacement& t : tasks)
    for (GpuGrant& g : t.gpus) {
      g.create_instance = g.enable_mig = g.disable_mig = false;
      g.destroy_mask = 0;
    }
  return tasks;
}

}  // namespace

void ServiceDriver::Notify() {
  // A wake posted and not yet taken covers this one: the cycle reads the job table after taking it. Without
  // this, every submission during a cycle's spacing woke the cycle thread for nothing (thousands a second).
  if (wake_posted_.exchange(true)) return;
  std::lock_guard<std::mutex> lock(wake_mu_);
  wake_ = true;
  wake_cv_.notify_one();
}

void ServiceDriver::CycleLoop() {
  pthread_setname_np(pthread_self(), "tessera-cycle");  // what top -H and perf show
  using Wall = std::chrono::steady_clock;
  double last_cost_s = 0;
  auto last = Wall::now();
  for (;;) {
    double wait_s = config_->tick_s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const int64_t next = driver_->NextEventS();
      if (next != INT64_MAX) wait_s = std::min(wait_s, clock_->WallSecondsUntil(static_cast<double>(next)));
    }
    {
      std::unique_lock<std::mutex> lock(wake_mu_);
      wake_cv_.wait_for(lock, std::chrono::duration<double>(std::max(wait_s, 0.0)),
                        [&] { return wake_ || stop_; });
      if (stop_) return;
      wake_ = false;
      wake_posted_ = false;  // under wake_mu_: a notifier that set it sets wake_ before it takes the lock
    }
    // Event-driven cycles are spaced by at least min_cycle_gap_s and four times the last cycle's cost, so
    // that a burst of submissions is batched into few cycles.
    const double gap = std::min(1.0, std::max(config_->min_cycle_gap_s, 8 * last_cost_s));
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

void ServiceDriver::RunCycleNow() {
  RunOneCycle();
  // Batches commit (and their effects apply) in order: once an empty one is done, the cycle's are too.
  (void)store_->WriteAndWait(WriteBatch());
}

std::vector<UsageRecord> ServiceDriver::UsageOf(const JobRecord& j, int64_t end_s) const {
  std::vector<UsageRecord> out;
  if (j.started_at < 0 || end_s <= j.started_at) return out;
  const Catalog& cat = *config_->catalog;
  for (const TaskPlacement& t : j.placements) {
    const Node& node = loop_->state().cluster().nodes[t.node];  // the live cluster (nodes are added)
    const GpuKind& kind = cat.kind(node.kind);
    auto list = PriceBook::Default().OnDemandListPrice(kind.id);
    for (const GpuGrant& g : t.gpus) {
      UsageRecord u = GrantUsage(node, kind, g);
      u.team = j.team;
      u.project = j.project;
      u.queue = config_->tenancy.queues[j.queue].name;
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

void ServiceDriver::AddToLoopLocked(const JobRecord& j, bool queued) {
  if (static_cast<int64_t>(replicas_.size()) < j.id) replicas_.resize(j.id);
  std::vector<JobSlot>& replicas = replicas_[j.id - 1];
  const PriorityClass* pc = config_->tenancy.FindClass(j.priority_class);
  for (int r = 0; r < j.replicas; ++r) {
    ControlJob cj;
    cj.request = j.request;
    cj.queue = j.queue;
    cj.preemptible = pc == nullptr || pc->preemptible;
    cj.remaining_work_s = j.duration_s > 0 ? static_cast<double>(j.duration_s) : -1;
    cj.time_limit_factor = TimeLimitFactor(j.duration_s, j.time_limit_s);
    cj.checkpointable = j.checkpointable;
    const JobSlot s = loop_->Add(std::move(cj));
    if (queued) loop_->Submit(s, j.submitted_at);
    replicas.push_back(s);
    job_of_slot_.push_back(j.id);
  }
  driver_->SetGroup(replicas);  // replicas launch all together
}

void ServiceDriver::BuildInputLocked(int64_t now, std::unique_ptr<ClusterState>* working, CycleInput* in) {
  loop_->BuildInput(now, in);
  if (!eviction_blocked_.empty())
    for (RunningJob& r : in->running) {
      const JobSlot slot = SlotOf(r.id);
      if (HasSlotLocked(slot) && eviction_blocked_.count(IdOfSlotLocked(slot))) r.preemptible = false;
    }
  ApplyJobNodesLocked(in);
  // Assigning into a kept state reuses its memory: a fresh copy of a large cluster costs milliseconds of
  // page faults, all of them under the lock that requests wait for.
  if (*working)
    **working = loop_->state();
  else
    *working = std::make_unique<ClusterState>(loop_->state());
  in->snapshot = working->get();
}

void ServiceDriver::ApplyJobNodesLocked(CycleInput* in) const {
  if (job_nodes_.empty() && !job_nodes_strict_) return;
  const std::vector<Node>& nodes = loop_->state().cluster().nodes;
  std::map<const std::set<std::string>*, std::shared_ptr<const std::vector<bool>>> masks;  // one per shared set
  // Strict: a job not judged yet (submitted since the last SetJobNodes) sits this cycle out, without a
  // verdict: "fits nowhere" would be a reason it does not have.
  if (job_nodes_strict_)
    std::erase_if(in->pending, [&](const PendingJob& p) {
      const JobSlot slot = SlotOf(p.request.id);
      return HasSlotLocked(slot) && !job_nodes_.count(IdOfSlotLocked(slot));
    });
  for (PendingJob& p : in->pending) {
    const JobSlot slot = SlotOf(p.request.id);
    if (!HasSlotLocked(slot)) continue;
    auto it = job_nodes_.find(IdOfSlotLocked(slot));
    const std::set<std::string>* names = it != job_nodes_.end() ? it->second.get() : nullptr;
    if (names == nullptr) continue;
    auto& mask = masks[names];
    if (mask == nullptr) {
      auto m = std::make_shared<std::vector<bool>>(nodes.size(), false);
      for (size_t n = 0; n < nodes.size(); ++n) (*m)[n] = names->count(nodes[n].name) > 0;
      mask = std::move(m);
    }
    p.request.nodes = mask;
  }
}

void ServiceDriver::SetJobNodes(std::map<int64_t, std::shared_ptr<const std::set<std::string>>> nodes,
                                bool absent_nowhere) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const bool same = job_nodes_strict_ == absent_nowhere && job_nodes_.size() == nodes.size() &&
                      std::equal(job_nodes_.begin(), job_nodes_.end(), nodes.begin(), [](const auto& a, const auto& b) {
                        return a.first == b.first && (a.second == b.second || (a.second && b.second && *a.second == *b.second));
                      });
    job_nodes_ = std::move(nodes);
    job_nodes_strict_ = absent_nowhere;
    if (same) return;
  }
  Notify();  // jobs may go where they could not: a cycle looks again
}

void ServiceDriver::SetEvictionBlocked(std::set<int64_t> ids) {
  std::lock_guard<std::mutex> lock(mu_);
  eviction_blocked_ = std::move(ids);
}

std::vector<int64_t> ServiceDriver::RunningLocked() const {
  std::vector<int64_t> out;
  for (JobSlot s : loop_->jobs().holding()) out.push_back(IdOfSlotLocked(s));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

JobPtr ServiceDriver::FinishLocked(const JobRecord& j, JobState state, int64_t at, const std::string& message,
                                   WriteBatch* b) {
  auto next = std::make_shared<JobRecord>(j);
  next->version = NextVersion();
  next->state = state;
  next->finished_at = at;
  next->message = message;
  next->starting = false;
  if (j.state == JobState::kRunning) {
    for (UsageRecord& u : UsageOf(j, at)) b->usage.push_back(std::move(u));
    state_changed_ = true;
  }
  b->events.push_back({j.id, at, JobStateName(state), message});
  reason_.erase(j.id);  // read at a start or a preemption only: an ended job's entry would stay forever
  return next;
}

JobPtr ServiceDriver::RequeuedLocked(const JobRecord& j, const std::string& why, int64_t now, WriteBatch* b) {
  for (UsageRecord& u : UsageOf(j, now)) b->usage.push_back(std::move(u));
  auto next = std::make_shared<JobRecord>(j);
  next->version = NextVersion();
  next->state = JobState::kPending;
  next->started_at = -1;
  next->starting = false;
  next->placements.clear();
  next->message = why;
  state_changed_ = true;
  return next;
}

JobPtr ServiceDriver::CurrentLocked(int64_t id) const {
  if (fx_ != nullptr)
    for (auto it = fx_->changed.rbegin(); it != fx_->changed.rend(); ++it)
      if ((*it)->id == id) return *it;
  return book_->Current(id);
}

const std::vector<JobSlot>& ServiceDriver::ReplicasLocked(int64_t id) const {
  static const std::vector<JobSlot> kNone;
  return id >= 1 && id <= static_cast<int64_t>(replicas_.size()) ? replicas_[id - 1] : kNone;
}

void ServiceDriver::ChangedLocked(JobPtr next) { fx_->changed.push_back(std::move(next)); }

// Every applied action: counters, reasons, GPUs to relayout; a job whose replicas all hold their grants
// runs from now on (starting until launched).
void ServiceDriver::OnBoundLocked(const Applied& a, int64_t now) {
  const Action* act = fx_->plan != nullptr && fx_->index < fx_->plan->actions.size()
                          ? &fx_->plan->actions[fx_->index]
                          : nullptr;
  ++fx_->index;
  if (!a.done || a.conflict) return;
  state_changed_ = true;
  const bool mig_change = a.kind == ActionKind::kBind || a.kind == ActionKind::kRepartition;
  if (act != nullptr && mig_change)
    for (const TaskPlacement& t : act->tasks)
      for (const GpuGrant& g : t.gpus)
        if (g.mig_profile >= 0 || g.enable_mig || g.disable_mig || g.destroy_mask)
          fx_->relayout.insert(g.gpu);
  if (a.kind == ActionKind::kPreempt && act != nullptr) reason_[IdOfSlotLocked(a.job)] = act->reason;
  if (a.kind == ActionKind::kPreempt) counters_.preemptions.fetch_add(1, std::memory_order_relaxed);
  if (a.kind != ActionKind::kBind) return;
  counters_.mig_repartitions.fetch_add(a.mig_mode_gpus + a.mig_instance_gpus, std::memory_order_relaxed);
  const int64_t id = IdOfSlotLocked(a.job);
  if (act != nullptr) reason_[id] = act->reason;
  const std::vector<JobSlot>& replicas = ReplicasLocked(id);
  for (JobSlot s : replicas) {
    const JobPhase p = loop_->jobs()[s].phase;
    if (p != JobPhase::kBound && p != JobPhase::kRunning) return;
  }
  JobPtr j = CurrentLocked(id);
  if (!j || j->state != JobState::kPending) return;
  std::vector<TaskPlacement> tasks;
  for (JobSlot s : replicas)
    tasks.insert(tasks.end(), loop_->jobs()[s].tasks.begin(), loop_->jobs()[s].tasks.end());
  auto next = std::make_shared<JobRecord>(*j);
  next->version = NextVersion();
  next->state = JobState::kRunning;
  next->started_at = now;
  next->starting = true;
  next->placements = WithoutFlags(std::move(tasks));
  next->message.clear();
  fx_->b.events.push_back({id, now, "Started", reason_[id]});
  ChangedLocked(std::move(next));
  counters_.placements.fetch_add(1, std::memory_order_relaxed);
}

void ServiceDriver::OnStartedLocked(JobSlot s, int64_t now, bool in_flight) {
  const int64_t id = IdOfSlotLocked(s);
  for (JobSlot r : ReplicasLocked(id))
    if (loop_->jobs()[r].phase != JobPhase::kRunning) return;
  JobPtr j = CurrentLocked(id);
  if (!j || j->state != JobState::kRunning || !j->starting || in_flight) return;
  auto next = std::make_shared<JobRecord>(*j);
  next->version = NextVersion();
  next->starting = false;
  ChangedLocked(std::move(next));
}

void ServiceDriver::OnBackendEventLocked(const BackendEvent& e) {
  if (!HasSlotLocked(e.slot)) return;
  JobPtr j = CurrentLocked(IdOfSlotLocked(e.slot));
  if (!j) return;
  const bool started = e.kind == BackendEventKind::kStarted && j->state == JobState::kRunning && j->starting;
  const bool stopped = e.kind == BackendEventKind::kStopped && j->stopping;
  if (!started && !stopped) return;
  if (started)
    for (JobSlot r : ReplicasLocked(j->id))
      if (loop_->jobs()[r].phase != JobPhase::kRunning) return;
  auto next = std::make_shared<JobRecord>(*j);
  next->version = NextVersion();
  if (started) next->starting = false;
  if (stopped) next->stopping = false;
  ChangedLocked(std::move(next));
}

void ServiceDriver::OnReleasedLocked(const Released& r, int64_t now, ReleaseCause cause) {
  const int64_t id = IdOfSlotLocked(r.job);
  JobPtr j = CurrentLocked(id);
  if (!j) return;
  switch (cause) {
    case ReleaseCause::kCompleted:
      for (JobSlot s : ReplicasLocked(id))
        if (loop_->jobs()[s].phase != JobPhase::kDone) return;
      if (j->state != JobState::kRunning) return;
      ChangedLocked(FinishLocked(*j, JobState::kSucceeded, now, "completed", &fx_->b));
      counters_.finished.fetch_add(1, std::memory_order_relaxed);
      return;
    case ReleaseCause::kFailed:
    case ReleaseCause::kLaunchRefused:
      if (Terminal(j->state)) return;
      ChangedLocked(FinishLocked(*j, JobState::kFailed, now, "failed on the backend", &fx_->b));
      counters_.finished.fetch_add(1, std::memory_order_relaxed);
      counters_.failed.fetch_add(1, std::memory_order_relaxed);
      return;
    case ReleaseCause::kPreempted:
    case ReleaseCause::kInterrupted:
    case ReleaseCause::kLaunchFailed: {
      if (j->state != JobState::kRunning) return;
      const std::string why = cause == ReleaseCause::kPreempted ? "preempted: " + reason_[id]
                              : cause == ReleaseCause::kInterrupted
                                  ? "interrupted on the backend; requeued"
                                  : "the backend could not launch it; requeued";
      fx_->b.events.push_back({id, now, cause == ReleaseCause::kPreempted ? "Preempted" : "Requeued",
                               cause == ReleaseCause::kPreempted ? reason_[id] : why});
      ChangedLocked(RequeuedLocked(*j, why, now, &fx_->b));
      return;
    }
    case ReleaseCause::kVacated:
    case ReleaseCause::kCancelled:
      return;
  }
}

void ServiceDriver::ApplyTakesLocked(const Plan& plan, int64_t now, WriteBatch* b,
                                     std::vector<JobPtr>* changed) {
  Fx fx;
  fx.plan = &plan;
  fx_ = &fx;
  driver_->ApplyPlan(plan, now);
  fx_ = nullptr;
  changed->insert(changed->end(), fx.changed.begin(), fx.changed.end());
  b->events.insert(b->events.end(), fx.b.events.begin(), fx.b.events.end());
  b->usage.insert(b->usage.end(), fx.b.usage.begin(), fx.b.usage.end());
}

void ServiceDriver::FlushLocked(Fx* fx, int64_t now, bool meta) {
  const ClusterState& st = loop_->state();
  for (GpuId g : fx->relayout) {
    const NodeId n = st.gpu(g).node;
    fx->b.layouts.push_back({st.cluster().nodes[n].name, g - st.node(n).first_gpu, MigLayoutText(st, g)});
  }
  fx->relayout.clear();
  if (meta) {
    fx->b.meta["clock_s"] = std::to_string(now);
    fx->b.meta["queue_usage"] = UsageMetaLocked();
  }
  if (!fx->changed.empty() || !fx->b.layouts.empty() || meta)
    PutLocked(std::move(fx->changed), std::move(fx->b), nullptr);
  fx->changed.clear();
  fx->b = WriteBatch();
}

bool ServiceDriver::DueLocked(int64_t now) {
  Fx fx;
  fx_ = &fx;
  const bool changed = driver_->HandleDue(now);
  FlushLocked(&fx, now, false);
  fx_ = nullptr;
  return changed;
}

std::string ServiceDriver::UsageMetaLocked() const {
  nlohmann::json by_queue = nlohmann::json::object();
  const QueueUsage& u = loop_->usage();
  for (size_t q = 0; q < u.usage().size() && q < loop_->queues().size(); ++q)
    by_queue[loop_->queues()[q].name] = u.usage()[q];
  return nlohmann::json{{"at", u.last_s()}, {"usage", by_queue}}.dump();
}

void ServiceDriver::RestoreUsageLocked(const std::string& meta) {
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
Plan ServiceDriver::DecideInBackground(const CycleInput& in) const {
  if (config_->decide_nice <= 0) return RunCycle(in, *policy_);
  Plan plan;
  std::thread t([&] {
    pthread_setname_np(pthread_self(), "tessera-decide");
    LowerThreadPriority(config_->decide_nice);
    plan = RunCycle(in, *policy_);
  });
  t.join();
  return plan;
}

std::vector<size_t> ServiceDriver::SliceCuts(const Plan& plan) const {
  constexpr size_t kSlice = 256;  // actions applied under one hold of the lock (about a millisecond)
  std::vector<size_t> cuts = {0};
  std::unordered_map<int64_t, size_t> last;  // job -> index of its last action
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < plan.actions.size(); ++i) {
      const JobSlot s = SlotOf(plan.actions[i].job);
      if (HasSlotLocked(s)) last[IdOfSlotLocked(s)] = i;
    }
    size_t reach = 0;  // the furthest action of a job seen in this slice
    for (size_t i = 0; i < plan.actions.size(); ++i) {
      const JobSlot s = SlotOf(plan.actions[i].job);
      if (HasSlotLocked(s)) reach = std::max(reach, last[IdOfSlotLocked(s)]);
      if (i + 1 - cuts.back() >= kSlice && reach <= i) cuts.push_back(i + 1);
    }
  }
  if (cuts.back() != plan.actions.size()) cuts.push_back(plan.actions.size());
  if (cuts.size() == 1) cuts.push_back(0);  // an empty plan: one empty slice
  return cuts;
}

void ServiceDriver::RunOneCycle() {
  const int64_t now = Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    DueLocked(now);
  }
  outbox_->Flush();
  CycleAt(now, /*paced=*/true);
}

int ServiceDriver::CycleAt(int64_t now, bool paced) {
  const auto t0 = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> one_cycle(cycle_mu_);
  CycleInput& in = cycle_in_;
  std::unique_ptr<ClusterState>& working = cycle_working_;
  {
    size_t pending, holding;
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending = loop_->jobs().pending().size();
      holding = loop_->jobs().holding().size();
    }
    // Memory the input grows into is mapped here, not under the lock (ControlLoop::ReserveInput), with
    // room for the jobs that arrive meanwhile.
    ControlLoop::ReserveInput(&in, pending + pending / 4 + 256, holding + holding / 4 + 256);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto held = std::chrono::steady_clock::now();
    BuildInputLocked(now, &working, &in);
    counters_.lock_input.Observe(SecondsSince(held));
  }
  Plan plan = DecideInBackground(in);
  std::shared_ptr<Snapshot> snap;
  std::vector<PendingRef> snap_jobs(plan.pending.size());  // mapped before the lock, like the input
  snap_jobs.clear();
  int binds = 0;
  // A large plan is applied in slices, the lock released between them, so that requests wait for one
  // slice at most; a slice ends only where no job has actions left further on (a job starts whole).
  const std::vector<size_t> cuts = SliceCuts(plan);
  // Each slice's writes commit before the next slice is applied, so that a submission waits behind one
  // slice's rows in the store, not behind the whole plan's.
  for (size_t k = 0; k + 1 < cuts.size(); ++k) {
    Plan part;
    part.actions.assign(plan.actions.begin() + cuts[k], plan.actions.begin() + cuts[k + 1]);
    const bool last = k + 2 == cuts.size();
    const auto slice_t0 = std::chrono::steady_clock::now();
    bool wrote = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto held = std::chrono::steady_clock::now();
      Fx fx;
      fx.plan = &part;
      fx_ = &fx;
      binds += driver_->ApplyPlan(part, now);
      fx_ = nullptr;
      wrote = !fx.changed.empty();
      FlushLocked(&fx, now, wrote || (last && ++cycle_seq_ % 16 == 0));
      if (last) snap = BeginSnapshotLocked(&plan, now, &snap_jobs);
      counters_.lock_apply.Observe(SecondsSince(held));
    }
    outbox_->Flush();  // the slice's launches and stops, without the lock
    if (wrote && !last) {
      (void)store_->WriteAndWait(WriteBatch());
      // Paced: requests get twice the slice's time before the next, so that a large plan (thousands of
      // starts) takes at most a third of the service while it is applied instead of queueing every request
      // behind it slice after slice; its last jobs start that much later (docs/benchmarks.md).
      if (paced) {
        const auto took = 2 * (std::chrono::steady_clock::now() - slice_t0);
        std::unique_lock<std::mutex> lock(wake_mu_);
        wake_cv_.wait_for(lock, took, [&] { return stop_; });
      }
    }
  }
  FinishSnapshot(std::move(snap), &plan, snap_jobs);
  counters_.cycles.fetch_add(1, std::memory_order_relaxed);
  ready_.store(true);
  counters_.cycle.Observe(SecondsSince(t0));
  return binds;
}

int64_t ServiceDriver::NextInstant(int64_t now, int64_t owner_next_s, int64_t horizon_s, bool* tick) const {
  std::lock_guard<std::mutex> lock(mu_);
  return driver_->NextInstant(now, owner_next_s, horizon_s, tick);
}

size_t ServiceDriver::WaitingJobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loop_->jobs().pending().size();
}

// One instant of the driver rules: the service's own parts (backend events under the lock, cycles) with
// the caller's arrivals.
bool ServiceDriver::RunInstant(int64_t now, bool tick, InstantSource& arrivals) {
  class Source final : public InstantSource {
   public:
    Source(ServiceDriver* s, InstantSource* a) : s_(s), a_(a) {}
    bool Due(Driver&, int64_t now) override {
      bool changed = false;
      {
        std::lock_guard<std::mutex> lock(s_->mu_);
        changed = s_->DueLocked(now);
      }
      s_->outbox_->Flush();
      return changed;
    }
    size_t Waiting() const override { return s_->WaitingJobs(); }
    bool Arrive(int64_t now) override { return a_->Arrive(now); }
    int ReleaseBacklog(int64_t now) override { return a_->ReleaseBacklog(now); }
    bool backlog() const override { return a_->backlog(); }
    bool External(int64_t now) override { return a_->External(now); }
    int Cycle(int64_t now) override { return s_->CycleAt(now); }

   private:
    ServiceDriver* s_;
    InstantSource* a_;
  } source(this, &arrivals);
  const bool changed = driver_->RunInstant(now, tick, source);
  (void)store_->WriteAndWait(WriteBatch());  // the instant's writes are visible before the next
  return changed;
}

std::vector<JobSlot> ServiceDriver::LoopSlotsOf(int64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return ReplicasLocked(id);
}

JobPtr ServiceDriver::JobOfSlot(JobSlot slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!HasSlotLocked(slot)) return nullptr;
  return book_->Current(IdOfSlotLocked(slot));
}

std::vector<std::string> ServiceDriver::TakeDecisionLines() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const Decision& d : driver_->TakeDecisions())
    out.push_back(DecisionLine(
        d, loop_->state(), [&](JobSlot slot) { return book_->Current(IdOfSlotLocked(slot))->name; },
        [&](int64_t n) { return loop_->state().cluster().nodes[n].name; }));
  return out;
}

std::shared_ptr<Snapshot> ServiceDriver::BeginSnapshotLocked(const Plan* plan, int64_t now,
                                                             std::vector<PendingRef>* jobs) {
  auto snap = std::make_shared<Snapshot>();
  snap->at = now;
  snap->cycle = cycle_seq_;
  auto old = snapshot();
  if (state_changed_ || !old)
    snap->cluster = RecycledClusterLocked();
  else
    snap->cluster = old->cluster;
  state_changed_ = false;
  snap->node_states.reserve(loop_->state().num_nodes());
  for (NodeId n = 0; n < loop_->state().num_nodes(); ++n) snap->node_states.push_back(nodes_->StateLocked(n));
  for (const QueueConfig& q : config_->tenancy.queues) snap->queue_names.push_back(q.name);
  QueueSignaturesLocked(snap.get());
  if (plan == nullptr) {
    if (old) snap->queues = old->queues;
    return snap;
  }
  snap->queues = plan->queues;
  jobs->reserve(plan->pending.size());
  for (const PendingStatus& p : plan->pending) {
    const JobSlot gang = p.reservation_job >= 0 ? SlotOf(p.reservation_job) : kNoSlot;
    jobs->push_back({book_->Current(IdOfSlotLocked(SlotOf(p.job))),
                     HasSlotLocked(gang) ? book_->Current(IdOfSlotLocked(gang)) : nullptr});
  }
  return snap;
}

std::shared_ptr<const ClusterState> ServiceDriver::RecycledClusterLocked() {
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

namespace {

// The cycle's "waits behind a reserved gang" names the gang: its job id, name and the reservation's start.
void NameReservation(const JobPtr& gang, int64_t start, PendingInfo* info) {
  constexpr std::string_view kPrefix = "waits behind a reserved gang";
  info->reservation = gang;
  info->reservation_start = start;
  const std::string& m = info->message.str();
  if (m.rfind(kPrefix, 0) != 0) return;
  info->message = fmt::format("waits behind the reservation of job {} ({}, {} GPUs from {}){}", gang->id,
                              gang->name, TotalGpus(*gang), FormatIsoUtc(start), m.substr(kPrefix.size()));
}

}  // namespace

void ServiceDriver::FinishSnapshot(std::shared_ptr<Snapshot> snap, const Plan* plan,
                                   const std::vector<PendingRef>& jobs) {
  const std::shared_ptr<const Snapshot> old = snapshot();
  if (old && old->summary && old->cluster == snap->cluster && old->node_states == snap->node_states)
    snap->summary = old->summary;
  else
    snap->summary = SummariseCluster(*snap->cluster, snap->node_states);
  if (plan != nullptr) {
    std::unordered_map<int64_t, JobPtr> by_id;
    std::unordered_map<int64_t, int64_t> needed;  // GPU thousandths short of the queue limit
    for (size_t i = 0; i < plan->pending.size(); ++i) {
      const PendingStatus& p = plan->pending[i];
      const JobPtr& j = jobs[i].job;
      if (!j || j->state != JobState::kPending) continue;
      auto [it, fresh] = snap->pending.try_emplace(j->id);
      if (!fresh && it->second.pool_position <= p.pool_position) continue;
      PendingInfo& info = it->second = PendingInfo{};
      info.team_position = p.team_position;
      info.pool_position = p.pool_position;
      info.code = p.code;
      info.message = p.message;
      info.estimated_start = p.estimated_start_s;
      if (jobs[i].reservation) NameReservation(jobs[i].reservation, p.reservation_start_s, &info);
      by_id[j->id] = j;
      needed[j->id] = p.still_needed;
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
      StabiliseEstimate(*j, needed[id], *snap, old.get(), &info);
      snap->queue.push_back({j, info});
    }
  }
  std::lock_guard<std::mutex> lock(snap_mu_);
  snapshot_ = std::move(snap);
}

void ServiceDriver::PublishLocked(const Plan* plan, int64_t now) {
  std::vector<PendingRef> jobs;
  FinishSnapshot(BeginSnapshotLocked(plan, now, &jobs), plan, jobs);
}

}  // namespace tessera
