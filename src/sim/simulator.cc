#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <climits>
#include <chrono>
#include <cmath>
#include <deque>
#include <set>

#include "base/random.h"
#include "sched/cluster_state.h"
#include "sched/cycle.h"
#include "sim/event_queue.h"

namespace tessera {
namespace {

// kTerminating: preempted with nobody waiting for its capacity (production headroom); it holds its GPUs,
// doing no work, for the termination grace period, then returns to the queue.
// A uniform draw in [0, 1) from (a, b, seed): splitmix64 of their mix. Deterministic, no shared state.
double HashUniform(uint64_t a, uint64_t b, uint64_t seed) {
  return UnitInterval(SplitMix64Mix(a * 0xd1b54a32d192ed03ULL + b * 0x8cb92ba72f3d8dd7ULL + kSplitMix64Gamma * (seed + 1)));
}

enum class JobStatus : uint8_t { kFuture, kPending, kBound, kRunning, kTerminating, kDone, kFailed };

struct JobState {
  const TraceJob* spec = nullptr;
  Request request;
  JobStatus status = JobStatus::kFuture;
  int64_t submit_s = 0;        // arrival (backlog: release) time
  int64_t first_bind_s = -1;
  int64_t bind_s = -1;
  int64_t start_s = -1;
  int64_t end_s = -1;          // scheduled completion while running (-1 = none)
  uint32_t epoch = 0;
  std::vector<TaskPlacement> tasks;
  double remaining_work_s = 0;  // ideal seconds left (at efficiency 1)
  double checkpointed_work_s = 0;  // ideal seconds done and saved
  int64_t last_checkpoint_s = -1;
  double efficiency = 1;
  bool oom = false;
  bool in_window = false;
  // Current contributions (milli), added at bind/start, removed at release.
  double alloc_milli = 0;
  double used_milli = 0;
  double eff_gpus = 0;
  int cls_index = 0;
  int team_index = 0;
};

constexpr int kClasses = 4;

struct Accum {
  double alloc = 0, used = 0;  // milli-seconds integrals
};

}  // namespace

Result<RunResult> Simulate(const Cluster& cluster, const Catalog& catalog, const std::vector<TraceJob>& trace,
                           const Policy& policy_in, const SimOptions& opt) {
  const auto wall0 = std::chrono::steady_clock::now();
  auto built = ClusterState::Build(cluster, catalog);
  if (!built.ok()) return Status::Error("simulate: " + built.error());
  ClusterState state = std::move(built).value();
  FabricParams fabric = opt.fabric;
  if (opt.fabric_oversubscription_from_cluster) fabric.leaf_oversubscription = cluster.spine_oversubscription;

  SimHook* const hook = opt.hook;  // issue 5 tiers hook (may be null)
  const Policy& policy = hook ? hook->Route(policy_in) : policy_in;
  if (hook) {
    if (Status st = hook->Begin(state); !st.ok()) return Status::Error("simulate: " + st.message());
  }
  RunResult res;
  res.policy = std::string(policy.name());
  res.gpus = state.num_gpus();
  if (res.gpus == 0) return Status::Error("simulate: the cluster has no GPUs");
  const double capacity_milli = 1000.0 * res.gpus;
  const bool backlog = opt.arrivals == "backlog";
  if (!backlog && opt.arrivals != "trace")
    return Status::Error(fmt::format("simulate: arrivals '{}' is not one of trace, backlog", opt.arrivals));
  if (backlog && opt.horizon_s <= 0) return Status::Error("simulate: backlog arrivals need a horizon");

  // Jobs and teams.
  std::vector<JobState> jobs(trace.size());
  std::vector<std::string> team_names;
  std::map<std::string, int> team_index;
  for (size_t i = 0; i < trace.size(); ++i) {
    JobState& j = jobs[i];
    j.spec = &trace[i];
    auto r = ToRequest(trace[i], catalog);
    if (!r.ok()) return Status::Error("simulate: " + r.error());
    j.request = *r;
    j.request.id = static_cast<JobId>(i);  // the engine's id is the job table index
    j.submit_s = trace[i].submit_s;
    j.remaining_work_s = trace[i].duration_s < 0 ? -1 : static_cast<double>(trace[i].duration_s);
    j.cls_index = static_cast<int>(trace[i].cls);
    auto [it, inserted] = team_index.emplace(trace[i].team, static_cast<int>(team_names.size()));
    if (inserted) team_names.push_back(trace[i].team);
    j.team_index = it->second;
  }
  std::vector<QueueConfig> queues;
  for (const std::string& t : team_names) {
    QueueConfig q;
    q.name = t;
    queues.push_back(std::move(q));
  }
  // Multi-tenant runs: the tenancy's queues; a job's queue comes from its team.
  std::vector<int> queue_of(trace.size(), 0);
  for (size_t i = 0; i < trace.size(); ++i) queue_of[i] = jobs[i].team_index;
  if (opt.tenancy) {
    queues = opt.tenancy->queues;
    for (size_t i = 0; i < trace.size(); ++i) {
      auto it = opt.tenancy->queue_of_team.find(trace[i].team);
      queue_of[i] = it == opt.tenancy->queue_of_team.end() ? 0 : it->second;
    }
    res.job_records.resize(trace.size());
  }
  std::vector<int64_t> queue_alloc(queues.size(), 0);  // GPU units held per queue (multi-tenant records)
  std::vector<int64_t> queue_waiting(queues.size(), 0);  // GPU units asked by the queue's pending jobs
  // Hierarchy for guarantee records: parent of each queue, and each queue's subtree allocation after the last
  // cycle. A job is within its guarantee only if its queue and every ancestor stay within theirs.
  std::vector<int> queue_parent(queues.size(), -1);
  for (size_t q = 0; q < queues.size(); ++q)
    for (size_t a = 0; a < queues.size(); ++a)
      if (!queues[q].parent.empty() && queues[a].name == queues[q].parent) queue_parent[q] = static_cast<int>(a);
  std::vector<int64_t> subtree_alloc(queues.size(), 0);
  auto ancestors_within = [&](int q, int64_t units) {
    for (int a = queue_parent[q]; a >= 0; a = queue_parent[a])
      if (subtree_alloc[a] + units > queues[a].guaranteed_milli) return false;
    return true;
  };

  SimClock clock;
  EventQueue events;
  // Arrival order: by submit time, then trace position.
  std::vector<int32_t> order(trace.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  if (!backlog)
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return trace[a].submit_s < trace[b].submit_s; });
  size_t next_arrival = 0;
  std::vector<int32_t> pending;  // in queue order (submit time, then arrival order)
  std::set<int32_t> active;      // bound or running

