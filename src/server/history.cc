#include "server/history.h"

#include <algorithm>

namespace tessera {

void UtilisationHistory::Record(const UtilisationSample& s) {
  std::lock_guard lock(mu_);
  if (!samples_.empty() && s.t <= samples_.back().t) return;
  samples_.push_back(s);
  while (samples_.size() > capacity_) samples_.pop_front();
}

size_t UtilisationHistory::Size() const {
  std::lock_guard lock(mu_);
  return samples_.size();
}

std::vector<UtilisationSample> UtilisationHistory::Range(int64_t from, int64_t to, size_t max_points) const {
  std::vector<UtilisationSample> in;
  {
    std::lock_guard lock(mu_);
    auto lo = from < 0 ? samples_.begin()
                       : std::lower_bound(samples_.begin(), samples_.end(), from,
                                          [](const UtilisationSample& s, int64_t t) { return s.t < t; });
    auto hi = to < 0 ? samples_.end()
                     : std::upper_bound(samples_.begin(), samples_.end(), to,
                                        [](int64_t t, const UtilisationSample& s) { return t < s.t; });
    if (lo < hi) in.assign(lo, hi);
  }
  if (max_points == 0 || in.size() <= max_points) return in;
  // Equal-width buckets over [first, last]; each non-empty bucket becomes the mean of its samples.
  const int64_t t0 = in.front().t, span = in.back().t - in.front().t + 1;
  std::vector<UtilisationSample> out;
  size_t i = 0;
  for (size_t b = 0; b < max_points && i < in.size(); ++b) {
    const int64_t end = t0 + static_cast<int64_t>((static_cast<__int128>(span) * (b + 1)) / max_points);
    int64_t n = 0, tsum = 0, total = 0, alloc = 0, busy = 0;
    for (; i < in.size() && in[i].t < end; ++i, ++n) {
      tsum += in[i].t, total += in[i].total_gpus, alloc += in[i].allocated_milli, busy += in[i].busy_gpus;
    }
    if (n) out.push_back({tsum / n, total / n, alloc / n, busy / n});
  }
  return out;
}

}  // namespace tessera
