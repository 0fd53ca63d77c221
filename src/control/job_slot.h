#pragma once
// JobSlot: the index of a job in the control loop's job table (control/job_table.h).
//
// The loop hands each job of its table to the scheduler (sched/) as a Request whose id is the job's slot,
// so the request ids of every CycleInput the loop builds, and the job ids of every Plan it applies, are
// slots. EngineId and SlotOf are that conversion, in both directions; nothing else converts between the two.

#include <cstdint>
#include <limits>

#include "base/ids.h"

namespace tessera {

using JobSlot = int32_t;

// No job (e.g. a Released that released nothing).
inline constexpr JobSlot kNoSlot = -1;

// The scheduler's request id of the job in `slot` (Request::id, Action::job, PendingStatus::job).
constexpr JobId EngineId(JobSlot slot) { return slot; }

// The slot of the job a scheduler id names: the inverse of EngineId; kNoSlot for an id that EngineId
// never gives (negative, or beyond any slot).
constexpr JobSlot SlotOf(JobId id) {
  return id >= 0 && id <= std::numeric_limits<int32_t>::max() ? static_cast<JobSlot>(id) : kNoSlot;
}

}  // namespace tessera