  // Integrals.
  std::array<Accum, kClasses> cls_acc{};
  std::vector<Accum> team_acc(team_names.size());
  double total_alloc = 0, total_used = 0, eff_integral = 0, train_alloc_integral = 0;
  std::array<double, kClasses> cls_alloc_now{}, cls_used_now{};
  std::vector<double> team_alloc_now(team_names.size(), 0), team_used_now(team_names.size(), 0);
  double alloc_now = 0, used_now = 0, eff_now = 0, train_alloc_now = 0;
  const int64_t w0 = opt.warmup_s;
  const int64_t w1 = opt.horizon_s > 0 ? opt.horizon_s : INT64_MAX;
  int64_t last_t = 0;
  int64_t next_sample = 0;
  auto advance = [&](int64_t t) {
    const int64_t a = std::max(last_t, w0), b = std::min(t, w1);
    if (b > a) {
      const double dt = static_cast<double>(b - a);
      total_alloc += alloc_now * dt;
      total_used += used_now * dt;
      eff_integral += eff_now * dt;
      train_alloc_integral += train_alloc_now * dt;
      for (int c = 0; c < kClasses; ++c) {
        cls_acc[c].alloc += cls_alloc_now[c] * dt;
        cls_acc[c].used += cls_used_now[c] * dt;
      }
      for (size_t k = 0; k < team_acc.size(); ++k) {
        team_acc[k].alloc += team_alloc_now[k] * dt;
        team_acc[k].used += team_used_now[k] * dt;
      }
    }
    while (next_sample <= t && next_sample <= (opt.horizon_s > 0 ? opt.horizon_s : t)) {
      res.series.push_back({next_sample / 3600.0, alloc_now / capacity_milli, used_now / capacity_milli});
      next_sample += std::max<int64_t>(1, opt.sample_every_s);
    }
    last_t = t;
    clock.AdvanceTo(t);
  };
  auto add_contrib = [&](JobState& j, double alloc, double used, double effg, int sign) {
    const bool train = j.spec->cls == WorkloadClass::kTraining;
    alloc_now += sign * alloc;
    used_now += sign * used;
    cls_alloc_now[j.cls_index] += sign * alloc;
    cls_used_now[j.cls_index] += sign * used;
    team_alloc_now[j.team_index] += sign * alloc;
    team_used_now[j.team_index] += sign * used;
    if (train) {
      eff_now += sign * effg;
      train_alloc_now += sign * alloc;
    }
  };

