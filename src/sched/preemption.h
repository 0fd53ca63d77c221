#pragma once
// Preemption and reclaim rules: who may be a victim for whom, and the cost order of victims. Pure.
//
// Rules (a victim is always a whole running job, so a gang is preempted whole):
//  - `preemption: never` (RunningJob::preemptible == false): never a victim.
//  - Priority preemption: the victim's priority is strictly lower than the preemptor's, it ran at least
//    CycleOptions::min_runtime_s, and it is in the preemptor's queue, or borrowing, or the preemptor's
//    priority is at least cross_queue_preempt_priority (production inference).
//  - Reclaim: the preemptor's queue is within its guarantee with this job, the victim's queue (another
//    one) is above its guarantee, the victim ran at least reclaim_min_runtime_s, and the victim's priority
//    is below protected_priority or below the preemptor's (production inference is never reclaimed by
//    anything below it).
// Cost order (cheapest first): borrowed before within-quota, lower priority, less work lost since the last
// checkpoint (GPU-seconds), smaller gang, then id. The cycle releases candidates in this order until the
// job fits, then spares every victim it can (fewest victims).

#include <cstdint>

#include "sched/cycle.h"

namespace tessera {

enum class PreemptKind : uint8_t { kNone, kPriority, kReclaim };

struct Preemptor {
  int priority = 0;
  int queue = 0;
  bool within_guarantee = false;  // its queue stays within its guarantee with this job
};

// Whether `victim` may be preempted for `p`; `victim_queue_borrowing` = the victim's queue is above its
// guarantee right now.
PreemptKind MayPreempt(const Preemptor& p, const RunningJob& victim, bool victim_queue_borrowing, int64_t now_s,
                       const CycleOptions& o);

// GPU-seconds of work lost if `j` stops now (since its last checkpoint, or since start).
int64_t LostWorkGpuSeconds(const RunningJob& j, int64_t units_milli, int64_t now_s);

struct VictimCost {
  bool borrowed = false;
  int priority = 0;
  int64_t lost_gpu_s = 0;
  int tasks = 1;
  JobId id = 0;
};
bool CheaperVictim(const VictimCost& a, const VictimCost& b);

}  // namespace tessera
