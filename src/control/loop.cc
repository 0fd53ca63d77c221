#include "control/loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tessera {
namespace {

// The answer to `a` before it is applied: its kind and job, nothing done yet.
Applied AppliedFor(const Action& a) {
  Applied r;
  r.kind = a.kind;
  r.job = SlotOf(a.job);
  return r;
}

bool IsInference(const ControlJob& j) { return j.request.cls != WorkloadClass::kTraining; }

}  // namespace

ControlLoop::ControlLoop(ClusterState state, std::vector<QueueConfig> queues, LoopOptions options)
    : state_(std::move(state)),
      queues_(std::move(queues)),
      options_(std::move(options)),
      usage_(static_cast<int>(queues_.size()), options_.cycle.usage_half_life_s, 0),
      demand_(options_.demand_learning),
      workload_(options_.workload_learning) {}

int ControlLoop::AddQueue(QueueConfig q) {
  queues_.push_back(std::move(q));
  usage_.AddQueue();
  return static_cast<int>(queues_.size()) - 1;
}

void ControlLoop::RestoreUsage(const std::vector<double>& usage, int64_t at_s) {
  usage_ = QueueUsage(static_cast<int>(queues_.size()), options_.cycle.usage_half_life_s, at_s);
  for (size_t q = 0; q < usage.size() && q < queues_.size(); ++q) usage_.SetUsage(static_cast<int>(q), usage[q]);
}

void ControlLoop::Submit(JobSlot j, int64_t now) {
  ControlJob& job = jobs_[j];
  job.phase = JobPhase::kPending;
  job.submit_s = now;
  jobs_.PushPending(j);
  workload_.Observe(job.request);
}

// A holding job's entry in the cycle's input (terminating jobs only count as vacating capacity), written
// into entry *used of in.running, which keeps its memory from an earlier build.
void ControlLoop::AddRunning(const ControlJob& j, int64_t now, CycleInput& in, size_t* used,
                             std::vector<int64_t>* drain) const {
  if (j.phase == JobPhase::kTerminating) {  // holds its GPUs (in the snapshot) until it vacates
    for (const TaskPlacement& t : j.tasks)
      for (const GpuGrant& g : t.gpus) in.vacating_milli += g.milli >= kMilliPerGpu ? kMilliPerGpu : 0;
    return;
  }
  if (*used == in.running.size()) in.running.emplace_back();
  RunningJob& r = in.running[(*used)++];
  r.id = j.request.id;
  r.queue = j.queue;
  r.preemptible = j.preemptible;
  r.expected_end_s = -1;
  if (options_.expected_ends && j.remaining_work_s >= 0) {
    const int64_t from = std::max(j.bind_s, j.start_s);
    const bool progress = options_.running_end_at_progress && j.phase == JobPhase::kRunning && j.end_s >= 0;
    const double run_s = progress ? static_cast<double>(j.end_s - from) : j.remaining_work_s;
    r.expected_end_s = from + static_cast<int64_t>(std::ceil(run_s * j.time_limit_factor * LimitScale()));
    // Past its estimate: expected to end any moment (planning on it keeps reservations close, so gangs are
    // not starved by estimates that run late).
    if (r.expected_end_s <= now) r.expected_end_s = now + 1;
  }
  if (drain)  // drain times: the placement hint that keeps nodes' lifetimes aligned
    for (const TaskPlacement& t : j.tasks)
      (*drain)[t.node] = std::max((*drain)[t.node], r.expected_end_s < 0 ? ClusterState::kNever : r.expected_end_s);
  r.priority = j.request.priority;
  r.cls = j.request.cls;
  r.tasks = j.tasks;
  r.cpu_milli = j.request.cpu_milli;
  r.host_memory_mib = j.request.host_memory_mib;
  r.gpu_milli = j.held_milli;
  r.start_time_s = j.bind_s;
  r.last_checkpoint_s = j.last_checkpoint_s;
  r.checkpointable = j.checkpointable;
}

PreemptKind ControlLoop::MayPreemptFor(JobSlot victim, JobSlot for_job, int64_t now) const {
  const ControlJob& p = jobs_[for_job];
  if (p.phase != JobPhase::kPending) return PreemptKind::kNone;
  return MayPreemptFor(victim, p.request, p.queue, now);
}

