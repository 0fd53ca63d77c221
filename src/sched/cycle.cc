#include "sched/cycle.h"

#include <algorithm>
#include <numeric>

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

// First version: priority, then submit time; place greedily on a working copy. Fair share, quotas,
// preemption and reservations are layered on top of this order.
Plan RunCycle(const CycleInput& in, const Policy& policy) {
  Plan plan;
  ClusterState work = *in.snapshot;
  std::vector<size_t> order(in.pending.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const PendingJob& x = in.pending[a];
    const PendingJob& y = in.pending[b];
    if (x.request.priority != y.request.priority) return x.request.priority > y.request.priority;
    return x.submit_time_s < y.submit_time_s;
  });
  int pos = 0;
  for (size_t i : order) {
    const PendingJob& p = in.pending[i];
    ++pos;
    if (p.held) continue;
    PlaceResult res = policy.Place(work, p.request);
    if (res.ok) {
      work.Apply(res.tasks, p.request.cpu_milli, p.request.host_memory_mib,
                 p.request.cls != WorkloadClass::kTraining);
      plan.actions.push_back({ActionKind::kBind, p.request.id, std::move(res.tasks), std::move(res.reason)});
    } else {
      PendingStatus st;
      st.job = p.request.id;
      st.pool_position = pos;
      st.category = WaitCategory::kCapacity;
      st.code = NoFitCodeName(res.code);
      st.message = res.reason;
      st.waiting_s = in.now_s - p.eligible_time_s;
      plan.pending.push_back(std::move(st));
    }
  }
  return plan;
}

}  // namespace tessera
