#include "sched/preemption.h"

#include <algorithm>
#include <tuple>

namespace tessera {

PreemptKind MayPreempt(const Preemptor& p, const RunningJob& v, bool victim_queue_borrowing, int64_t now_s,
                       const CycleOptions& o) {
  if (!v.preemptible) return PreemptKind::kNone;
  const int64_t age = now_s - v.start_time_s;
  if (v.priority < p.priority && age >= o.min_runtime_s &&
      (v.queue == p.queue || victim_queue_borrowing || p.priority >= o.cross_queue_preempt_priority))
    return PreemptKind::kPriority;
  if (p.within_guarantee && v.queue != p.queue && victim_queue_borrowing && age >= o.reclaim_min_runtime_s &&
      (v.priority < o.protected_priority || v.priority < p.priority))
    return PreemptKind::kReclaim;
  return PreemptKind::kNone;
}

int64_t LostWorkGpuSeconds(const RunningJob& j, int64_t units_milli, int64_t now_s) {
  const int64_t since = std::max(j.start_time_s, j.last_checkpoint_s);
  return std::max<int64_t>(0, now_s - since) * units_milli / 1000;
}

bool CheaperVictim(const VictimCost& a, const VictimCost& b) {
  return std::make_tuple(!a.borrowed, a.priority, a.lost_gpu_s, a.tasks, a.id) <
         std::make_tuple(!b.borrowed, b.priority, b.lost_gpu_s, b.tasks, b.id);
}

}  // namespace tessera