PreemptKind ControlLoop::MayPreemptFor(JobSlot victim, const Request& r, int queue, int64_t now) const {
  const ControlJob& v = jobs_[victim];
  if (v.phase != JobPhase::kBound && v.phase != JobPhase::kRunning) return PreemptKind::kNone;
  // What each leaf queue holds, as a cycle counts it, against its guarantee (no queues: one queue
  // guaranteed the whole cluster).
  std::vector<int64_t> held(queues_.size(), 0);
  for (JobSlot s : jobs_.holding()) {
    const ControlJob& h = jobs_[s];
    if (h.phase != JobPhase::kTerminating && h.queue >= 0 && h.queue < static_cast<int>(held.size()))
      held[h.queue] += UnitsOf(state_, h.tasks, options_.cycle.slice_units);
  }
  const auto within = [&](int q, int64_t more) {
    return q < 0 || q >= static_cast<int>(held.size()) || held[q] + more <= queues_[q].guaranteed_milli;
  };
  const int64_t units = r.SubGpu() ? r.gpu_milli : int64_t{kMilliPerGpu} * r.TotalGpus();
  CycleInput in;
  size_t used = 0;
  AddRunning(v, now, in, &used, nullptr);
  return MayPreempt(Preemptor{r.priority, queue, within(queue, units)}, in.running[0], !within(v.queue, 0),
                    now, options_.cycle);
}

CycleInput ControlLoop::BuildInput(int64_t now) {
  CycleInput in;
  BuildInput(now, &in);
  return in;
}

void ControlLoop::BuildInput(int64_t now, CycleInput* out) {
  CycleInput& in = *out;
  state_.set_learned_headroom(demand_.Headroom());
  state_.set_learned_workload(workload_.Current());
  in.snapshot = &state_;
  in.queues = queues_;
  in.now_s = now;
  in.options = options_.cycle;
  in.vacating_milli = 0;
  usage_.AdvanceTo(now);
  if (options_.track_usage) in.historical_usage = usage_.usage();
  else in.historical_usage.assign(queues_.size(), 0.0);
  in.pending.clear();
  in.pending.reserve(jobs_.pending().size());
  const double scale = LimitScale();
  for (JobSlot p : jobs_.pending()) {
    const ControlJob& j = jobs_[p];
    in.pending.push_back(PendingJob{j.request, j.queue, j.submit_s, j.submit_s, false});
    if (options_.expected_ends) {
      const int64_t d = static_cast<int64_t>(std::ceil(std::max(0.0, j.remaining_work_s) * j.time_limit_factor * scale));
      in.pending.back().expected_duration_s = d;
      if (j.remaining_work_s >= 0) in.pending.back().request.expected_end_s = now + d;
    }
  }
  in.drain_s.clear();
  if (options_.drain_times) in.drain_s.assign(state_.num_nodes(), ClusterState::kNoWork);
  size_t used = 0;
  for (JobSlot a : jobs_.holding()) AddRunning(jobs_[a], now, in, &used, options_.drain_times ? &in.drain_s : nullptr);
  in.running.resize(used);
}

namespace {

// Capacity for n, every element written once (the pages mapped); the elements kept (moved).
template <class T>
void GrowTouched(std::vector<T>* v, size_t n) {
  if (v->capacity() >= n) return;
  std::vector<T> grown(n);
  std::move(v->begin(), v->end(), grown.begin());
  grown.resize(v->size());
  v->swap(grown);
}

}  // namespace

void ControlLoop::ReserveInput(CycleInput* in, size_t pending, size_t running) {
  GrowTouched(&in->pending, pending);
  GrowTouched(&in->running, running);
}

Plan ControlLoop::Decide(int64_t now, const Policy& policy) { return RunCycle(BuildInput(now), policy); }

std::vector<Applied> ControlLoop::Apply(const Plan& plan, int64_t now, const Observer& observer) {
  std::vector<Applied> out;
  out.reserve(plan.actions.size());
  std::vector<JobSlot> bound;
  for (const Action& a : plan.actions) {
    Applied r = AppliedFor(a);
    if (!jobs_.valid(r.job)) {
      r.conflict = true;
    } else {
      switch (a.kind) {
        case ActionKind::kBind:
          r = ApplyBind(a, now);
          if (r.done) bound.push_back(r.job);
          break;
        case ActionKind::kPreempt: r = ApplyPreempt(a, now); break;
        case ActionKind::kCheckpoint: {
          ControlJob& j = jobs_[r.job];
          if (j.phase == JobPhase::kRunning) {
            j.last_checkpoint_s = now;
            r.done = true;
          }
          break;
        }
        case ActionKind::kReserve:  // the cycle's own bookkeeping holds it
          r.done = true;
          r.reserve_start_s = a.start_s;
          break;
        case ActionKind::kRepartition: r = ApplyRepartition(a); break;
      }
    }
    if (observer) observer(r);
    out.push_back(std::move(r));
  }
  jobs_.ErasePending(bound);
  return out;
}

