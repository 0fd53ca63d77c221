// Accounting of the cycle: setup from the snapshot, GPU units per queue (by kind and GPU memory), fair
// shares and historical usage, pool-order keys, free capacity.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sched/cycle_internal.h"
#include "sched/fair_share.h"

namespace tessera {
namespace cycle_internal {
namespace {

int64_t GrantMemory(const GpuKind& kind, const GpuGrant& g) {
  if (g.shared) return g.memory_mib;
  if (g.mig_profile >= 0) return kind.profiles[g.mig_profile].usable_mib;
  if (g.milli >= kMilliPerGpu) return kind.memory_mib;
  return g.memory_mib;
}

}  // namespace

int64_t GrantUnits(const GpuKind& kind, const GpuGrant& g, SliceUnits mode) {
  if (g.mig_profile >= 0 && !g.shared) {
    if (mode == SliceUnits::kMemory && kind.mig_memory_slices > 0)
      return int64_t{kMilliPerGpu} * kind.profiles[g.mig_profile].memory_slices / kind.mig_memory_slices;
    return kind.ProfileComputeMilli(g.mig_profile);
  }
  if (g.milli >= kMilliPerGpu && !g.shared) return kMilliPerGpu;
  // A share of a GPU or of a shared instance: its own compute or memory.
  if (mode == SliceUnits::kMemory && kind.memory_mib > 0)
    return std::max<int64_t>(1, (g.memory_mib * kMilliPerGpu + kind.memory_mib - 1) / kind.memory_mib);
  return g.milli;
}

std::string Gpus(int64_t milli) {
  if (milli % kMilliPerGpu == 0) return fmt::format("{}", milli / kMilliPerGpu);
  return fmt::format("{:.2f}", static_cast<double>(milli) / kMilliPerGpu);
}

void CycleRun::Setup() {
  SetupKinds();
  SetupQueues();
  SetupRunning();
  SetupPending();
  SetupShares();
}

void CycleRun::SetupKinds() {
  const ClusterState& s = *in_.snapshot;
  const Catalog& cat = s.catalog();
  kind_idx_.assign(cat.size(), -1);
  kind_gpus_.assign(cat.size(), 0);
  for (const NodeState& ns : s.nodes()) {
    if (ns.kind < 0 || ns.gpu_count == 0) continue;
    if (kind_idx_[ns.kind] < 0) kind_idx_[ns.kind] = nk_++;
    kind_gpus_[ns.kind] += ns.gpu_count;
  }
  cap_res_.assign(nk_ + 1, 0);
  for (const NodeState& ns : s.nodes()) {
    if (ns.kind < 0 || ns.gpu_count == 0) continue;
    cap_res_[kind_idx_[ns.kind]] += int64_t{kMilliPerGpu} * ns.gpu_count;
    cap_res_[nk_] += cat.kind(ns.kind).memory_mib * ns.gpu_count;
  }
  for (int k = 0; k < nk_; ++k) capacity_ += cap_res_[k];
}

void CycleRun::SetupQueues() {
  nq_ = static_cast<int>(in_.queues.size());
  if (nq_ == 0) nq_ = 1;  // an implicit default queue
  parent_.assign(nq_, -1);
  leaf_.assign(nq_, true);
  guar_.assign(nq_, 0);
  limit_.assign(nq_, -1);
  std::unordered_map<std::string, int> by_name;
  for (int q = 0; q < static_cast<int>(in_.queues.size()); ++q) by_name[in_.queues[q].name] = q;
  for (int q = 0; q < static_cast<int>(in_.queues.size()); ++q) {
    const QueueConfig& qc = in_.queues[q];
    auto it = by_name.find(qc.parent);
    if (!qc.parent.empty() && it != by_name.end() && it->second != q) parent_[q] = it->second;
    guar_[q] = qc.guaranteed_milli;
    limit_[q] = qc.limit_milli;
    if (qc.lending_limit_milli >= 0 && qc.lending_limit_milli < qc.guaranteed_milli) lending_queues_.push_back(q);
  }
  if (in_.queues.empty()) guar_[0] = capacity_;
  // Break parent cycles (bad input): a chain longer than nq_ is cut at the root.
  for (int q = 0; q < nq_; ++q) {
    int a = q, steps = 0;
    while (a >= 0 && steps <= nq_) a = parent_[a], ++steps;
    if (steps > nq_) parent_[q] = -1;
  }
  for (int q = 0; q < nq_; ++q)
    if (parent_[q] >= 0) leaf_[parent_[q]] = false;
  alloc_.assign(nq_, 0);
  demand_.assign(nq_, 0);
  res_.assign(nq_, std::vector<int64_t>(nk_ + 1, 0));
  qjobs_.assign(nq_, {});
  qnext_.assign(nq_, 0);
  qver_.assign(nq_, 0);
  no_borrow_.assign(nq_, false);
}

void CycleRun::SetupRunning() {
  const ClusterState& s = *in_.snapshot;
  run_units_.assign(in_.running.size(), 0);
  preempted_.assign(in_.running.size(), false);
  for (size_t i = 0; i < in_.running.size(); ++i) {
    const RunningJob& rj = in_.running[i];
    const int q = rj.queue >= 0 && rj.queue < nq_ ? rj.queue : 0;
    run_units_[i] = rj.tasks.empty() ? rj.gpu_milli : UnitsOf(s, rj.tasks, o_.slice_units);
    Account(q, rj.tasks, +1);
    if (rj.tasks.empty())
      for (int a = q; a >= 0; a = parent_[a]) alloc_[a] += rj.gpu_milli;
  }
}

// Pending jobs: order within each queue, and demand.
void CycleRun::SetupPending() {
  est_units_.resize(in_.pending.size());
  out_.resize(in_.pending.size());
  plan_.pending.resize(in_.pending.size());  // statuses in job order; bound jobs are removed at the end
  for (size_t j = 0; j < in_.pending.size(); ++j) {
    const PendingJob& p = in_.pending[j];
    const int q = p.queue >= 0 && p.queue < nq_ ? p.queue : 0;
    est_units_[j] = EstimateUnits(p.request);
    qjobs_[q].push_back(static_cast<int>(j));
    if (!p.held)
      for (int a = q; a >= 0; a = parent_[a]) demand_[a] += est_units_[j];
  }
  for (int q = 0; q < nq_; ++q) {
    demand_[q] += alloc_[q];
    std::sort(qjobs_[q].begin(), qjobs_[q].end(), [&](int a, int b) {
      const PendingJob& x = in_.pending[a];
      const PendingJob& y = in_.pending[b];
      if (x.request.priority != y.request.priority) return x.request.priority > y.request.priority;
      if (x.submit_time_s != y.submit_time_s) return x.submit_time_s < y.submit_time_s;
      return x.request.id < y.request.id;
    });
  }
}

void CycleRun::SetupShares() {
  std::vector<FairShareClaim> claims(nq_);
  for (int q = 0; q < nq_; ++q) {
    claims[q].guaranteed = guar_[q];
    claims[q].limit = o_.allow_borrowing ? limit_[q] : (limit_[q] >= 0 ? std::min(limit_[q], guar_[q]) : guar_[q]);
    claims[q].weight = q < static_cast<int>(in_.queues.size()) ? in_.queues[q].over_quota_weight : 1;
    claims[q].demand = demand_[q];
  }
  fair_ = TreeFairShares(parent_, claims, capacity_);
  // Historical usage share (fractions of all recorded usage).
  hist_share_.assign(nq_, 0.0);
  double total_hist = 0;
  for (int q = 0; q < nq_ && q < static_cast<int>(in_.historical_usage.size()); ++q)
    if (leaf_[q]) total_hist += std::max(0.0, in_.historical_usage[q]);
  if (total_hist > 0)
    for (int q = 0; q < nq_ && q < static_cast<int>(in_.historical_usage.size()); ++q)
      hist_share_[q] = std::max(0.0, in_.historical_usage[q]) / total_hist;
}

void CycleRun::Account(int q, const std::vector<TaskPlacement>& tasks, int sign) {
  ++alloc_version_;
  const ClusterState& s = *in_.snapshot;
  int64_t units = 0;
  std::vector<std::pair<int, int64_t>> per;  // dense kind -> units
  int64_t mem = 0;
  for (const TaskPlacement& t : tasks)
    for (const GpuGrant& g : t.gpus) {
      const KindId k = s.gpu(g.gpu).kind;
      const GpuKind& kind = s.catalog().kind(k);
      const int64_t u = GrantUnits(kind, g, o_.slice_units);
      units += u;
      mem += GrantMemory(kind, g);
      const int d = kind_idx_[k];
      bool found = false;
      for (auto& [dk, du] : per)
        if (dk == d) du += u, found = true;
      if (!found) per.push_back({d, u});
    }
  for (int a = q; a >= 0; a = parent_[a]) {
    alloc_[a] += sign * units;
    for (auto [d, u] : per) res_[a][d] += sign * u;
    res_[a][nk_] += sign * mem;
  }
}

int64_t CycleRun::EstimateUnits(const Request& r) const {
  if (!r.SubGpu()) return int64_t{kMilliPerGpu} * r.TotalGpus();
  if (o_.slice_units == SliceUnits::kCompute) return r.gpu_milli;
  int64_t ref = 0;
  const Catalog& cat = in_.snapshot->catalog();
  for (KindId k = 0; k < static_cast<KindId>(cat.size()); ++k)
    if (kind_gpus_[k] > 0 && r.KindAllowed(k)) ref = std::max(ref, cat.kind(k).memory_mib);
  if (ref <= 0) return r.gpu_milli;
  return std::max<int64_t>(1, (r.gpu_memory_mib * kMilliPerGpu + ref - 1) / ref);
}

double CycleRun::DominantShare(int q) const {
  double dom = 0;
  for (int d = 0; d <= nk_; ++d)
    if (cap_res_[d] > 0) dom = std::max(dom, static_cast<double>(res_[q][d]) / cap_res_[d]);
  return dom;
}

double CycleRun::Key(int q) const {
  return FairShareKey(BlendedShare(DominantShare(q), hist_share_[q], in_.options.history_weight), fair_[q],
                      capacity_);
}

void CycleRun::Push(std::priority_queue<HeapItem>& heap, int q) {
  if (qnext_[q] >= qjobs_[q].size()) return;
  const int j = qjobs_[q][qnext_[q]];
  // Jobs are visited in pool order, which jumps between queues: fetch what processing the head will touch
  // while other queues go first, and the next head's request for this queue's next push.
  __builtin_prefetch(&out_[j], 1);
  __builtin_prefetch(&plan_.pending[j], 1);
  if (qnext_[q] + 1 < qjobs_[q].size()) {
    const int next = qjobs_[q][qnext_[q] + 1];
    __builtin_prefetch(&in_.pending[next]);
    __builtin_prefetch(reinterpret_cast<const char*>(&in_.pending[next]) + 64);
    __builtin_prefetch(&est_units_[next]);
  }
  const int tier = alloc_[q] + est_units_[j] <= guar_[q] ? 0 : 1;
  const PendingJob& p = in_.pending[j];
  const int prio = p.request.priority;
  const bool gang = p.request.tasks > 1 || p.request.gpus_per_task > 1;
  const int aged = o_.gang_aging_s >= 0 && gang && !p.held && in_.now_s - p.eligible_time_s >= o_.gang_aging_s ? 1 : 0;
  heap.push({prio >= o_.cross_queue_preempt_priority ? 1 : 0, aged, tier, prio, Key(q), q, ++qver_[q]});
}

int64_t CycleRun::FreeWhole() const {
  int64_t f = 0;
  for (const NodeState& ns : work_.nodes()) f += int64_t{kMilliPerGpu} * (ns.free_whole + ns.idle_mig_gpus);
  return f;
}

int64_t CycleRun::FreeAllowedWork(const Request& r) {
  for (FreeMemo& m : free_memo_)
    if (m.kind_mask == r.kind_mask && m.tier_mask == r.tier_mask && m.sub == r.SubGpu()) {
      if (m.version != work_version_) {
        m.value = FreeAllowed(work_, r);
        m.version = work_version_;
      }
      return m.value;
    }
  const int64_t v = FreeAllowed(work_, r);
  if (free_memo_.size() < 64) free_memo_.push_back({r.kind_mask, r.tier_mask, r.SubGpu(), work_version_, v});
  return v;
}

int64_t CycleRun::FreeAllowed(const ClusterState& s, const Request& r) const {
  int64_t f = 0;
  for (const NodeState& ns : s.nodes())
    if (ns.gpu_count > 0 && r.KindAllowed(ns.kind) && r.TierAllowed(ns.tier))
      f += int64_t{kMilliPerGpu} * (ns.free_whole + ns.idle_mig_gpus) + (r.SubGpu() ? ns.free_milli_total : 0);
  return f;
}

}  // namespace cycle_internal

int64_t UnitsOf(const ClusterState& s, const std::vector<TaskPlacement>& tasks, SliceUnits mode) {
  int64_t u = 0;
  for (const TaskPlacement& t : tasks)
    for (const GpuGrant& g : t.gpus) u += cycle_internal::GrantUnits(s.kind_of_gpu(g.gpu), g, mode);
  return u;
}

double DecayUsage(double usage, double dt_s, double half_life_s, double added) {
  if (half_life_s <= 0) return added;
  return usage * std::exp2(-std::max(0.0, dt_s) / half_life_s) + added;
}

}  // namespace tessera
