// Reservations in the cycle: a head gang that does not fit gets the earliest start on a what-if timeline
// (running work and earlier reservations end as expected), its GPUs that are free now are held (and, with
// fence_reserved_nodes, its nodes' free CPU and memory), and work that ends before a reservation starts may
// backfill into the holds.
#include <fmt/format.h>

#include <algorithm>

#include "sched/cycle_internal.h"

namespace tessera::cycle_internal {

bool CycleRun::TryReserve(int j) {
  if (reservations_ >= o_.max_reservations) return false;
  const PendingJob& p = in_.pending[j];
  // Only demand within its queue's guarantee (or production-level priority) may hold capacity ahead:
  // a borrowing gang must not block an owner's guaranteed demand.
  const int q = plan_.pending[j].queue;
  if (!o_.reserve_beyond_guarantee && alloc_[q] + est_units_[j] > guar_[q] &&
      p.request.priority < o_.cross_queue_preempt_priority)
    return false;
  scratch_ = work_;  // reuses the buffers of the previous what-if
  // Conservative backfill: an earlier reservation claims its GPUs from the moment they free until its gang is
  // expected to end, so two reservations never count on the same GPUs.
  std::vector<int> claim_of(static_cast<size_t>(scratch_.num_gpus()), -1);
  BuildRunningEnds();
  CollectPlannedEnds(&claim_of);
  PlaceResult res;
  const int64_t t = FindReservationTime(j, claim_of, &res);
  if (t < 0) return false;
  ++reservations_;
  // Hold the GPUs of the reservation that are free now, so backfill cannot delay it.
  Phantom ph;
  ph.tasks = FreeGpuHolds(res.tasks);
  const bool held = !ph.tasks.empty() && work_.CanApply(ph.tasks, 0, 0).ok();
  if (held) {
    work_.Apply(ph.tasks, 0, 0, false);
    for (const TaskPlacement& tp : ph.tasks) phantom_units_ += int64_t{kMilliPerGpu} * static_cast<int64_t>(tp.gpus.size());
  }
  if (o_.fence_reserved_nodes) FenceNodes(res.tasks, &ph);
  // Shared instances on the GPUs it counts on take no new sharers (they would keep the GPUs busy).
  for (const TaskPlacement& tp : res.tasks)
    for (const GpuGrant& g : tp.gpus) work_.CloseSharing(g.gpu);
  if (!held) ph.tasks.clear();
  ph.job = p.request.id;
  ph.start_s = t;
  ph.end_s = t + (p.expected_duration_s > 0 ? p.expected_duration_s : o_.default_runtime_s);
  ph.claim = res.tasks;
  ++work_version_;
  phantoms_.push_back(std::move(ph));
  // Holds only shrink free capacity, so cached failures stay valid.
  Action a;
  a.kind = ActionKind::kReserve;
  a.job = p.request.id;
  a.tasks = std::move(res.tasks);
  a.start_s = t;
  a.units_milli = int64_t{kMilliPerGpu} * p.request.TotalGpus();
  a.reason = fmt::format("reserved {} GPUs for the head gang from t={} s ({} s from now); backfill may not delay it",
                         p.request.TotalGpus(), t, t - in_.now_s);
  plan_.actions.push_back(std::move(a));
  out_[j].reserved_start = t;
  return true;
}

// Running work's ends, sorted once per cycle.
void CycleRun::BuildRunningEnds() {
  if (running_ends_built_) return;
  running_ends_built_ = true;
  for (size_t i = 0; i < in_.running.size(); ++i) {
    const RunningJob& v = in_.running[i];
    if (v.expected_end_s < 0 || v.tasks.empty()) continue;
    running_ends_.push_back({std::max(v.expected_end_s, in_.now_s), &v.tasks, v.cpu_milli, v.host_memory_mib,
                             v.cls != WorkloadClass::kTraining, -1, static_cast<int>(i)});
  }
  std::stable_sort(running_ends_.begin(), running_ends_.end(),
                   [](const PlannedEnd& a, const PlannedEnd& b) { return a.t < b.t; });
}

// The what-if timeline into ends_buf_: earlier reservations' ends, jobs bound this cycle, then running work
// that was not preempted, merged by time. Marks each GPU an earlier reservation claims in *claim_of.
void CycleRun::CollectPlannedEnds(std::vector<int>* claim_of) {
  std::vector<PlannedEnd>& ends = ends_buf_;
  ends.clear();
  for (size_t k = 0; k < phantoms_.size(); ++k) {
    for (const TaskPlacement& tp : phantoms_[k].claim)
      for (const GpuGrant& g : tp.gpus) (*claim_of)[g.gpu] = static_cast<int>(k);
    ends.push_back({phantoms_[k].end_s, nullptr, 0, 0, false, static_cast<int>(k), -1});
  }
  for (const auto& [bj, tasks] : bound_) {
    const PendingJob& b = in_.pending[bj];
    ends.push_back({in_.now_s + (b.expected_duration_s > 0 ? b.expected_duration_s : o_.default_runtime_s), &tasks,
                    b.request.cpu_milli, b.request.host_memory_mib, b.request.cls != WorkloadClass::kTraining, -1, -1});
  }
  auto by_time = [](const PlannedEnd& a, const PlannedEnd& b) { return a.t < b.t; };
  std::stable_sort(ends.begin(), ends.end(), by_time);
  const size_t mid = ends.size();
  for (const PlannedEnd& e : running_ends_)
    if (!preempted_[e.run]) ends.push_back(e);
  std::inplace_merge(ends.begin(), ends.begin() + static_cast<std::ptrdiff_t>(mid), ends.end(), by_time);
}

// Replays ends_buf_ on scratch_ until the job fits; returns that time (-1: never) and the placement in *res.
// GPUs freed while an earlier reservation still claims them are held for it until its gang ends.
int64_t CycleRun::FindReservationTime(int j, const std::vector<int>& claim_of, PlaceResult* res) {
  const PendingJob& p = in_.pending[j];
  ClusterState& w = scratch_;
  const std::vector<PlannedEnd>& ends = ends_buf_;
  std::vector<std::vector<TaskPlacement>> claim_holds(phantoms_.size());
  std::vector<bool> claim_over(phantoms_.size(), false);
  const int64_t need = int64_t{kMilliPerGpu} * p.request.TotalGpus();
  int64_t free_units = FreeAllowed(w, p.request);
  auto count_free = [&](NodeId n, GpuId g) {
    if (p.request.KindAllowed(w.gpu(g).kind) && p.request.TierAllowed(w.node(n).tier) && w.gpu(g).tasks == 0)
      free_units += kMilliPerGpu;
  };
  // A single-task request fits at a new time point only on a node whose capacity grew since the last try.
  const bool one_node = p.request.tasks == 1;
  bool grown = false;
  auto touch = [&](NodeId n) { grown = grown || w.convertible_index()[n] >= p.request.GpusPerTask(); };
  for (size_t e = 0; e < ends.size(); ++e) {
    if (const int k = ends[e].claim; k >= 0) {
      claim_over[k] = true;
      w.Release(claim_holds[k], 0, 0, false);
      w.Release(phantoms_[k].tasks, 0, 0, false);
      for (const auto* list : {&claim_holds[k], &phantoms_[k].tasks})
        for (const TaskPlacement& tp : *list) {
          for (const GpuGrant& g : tp.gpus) count_free(tp.node, g.gpu);
          touch(tp.node);
        }
    } else {
      w.Release(*ends[e].tasks, ends[e].cpu, ends[e].mem, ends[e].inf);
      for (const TaskPlacement& tp : *ends[e].tasks) {
        for (const GpuGrant& g : tp.gpus) {
          const GpuState& gs = w.gpu(g.gpu);
          if (gs.tasks != 0) continue;
          const int k = claim_of[g.gpu];
          if (k < 0 || claim_over[k]) {
            count_free(tp.node, g.gpu);
            continue;
          }
          GpuGrant h;
          h.gpu = g.gpu;
          h.milli = kMilliPerGpu;
          h.disable_mig = gs.mig_enabled;
          TaskPlacement hold{tp.node, {h}};
          if (!w.CanApply({hold}, 0, 0).ok()) continue;
          w.Apply({hold}, 0, 0, false);
          claim_holds[k].push_back(std::move(hold));
        }
        touch(tp.node);
      }
    }
    if (e + 1 < ends.size() && ends[e + 1].t == ends[e].t) continue;
    if (free_units < need) continue;
    if (one_node && !grown) continue;
    grown = false;
    *res = PlaceWithin(policy_, w, p.request);
    if (res->ok) return ends[e].t;
  }
  return -1;
}


// One hold per node: the GPUs of `placed` that are idle in work_ now, as whole-GPU grants.
std::vector<TaskPlacement> CycleRun::FreeGpuHolds(const std::vector<TaskPlacement>& placed) const {
  std::vector<TaskPlacement> holds;
  for (const TaskPlacement& tp : placed) {
    TaskPlacement hold;
    hold.node = tp.node;
    for (const GpuGrant& g : tp.gpus) {
      const GpuState& gs = work_.gpu(g.gpu);
      if (gs.tasks != 0) continue;
      GpuGrant h;
      h.gpu = g.gpu;
      h.milli = kMilliPerGpu;
      h.memory_mib = 0;
      h.disable_mig = gs.mig_enabled;
      bool dup = false;
      for (const GpuGrant& o : hold.gpus) dup |= o.gpu == h.gpu;
      if (!dup) hold.gpus.push_back(h);
    }
    if (!hold.gpus.empty()) {
      bool merged = false;
      for (TaskPlacement& x : holds)
        if (x.node == hold.node) {
          for (const GpuGrant& g : hold.gpus) {
            bool dup = false;
            for (const GpuGrant& o : x.gpus) dup |= o.gpu == g.gpu;
            if (!dup) x.gpus.push_back(g);
          }
          merged = true;
        }
      if (!merged) holds.push_back(std::move(hold));
    }
  }
  return holds;
}

// Takes the free CPU and host memory of each node of `placed` in work_, once per node.
void CycleRun::FenceNodes(const std::vector<TaskPlacement>& placed, Phantom* ph) {
  for (const TaskPlacement& tp : placed) {
    bool seen = false;
    for (const Phantom::Fence& f : ph->fences) seen |= f.node == tp.node;
    const NodeState& ns = work_.node(tp.node);
    if (seen || (ns.free_cpu_milli <= 0 && ns.free_memory_mib <= 0)) continue;
    ph->fences.push_back({tp.node, ns.free_cpu_milli, ns.free_memory_mib});
    work_.Apply({TaskPlacement{tp.node, {}}}, ns.free_cpu_milli, ns.free_memory_mib, false);
  }
}

// Releases (held = false) or re-takes (held = true) a reservation's holds on GPUs that are not in MIG mode, and
// its fences. Re-taking keeps only what is still free.
void CycleRun::SetHolds(Phantom& ph, bool held) {
  for (TaskPlacement& tp : ph.tasks) {
    TaskPlacement t{tp.node, {}};
    std::vector<GpuGrant> kept;
    for (const GpuGrant& g : tp.gpus) {
      if (g.disable_mig) {
        kept.push_back(g);  // MIG GPUs stay held throughout
      } else if (!held) {
        t.gpus.push_back(g);
        kept.push_back(g);
      } else if (work_.gpu(g.gpu).WholeFree()) {
        t.gpus.push_back(g);
        kept.push_back(g);
      }
    }
    tp.gpus = std::move(kept);
    if (t.gpus.empty()) continue;
    const int64_t units = int64_t{kMilliPerGpu} * static_cast<int64_t>(t.gpus.size());
    if (held) {
      work_.Apply({t}, 0, 0, false);
      phantom_units_ += units;
    } else {
      work_.Release({t}, 0, 0, false);
      phantom_units_ -= units;
    }
  }
  for (Phantom::Fence& f : ph.fences) {
    if (held) {
      const NodeState& ns = work_.node(f.node);
      f.cpu_milli = std::max<int64_t>(0, std::min(f.cpu_milli, ns.free_cpu_milli));
      f.memory_mib = std::max<int64_t>(0, std::min(f.memory_mib, ns.free_memory_mib));
      work_.Apply({TaskPlacement{f.node, {}}}, f.cpu_milli, f.memory_mib, false);
    } else {
      work_.Release({TaskPlacement{f.node, {}}}, f.cpu_milli, f.memory_mib, false);
    }
  }
  ++work_version_;
}

// The earliest expected start among the reservations `open` whose held GPUs or fenced nodes `tasks` use (the
// earliest of them all when none is used directly).
int64_t CycleRun::ReservedStartUnder(const std::vector<size_t>& open,
                                     const std::vector<TaskPlacement>& tasks) const {
  int64_t any = INT64_MAX, used = INT64_MAX;
  for (size_t i : open) {
    const Phantom& ph = phantoms_[i];
    any = std::min(any, ph.start_s);
    bool touches = false;
    for (const TaskPlacement& t : tasks) {
      for (const Phantom::Fence& f : ph.fences) touches |= f.node == t.node;
      for (const TaskPlacement& h : ph.tasks)
        for (const GpuGrant& hg : h.gpus)
          for (const GpuGrant& g : t.gpus) touches |= hg.gpu == g.gpu;
    }
    if (touches) used = std::min(used, ph.start_s);
  }
  return used != INT64_MAX ? used : any;
}

// Slurm-style backfill into reservations: a whole-GPU job expected to end no later than a reservation starts
// (Request::expected_end_s: its time limit, scaled by what completed jobs showed) may use the GPUs, CPU and
// memory held for it. The scaled estimate can run short: RunResult::backfill_overruns measures how often a
// job let in still holds the capacity when the reservation was to start. Sub-GPU work stays out (a MIG
// instance made there would outlive the job).
bool CycleRun::TryBackfillHolds(int j) {
  const PendingJob& p = in_.pending[j];
  const Request& r = p.request;
  if (!o_.backfill_into_reservations || r.expected_end_s < 0 || r.SubGpu() || phantoms_.empty()) return false;
  std::vector<size_t> open;
  for (size_t i = 0; i < phantoms_.size(); ++i)
    if (phantoms_[i].start_s >= r.expected_end_s) open.push_back(i);
  if (open.empty()) return false;
  for (size_t i : open) SetHolds(phantoms_[i], false);
  PlaceResult res = PlaceWithin(policy_, work_, r);
  PendingStatus tmp;
  tmp.queue = plan_.pending[j].queue;
  const bool ok = res.ok && KindLimitsOk(tmp.queue, res.tasks, &tmp) && HeadroomOk(j, res.tasks);
  if (ok) {
    const int64_t until = ReservedStartUnder(open, res.tasks);
    Bind(j, std::move(res.tasks),
         fmt::format("backfilled into reserved capacity (ends by t={} s, before the reservation starts): {}",
                     r.expected_end_s, res.reason));
    plan_.actions.back().backfill_until_s = until;
  }
  for (size_t i : open) SetHolds(phantoms_[i], true);
  return ok;
}

}  // namespace tessera::cycle_internal
