#include "sched/sharing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera {

const char* SharingModeName(SharingMode m) { return m == SharingMode::kMps ? "mps" : "time-slicing"; }

Result<SharingMode> ParseSharingMode(std::string_view s) {
  if (s == "mps") return SharingMode::kMps;
  if (s == "time-slicing") return SharingMode::kTimeSlicing;
  return Status::Error(fmt::format("'{}' is not one of mps, time-slicing", s));
}

namespace {
// Time-slicing's context-switch factor for `sharers` processes on one unit; 1 under MPS.
double SwitchFactor(const SharingOptions& o, int sharers) {
  return o.mode == SharingMode::kTimeSlicing ? 1.0 + o.switch_overhead * std::max(0, sharers - 1) : 1.0;
}
}  // namespace

double P99Slowdown(const SharingOptions& o, int own_milli, int summed_milli, int capacity_milli,
                   int sharers) {
  if (sharers <= 1 || capacity_milli <= 0) return 1.0;
  if (summed_milli >= capacity_milli) return std::numeric_limits<double>::infinity();
  const double u = static_cast<double>(summed_milli) / capacity_milli;
  const double ui = static_cast<double>(own_milli) / capacity_milli;
  return (1.0 - ui) / (1.0 - u) * SwitchFactor(o, sharers);
}

double WorstSlowdown(const SharingOptions& o, int summed_milli, int capacity_milli, int sharers) {
  return P99Slowdown(o, 0, summed_milli, capacity_milli, sharers);
}

bool SharerFits(const SharingOptions& o, int summed_milli, int sharers, int sensitive, int capacity_milli,
                int milli, bool latency_sensitive) {
  const double worst = WorstSlowdown(o, summed_milli + milli, capacity_milli, sharers + 1);
  const double slo = (sensitive > 0 || latency_sensitive) ? o.sensitive_slo : o.standard_slo;
  return worst <= slo;
}

int MaxJoinMilli(const SharingOptions& o, int max_headroom_milli, int min_capacity_milli, int min_sharers,
                 int min_sensitive, bool latency_sensitive) {
  const double slo = (min_sensitive > 0 || latency_sensitive) ? o.sensitive_slo
                                                               : std::max(o.standard_slo, o.sensitive_slo);
  if (!(slo > 0)) return -1;
  const double bound = max_headroom_milli - min_capacity_milli * SwitchFactor(o, min_sharers + 1) / slo;
  return static_cast<int>(std::floor(std::clamp(bound, -1.0, 1e6))) + 1;
}

int SharersThatFit(const SharingOptions& o, int capacity_milli, int64_t usable_mib, int milli,
                   int64_t memory_mib, bool latency_sensitive) {
  const int64_t per = memory_mib + o.context_mib;
  int k = 0;
  while (k < 48 && (k + 1) * per <= usable_mib &&
         SharerFits(o, k * milli, k, latency_sensitive ? k : 0, capacity_milli, milli, latency_sensitive))
    ++k;
  return k;
}

bool MayShare(const Request& r) {
  return r.SubGpu() && r.tasks == 1 && r.allow_share && r.gpu_milli > 0 && r.cls != WorkloadClass::kTraining;
}

}  // namespace tessera
