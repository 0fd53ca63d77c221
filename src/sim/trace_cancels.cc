#include "sim/trace_cancels.h"

#include <climits>

namespace tessera {

void TraceCancels::Arrived(int32_t index, const TraceJob& job, int64_t now) {
  if (job.cancel_s < 0) return;
  due_.emplace(std::make_pair(now + job.cancel_s, seq_++), index);
}

int64_t TraceCancels::NextS(const std::function<bool(int32_t index)>& over) {
  while (!due_.empty() && over(due_.begin()->second)) due_.erase(due_.begin());
  return due_.empty() ? INT64_MAX : due_.begin()->first.first;
}

std::vector<int32_t> TraceCancels::TakeDue(int64_t now) {
  std::vector<int32_t> out;
  while (!due_.empty() && due_.begin()->first.first <= now) {
    out.push_back(due_.begin()->second);
    due_.erase(due_.begin());
  }
  return out;
}

}  // namespace tessera
