// The scheduling cycle's top-level flow (see cycle.h for the algorithm): queue heads in pool order, one
// job's path (validity, quota, lending, failure cache, placement, then backfill into holds, preemption or a
// reservation), binding, and the statuses of jobs left pending. The other concerns live in cycle_*.cc
// (cycle_internal.h lists them).
#include "sched/cycle.h"

#include <fmt/format.h>

#include <algorithm>

#include "sched/cycle_internal.h"

namespace tessera {

const char* ActionKindName(ActionKind k) {
  switch (k) {
    case ActionKind::kBind: return "bind";
    case ActionKind::kPreempt: return "preempt";
    case ActionKind::kCheckpoint: return "checkpoint";
    case ActionKind::kReserve: return "reserve";
    case ActionKind::kRepartition: return "repartition";
  }
  return "?";
}

const char* WaitCategoryName(WaitCategory c) {
  switch (c) {
    case WaitCategory::kWaiting: return "Waiting";
    case WaitCategory::kCapacity: return "Capacity";
    case WaitCategory::kQuota: return "Quota";
    case WaitCategory::kHeld: return "Held";
    case WaitCategory::kInvalid: return "Invalid";
  }
  return "?";
}

namespace cycle_internal {
namespace {

bool CapacityCode(NoFitCode c) {
  return c == NoFitCode::kResources || c == NoFitCode::kMigProfileUnavailable || c == NoFitCode::kMemory ||
         c == NoFitCode::kTopologyUnsatisfiable || c == NoFitCode::kFragmented;
}

}  // namespace

Plan CycleRun::Run() {
  Setup();
  InitStatuses();
  const std::vector<int> order = ProcessInPoolOrder();
  RestoreHeadroom();
  Estimate(AssignPositions(order));
  CompactPending();
  FillQueueStatuses();
  return std::move(plan_);
}

void CycleRun::InitStatuses() {
  for (size_t j = 0; j < in_.pending.size(); ++j) {
    const int q = in_.pending[j].queue >= 0 && in_.pending[j].queue < nq_ ? in_.pending[j].queue : 0;
    plan_.pending[j].job = in_.pending[j].request.id;
    plan_.pending[j].queue = q;
    plan_.pending[j].waiting_s = std::max<int64_t>(0, in_.now_s - in_.pending[j].eligible_time_s);
  }
}

std::vector<int> CycleRun::ProcessInPoolOrder() {
  std::priority_queue<HeapItem> heap;
  for (int q = 0; q < nq_; ++q) Push(heap, q);
  std::vector<int> order;
  order.reserve(in_.pending.size());
  while (!heap.empty()) {
    HeapItem it = heap.top();
    heap.pop();
    const int q = it.q;
    if (it.ver != qver_[q]) {  // stale (the queue's allocation changed): re-key
      Push(heap, q);
      continue;
    }
    if (qnext_[q] >= qjobs_[q].size()) continue;
    const int j = qjobs_[q][qnext_[q]++];
    order.push_back(j);
    if (examined_ >= o_.max_backfill_scan) {
      out_[j].examined = true;
      out_[j].order = seq_++;
      PendingStatus& st = plan_.pending[j];
      st.category = WaitCategory::kWaiting;
      st.code = "Priority";
      st.message = fmt::format("not examined this cycle: {} jobs ahead of it in the pool were", o_.max_backfill_scan);
    } else {
      ++examined_;
      Process(j);
    }
    Push(heap, q);
    // Preemptions change other queues' keys; their entries are re-keyed lazily through qver_.
  }
  return order;
}

void CycleRun::Process(int j) {
  const PendingJob& p = in_.pending[j];
  Outcome& oc = out_[j];
  PendingStatus& st = plan_.pending[j];
  oc.examined = true;
  oc.order = seq_++;
  const int q = st.queue;
  const int64_t units = est_units_[j];
  if (p.held) {
    st.category = WaitCategory::kHeld;
    st.code = "Held";
    st.message = "held (by a user, an admin or an unmet dependency); not considered until released";
    return;
  }
  if (!leaf_[q]) {
    st.category = WaitCategory::kInvalid;
    st.code = "QueueNotLeaf";
    st.message = fmt::format("queue {} has sub-queues; jobs go to leaf queues", in_.queues[q].name);
    return;
  }
  const Request& r = p.request;
  if (RejectIfExceedsCluster(j, units)) return;
  if (QuotaBlocked(j, units)) return;
  if (!LendingOk(j, units, &st)) return;
  // A request limited to some nodes neither uses nor feeds the cache: its failure says nothing of others.
  if (const FailureCache::Entry* e = r.nodes ? nullptr : fails_.Find(r)) {
    HandleNoFit(j, e->code, CachedFailureReason(r, e), units);
    return;
  }
  PlaceResult res = PlaceWithin(policy_, work_, r);
  if (res.ok) {
    if (!KindLimitsOk(q, res.tasks, &st) || !HeadroomOk(j, res.tasks)) return;
    Bind(j, std::move(res.tasks), std::move(res.reason));
    return;
  }
  if (!CapacityCode(res.code)) {
    SetCapacityStatus(j, res.code, std::move(res.reason), units);
    return;
  }
  SharedText why(std::move(res.reason));
  if (!r.nodes) fails_.Add(r, res.code, why);
  HandleNoFit(j, res.code, std::move(why), units);
}

// Larger than every allowed GPU of the cluster: can never run.
bool CycleRun::RejectIfExceedsCluster(int j, int64_t units) {
  const Request& r = in_.pending[j].request;
  PendingStatus& st = plan_.pending[j];
  if (r.SubGpu() || r.tasks < 1 || r.gpus_per_task < 1) return false;
  int64_t allowed = 0;
  for (KindId k = 0; k < static_cast<KindId>(kind_gpus_.size()); ++k)
    if (r.KindAllowed(k)) allowed += kind_gpus_[k];
  if (r.TotalGpus() <= allowed) return false;
  st.category = WaitCategory::kInvalid;
  st.code = "RequestExceedsCluster";
  st.message = fmt::format("needs {} GPUs; the cluster has {} of the allowed kinds", r.TotalGpus(), allowed);
  st.resource = "gpu.milli";
  st.requested = units;
  st.available = allowed * kMilliPerGpu;
  st.still_needed = units - st.available;
  return true;
}

// A job over its queue's quota may still preempt lower priorities of its own queue.
bool CycleRun::QuotaBlocked(int j, int64_t units) {
  PendingStatus& st = plan_.pending[j];
  const int q = st.queue;
  bool invalid = false;
  int blocking = q;
  if (QuotaCheck(j, units, &st, &invalid, &blocking)) return false;
  if (invalid) return true;
  PlaceResult placed;
  const int64_t need = st.still_needed;
  if (blocking == q && TryPreempt(j, units, need, &placed)) {
    Bind(j, std::move(placed.tasks), "after preempting lower priorities of its own queue: " + placed.reason,
         AfterGrace());
  }
  return true;
}

// The reason a request dominated by a cached failure waits: the failure's own sentence for the same shape,
// else one sentence per (shape, cause) and cache generation (many pending jobs share a shape).
SharedText CycleRun::CachedFailureReason(const Request& r, const FailureCache::Entry* e) {
  if (e->tasks == r.tasks && e->gpt == r.gpus_per_task && e->milli == r.gpu_milli && e->mem == r.gpu_memory_mib)
    return e->reason;
  const auto key = std::make_tuple(r.tasks, r.gpus_per_task, r.gpu_milli, r.gpu_memory_mib, e);
  auto it = dominated_msgs_.find(key);
  if (it == dominated_msgs_.end() || it->second.first != fails_generation_) {
    std::string m =
        fmt::format("needs {} x {} GPUs ({} MiB each); a request no larger did not fit this cycle: {}",
                    r.tasks, r.SubGpu() ? Gpus(r.gpu_milli) : Gpus(int64_t{kMilliPerGpu} * r.gpus_per_task),
                    r.gpu_memory_mib, e->reason.str());
    it = dominated_msgs_.insert_or_assign(key, std::make_pair(fails_generation_, std::move(m))).first;
  }
  return it->second.second;
}

void CycleRun::HandleNoFit(int j, NoFitCode code, SharedText why, int64_t units) {
  const Request& r = in_.pending[j].request;
  if (TryBackfillHolds(j)) return;
  PlaceResult placed;
  if (TryPreempt(j, units, 0, &placed)) {
    Bind(j, std::move(placed.tasks), "after preemption: " + placed.reason, AfterGrace());
    return;
  }
  SetCapacityStatus(j, code, std::move(why), units);
  if (r.tasks > 1 || r.gpus_per_task > 1) TryReserve(j);
}

void CycleRun::Bind(int j, std::vector<TaskPlacement> tasks, std::string reason, int64_t start_s) {
  const PendingJob& p = in_.pending[j];
  const int q = plan_.pending[j].queue;
  work_.Apply(tasks, p.request.cpu_milli, p.request.host_memory_mib, p.request.cls != WorkloadClass::kTraining);
  for (const TaskPlacement& t : tasks)
    work_.ExtendDrain(t.node, p.request.expected_end_s >= 0 ? p.request.expected_end_s : ClusterState::kNever);
  ++work_version_;
  Account(q, tasks, +1);
  Action a;
  a.kind = ActionKind::kBind;
  a.job = p.request.id;
  a.units_milli = UnitsOf(work_, tasks, o_.slice_units);
  a.reason = std::move(reason);
  a.start_s = start_s;
  a.tasks = tasks;
  plan_.actions.push_back(std::move(a));
  bound_.push_back({j, std::move(tasks)});
  out_[j].bound = true;
}

void CycleRun::SetCapacityStatus(int j, NoFitCode code, SharedText reason, int64_t units) {
  const PendingJob& p = in_.pending[j];
  PendingStatus& st = plan_.pending[j];
  const int q = st.queue;
  st.resource = "gpu.milli";
  st.requested = units;
  st.available = FreeAllowedWork(p.request);
  st.limit = limit_[q];
  st.still_needed = std::max<int64_t>(0, units - st.available);
  if (code == NoFitCode::kRequestExceedsCluster || code == NoFitCode::kInvalid) {
    st.category = WaitCategory::kInvalid;
    st.code = NoFitCodeName(code);
    st.message = std::move(reason);
    return;
  }
  st.category = WaitCategory::kCapacity;
  st.code = NoFitCodeName(code);
  if (p.request.tasks > 1 && code == NoFitCode::kResources) st.code = "GangIncomplete";
  // A queue above its fair share waits for queues below theirs before it gets freed capacity.
  if (alloc_[q] + units > fair_[q] && alloc_[q] > guar_[q] && st.still_needed == 0) {
    st.category = WaitCategory::kWaiting;
    st.code = "FairShare";
    st.message = fmt::format("queue uses {} GPUs, above its fair share of {}; {} ({})", Gpus(alloc_[q]),
                             Gpus(fair_[q]), reason.str(), NoFitCodeName(code));
  } else {
    st.message = std::move(reason);
  }
}

// Positions among jobs still pending, in pool order; returns those jobs.
std::vector<int> CycleRun::AssignPositions(const std::vector<int>& order) {
  std::vector<int> team_pos(nq_, 0);
  int pool_pos = 0;
  std::vector<int> still;
  still.reserve(order.size());
  for (int j : order) {
    if (out_[j].bound) continue;
    still.push_back(j);
    PendingStatus& st = plan_.pending[j];
    st.pool_position = ++pool_pos;
    st.team_position = ++team_pos[st.queue];
    // A job behind a reservation that would otherwise fit waits for priority, not capacity.
    if (!phantoms_.empty() && st.category == WaitCategory::kCapacity && st.still_needed <= phantom_units_) {
      st.category = WaitCategory::kWaiting;
      st.code = "Priority";
      st.reservation_job = phantoms_.front().job;
      st.reservation_start_s = phantoms_.front().start_s;
      st.message = "waits behind a reserved gang; " + st.message.str();
    }
  }
  return still;
}

// Bound jobs leave plan_.pending; the rest keep CycleInput::pending order.
void CycleRun::CompactPending() {
  size_t keep = 0;
  for (size_t j = 0; j < in_.pending.size(); ++j)
    if (!out_[j].bound) {
      if (keep != j) plan_.pending[keep] = std::move(plan_.pending[j]);
      ++keep;
    }
  plan_.pending.resize(keep);
}

void CycleRun::FillQueueStatuses() {
  plan_.queues.resize(nq_);
  for (int q = 0; q < nq_; ++q) {
    QueueStatus& qs = plan_.queues[q];
    qs.allocated_milli = alloc_[q];
    qs.fair_share_milli = fair_[q];
    qs.demand_milli = demand_[q];
    qs.dominant_share = DominantShare(q);
    qs.borrowing = alloc_[q] > guar_[q];
  }
}

}  // namespace cycle_internal

Plan RunCycle(const CycleInput& in, const Policy& policy) {
  TESSERA_CHECK(in.snapshot != nullptr, "RunCycle needs a snapshot");
  cycle_internal::CycleRun run(in, policy);
  return run.Run();
}

}  // namespace tessera
