#include "control/driver.h"

#include "control/decisions.h"

#include <algorithm>
#include <climits>

namespace tessera {

const char* DecisionKindName(DecisionKind k) {
  switch (k) {
    case DecisionKind::kStart: return "start";
    case DecisionKind::kPreempt: return "preempt";
    case DecisionKind::kEnd: return "end";
    case DecisionKind::kFail: return "fail";
    case DecisionKind::kCancel: return "cancel";
  }
  return "start";
}

const char* BackendEventName(BackendEventKind k) {
  switch (k) {
    case BackendEventKind::kStarted: return "started";
    case BackendEventKind::kEnded: return "ended";
    case BackendEventKind::kFailed: return "failed";
    case BackendEventKind::kInterrupted: return "interrupted";
    case BackendEventKind::kLaunchFailed: return "launch-failed";
    case BackendEventKind::kStopped: return "stopped";
    case BackendEventKind::kCheckpointed: return "checkpointed";
    case BackendEventKind::kReconfigureFailed: return "reconfigure-failed";
    case BackendEventKind::kDemand: return "demand";
  }
  return "ended";
}

bool Driver::Timer::operator>(const Timer& o) const {
  if (at != o.at) return at > o.at;
  if (kind != o.kind) return kind > o.kind;
  return seq > o.seq;
}

Driver::Driver(ControlLoop* loop, Backend* backend, DriverOptions options, DriverListener* listener)
    : loop_(loop), backend_(backend), options_(options), listener_(listener ? listener : &null_listener_) {}

void Driver::SetGroup(const std::vector<JobSlot>& members) {
  if (members.size() < 2) return;
  const int32_t g = static_cast<int32_t>(groups_.size());
  groups_.push_back(members);
  for (JobSlot m : members) {
    if (m.value() >= static_cast<int32_t>(group_of_.size())) group_of_.resize(m.value() + 1, -1);
    group_of_[m.value()] = g;
  }
}

std::vector<JobSlot> Driver::GroupOf(JobSlot j) const {
  const int32_t i = j.value();
  if (i >= 0 && i < static_cast<int32_t>(group_of_.size()) && group_of_[i] >= 0) return groups_[group_of_[i]];
  return {j};
}

void Driver::PushTimer(int64_t at, TimerKind kind, JobSlot j) {
  timers_.push_back({at, kind, j, loop_->jobs()[j].epoch, next_seq_++});
  std::push_heap(timers_.begin(), timers_.end(), std::greater<Timer>());
}

int64_t Driver::NextEventS() const {
  int64_t t = timers_.empty() ? INT64_MAX : timers_.front().at;
  const int64_t b = backend_->NextEventS();
  return b >= 0 ? std::min(t, b) : t;
}

int64_t Driver::NextInstant(int64_t now, int64_t owner_next_s, int64_t horizon_s, bool* tick) const {
  int64_t t = std::min(owner_next_s, NextEventS());
  *tick = false;
  const int64_t every = options_.cycle_every_s;
  if (every > 0 && !loop_->jobs().pending().empty() && now + every < t && (t != INT64_MAX || horizon_s > 0)) {
    t = now + every;
    *tick = true;
  }
  return t;
}

bool InstantSource::Due(Driver& driver, int64_t now) { return driver.HandleDue(now); }

bool Driver::RunInstant(int64_t now, bool tick, InstantSource& source) {
  bool changed = source.Due(*this, now);
  changed |= source.Arrive(now);
  const bool backlog = source.backlog();
  if (backlog) {
    source.ReleaseBacklog(now);
    changed = true;
  }
  changed |= tick;
  changed |= source.External(now);
  if (!changed || source.Waiting() == 0) return changed;
  for (int k = 0; k < options_.max_cycles_per_instant; ++k) {
    if (source.Cycle(now) == 0 || !backlog) break;
    const size_t before = source.Waiting();
    source.ReleaseBacklog(now);
    if (source.Waiting() == before) break;
  }
  return changed;
}

bool Driver::HandleDue(int64_t now) {
  bool changed = false;
  for (const BackendEvent& e : backend_->Poll(now)) changed |= OnBackend(e, now);
  while (!timers_.empty() && timers_.front().at <= now) {
    std::pop_heap(timers_.begin(), timers_.end(), std::greater<Timer>());
    const Timer t = timers_.back();
    timers_.pop_back();
    const ControlJob& j = loop_->jobs()[t.job];
    if (t.epoch != j.epoch) continue;
    if (t.kind == TimerKind::kStart && j.phase == JobPhase::kBound) Ready(t.job, now);
    if (t.kind == TimerKind::kVacate && j.phase == JobPhase::kTerminating) Requeued(t.job, now, ReleaseCause::kVacated);
    changed = true;
  }
  return changed;
}

int Driver::ApplyPlan(const Plan& plan, int64_t now) {
  int binds = 0;
  size_t index = 0;  // the loop reports the actions in plan order
  loop_->Apply(plan, now, [&](const Applied& a) {
    if (a.done && !a.conflict && index < plan.actions.size()) Reconfigure(plan.actions[index], now);  // first
    ++index;
    OnApplied(a, now);
    binds += a.kind == ActionKind::kBind && a.done ? 1 : 0;
  });
  return binds;
}

// A bind or repartition that creates or destroys MIG instances or switches MIG mode: each GPU's new layout
// goes to the backend (a GPU Operator applies it; the simulated cluster needs nothing).
void Driver::Reconfigure(const Action& a, int64_t now) {
  if (a.kind != ActionKind::kBind && a.kind != ActionKind::kRepartition) return;
  for (const TaskPlacement& t : a.tasks)
    for (const GpuGrant& g : t.gpus)
      if (g.create_instance || g.enable_mig || g.disable_mig || g.destroy_mask)
        backend_->Reconfigure(g.gpu, MigLayoutText(loop_->state(), g.gpu), now);
}

int Driver::CycleOnce(int64_t now, const Policy& policy, Plan* plan_out) {
  Plan plan = loop_->Decide(now, policy);
  const int binds = ApplyPlan(plan, now);
  if (plan_out) *plan_out = std::move(plan);
  return binds;
}

void Driver::OnApplied(const Applied& a, int64_t now) {
  listener_->OnApplied(a, now);
  if (a.conflict || !a.done) return;
  switch (a.kind) {
    case ActionKind::kBind: OnBound(a, now); break;
    case ActionKind::kPreempt: OnPreempted(a, now); break;
    case ActionKind::kCheckpoint: backend_->Checkpoint(a.job, loop_->jobs()[a.job].epoch, now); break;
    case ActionKind::kReserve:
    case ActionKind::kRepartition: break;
  }
}

void Driver::OnBound(const Applied& a, int64_t now) {
  int64_t delay = 0;
  if (a.mig_mode_gpus > 0) delay = std::max(delay, options_.mig_mode_delay_s);
  if (a.mig_instance_gpus > 0) delay = std::max(delay, options_.mig_instance_delay_s);
  delay = std::max(delay, listener_->ExtraStartDelay(a.job, now));
  delay += a.granted_s - now;  // reconfiguration starts once the victims are gone
  if (delay == 0) Ready(a.job, now);
  else PushTimer(now + delay, TimerKind::kStart, a.job);
}

// A member is due: the group launches once every member is bound and due.
void Driver::Ready(JobSlot j, int64_t now) {
  if (j.value() >= static_cast<int32_t>(ready_.size())) ready_.resize(loop_->jobs().size(), 0);
  ready_[j.value()] = 1;
  for (JobSlot m : GroupOf(j))
    if (!IsReady(m) || loop_->jobs()[m].phase != JobPhase::kBound) return;
  Launch(j, now);
}

bool Driver::IsReady(JobSlot j) const {
  return j.value() < static_cast<int32_t>(ready_.size()) && ready_[j.value()];
}

void Driver::ClearReady(JobSlot j) {
  if (j.value() < static_cast<int32_t>(ready_.size())) ready_[j.value()] = 0;
}

LaunchSpec LaunchSpecOf(const ControlLoop& loop, JobSlot j) {
  const ControlJob& cj = loop.jobs()[j];
  LaunchSpec spec{j, cj.epoch, cj.tasks, cj.remaining_work_s, cj.key, {}};
  spec.node_names.reserve(cj.tasks.size());
  for (const TaskPlacement& t : cj.tasks)
    spec.node_names.push_back(loop.state().cluster().nodes[t.node].name);
  return spec;
}

void Driver::Launch(JobSlot j, int64_t now) {
  const std::vector<JobSlot> members = GroupOf(j);
  std::vector<TaskPlacement> all;
  bool refused = false;
  for (JobSlot m : members) {
    ClearReady(m);
    ControlJob& cj = loop_->jobs()[m];
    const LaunchAck ack = backend_->Launch(LaunchSpecOf(*loop_, m), now);
    if (ack.failed) {
      refused = true;
      const Released r = loop_->Fail(m, now);
      listener_->OnReleased(r, now, ReleaseCause::kLaunchRefused, -1);
      continue;
    }
    all.insert(all.end(), cj.tasks.begin(), cj.tasks.end());
    loop_->Start(m, now, ack.efficiency);
    listener_->OnStarted(m, now, ack.efficiency, ack.in_flight);
  }
  if (!refused) {
    Record(now, j, DecisionKind::kStart, std::move(all));
    return;
  }
  for (JobSlot m : members) {  // the job fails as a whole
    const ControlJob& cj = loop_->jobs()[m];
    if (cj.phase != JobPhase::kRunning) continue;
    backend_->Stop(m, cj.epoch, 0, "another member of the job could not start", now);
    listener_->OnReleased(loop_->Fail(m, now), now, ReleaseCause::kFailed, -1);
  }
  Record(now, j, DecisionKind::kFail);
}

void Driver::OnPreempted(const Applied& a, int64_t now) {
  const ControlJob& cj = loop_->jobs()[a.job];
  const uint32_t run = a.released ? cj.epoch - 1 : cj.epoch;  // a release ended the run's epoch
  backend_->Stop(a.job, run, a.released ? 0 : options_.stop_grace_s, "preempted", now);
  Record(now, a.job, DecisionKind::kPreempt);
  if (a.released) {
    ClearReady(a.job);
    listener_->OnReleased(*a.released, now, ReleaseCause::kPreempted, a.lost_since_s);
  } else {
    PushTimer(a.vacate_s, TimerKind::kVacate, a.job);
  }
  PreemptRestOfGroup(a.job, now);
}

void Driver::PreemptRestOfGroup(JobSlot j, int64_t now) {
  for (JobSlot m : GroupOf(j)) {
    const ControlJob& cj = loop_->jobs()[m];
    if (m == j || (cj.phase != JobPhase::kBound && cj.phase != JobPhase::kRunning)) continue;
    const uint32_t run = cj.epoch;
    const int64_t lost = loop_->Interrupt(m);
    backend_->Stop(m, run, 0, "preempted with its job", now);
    ClearReady(m);
    listener_->OnReleased(loop_->Requeue(m, now), now, ReleaseCause::kPreempted, lost);
  }
}

void Driver::Requeued(JobSlot j, int64_t now, ReleaseCause cause) {
  ClearReady(j);
  listener_->OnReleased(loop_->Requeue(j, now), now, cause, -1);
}

// Reports that change no job: measured demand goes to the loop's admission headroom; a failed MIG reconfiguration leaves the GPU's layout unknown, so the GPU takes
// no new work until an operator (or the backend, reading the layout again) uncordons it.
bool Driver::OnBackendReport(const BackendEvent& e) {
  if (e.kind == BackendEventKind::kDemand) {  // learned, never a change that wakes a cycle
    loop_->ObserveDemand(e.demand_ratio, e.sensitive);
    return false;
  }
  listener_->OnBackendEvent(e);
  if (e.kind != BackendEventKind::kReconfigureFailed || e.gpu < 0 || e.gpu >= loop_->state().num_gpus()) return false;
  return loop_->state().CordonGpu(e.gpu).ok();
}

bool Driver::OnBackend(const BackendEvent& e, int64_t now) {
  if (!loop_->jobs().valid(e.slot) || e.run != loop_->jobs()[e.slot].epoch) return OnBackendReport(e);
  const JobSlot j = e.slot;
  const JobPhase phase = loop_->jobs()[j].phase;
  now = std::min(now, e.at);  // when it happened (a driver polling late still charges the true end)
  const bool holding = phase == JobPhase::kBound || phase == JobPhase::kRunning;
  switch (e.kind) {
    case BackendEventKind::kEnded: {
      if (phase != JobPhase::kRunning) return false;
      listener_->OnReleased(loop_->Complete(j, now), now, ReleaseCause::kCompleted, -1);
      const std::vector<JobSlot> members = GroupOf(j);
      if (std::all_of(members.begin(), members.end(),
                      [&](JobSlot m) { return loop_->jobs()[m].phase == JobPhase::kDone; }))
        Record(now, j, DecisionKind::kEnd);
      return true;
    }
    case BackendEventKind::kFailed:
      if (phase != JobPhase::kRunning) return false;
      for (JobSlot m : GroupOf(j)) {
        const ControlJob& cj = loop_->jobs()[m];
        if (cj.phase != JobPhase::kBound && cj.phase != JobPhase::kRunning) continue;
        if (m != j) backend_->Stop(m, cj.epoch, 0, "another member of the job failed", now);
        listener_->OnReleased(loop_->Fail(m, now), now, ReleaseCause::kFailed, -1);
      }
      Record(now, j, DecisionKind::kFail);
      return true;
    case BackendEventKind::kInterrupted:
    case BackendEventKind::kLaunchFailed: {
      if (e.kind == BackendEventKind::kInterrupted ? phase != JobPhase::kRunning : !holding) return false;
      const int64_t lost = loop_->Interrupt(j);
      ClearReady(j);
      const ReleaseCause cause =
          e.kind == BackendEventKind::kInterrupted ? ReleaseCause::kInterrupted : ReleaseCause::kLaunchFailed;
      listener_->OnReleased(loop_->Requeue(j, now), now, cause, lost);
      Record(now, j, DecisionKind::kFail);
      PreemptRestOfGroup(j, now);
      return true;
    }
    default: return OnBackendReport(e);
  }
}

void Driver::Cancel(JobSlot j, int64_t now, std::string_view reason) {
  for (JobSlot m : GroupOf(j)) {
    const ControlJob& cj = loop_->jobs()[m];
    const bool holding = cj.phase == JobPhase::kBound || cj.phase == JobPhase::kRunning ||
                         cj.phase == JobPhase::kTerminating;
    const uint32_t run = cj.epoch;
    ClearReady(m);
    const Released r = loop_->Withdraw(m, now);
    if (!holding) continue;
    backend_->Stop(m, run, options_.stop_grace_s, reason, now);
    listener_->OnReleased(r, now, ReleaseCause::kCancelled, -1);
  }
  Record(now, j, DecisionKind::kCancel);
}

void Driver::Record(int64_t t, JobSlot j, DecisionKind kind, std::vector<TaskPlacement> tasks) {
  if (!recording_) return;
  decisions_.push_back({t, GroupOf(j).front(), kind, std::move(tasks)});
}

std::vector<Decision> Driver::TakeDecisions() {
  std::vector<Decision> out;
  out.swap(decisions_);
  return out;
}

}  // namespace tessera
