// Preemption in the cycle: which running jobs are released for a blocked job (cheapest first, node by
// node for whole-GPU requests), which are spared again, the preempt/checkpoint actions, and restoring the
// production headroom by reclaiming borrowed capacity.
#include <fmt/format.h>

#include <algorithm>

#include "sched/cycle_internal.h"
#include "sched/take.h"

namespace tessera::cycle_internal {
namespace {

// Grants as they are once applied (instances exist, MIG mode set): re-applying a released placement.
std::vector<TaskPlacement> Steady(const std::vector<TaskPlacement>& tasks) {
  std::vector<TaskPlacement> out = tasks;
  for (TaskPlacement& t : out)
    for (GpuGrant& g : t.gpus) {
      g.create_instance = g.enable_mig = g.disable_mig = false;
      g.destroy_mask = 0;
    }
  return out;
}

}  // namespace

void CycleRun::EmitPreemption(int i, JobId for_job, bool reclaim, std::string reason) {
  const RunningJob& v = in_.running[i];
  const int vq = v.queue >= 0 && v.queue < nq_ ? v.queue : 0;
  const TakeTarget t{v.id, v.checkpointable, true, in_.now_s - std::max(v.start_time_s, v.last_checkpoint_s)};
  Action& a = AppendTake(t, for_job, std::move(reason), o_.checkpoint_min_age_s, &plan_);
  a.units_milli = run_units_[i];
  a.reclaim = reclaim;
  preempted_[i] = true;
  Account(vq, v.tasks, -1);
  if (reclaim) no_borrow_[vq] = true;  // no reclaim loops within a cycle
  ++qver_[vq];
}

void CycleRun::RestoreHeadroom() {
  if (o_.production_headroom_milli <= 0 || !o_.allow_preemption) return;
  auto free_whole = [&]() { return FreeWhole() + in_.vacating_milli; };
  int64_t free = free_whole();
  if (free >= o_.production_headroom_milli) return;
  struct Cand {
    int i;
    VictimCost cost;
  };
  std::vector<Cand> cands;
  // Restoring headroom reclaims borrowed capacity: the reclaim guard applies, not the priority one.
  const Preemptor pre{o_.cross_queue_preempt_priority, -1, true};
  for (size_t i = 0; i < in_.running.size(); ++i) {
    const RunningJob& v = in_.running[i];
    const int vq = v.queue >= 0 && v.queue < nq_ ? v.queue : 0;
    if (preempted_[i] || v.tasks.empty() || !Borrowing(vq) || OnCordon(static_cast<int>(i))) continue;
    if (MayPreempt(pre, v, true, in_.now_s, o_) == PreemptKind::kNone) continue;
    cands.push_back({static_cast<int>(i), {true, v.priority, LostWorkGpuSeconds(v, run_units_[i], in_.now_s),
                                           static_cast<int>(v.tasks.size()), v.id}});
  }
  std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) { return CheaperVictim(a.cost, b.cost); });
  for (const Cand& c : cands) {
    if (free >= o_.production_headroom_milli) break;
    const RunningJob& v = in_.running[c.i];
    const int vq = v.queue >= 0 && v.queue < nq_ ? v.queue : 0;
    if (!Borrowing(vq)) continue;  // stopped borrowing after earlier victims
    work_.Release(v.tasks, v.cpu_milli, v.host_memory_mib, v.cls != WorkloadClass::kTraining);
    const int64_t after = free_whole();
    if (after == free) {  // frees no whole GPU (a slice on a shared GPU): keep it
      work_.Apply(Steady(v.tasks), v.cpu_milli, v.host_memory_mib, v.cls != WorkloadClass::kTraining);
      continue;
    }
    free = after;
    EmitPreemption(c.i, -1, true,
                   fmt::format("reclaims {} borrowed GPUs to restore the production headroom of {} GPUs",
                               Gpus(run_units_[c.i]), Gpus(o_.production_headroom_milli)));
    ++work_version_;
  }
}

bool CycleRun::TryPreempt(int j, int64_t units, int64_t quota_need, PlaceResult* placed) {
  if (!o_.allow_preemption || preempt_attempts_ >= o_.max_preemption_attempts) return false;
  const PendingJob& p = in_.pending[j];
  if (!p.request.may_preempt) return false;
  const int q = plan_.pending[j].queue;
  const std::pair<uint64_t, uint64_t> versions{work_version_, alloc_version_};
  if (versions != memo_versions_) {
    no_victims_.clear();
    memo_versions_ = versions;
  }
  const NoVictims key{p.request.priority, q, alloc_[q] + units <= guar_[q], quota_need > 0};
  const bool memo = o_.remember_no_victims;
  if (memo && std::find(no_victims_.begin(), no_victims_.end(), key) != no_victims_.end()) return false;
  std::vector<VictimCand> cands = PreemptionCandidates(j, units, quota_need);
  if (cands.empty()) {
    if (memo) no_victims_.push_back(key);
    return false;
  }
  ++preempt_attempts_;
  std::sort(cands.begin(), cands.end(),
            [](const VictimCand& a, const VictimCand& b) { return CheaperVictim(a.cost, b.cost); });
  if (!p.request.SubGpu()) OrderVictimsByNode(p.request, &cands);
  std::vector<VictimCand> released;
  int64_t freed_own = 0;
  PlaceResult res;
  if (!ReleaseVictims(j, units, quota_need, cands, &released, &freed_own, &res)) return false;
  const std::vector<bool> spared = SpareVictims(j, quota_need, released, freed_own, &res);
  PendingStatus tmp;
  tmp.queue = q;
  if (!KindLimitsOk(q, res.tasks, &tmp)) {
    for (int k = static_cast<int>(released.size()) - 1; k >= 0; --k)
      if (!spared[k]) ReapplyRunning(released[k].i);
    return false;
  }
  EmitVictims(j, released, spared);
  fails_.Clear();
  ++fails_generation_;  // capacity was released
  ++work_version_;
  *placed = std::move(res);
  return true;
}