  // Step-time efficiency of a placement.
  auto efficiency_of = [&](const JobState& j) -> double {
    const TraceJob& s = *j.spec;
    if (s.cls != WorkloadClass::kTraining || s.step_compute_s <= 0 || s.grad_bytes <= 0) return 1.0;
    GangLayout l;
    std::vector<std::pair<NodeId, int>> per_node;
    std::set<LeafId> leaves;
    std::set<SpineId> spines;
    l.gpus = 0;
    l.nic_gbps_per_gpu = 1e18;
    for (const TaskPlacement& t : j.tasks) {
      l.gpus += static_cast<int>(t.gpus.size());
      auto it = std::find_if(per_node.begin(), per_node.end(), [&](auto& p) { return p.first == t.node; });
      if (it == per_node.end()) per_node.push_back({t.node, static_cast<int>(t.gpus.size())});
      else it->second += static_cast<int>(t.gpus.size());
      leaves.insert(state.node(t.node).leaf);
      spines.insert(state.node(t.node).spine);
      l.nic_gbps_per_gpu = std::min(l.nic_gbps_per_gpu, cluster.nodes[t.node].nic_gbps_per_gpu);
      l.interconnect = cluster.nodes[t.node].interconnect;
    }
    for (auto& p : per_node) l.gpus_per_node.push_back(p.second);
    l.span = l.gpus <= 1 ? Span::kOneGpu
             : per_node.size() == 1 ? Span::kOneNode
             : leaves.size() == 1   ? Span::kOneLeaf
             : spines.size() == 1   ? Span::kOneSpine
                                    : Span::kCrossSpine;
    return ComputeStepTime(fabric, l, s.grad_bytes, s.step_compute_s).Efficiency();
  };
  auto grant_memory = [&](const GpuGrant& g) -> int64_t {
    const GpuKind& kind = state.kind_of_gpu(g.gpu);
    if (g.mig_profile >= 0) return kind.profiles[g.mig_profile].usable_mib;
    if (g.milli >= kMilliPerGpu) return kind.memory_mib;
    return g.memory_mib;
  };
  auto is_inference = [](const JobState& j) { return j.request.cls != WorkloadClass::kTraining; };

