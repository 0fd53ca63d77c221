#include "sim/harvest.h"

#include <algorithm>

namespace tessera {

SharingOptions HarvestSharing(SharingOptions o) {
  o.mode = SharingMode::kMps;
  return o;
}

double HarvestedOwnerSlowdown(const SharingOptions& o, int owner_milli, int cap_milli, int capacity_milli) {
  if (cap_milli <= 0) return 1.0;
  return P99Slowdown(HarvestSharing(o), std::max(0, owner_milli), std::max(0, owner_milli) + cap_milli,
                     capacity_milli, 2);
}

int HarvestCapMilli(const SharingOptions& o, int owner_milli, int capacity_milli, double slo_limit) {
  owner_milli = std::max(0, owner_milli);
  if (capacity_milli <= 0 || owner_milli >= capacity_milli || !(slo_limit > 1)) return 0;
  // The slowdown grows with the cap: bisect for the largest cap that keeps it within the limit.
  int lo = 0, hi = capacity_milli - owner_milli;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (HarvestedOwnerSlowdown(o, owner_milli, mid, capacity_milli) <= slo_limit)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

double HarvestUsefulMilli(const SharingOptions& o, int owner_milli, int cap_milli, int capacity_milli) {
  if (cap_milli <= 0 || capacity_milli <= 0) return 0;
  const double busy = static_cast<double>(std::max(0, owner_milli) + cap_milli) / capacity_milli;
  const double contention = 1.0 + HarvestSharing(o).mps_contention * std::clamp(busy, 0.0, 1.0);
  return cap_milli / contention;
}

}  // namespace tessera