Applied ControlLoop::ApplyBind(const Action& a, int64_t now) {
  Applied r = AppliedFor(a);
  ControlJob& j = jobs_[r.job];
  if (j.phase != JobPhase::kPending ||
      !state_.CanApply(a.tasks, j.request.cpu_milli, j.request.host_memory_mib).ok()) {
    r.conflict = true;
    return r;
  }
  // After preemption the job gets its capacity once the victims' grace period is over.
  r.granted_s = std::max(now, a.start_s);
  r.backfill_until_s = a.backfill_until_s;
  Hold(r.job, a.tasks, now);
  if (j.first_bind_s < 0) {
    j.first_bind_s = now;
    r.first_bind = true;
  }
  for (const TaskPlacement& t : a.tasks)
    for (const GpuGrant& g : t.gpus) {
      if (g.enable_mig || g.disable_mig) ++r.mig_mode_gpus;
      else if (g.create_instance || g.destroy_mask) ++r.mig_instance_gpus;
    }
  r.done = true;
  return r;
}

void ControlLoop::Hold(JobSlot j, const std::vector<TaskPlacement>& tasks, int64_t now) {
  ControlJob& job = jobs_[j];
  state_.Apply(tasks, job.request.cpu_milli, job.request.host_memory_mib, IsInference(job));
  job.tasks = tasks;
  job.phase = JobPhase::kBound;
  job.bind_s = now;
  job.held_milli = 0;
  for (const TaskPlacement& t : tasks)
    for (const GpuGrant& g : t.gpus) job.held_milli += g.milli;
  if (options_.track_usage) {
    job.held_units = UnitsOf(state_, job.tasks, options_.cycle.slice_units);
    usage_.AdvanceTo(now);
    usage_.AddHeld(job.queue, job.held_units);
  }
  jobs_.AddHolding(j);
}

// Creates the MIG instances `tasks` name that the state lacks (destroying idle instances in their way).
void ControlLoop::EnsureInstances(const std::vector<TaskPlacement>& tasks) {
  for (const TaskPlacement& t : tasks)
    for (const GpuGrant& g : t.gpus) {
      if (g.mig_profile < 0 || g.gpu < 0 || g.gpu >= state_.num_gpus()) continue;
      const GpuState& gs = state_.gpu(g.gpu);
      bool exists = false;
      for (int i = 0; i < gs.n_instances; ++i)
        exists |= gs.instances[i].profile == g.mig_profile && gs.instances[i].start == g.mig_start;
      if (exists) continue;
      if (!gs.mig_enabled) (void)state_.SetMigMode(g.gpu, true);
      const GpuKind& kind = state_.kind_of_gpu(g.gpu);
      if (g.mig_profile >= static_cast<int>(kind.profiles.size())) continue;
      const uint8_t want = kind.profiles[g.mig_profile].MaskAt(g.mig_start);
      for (int i = state_.gpu(g.gpu).n_instances - 1; i >= 0; --i) {
        const MigSlot& slot = state_.gpu(g.gpu).instances[i];
        if ((kind.profiles[slot.profile].MaskAt(slot.start) & want) && !slot.busy)
          (void)state_.DestroyInstance(g.gpu, slot.start);
      }
      (void)state_.CreateInstance(g.gpu, g.mig_profile, g.mig_start);
    }
}

Status ControlLoop::Resume(JobSlot j, const std::vector<TaskPlacement>& tasks, int64_t start_s, int64_t now,
                           double efficiency) {
  ControlJob& job = jobs_[j];
  if (job.phase != JobPhase::kFuture && job.phase != JobPhase::kPending)
    return Status::Error(fmt::format("job {} is {}, not waiting", j.value(), JobPhaseName(job.phase)));
  for (const TaskPlacement& t : tasks)
    for (const GpuGrant& g : t.gpus)
      if (t.node < 0 || t.node >= state_.num_nodes() || g.gpu < 0 || g.gpu >= state_.num_gpus())
        return Status::Error(fmt::format("job {}: grant of GPU {} on node {} is not in the cluster",
                                         j.value(), g.gpu, t.node));
  EnsureInstances(tasks);
  if (Status st = state_.CanApply(tasks, job.request.cpu_milli, job.request.host_memory_mib); !st.ok()) return st;
  if (job.phase == JobPhase::kPending) jobs_.ErasePending({j});
  Hold(j, tasks, now);
  job.bind_s = job.first_bind_s = start_s;
  Start(j, start_s, efficiency);
  return Status::Ok();
}

Released ControlLoop::Withdraw(JobSlot j, int64_t now) {
  ControlJob& job = jobs_[j];
  Released r;
  r.job = kNoSlot;
  if (job.phase == JobPhase::kPending) jobs_.ErasePending({j});
  else if (job.phase == JobPhase::kBound || job.phase == JobPhase::kRunning || job.phase == JobPhase::kTerminating)
    r = ReleaseHold(j, now);
  job.phase = JobPhase::kFailed;
  return r;
}