  auto release = [&](JobState& j, bool completed = false) {
    if (hook)  // issue 5 tiers hook
      hook->OnRelease(static_cast<int32_t>(&j - jobs.data()), clock.now_s(), completed,
                      j.status == JobStatus::kRunning ? j.start_s : -1, j.last_checkpoint_s);
    state.Release(j.tasks, j.request.cpu_milli, j.request.host_memory_mib, is_inference(j));
    add_contrib(j, j.alloc_milli, j.used_milli, j.eff_gpus, -1);
    j.alloc_milli = j.used_milli = j.eff_gpus = 0;
    active.erase(static_cast<int32_t>(&j - jobs.data()));
  };
  // A bound or running job stops before its end (preemption, failure): its queue's records count it as
  // waiting again, and a running job keeps only the work up to its last checkpoint (a job that never
  // checkpointed restarts from scratch). Returns when the lost work began, or -1 if it was not running.
  auto interrupt = [&](JobState& j) -> int64_t {
    const int32_t idx = static_cast<int32_t>(&j - jobs.data());
    if (opt.tenancy) {
      queue_alloc[queue_of[idx]] -= UnitsOf(state, j.tasks, opt.tenancy->cycle.slice_units);
      queue_waiting[queue_of[idx]] += res.job_records[idx].gpu_milli;
    }
    if (j.status != JobStatus::kRunning) return -1;
    const bool ckpt = j.spec->checkpointable && j.last_checkpoint_s >= j.start_s;
    if (j.remaining_work_s >= 0)
      j.remaining_work_s =
          std::max(1.0, j.remaining_work_s - (ckpt ? (j.last_checkpoint_s - j.start_s) * j.efficiency : 0.0));
    return ckpt ? j.last_checkpoint_s : j.start_s;
  };
  // A preempted job goes back into the queue at its submit-time position.
  auto requeue = [&](JobState& j) {
    release(j);
    j.tasks.clear();
    j.epoch++;
    j.status = JobStatus::kPending;
    const int32_t idx = static_cast<int32_t>(&j - jobs.data());
    auto pos = std::find_if(pending.begin(), pending.end(), [&](int32_t p) { return jobs[p].submit_s > j.submit_s; });
    pending.insert(pos, idx);
  };
  auto start = [&](int32_t idx, int64_t now) {
    JobState& j = jobs[idx];
    // OOM: a task whose granted memory is below its need fails as soon as it runs.
    for (const TaskPlacement& t : j.tasks)
      for (const GpuGrant& g : t.gpus)
        if (grant_memory(g) < j.spec->memory_mib) j.oom = true;
    if (j.oom) {
      ++res.oom_events;
      ++res.jobs_failed;
      release(j);
      j.status = JobStatus::kFailed;
      j.epoch++;
      return;
    }
    j.status = JobStatus::kRunning;
    j.start_s = now;
    j.efficiency = efficiency_of(j);
    if (hook) j.efficiency *= hook->OnRun(idx, now);  // issue 5: periodic checkpoint overhead
    double used = 0;
    int gpus = 0;
    for (const TaskPlacement& t : j.tasks)
      for (const GpuGrant& g : t.gpus) {
        used += std::min<double>(j.spec->compute_milli, g.milli);
        ++gpus;
      }
    used *= j.efficiency;
    const double effg = j.spec->cls == WorkloadClass::kTraining ? gpus * j.efficiency : 0;
    add_contrib(j, 0, used, effg, +1);
    j.used_milli = used;
    j.eff_gpus = effg;
    if (j.remaining_work_s >= 0) {
      const double wall = j.remaining_work_s / std::max(1e-9, j.efficiency);
      j.end_s = now + std::max<int64_t>(1, static_cast<int64_t>(std::ceil(wall)));
      events.Push({j.end_s, EventType::kCompletion, idx, j.epoch, 0});
    }
    if (opt.gpu_mtbf_h > 0 && gpus > 0) {  // failure injection: exponential time to this run's first failure
      const double u = HashUniform(static_cast<uint64_t>(idx), j.epoch, opt.failure_seed);
      const double dt = -std::log1p(-u) * opt.gpu_mtbf_h * 3600.0 / gpus;
      const int64_t at = now + std::max<int64_t>(1, static_cast<int64_t>(dt));
      if (j.end_s < 0 || at < j.end_s) events.Push({at, EventType::kFailure, idx, j.epoch, 0});
    }
  };

  auto mark_arrival = [&](int32_t idx, int64_t now) {
    JobState& j = jobs[idx];
    j.status = JobStatus::kPending;
    j.submit_s = now;
    j.in_window = now >= w0 && now < w1;
    if (opt.tenancy) {
      SimJobRecord& r = res.job_records[idx];
      r.team = j.spec->team;
      r.priority = j.request.priority;
      r.submit_s = now;
      r.gpu_milli = j.request.SubGpu() ? j.request.gpu_milli : int64_t{kMilliPerGpu} * j.request.TotalGpus();
      const int q = queue_of[idx];
      // Within the guarantee counting what the queue holds and what waits ahead of it.
      r.within_guarantee = queue_alloc[q] + queue_waiting[q] + r.gpu_milli <= queues[q].guaranteed_milli &&
                           ancestors_within(q, r.gpu_milli);
      queue_waiting[q] += r.gpu_milli;
      r.in_window = j.in_window;
    }
    if (j.in_window) {
      ClassStats& c = res.by_class[WorkloadClassName(j.spec->cls)];
      ClassStats& t = res.by_team[j.spec->team];
      for (ClassStats* s : {&c, &t}) {
        ++s->jobs_arrived;
        s->gpu_requests_arrived += j.spec->GpuRequests();
      }
    }
    pending.push_back(idx);
  };

