// The service's side of the control loop: the driver rules (control/driver.h) over its loop, what each
// report of the driver means for a job and the store, a cycle's slice applied and written (the cycle
// itself: cycle_room.h), publishing the snapshot.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "base/utc_time.h"
#include "control/decisions.h"
#include "cost/pricebook.h"
#include "service/service_driver.h"

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

}  // namespace

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

int ServiceDriver::ApplySliceLocked(const Plan& part, int64_t now, bool last, bool* wrote) {
  Fx fx;
  fx.plan = &part;
  fx_ = &fx;
  const int binds = driver_->ApplyPlan(part, now);
  fx_ = nullptr;
  *wrote = !fx.changed.empty();
  FlushLocked(&fx, now, *wrote || (last && ++cycle_seq_ % 16 == 0));
  return binds;
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

}  // namespace tessera