Applied ControlLoop::ApplyPreempt(const Action& a, int64_t now) {
  Applied r = AppliedFor(a);
  ControlJob& j = jobs_[r.job];
  if (j.phase != JobPhase::kBound && j.phase != JobPhase::kRunning) {
    r.conflict = true;
    return r;
  }
  r.tasks = j.tasks;
  r.lost_since_s = Interrupt(r.job);
  r.done = true;
  if (a.for_job < 0 && options_.termination_grace_s > 0) {  // nobody takes its capacity: it vacates later
    Terminate(r.job);
    r.vacate_s = now + options_.termination_grace_s;
    return r;
  }
  r.released = Requeue(r.job, now);
  return r;
}

Applied ControlLoop::ApplyRepartition(const Action& a) {
  Applied r = AppliedFor(a);
  for (const TaskPlacement& t : a.tasks)
    for (const GpuGrant& g : t.gpus) {
      Status st = Status::Ok();
      for (int s = 0; s < 8 && st.ok(); ++s)
        if ((g.destroy_mask >> s) & 1u) st = state_.DestroyInstance(g.gpu, s);
      if (st.ok() && g.disable_mig) st = state_.SetMigMode(g.gpu, false);
      if (st.ok() && g.enable_mig) st = state_.SetMigMode(g.gpu, true);
      if (st.ok() && g.create_instance) st = state_.CreateInstance(g.gpu, g.mig_profile, g.mig_start);
      if (st.ok()) ++r.gpus_reconfigured;
      else ++r.gpus_failed;
    }
  r.done = r.gpus_reconfigured > 0;
  r.conflict = r.gpus_failed > 0;
  return r;
}

int64_t ControlLoop::Start(JobSlot j, int64_t now, double efficiency) {
  ControlJob& job = jobs_[j];
  job.phase = JobPhase::kRunning;
  job.start_s = now;
  job.efficiency = efficiency;
  job.end_s = RunEnd(now, job.remaining_work_s, efficiency);
  return job.end_s;
}

int64_t RunEnd(int64_t now, double work_s, double efficiency) {
  if (work_s < 0) return -1;
  const double wall = work_s / std::max(1e-9, efficiency);
  return now + std::max<int64_t>(1, static_cast<int64_t>(std::ceil(wall)));
}

Released ControlLoop::ReleaseHold(JobSlot j, int64_t now) {
  ControlJob& job = jobs_[j];
  Released r{j, job.phase, job.start_s, job.last_checkpoint_s, job.held_milli, {}};
  state_.Release(job.tasks, job.request.cpu_milli, job.request.host_memory_mib, IsInference(job));
  r.tasks = std::move(job.tasks);
  if (options_.track_usage) {
    usage_.AdvanceTo(now);
    usage_.AddHeld(job.queue, -job.held_units);
  }
  job.tasks.clear();
  job.held_milli = job.held_units = 0;
  jobs_.EraseHolding(j);
  ++job.epoch;
  return r;
}

Released ControlLoop::Complete(JobSlot j, int64_t now) {
  if (options_.expected_ends && jobs_[j].remaining_work_s >= 0 && jobs_[j].time_limit_factor > 0) {
    limit_sum_ += -std::log(jobs_[j].time_limit_factor);
    ++limit_n_;
  }
  Released r = ReleaseHold(j, now);
  jobs_[j].phase = JobPhase::kDone;
  return r;
}

Released ControlLoop::Fail(JobSlot j, int64_t now) {
  Released r = ReleaseHold(j, now);
  jobs_[j].phase = JobPhase::kFailed;
  return r;
}

void ControlLoop::AppendTakeOf(JobSlot j, int64_t now, std::string reason, Plan* plan) const {
  const ControlJob& job = jobs_[j];
  const bool running = job.phase == JobPhase::kRunning;
  const TakeTarget t{EngineId(j), job.checkpointable, running,
                     running ? now - std::max(job.start_s, job.last_checkpoint_s) : 0};
  AppendTake(t, EngineId(j), std::move(reason), options_.cycle.checkpoint_min_age_s, plan);
}

int64_t ControlLoop::Interrupt(JobSlot j) {
  ControlJob& job = jobs_[j];
  if (job.phase != JobPhase::kRunning) return -1;
  const bool ckpt = job.checkpointable && job.last_checkpoint_s >= job.start_s;
  if (job.remaining_work_s >= 0)
    job.remaining_work_s = std::max(
        1.0, job.remaining_work_s - (ckpt ? (job.last_checkpoint_s - job.start_s) * job.efficiency : 0.0));
  return ckpt ? job.last_checkpoint_s : job.start_s;
}

void ControlLoop::Terminate(JobSlot j) {
  ControlJob& job = jobs_[j];
  job.phase = JobPhase::kTerminating;
  ++job.epoch;
}

Released ControlLoop::Requeue(JobSlot j, int64_t now) {
  Released r = ReleaseHold(j, now);
  jobs_[j].phase = JobPhase::kPending;
  jobs_.InsertPendingBySubmit(j);
  return r;
}

}  // namespace tessera