  auto apply_plan = [&](const Plan& plan, int64_t now) -> int {
    int binds = 0;
    std::vector<int32_t> removed;
    for (const Action& a : plan.actions) {
      if (a.job < 0 || a.job >= static_cast<JobId>(jobs.size())) {
        ++res.apply_conflicts;
        continue;
      }
      const int32_t idx = static_cast<int32_t>(a.job);
      JobState& j = jobs[idx];
      switch (a.kind) {
        case ActionKind::kBind: {
          if (j.status != JobStatus::kPending ||
              !state.CanApply(a.tasks, j.request.cpu_milli, j.request.host_memory_mib).ok()) {
            ++res.apply_conflicts;
            break;
          }
          // After preemption the job gets its capacity once the victims' grace period is over.
          const int64_t granted = std::max(now, a.start_s);
          if (opt.tenancy) {
            if (res.job_records[idx].first_bind_s < 0) res.job_records[idx].first_bind_s = granted;
            queue_waiting[queue_of[idx]] -= res.job_records[idx].gpu_milli;
            queue_alloc[queue_of[idx]] += UnitsOf(state, a.tasks, opt.tenancy->cycle.slice_units);
          }
          state.Apply(a.tasks, j.request.cpu_milli, j.request.host_memory_mib, is_inference(j));
          j.tasks = a.tasks;
          j.status = JobStatus::kBound;
          j.bind_s = now;
          if (j.first_bind_s < 0) {
            j.first_bind_s = now;
            ClassStats& c = res.by_class[WorkloadClassName(j.spec->cls)];
            ClassStats& t = res.by_team[j.spec->team];
            for (ClassStats* s : {&c, &t}) {
              // Served mix: work first started inside the window (whenever it arrived).
              if (now >= w0 && now < w1) {
                ++s->jobs_started;
                s->gpu_requests_served += j.spec->GpuRequests();
              }
              if (j.in_window) s->queue_delays_s.push_back(static_cast<double>(granted - j.submit_s));
            }
          }
          double alloc = 0;
          int64_t delay = 0;
          const int64_t grace = granted - now;
          for (const TaskPlacement& t : a.tasks)
            for (const GpuGrant& g : t.gpus) {
              alloc += g.milli;
              if (g.enable_mig || g.disable_mig) {
                ++res.mig_repartitions;
                delay = std::max(delay, opt.mig_mode_delay_s);
              } else if (g.create_instance || g.destroy_mask) {
                ++res.mig_repartitions;
                delay = std::max(delay, opt.mig_instance_delay_s);
              }
            }
          if (hook) delay = std::max(delay, hook->OnBind(idx, a.tasks, now));  // issue 5: restart cost
          j.alloc_milli = alloc;
          add_contrib(j, alloc, 0, 0, +1);
          active.insert(idx);
          removed.push_back(idx);
          ++binds;
          delay += grace;  // reconfiguration starts once the victims are gone
          if (delay == 0) start(idx, now);
          else events.Push({now + delay, EventType::kStart, idx, j.epoch, 0});
          break;
        }
        case ActionKind::kPreempt: {
          if (j.status != JobStatus::kBound && j.status != JobStatus::kRunning) {
            ++res.apply_conflicts;
            break;
          }
          if (const int64_t since = interrupt(j); opt.tenancy && since >= 0)
            res.lost_gpu_s += static_cast<double>(now - since) * UnitsOf(state, j.tasks, SliceUnits::kCompute) / 1000.0;
          ++res.preemptions;
          const int64_t grace = opt.tenancy ? opt.tenancy->cycle.termination_grace_s : 0;
          if (a.for_job < 0 && grace > 0) {  // nobody takes its capacity: it vacates after the grace period
            add_contrib(j, 0, j.used_milli, j.eff_gpus, -1);
            j.used_milli = j.eff_gpus = 0;
            j.status = JobStatus::kTerminating;
            j.epoch++;
            events.Push({now + grace, EventType::kVacate, idx, j.epoch, 0});
            break;
          }
          requeue(j);
          break;
        }
        case ActionKind::kCheckpoint:
          if (j.status == JobStatus::kRunning) {
            j.last_checkpoint_s = now;
            ++res.checkpoints;
          }
          break;
        case ActionKind::kReserve:
          ++res.reservations;  // capacity is held by the cycle's own bookkeeping, nothing to apply
          break;
        case ActionKind::kRepartition:
          for (const TaskPlacement& t : a.tasks)
            for (const GpuGrant& g : t.gpus) {
              Status st = Status::Ok();
              for (int s = 0; s < 8 && st.ok(); ++s)
                if ((g.destroy_mask >> s) & 1u) st = state.DestroyInstance(g.gpu, s);
              if (st.ok() && g.disable_mig) st = state.SetMigMode(g.gpu, false);
              if (st.ok() && g.enable_mig) st = state.SetMigMode(g.gpu, true);
              if (st.ok() && g.create_instance) st = state.CreateInstance(g.gpu, g.mig_profile, g.mig_start);
              if (st.ok()) ++res.mig_repartitions;
              else ++res.apply_conflicts;
            }
          break;
      }
    }
    if (!removed.empty()) {
      std::set<int32_t> rm(removed.begin(), removed.end());
      pending.erase(std::remove_if(pending.begin(), pending.end(), [&](int32_t p) { return rm.count(p) > 0; }),
                    pending.end());
    }
    return binds;
  };

