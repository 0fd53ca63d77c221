#pragma once
// TraceCancels: the cancellations a trace asks for (TraceJob::cancel_s). Each job that carries one is
// cancelled that many seconds after it arrives (its submit time, or in backlog mode the instant it is
// released). The simulator and the service's replay keep one each, so both cancel at the same instants and
// in the same order (time, then arrival), and their decisions stay identical (docs/simulator.md).

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "sim/trace.h"

namespace tessera {

class TraceCancels {
 public:
  // The trace's job `index` arrived at `now`; a job without cancel_s schedules nothing.
  void Arrived(int32_t index, const TraceJob& job, int64_t now);
  // The time of the earliest cancellation still to come, of a job not over yet: cancellations of jobs that
  // `over` says have ended are dropped first, so a run does not go on for them; INT64_MAX = none.
  int64_t NextS(const std::function<bool(int32_t index)>& over);
  // Removes and returns the cancellations due at or before `now`: trace indices in (time, arrival) order.
  std::vector<int32_t> TakeDue(int64_t now);
  bool empty() const { return due_.empty(); }

 private:
  std::map<std::pair<int64_t, uint64_t>, int32_t> due_;  // (time, arrival sequence) -> trace index
  uint64_t seq_ = 0;
};

}  // namespace tessera
