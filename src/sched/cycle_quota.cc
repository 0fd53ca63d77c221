// Quotas of the cycle: queue limits and borrowing, per-kind limits, lending limits and the production
// headroom. Each check either passes or fills the job's PendingStatus with the reason it waits.
#include <fmt/format.h>

#include <algorithm>

#include "sched/cycle_internal.h"

namespace tessera::cycle_internal {

bool CycleRun::QuotaCheck(int j, int64_t units, PendingStatus* st, bool* invalid, int* blocking) const {
  const int q = st->queue;
  *invalid = false;
  for (int a = q; a >= 0; a = parent_[a]) {
    const std::string& name = a < static_cast<int>(in_.queues.size()) ? in_.queues[a].name : "default";
    const bool no_borrow = !o_.allow_borrowing || no_borrow_[a];
    int64_t cap = limit_[a];
    if (no_borrow && a == q) cap = cap >= 0 ? std::min(cap, guar_[a]) : guar_[a];
    if (cap < 0) continue;
    st->resource = "gpu.milli";
    st->requested = units;
    st->limit = cap;
    st->available = std::max<int64_t>(0, cap - alloc_[a]);
    st->still_needed = std::max<int64_t>(0, units - st->available);
    *blocking = a;
    if (limit_[a] >= 0 && units > limit_[a]) {  // can never run in this queue
      *invalid = true;
      st->category = WaitCategory::kInvalid;
      st->code = "ExceedsQueueLimit";
      st->message = fmt::format("queue {} has a limit of {} GPUs; the job asks for {}", name, Gpus(limit_[a]),
                                Gpus(units));
      return false;
    }
    if (alloc_[a] + units > cap) {
      st->category = WaitCategory::kQuota;
      const bool borrow_limit = cap > guar_[a] || (no_borrow_[a] && o_.allow_borrowing);
      st->code = borrow_limit ? "BorrowLimit" : "TeamQuotaExhausted";
      if (no_borrow_[a] && o_.allow_borrowing && a == q)
        st->message = fmt::format(
            "capacity was reclaimed from queue {} this cycle; it borrows again next cycle (guarantee {} GPUs, {} in "
            "use, {} requested)",
            name, Gpus(guar_[a]), Gpus(alloc_[a]), Gpus(units));
      else if (borrow_limit)
        st->message = fmt::format("borrow limit of queue {} is {} GPUs, {} in use, {} requested", name, Gpus(cap),
                                  Gpus(alloc_[a]), Gpus(units));
      else
        st->message = fmt::format("team quota {} GPUs ({}), {} in use, {} requested", Gpus(cap), name,
                                  Gpus(alloc_[a]), Gpus(units));
      return false;
    }
  }
  return true;
}

bool CycleRun::HeadroomOk(int j, const std::vector<TaskPlacement>& tasks) {
  if (o_.production_headroom_milli <= 0) return true;
  const Request& r = in_.pending[j].request;
  const int q = plan_.pending[j].queue;
  if (r.priority >= o_.cross_queue_preempt_priority) return true;
  int64_t idle_taken = 0;  // idle GPUs this placement would start using
  for (const TaskPlacement& t : tasks)
    for (const GpuGrant& g : t.gpus) idle_taken += work_.gpu(g.gpu).tasks == 0 ? kMilliPerGpu : 0;
  if (idle_taken == 0 || alloc_[q] + UnitsOf(work_, tasks, o_.slice_units) <= guar_[q]) return true;
  const int64_t free = FreeWhole();
  if (free - idle_taken >= o_.production_headroom_milli) return true;
  PendingStatus& st = plan_.pending[j];
  st.category = WaitCategory::kQuota;
  st.code = "BorrowLimit";
  st.resource = "gpu.milli";
  st.requested = idle_taken;
  st.available = std::max<int64_t>(0, free - o_.production_headroom_milli);
  st.limit = -1;
  st.still_needed = idle_taken - st.available;
  st.message = fmt::format("borrowing would leave {} idle GPUs, below the production headroom of {}",
                           Gpus(free - idle_taken), Gpus(o_.production_headroom_milli));
  return false;
}

bool CycleRun::LendingOk(int j, int64_t units, PendingStatus* st) {
  if (lending_queues_.empty()) return true;
  const int q = st->queue;
  const Request& r = in_.pending[j].request;
  if (alloc_[q] + units <= guar_[q] || r.priority >= o_.cross_queue_preempt_priority) return true;
  int64_t kept = 0;  // idle guarantee that other queues keep back from lending
  for (int k : lending_queues_)
    if (k != q) kept += std::max<int64_t>(0, guar_[k] - in_.queues[k].lending_limit_milli - alloc_[k]);
  const int64_t free = FreeAllowedWork(r);
  if (free - units >= kept) return true;
  st->category = WaitCategory::kQuota;
  st->code = "BorrowLimit";
  st->resource = "gpu.milli";
  st->requested = units;
  st->available = std::max<int64_t>(0, free - kept);
  st->limit = -1;
  st->still_needed = units - st->available;
  st->message = fmt::format(
      "borrowing {} GPUs would take idle guarantee that other queues keep back from lending: {} free, {} kept",
      Gpus(units), Gpus(free), Gpus(kept));
  return false;
}

bool CycleRun::KindLimitsOk(int q, const std::vector<TaskPlacement>& tasks, PendingStatus* st) const {
  if (q >= static_cast<int>(in_.queues.size())) return true;
  for (int a = q; a >= 0; a = parent_[a]) {
    const QueueConfig& qc = in_.queues[a];
    for (const QueueConfig::KindQuota& kq : qc.kinds) {
      if (kq.kind < 0 || kq.kind >= static_cast<KindId>(kind_idx_.size()) || kind_idx_[kq.kind] < 0) continue;
      int64_t cap = kq.limit_milli;
      if (!o_.allow_borrowing || no_borrow_[a]) cap = cap >= 0 ? std::min(cap, kq.guaranteed_milli) : kq.guaranteed_milli;
      if (cap < 0) continue;
      int64_t add = 0;
      for (const TaskPlacement& t : tasks)
        for (const GpuGrant& g : t.gpus)
          if (work_.gpu(g.gpu).kind == kq.kind) add += GrantUnits(work_.kind_of_gpu(g.gpu), g, o_.slice_units);
      const int64_t used = res_[a][kind_idx_[kq.kind]];
      if (add > 0 && used + add > cap) {
        st->category = WaitCategory::kQuota;
        st->code = cap > kq.guaranteed_milli ? "BorrowLimit" : "TeamQuotaExhausted";
        st->message = fmt::format("queue {} may hold {} {} GPUs, {} in use, {} requested", qc.name, Gpus(cap),
                                  work_.catalog().kind(kq.kind).id, Gpus(used), Gpus(add));
        st->resource = "gpu.milli/" + work_.catalog().kind(kq.kind).id;
        st->requested = add;
        st->limit = cap;
        st->available = std::max<int64_t>(0, cap - used);
        st->still_needed = std::max<int64_t>(0, add - st->available);
        return false;
      }
    }
  }
  return true;
}

}  // namespace tessera::cycle_internal