  // Per-job time-limit factor (SimOptions::time_limit_factor_*): a fixed hash of the job and the seed.
  auto limit_factor = [&](int32_t idx) {
    if (opt.time_limit_factor_max <= opt.time_limit_factor_min) return opt.time_limit_factor_min;
    const double u = HashUniform(static_cast<uint64_t>(idx), 0, opt.time_limit_seed);
    return opt.time_limit_factor_min + u * (opt.time_limit_factor_max - opt.time_limit_factor_min);
  };
  auto run_cycle = [&](int64_t now) -> int {
    CycleInput in;
    in.snapshot = &state;
    in.queues = queues;
    in.now_s = now;
    const bool expected_ends = opt.tenancy || opt.gang_backfill;
    if (opt.tenancy) in.options = opt.tenancy->cycle;
    else if (opt.gang_backfill) {
      in.options.reserve_beyond_guarantee = true;
      in.options.gang_aging_s = opt.gang_aging_s;
      in.options.fence_reserved_nodes = true;
      in.options.max_reservations = opt.gang_reservations;
    }
    in.historical_usage.assign(queues.size(), 0.0);
    in.pending.reserve(pending.size());
    for (int32_t p : pending) {
      const JobState& j = jobs[p];
      in.pending.push_back(PendingJob{j.request, queue_of[p], j.submit_s, j.submit_s, false});
      if (expected_ends) {
        const int64_t d = static_cast<int64_t>(std::ceil(std::max(0.0, j.remaining_work_s) * limit_factor(p)));
        in.pending.back().expected_duration_s = d;
        if (j.remaining_work_s >= 0) in.pending.back().request.expected_end_s = now + d;
      }
    }
    if (opt.gang_backfill) state.EnableDrainTimes();
    for (int32_t a : active) {
      const JobState& j = jobs[a];
      if (j.status == JobStatus::kTerminating) {  // holds its GPUs (in the snapshot) until it vacates
        for (const TaskPlacement& t : j.tasks)
          for (const GpuGrant& g : t.gpus) in.vacating_milli += g.milli >= kMilliPerGpu ? kMilliPerGpu : 0;
        continue;
      }
      RunningJob r;
      r.id = a;
      r.queue = queue_of[a];
      if (opt.tenancy) {
        auto pit = opt.tenancy->preemptible_by_priority.find(j.request.priority);
        r.preemptible = pit == opt.tenancy->preemptible_by_priority.end() || pit->second;
      }
      if (expected_ends && j.remaining_work_s >= 0) {
        const int64_t from = std::max(j.bind_s, j.start_s);
        const double f = limit_factor(a);
        r.expected_end_s = from + static_cast<int64_t>(std::ceil(j.remaining_work_s * f));
        // Default runs: a running job's end at its actual progress rate (step-time efficiency included), as
        // a time limit fitted to the job would say; multi-tenant runs keep the ideal-work estimate.
        if (!opt.tenancy && j.status == JobStatus::kRunning && j.end_s >= 0)
          r.expected_end_s = from + static_cast<int64_t>(std::ceil((j.end_s - from) * f));
      }
      if (opt.gang_backfill)  // drain times: the placement hint that keeps nodes' lifetimes aligned
        for (const TaskPlacement& t : j.tasks) state.ExtendDrain(t.node, r.expected_end_s < 0 ? ClusterState::kNever : r.expected_end_s);
      r.priority = j.request.priority;
      r.cls = j.request.cls;
      r.tasks = j.tasks;
      r.cpu_milli = j.request.cpu_milli;
      r.host_memory_mib = j.request.host_memory_mib;
      r.gpu_milli = static_cast<int64_t>(j.alloc_milli);
      r.start_time_s = j.bind_s;
      r.last_checkpoint_s = j.last_checkpoint_s;
      r.checkpointable = j.spec->checkpointable;
      in.running.push_back(std::move(r));
    }
    ++res.cycles;
    Plan plan = RunCycle(in, policy);
    if (opt.tenancy)
      for (size_t q = 0; q < plan.queues.size() && q < subtree_alloc.size(); ++q)
        subtree_alloc[q] = plan.queues[q].allocated_milli;
    return apply_plan(plan, now);
  };

