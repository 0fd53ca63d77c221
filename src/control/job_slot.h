#pragma once
// JobSlot: the index of a job in the control loop's job table (control/job_table.h). It is a type of its
// own, not an integer alias, so that a slot is never taken for a JobId (the caller-chosen id of a job) or
// any other integer without saying so: construction from an integer is explicit and value() reads it back.
//
// The loop hands each job of its table to the scheduler (sched/) as a Request whose id is the job's slot,
// so the request ids of every CycleInput the loop builds, and the job ids of every Plan it applies, are
// slots. EngineId and SlotOf are that conversion, in both directions; nothing else converts between the two.

#include <compare>
#include <cstdint>
#include <iosfwd>
#include <limits>

#include "base/ids.h"

namespace tessera {

class JobSlot {
 public:
  // No slot (kNoSlot).
  constexpr JobSlot() = default;
  constexpr explicit JobSlot(int32_t index) : value_(index) {}

  // The index into the job table (-1 for kNoSlot).
  constexpr int32_t value() const { return value_; }

  friend constexpr auto operator<=>(JobSlot a, JobSlot b) = default;

 private:
  int32_t value_ = -1;
};

// No job (e.g. a Released that released nothing).
inline constexpr JobSlot kNoSlot{};

// The scheduler's request id of the job in `slot` (Request::id, Action::job, PendingStatus::job).
constexpr JobId EngineId(JobSlot slot) { return slot.value(); }

// The slot of the job a scheduler id names: the inverse of EngineId; kNoSlot for an id that EngineId
// never gives (negative, or beyond any slot).
constexpr JobSlot SlotOf(JobId id) {
  return id >= 0 && id <= std::numeric_limits<int32_t>::max() ? JobSlot(static_cast<int32_t>(id)) : kNoSlot;
}

// Prints the index (test failure messages, logs).
std::ostream& operator<<(std::ostream& os, JobSlot slot);

}  // namespace tessera
