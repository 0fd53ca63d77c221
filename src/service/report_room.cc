// What each report of the driver means for a job and the store (report_room.h).
#include "service/report_room.h"

#include <string>

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

ReportRoom::ReportRoom(ServiceDriver* driver) : d_(driver) {}

JobPtr ReportRoom::FinishLocked(const JobRecord& j, JobState state, int64_t at, const std::string& message,
                                   WriteBatch* b) {
  auto next = std::make_shared<JobRecord>(j);
  next->version = d_->NextVersion();
  next->state = state;
  next->finished_at = at;
  next->message = message;
  next->starting = false;
  if (j.state == JobState::kRunning) {
    for (UsageRecord& u : d_->UsageOf(j, at)) b->usage.push_back(std::move(u));
    d_->state_changed_ = true;
  }
  b->events.push_back({j.id, at, JobStateName(state), message});
  reason_.erase(j.id);  // read at a start or a preemption only: an ended job's entry would stay forever
  return next;
}

JobPtr ReportRoom::RequeuedLocked(const JobRecord& j, const std::string& why, int64_t now, WriteBatch* b) {
  for (UsageRecord& u : d_->UsageOf(j, now)) b->usage.push_back(std::move(u));
  auto next = std::make_shared<JobRecord>(j);
  next->version = d_->NextVersion();
  next->state = JobState::kPending;
  next->started_at = -1;
  next->starting = false;
  next->placements.clear();
  next->message = why;
  d_->state_changed_ = true;
  return next;
}

JobPtr ReportRoom::CurrentLocked(int64_t id) const {
  if (fx_ != nullptr)
    for (auto it = fx_->changed.rbegin(); it != fx_->changed.rend(); ++it)
      if ((*it)->id == id) return *it;
  return d_->book_->Current(id);
}

void ReportRoom::ChangedLocked(JobPtr next) { fx_->changed.push_back(std::move(next)); }

// Every applied action: counters, reasons, GPUs to relayout; a job whose replicas all hold their grants
// runs from now on (starting until launched).
void ReportRoom::OnApplied(const Applied& a, int64_t now) {
  const Action* act = fx_->plan != nullptr && fx_->index < fx_->plan->actions.size()
                          ? &fx_->plan->actions[fx_->index]
                          : nullptr;
  ++fx_->index;
  if (!a.done || a.conflict) return;
  d_->state_changed_ = true;
  const bool mig_change = a.kind == ActionKind::kBind || a.kind == ActionKind::kRepartition;
  if (act != nullptr && mig_change)
    for (const TaskPlacement& t : act->tasks)
      for (const GpuGrant& g : t.gpus)
        if (g.mig_profile >= 0 || g.enable_mig || g.disable_mig || g.destroy_mask)
          fx_->relayout.insert(g.gpu);
  if (a.kind == ActionKind::kPreempt && act != nullptr) reason_[d_->IdOfSlotLocked(a.job)] = act->reason;
  if (a.kind == ActionKind::kPreempt) d_->counters_.preemptions.fetch_add(1, std::memory_order_relaxed);
  if (a.kind != ActionKind::kBind) return;
  d_->counters_.mig_repartitions.fetch_add(a.mig_mode_gpus + a.mig_instance_gpus, std::memory_order_relaxed);
  const int64_t id = d_->IdOfSlotLocked(a.job);
  if (act != nullptr) reason_[id] = act->reason;
  const std::vector<JobSlot>& replicas = d_->ReplicasLocked(id);
  for (JobSlot s : replicas) {
    const JobPhase p = d_->loop_->jobs()[s].phase;
    if (p != JobPhase::kBound && p != JobPhase::kRunning) return;
  }
  JobPtr j = CurrentLocked(id);
  if (!j || j->state != JobState::kPending) return;
  std::vector<TaskPlacement> tasks;
  for (JobSlot s : replicas)
    tasks.insert(tasks.end(), d_->loop_->jobs()[s].tasks.begin(), d_->loop_->jobs()[s].tasks.end());
  auto next = std::make_shared<JobRecord>(*j);
  next->version = d_->NextVersion();
  next->state = JobState::kRunning;
  next->started_at = now;
  next->starting = true;
  next->placements = WithoutFlags(std::move(tasks));
  next->message.clear();
  fx_->b.events.push_back({id, now, "Started", reason_[id]});
  ChangedLocked(std::move(next));
  d_->counters_.placements.fetch_add(1, std::memory_order_relaxed);
}