  auto release_backlog = [&](int64_t now) {
    while (backlog && pending.size() < static_cast<size_t>(std::max(1, opt.backlog_depth)) &&
           next_arrival < order.size())
      mark_arrival(order[next_arrival++], now);
  };

  // Main loop.
  release_backlog(0);
  int64_t now = 0;
  bool first = true;
  while (true) {
    int64_t t_next = INT64_MAX;
    if (!events.empty()) t_next = events.top().time_s;
    if (!backlog && next_arrival < order.size()) t_next = std::min(t_next, trace[order[next_arrival]].submit_s);
    if (hook) t_next = std::min(t_next, hook->NextTimeS());  // issue 5
    if (first) t_next = std::min<int64_t>(t_next, 0), first = false;
    bool tick = false;  // multi-tenant runs: a periodic cycle while jobs wait (guards expire, reclaim)
    if (opt.tenancy && !pending.empty() && opt.tenancy->cycle_every_s > 0 && now + opt.tenancy->cycle_every_s < t_next &&
        (t_next != INT64_MAX || opt.horizon_s > 0)) {
      t_next = now + opt.tenancy->cycle_every_s;
      tick = true;
    }
    if (t_next == INT64_MAX) break;
    if (opt.horizon_s > 0 && t_next > opt.horizon_s) break;
    advance(t_next);
    now = t_next;
    bool changed = false;
    while (!events.empty() && events.top().time_s == now) {
      Event e = events.Pop();
      JobState& j = jobs[e.job];
      if (e.epoch != j.epoch) continue;
      switch (e.type) {
        case EventType::kCompletion:
          if (j.status != JobStatus::kRunning) break;
          if (opt.tenancy) queue_alloc[queue_of[e.job]] -= UnitsOf(state, j.tasks, opt.tenancy->cycle.slice_units);
          release(j, true);
          j.status = JobStatus::kDone;
          j.epoch++;
          ++res.jobs_completed;
          res.makespan_s = static_cast<double>(now);
          if (j.in_window) {
            res.by_class[WorkloadClassName(j.spec->cls)].jct_s.push_back(static_cast<double>(now - j.submit_s));
            res.by_team[j.spec->team].jct_s.push_back(static_cast<double>(now - j.submit_s));
          }
          changed = true;
          break;
        case EventType::kFailure: {
          if (j.status != JobStatus::kRunning) break;
          ++res.job_failures;
          int gpus = 0;
          for (const TaskPlacement& t : j.tasks) gpus += static_cast<int>(t.gpus.size());
          res.failure_lost_gpu_s += static_cast<double>(now - interrupt(j)) * gpus;
          requeue(j);
          changed = true;
          break;
        }
        case EventType::kVacate:
          if (j.status == JobStatus::kTerminating) requeue(j);
          changed = true;
          break;
        case EventType::kStart:
          if (j.status == JobStatus::kBound) start(e.job, now);
          changed = true;
          break;
        case EventType::kArrival:
          break;
      }
    }
    while (!backlog && next_arrival < order.size() && trace[order[next_arrival]].submit_s == now) {
      mark_arrival(order[next_arrival++], now);
      changed = true;
    }
    if (backlog) {
      release_backlog(now);
      changed = true;
    }
    if (tick) changed = true;
    if (hook) {  // issue 5: node arrivals, spot notices and reclaims, applied like cycle actions
      for (int k = 0; k < 8; ++k) {
        Plan hp;
        hook->OnTime(now, state, &hp, &changed);
        if (hp.actions.empty()) break;
        apply_plan(hp, now);
        changed = true;
      }
    }
    if (changed && !pending.empty()) {
      for (int k = 0; k < opt.max_cycles_per_instant; ++k) {
        const int binds = run_cycle(now);
        if (binds == 0) break;
        if (!backlog) break;
        const size_t before = pending.size();
        release_backlog(now);
        if (pending.size() == before) break;
      }
    }
    if (opt.tenancy && changed)  // guarantee waits end once the queue's own work covers its guarantee
      for (int32_t p : pending) {
        SimJobRecord& r = res.job_records[p];
        if (r.within_guarantee && r.first_bind_s < 0 && r.guarantee_met_s < 0 &&
            (queue_alloc[queue_of[p]] + r.gpu_milli > queues[queue_of[p]].guaranteed_milli ||
             !ancestors_within(queue_of[p], r.gpu_milli)))
          r.guarantee_met_s = now;
      }
    if (hook) hook->AfterCycles(now, state, pending);  // issue 5: autoscaling
  }
  const int64_t end = opt.horizon_s > 0 ? opt.horizon_s : now;
  advance(end);
  if (hook) hook->End(end, &res);  // issue 5

