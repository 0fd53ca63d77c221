#include "control/usage.h"

#include "sched/cycle.h"

namespace tessera {

QueueUsage::QueueUsage(int queues, double half_life_s, int64_t now_s)
    : half_life_s_(half_life_s), last_s_(now_s), usage_(queues, 0.0), held_(queues, 0) {}

void QueueUsage::AdvanceTo(int64_t now_s) {
  if (now_s <= last_s_) return;
  const double dt = static_cast<double>(now_s - last_s_);
  for (size_t q = 0; q < usage_.size(); ++q)
    usage_[q] = DecayUsage(usage_[q], dt, half_life_s_, static_cast<double>(held_[q]) * dt);
  last_s_ = now_s;
}

}  // namespace tessera
