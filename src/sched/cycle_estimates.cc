// Start estimates of the cycle: a what-if replay on a copy of the state after the plan (reservation holds
// and fences released), where running and just-bound work ends as expected and jobs left pending start in
// pool order as soon as the policy places them. Reserved jobs report their reservation's start.
#include <algorithm>

#include "sched/cycle_internal.h"

namespace tessera::cycle_internal {

// The what-if state and the expected ends of running work (not preempted) and of jobs bound this cycle.
ClusterState CycleRun::EstimateStart(EstimateEnds* ends) const {
  ClusterState w = work_;
  for (const Phantom& ph : phantoms_) {
    w.Release(ph.tasks, 0, 0, false);
    for (const Phantom::Fence& f : ph.fences) w.Release({TaskPlacement{f.node, {}}}, f.cpu_milli, f.memory_mib, false);
  }
  for (size_t i = 0; i < in_.running.size(); ++i) {
    const RunningJob& v = in_.running[i];
    if (preempted_[i] || v.expected_end_s < 0 || v.tasks.empty()) continue;
    ends->push({std::max(v.expected_end_s, in_.now_s), &v.tasks, v.cpu_milli, v.host_memory_mib,
                v.cls != WorkloadClass::kTraining});
  }
  for (const auto& [bj, tasks] : bound_) {
    const PendingJob& b = in_.pending[bj];
    ends->push({in_.now_s + (b.expected_duration_s > 0 ? b.expected_duration_s : o_.default_runtime_s), &tasks,
                b.request.cpu_milli, b.request.host_memory_mib, b.request.cls != WorkloadClass::kTraining});
  }
  return w;
}

void CycleRun::Estimate(const std::vector<int>& order) {
  if (o_.estimate_limit <= 0) return;
  EstimateEnds ends;
  ClusterState w = EstimateStart(&ends);
  std::vector<std::vector<TaskPlacement>> placed_store;
  placed_store.reserve(o_.estimate_limit);
  int64_t t = in_.now_s;
  int budget = 2 * o_.estimate_limit + 32;  // Place calls
  int done = 0;
  for (int j : order) {
    if (done >= o_.estimate_limit || budget <= 0) break;
    Outcome& oc = out_[j];
    if (plan_.pending[j].category == WaitCategory::kHeld || plan_.pending[j].category == WaitCategory::kInvalid) continue;
    ++done;
    const PendingJob& p = in_.pending[j];
    if (oc.reserved_start >= 0) {
      plan_.pending[j].estimated_start_s = oc.reserved_start;
      continue;
    }
    while (budget > 0) {
      --budget;
      PlaceResult res = PlaceWithin(policy_, w, p.request);
      if (res.ok) {
        plan_.pending[j].estimated_start_s = std::max(t, in_.now_s);
        w.Apply(res.tasks, p.request.cpu_milli, p.request.host_memory_mib, p.request.cls != WorkloadClass::kTraining);
        placed_store.push_back(std::move(res.tasks));
        ends.push({plan_.pending[j].estimated_start_s + (p.expected_duration_s > 0 ? p.expected_duration_s : o_.default_runtime_s),
                   &placed_store.back(), p.request.cpu_milli, p.request.host_memory_mib,
                   p.request.cls != WorkloadClass::kTraining});
        break;
      }
      if (ends.empty()) break;
      // Advance to the next end time, releasing everything that ends then.
      t = ends.top().t;
      while (!ends.empty() && ends.top().t == t) {
        EstimateEnd e = ends.top();
        ends.pop();
        w.Release(*e.tasks, e.cpu, e.mem, e.inf);
      }
    }
  }
}

}  // namespace tessera::cycle_internal