  // Results.
  const double window = static_cast<double>(std::max<int64_t>(1, std::min(end, w1) - w0));
  const double denom = capacity_milli * window;
  res.gpu_allocation = total_alloc / denom;
  res.gpu_utilization = total_used / denom;
  res.effective_training_throughput = eff_integral / window;
  res.training_gpus_allocated = train_alloc_integral / 1000.0 / window;
  for (int c = 0; c < kClasses; ++c) {
    const std::string name = WorkloadClassName(static_cast<WorkloadClass>(c));
    if (!res.by_class.count(name) && cls_acc[c].alloc == 0) continue;
    res.by_class[name].allocation = cls_acc[c].alloc / denom;
    res.by_class[name].utilization = cls_acc[c].used / denom;
  }
  for (size_t k = 0; k < team_names.size(); ++k) {
    res.by_team[team_names[k]].allocation = team_acc[k].alloc / denom;
    res.by_team[team_names[k]].utilization = team_acc[k].used / denom;
  }
  res.unplaced_jobs = static_cast<int64_t>(pending.size());
  for (int32_t p : pending) res.unplaced_gpu_requests += jobs[p].spec->GpuRequests();
  res.all_completed = pending.empty() && active.empty() && next_arrival == order.size();
  if (res.all_completed) {
    for (const JobState& j : jobs)
      if (j.status == JobStatus::kRunning || j.status == JobStatus::kBound) res.all_completed = false;
  }
  res.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall0).count();
  return res;
}

}  // namespace tessera
