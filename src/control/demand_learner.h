#pragma once
// DemandLearner: what shared units' real demand has been against their declared demand, learned online.
// Admission of sharers counts a unit's summed declared demand times a headroom (sched/sharing.h); this
// learns that headroom from what the cluster observed instead of taking it as configured: per class of unit
// (one that holds a latency-sensitive replica, or not), a histogram of the ratio summed real demand /
// summed declared demand over observed unit-epochs, read at the class's quantile. Before `min_samples`
// observations of a class its headroom is not learned (0: the configured one holds).
//
// Bins are logarithmic (0.5 % wide) from 1/4 to 4; a ratio outside counts in the end bin. A quantile is
// read at its bin's upper edge (never below the truth by more than a bin), and clamped to
// [1, max_headroom]: admission never counts less than the declared demand. The learner forgets slowly:
// when a class has seen 2^20 observations its counts halve, so that a workload that changes is followed.

#include <array>
#include <cstdint>

#include "sched/sharing.h"

namespace tessera {

struct DemandLearning {
  // The quantile each class's headroom is read at: the share of unit-epochs whose summed real demand stays
  // within headroom x declared (the SLO's protection; docs/sharing.md "Learned headroom").
  double sensitive_quantile = 0.995;
  double standard_quantile = 0.9;
  int64_t min_samples = 500;
  double max_headroom = 3.0;
};

class DemandLearner {
 public:
  explicit DemandLearner(DemandLearning options = {}) : options_(options) {}

  // One unit-epoch: the unit's summed real demand / its summed declared demand (> 0), and whether it holds a
  // latency-sensitive replica. Non-positive or non-finite ratios are ignored.
  void Observe(double ratio, bool sensitive);
  // The learned headroom per class (0 where not learned yet). A policy uses it where its SharingOptions
  // say learn_headroom.
  LearnedHeadroom Headroom() const;
  int64_t samples(bool sensitive) const { return classes_[sensitive ? 1 : 0].total; }

 private:
  static constexpr int kBins = 556;  // ln(16) / ln(1.005) bins cover [1/4, 4)
  static constexpr double kLow = 0.25;
  struct Histogram {
    std::array<int64_t, kBins> counts{};
    int64_t total = 0;
  };
  double Quantile(const Histogram& h, double q) const;

  DemandLearning options_;
  std::array<Histogram, 2> classes_;  // [0] standard units, [1] units with a latency-sensitive replica
};

}  // namespace tessera