void ReportRoom::OnStarted(JobSlot s, int64_t now, double, bool in_flight) {
  const int64_t id = d_->IdOfSlotLocked(s);
  for (JobSlot r : d_->ReplicasLocked(id))
    if (d_->loop_->jobs()[r].phase != JobPhase::kRunning) return;
  JobPtr j = CurrentLocked(id);
  if (!j || j->state != JobState::kRunning || !j->starting || in_flight) return;
  auto next = std::make_shared<JobRecord>(*j);
  next->version = d_->NextVersion();
  next->starting = false;
  ChangedLocked(std::move(next));
}

void ReportRoom::OnBackendEvent(const BackendEvent& e) {
  if (!d_->HasSlotLocked(e.slot)) return;
  JobPtr j = CurrentLocked(d_->IdOfSlotLocked(e.slot));
  if (!j) return;
  const bool started = e.kind == BackendEventKind::kStarted && j->state == JobState::kRunning && j->starting;
  const bool stopped = e.kind == BackendEventKind::kStopped && j->stopping;
  if (!started && !stopped) return;
  if (started)
    for (JobSlot r : d_->ReplicasLocked(j->id))
      if (d_->loop_->jobs()[r].phase != JobPhase::kRunning) return;
  auto next = std::make_shared<JobRecord>(*j);
  next->version = d_->NextVersion();
  if (started) next->starting = false;
  if (stopped) next->stopping = false;
  ChangedLocked(std::move(next));
}

void ReportRoom::OnReleased(const Released& r, int64_t now, ReleaseCause cause, int64_t) {
  const int64_t id = d_->IdOfSlotLocked(r.job);
  JobPtr j = CurrentLocked(id);
  if (!j) return;
  switch (cause) {
    case ReleaseCause::kCompleted:
      for (JobSlot s : d_->ReplicasLocked(id))
        if (d_->loop_->jobs()[s].phase != JobPhase::kDone) return;
      if (j->state != JobState::kRunning) return;
      ChangedLocked(FinishLocked(*j, JobState::kSucceeded, now, "completed", &fx_->b));
      d_->counters_.finished.fetch_add(1, std::memory_order_relaxed);
      return;
    case ReleaseCause::kFailed:
    case ReleaseCause::kLaunchRefused:
      if (Terminal(j->state)) return;
      ChangedLocked(FinishLocked(*j, JobState::kFailed, now, "failed on the backend", &fx_->b));
      d_->counters_.finished.fetch_add(1, std::memory_order_relaxed);
      d_->counters_.failed.fetch_add(1, std::memory_order_relaxed);
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

void ReportRoom::ApplyTakesLocked(const Plan& plan, int64_t now, WriteBatch* b,
                                     std::vector<JobPtr>* changed) {
  Fx fx;
  fx.plan = &plan;
  fx_ = &fx;
  d_->driver_->ApplyPlan(plan, now);
  fx_ = nullptr;
  changed->insert(changed->end(), fx.changed.begin(), fx.changed.end());
  b->events.insert(b->events.end(), fx.b.events.begin(), fx.b.events.end());
  b->usage.insert(b->usage.end(), fx.b.usage.begin(), fx.b.usage.end());
}

int ReportRoom::ApplySliceLocked(const Plan& part, int64_t now, bool last, bool* wrote) {
  Fx fx;
  fx.plan = &part;
  fx_ = &fx;
  const int binds = d_->driver_->ApplyPlan(part, now);
  fx_ = nullptr;
  *wrote = !fx.changed.empty();
  FlushLocked(&fx, now, *wrote || (last && ++d_->cycle_seq_ % 16 == 0));
  return binds;
}

void ReportRoom::FlushLocked(Fx* fx, int64_t now, bool meta) {
  const ClusterState& st = d_->loop_->state();
  for (GpuId g : fx->relayout) {
    const NodeId n = st.gpu(g).node;
    fx->b.layouts.push_back({st.cluster().nodes[n].name, g - st.node(n).first_gpu, MigLayoutText(st, g)});
  }
  fx->relayout.clear();
  if (meta) {
    fx->b.meta["clock_s"] = std::to_string(now);
    fx->b.meta["queue_usage"] = d_->UsageMetaLocked();
  }
  if (!fx->changed.empty() || !fx->b.layouts.empty() || meta)
    d_->PutLocked(std::move(fx->changed), std::move(fx->b), nullptr);
  fx->changed.clear();
  fx->b = WriteBatch();
}

bool ReportRoom::DueLocked(int64_t now) {
  Fx fx;
  fx_ = &fx;
  const bool changed = d_->driver_->HandleDue(now);
  FlushLocked(&fx, now, false);
  fx_ = nullptr;
  return changed;
}

}  // namespace tessera
