#include "control/demand_learner.h"

#include <algorithm>
#include <cmath>

namespace tessera {

namespace {
constexpr double kStep = 1.005;  // bin width ratio
constexpr int64_t kForgetAt = int64_t{1} << 20;
}  // namespace

void DemandLearner::Observe(double ratio, bool sensitive) {
  if (!(ratio > 0) || !std::isfinite(ratio)) return;
  Histogram& h = classes_[sensitive ? 1 : 0];
  const double pos = std::log(ratio / kLow) / std::log(kStep);
  const int bin = static_cast<int>(std::clamp(std::floor(pos), 0.0, static_cast<double>(kBins - 1)));
  ++h.counts[bin];
  if (++h.total < kForgetAt) return;
  h.total = 0;
  for (int64_t& c : h.counts) h.total += c /= 2;
}

double DemandLearner::Quantile(const Histogram& h, double q) const {
  if (h.total <= 0 || h.total < options_.min_samples) return 0;
  const double want = std::clamp(q, 0.0, 1.0) * static_cast<double>(h.total);
  int64_t seen = 0;
  int bin = kBins - 1;
  for (int b = 0; b < kBins; ++b) {
    seen += h.counts[b];
    if (static_cast<double>(seen) >= want) {
      bin = b;
      break;
    }
  }
  const double upper = kLow * std::pow(kStep, bin + 1);
  return std::clamp(upper, 1.0, std::max(1.0, options_.max_headroom));
}

LearnedHeadroom DemandLearner::Headroom() const {
  return LearnedHeadroom{Quantile(classes_[1], options_.sensitive_quantile),
                         Quantile(classes_[0], options_.standard_quantile)};
}

}  // namespace tessera