std::vector<CycleRun::VictimCand> CycleRun::PreemptionCandidates(int j, int64_t units, int64_t quota_need) const {
  const PendingJob& p = in_.pending[j];
  const int q = plan_.pending[j].queue;
  Preemptor pre{p.request.priority, q, alloc_[q] + units <= guar_[q]};
  std::vector<VictimCand> cands;
  for (size_t i = 0; i < in_.running.size(); ++i) {
    if (preempted_[i] || OnCordon(static_cast<int>(i))) continue;
    const RunningJob& v = in_.running[i];
    const int vq = v.queue >= 0 && v.queue < nq_ ? v.queue : 0;
    if (quota_need > 0 && vq != q) continue;  // quota-blocked: only the queue's own lower priorities help
    PreemptKind k = MayPreempt(pre, v, Borrowing(vq), in_.now_s, o_);
    if (k == PreemptKind::kNone) continue;
    if (quota_need > 0 && k != PreemptKind::kPriority) continue;
    cands.push_back({static_cast<int>(i),
                     {Borrowing(vq), v.priority, LostWorkGpuSeconds(v, run_units_[i], in_.now_s),
                      static_cast<int>(v.tasks.size()), v.id},
                     k});
  }
  return cands;
}

// Whole-GPU requests: victims spread over the cluster rarely free a whole node. As kube-scheduler does, pick
// the nodes where the fewest, cheapest victims make room for a task, and release those victims first.
void CycleRun::OrderVictimsByNode(const Request& r, std::vector<VictimCand>* cands_io) const {
  std::vector<VictimCand>& cands = *cands_io;
  const int g = r.GpusPerTask();
  struct NodePlan {
    int whole = 0;               // whole GPUs free now
    std::vector<size_t> victims; // candidate indices (cost order) with whole GPUs here
    std::vector<int> gpus;       // their whole GPUs here
  };
  std::unordered_map<NodeId, NodePlan> nodes;
  for (size_t c = 0; c < cands.size(); ++c) {
    const RunningJob& v = in_.running[cands[c].i];
    for (const TaskPlacement& tp : v.tasks) {
      int whole = 0;
      for (const GpuGrant& gr : tp.gpus) whole += gr.milli >= kMilliPerGpu && gr.mig_profile < 0;
      if (whole == 0) continue;
      NodePlan& np = nodes[tp.node];
      np.victims.push_back(c);
      np.gpus.push_back(whole);
    }
  }
  struct Choice {
    std::tuple<int, int64_t, NodeId> key;  // victims needed, GPU-seconds lost, node
    std::vector<size_t> victims;
  };
  std::vector<Choice> choices;
  for (auto& [n, np] : nodes) {
    const NodeState& ns = work_.node(n);
    if (!r.NodeAllowed(n) || !r.KindAllowed(ns.kind) || !r.TierAllowed(ns.tier) || work_.catalog().kind(ns.kind).memory_mib < r.gpu_memory_mib)
      continue;
    int have = ns.free_whole + ns.idle_mig_gpus;
    Choice ch;
    int64_t lost = 0;
    for (size_t k = 0; k < np.victims.size() && have < g; ++k) {
      have += np.gpus[k];
      lost += cands[np.victims[k]].cost.lost_gpu_s;
      ch.victims.push_back(np.victims[k]);
    }
    if (have < g) continue;
    ch.key = {static_cast<int>(ch.victims.size()), lost, n};
    choices.push_back(std::move(ch));
  }
  std::sort(choices.begin(), choices.end(), [](const Choice& a, const Choice& b) { return a.key < b.key; });
  std::vector<bool> first(cands.size(), false);
  std::vector<VictimCand> order;
  int tasks_covered = 0;
  for (const Choice& ch : choices) {
    if (tasks_covered >= r.tasks) break;
    ++tasks_covered;
    for (size_t c : ch.victims)
      if (!first[c]) first[c] = true, order.push_back(cands[c]);
  }
  for (size_t c = 0; c < cands.size(); ++c)
    if (!first[c]) order.push_back(cands[c]);
  cands = std::move(order);
}

