#include "control/workload_learner.h"

#include <algorithm>
#include <utility>

namespace tessera {

WorkloadLearner::WorkloadLearner(WorkloadLearning options) : options_(options) {
  options_.window = std::max<int64_t>(1, options_.window);
  options_.refresh_every = std::max<int64_t>(1, options_.refresh_every);
}

void WorkloadLearner::Observe(const Request& r) {
  if (!options_.enabled) return;
  const TaskSample t{ShapeOf(r), r.host_memory_mib, r.cls == WorkloadClass::kTraining};
  const int64_t weight = Weight(r);
  for (int64_t k = 0; k < weight; ++k) {
    if (static_cast<int64_t>(window_.size()) < options_.window) {
      window_.push_back(t);
    } else {
      window_[next_] = t;
      next_ = (next_ + 1) % window_.size();
    }
  }
  ++observed_;
  if (observed_ >= options_.min_requests && (observed_ - options_.min_requests) % options_.refresh_every == 0)
    Refresh();
}

int64_t WorkloadLearner::Weight(const Request& r) {
  if (r.gpus_per_task <= 0) return 1;
  return std::min<int64_t>(kMaxWeight, int64_t{std::max(1, r.tasks)} * r.gpus_per_task);
}

void WorkloadLearner::Refresh() {
  // Oldest first, so that equal counts rank the same way whatever the ring's position.
  std::vector<TaskSample> ordered;
  ordered.reserve(window_.size());
  for (size_t i = 0; i < window_.size(); ++i) ordered.push_back(window_[(next_ + i) % window_.size()]);
  current_ = std::make_shared<const TaskShapeDistribution>(
      TaskShapeDistribution::FromSamples(ordered, options_.coverage));
}

}  // namespace tessera