void CycleRun::ReleaseRunning(int i) {
  const RunningJob& v = in_.running[i];
  work_.Release(v.tasks, v.cpu_milli, v.host_memory_mib, v.cls != WorkloadClass::kTraining);
}

bool CycleRun::OnCordon(int i) const {
  for (const TaskPlacement& t : in_.running[i].tasks) {
    if (work_.node_cordoned(t.node)) return true;
    for (const GpuGrant& gr : t.gpus)
      if (work_.gpu_cordoned(gr.gpu)) return true;
  }
  return false;
}

void CycleRun::ReapplyRunning(int i) {
  const RunningJob& v = in_.running[i];
  work_.Apply(Steady(v.tasks), v.cpu_milli, v.host_memory_mib, v.cls != WorkloadClass::kTraining);
}

bool CycleRun::ReleaseVictims(int j, int64_t units, int64_t quota_need, const std::vector<VictimCand>& cands,
                              std::vector<VictimCand>* released, int64_t* freed_own, PlaceResult* res) {
  const PendingJob& p = in_.pending[j];
  const int q = plan_.pending[j].queue;
  std::vector<int64_t> tentative = alloc_;
  bool ok = false;
  // Place is tried only once the free capacity of the allowed kinds plus what was released covers the job.
  const int64_t free0 = FreeAllowedWork(p.request);
  int64_t freed_total = 0;
  int examined = 0;
  for (const VictimCand& c : cands) {
    if (examined++ >= o_.max_victims_examined) break;
    const RunningJob& v = in_.running[c.i];
    const int vq = v.queue >= 0 && v.queue < nq_ ? v.queue : 0;
    if (c.kind == PreemptKind::kReclaim && tentative[vq] <= guar_[vq]) continue;  // no longer borrowing
    if (v.tasks.empty()) continue;
    ReleaseRunning(c.i);
    released->push_back(c);
    for (int a = vq; a >= 0; a = parent_[a]) tentative[a] -= run_units_[c.i];
    if (vq == q) *freed_own += run_units_[c.i];
    if (p.request.kind_mask == 0 || p.request.KindAllowed(work_.gpu(v.tasks[0].gpus.empty() ? 0 : v.tasks[0].gpus[0].gpu).kind))
      freed_total += run_units_[c.i];
    if (*freed_own < quota_need) continue;
    if (free0 + freed_total < units) continue;
    *res = PlaceWithin(policy_, work_, p.request);
    if (res->ok) {
      ok = true;
      break;
    }
  }
  if (!ok) {
    for (auto it = released->rbegin(); it != released->rend(); ++it) ReapplyRunning(it->i);
    return false;
  }
  return true;
}

// Spares every victim that is not needed, most expensive first.
std::vector<bool> CycleRun::SpareVictims(int j, int64_t quota_need, const std::vector<VictimCand>& released,
                                         int64_t freed_own, PlaceResult* res) {
  const PendingJob& p = in_.pending[j];
  const int q = plan_.pending[j].queue;
  std::vector<bool> spared(released.size(), false);
  for (int k = static_cast<int>(released.size()) - 2; k >= 0; --k) {
    const VictimCand& c = released[k];
    const int vq = in_.running[c.i].queue;
    if (vq == q && freed_own - run_units_[c.i] < quota_need) continue;
    ReapplyRunning(c.i);
    PlaceResult r2 = PlaceWithin(policy_, work_, p.request);
    if (r2.ok) {
      spared[k] = true;
      *res = std::move(r2);
      if (vq == q) freed_own -= run_units_[c.i];
    } else {
      ReleaseRunning(c.i);
    }
  }
  return spared;
}

void CycleRun::EmitVictims(int j, const std::vector<VictimCand>& released, const std::vector<bool>& spared) {
  const PendingJob& p = in_.pending[j];
  const int q = plan_.pending[j].queue;
  const std::string& qname = q < static_cast<int>(in_.queues.size()) ? in_.queues[q].name : "default";
  for (size_t k = 0; k < released.size(); ++k) {
    if (spared[k]) continue;
    const VictimCand& c = released[k];
    const RunningJob& v = in_.running[c.i];
    const int vq = v.queue >= 0 && v.queue < nq_ ? v.queue : 0;
    const std::string& vname = vq < static_cast<int>(in_.queues.size()) ? in_.queues[vq].name : "default";
    const bool reclaim = c.kind == PreemptKind::kReclaim;
    EmitPreemption(
        c.i, p.request.id, reclaim,
        reclaim ? fmt::format("reclaims {} GPUs borrowed by queue {} for job {} of queue {} (within its guarantee)",
                              Gpus(run_units_[c.i]), vname, p.request.id, qname)
                : fmt::format("preempted for job {} of queue {}: priority {} > {}; {} GPU-s of work lost",
                              p.request.id, qname, p.request.priority, v.priority, c.cost.lost_gpu_s));
  }
}

}  // namespace tessera::cycle_internal
