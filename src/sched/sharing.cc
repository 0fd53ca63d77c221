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
double Headroom(const SharingOptions& o, bool sensitive) {
  return std::max(1.0, sensitive ? o.sensitive_headroom : o.standard_headroom);
}

// The latency factor of `sharers` processes beyond the queueing term at busy fraction u: f or m (header).
double ContentionFactor(const SharingOptions& o, int sharers, double u) {
  const double extra = std::max(0, sharers - 1) * std::clamp(u, 0.0, 1.0);
  return o.mode == SharingMode::kTimeSlicing ? 1.0 + o.switch_overhead * extra : 1.0 + o.mps_contention * extra;
}

// An upper bound on the admitted fraction of a unit with `sharers` processes: summed demand (times the
// headroom) above capacity x this never keeps the worst sharer within `slo`. Contention is at its least
// (an idle unit), so the bound holds at every load.
double AdmitFraction(const SharingOptions& o, double slo, bool sensitive) {
  return (1.0 - 1.0 / slo) / Headroom(o, sensitive);
}
}  // namespace

SharingOptions WithLearned(const SharingOptions& o, const LearnedHeadroom& h) {
  SharingOptions out = o;
  if (!o.learn_headroom) return out;
  if (h.sensitive > 0) out.sensitive_headroom = h.sensitive;
  if (h.standard > 0) out.standard_headroom = h.standard;
  return out;
}

double ThroughputFactor(const SharingOptions& o, int sharers, double u) {
  if (o.mode != SharingMode::kTimeSlicing || sharers <= 1) return 1.0;
  return 1.0 / (1.0 + o.switch_throughput_loss * (sharers - 1) * std::clamp(u, 0.0, 1.0));
}

double P99Slowdown(const SharingOptions& o, int own_milli, int summed_milli, int capacity_milli,
                   int sharers) {
  if (sharers <= 1 || capacity_milli <= 0) return 1.0;
  const double busy = static_cast<double>(summed_milli) / capacity_milli;
  const double useful = capacity_milli * ThroughputFactor(o, sharers, busy);
  if (summed_milli >= useful) return std::numeric_limits<double>::infinity();
  const double u = summed_milli / useful;
  const double ui = static_cast<double>(own_milli) / capacity_milli;
  return (1.0 - ui) / (1.0 - u) * ContentionFactor(o, sharers, busy);
}

double WorstSlowdown(const SharingOptions& o, int summed_milli, int capacity_milli, int sharers) {
  return P99Slowdown(o, 0, summed_milli, capacity_milli, sharers);
}

bool SharerFits(const SharingOptions& o, int summed_milli, int sharers, int sensitive, int capacity_milli,
                int milli, bool latency_sensitive) {
  const bool tight = sensitive > 0 || latency_sensitive;
  const double slo = tight ? o.sensitive_slo : o.standard_slo;
  if (!(slo > 0)) return false;
  const double admitted = (summed_milli + milli) * Headroom(o, tight);
  const double worst = WorstSlowdown(o, static_cast<int>(std::ceil(admitted - 1e-9)), capacity_milli, sharers + 1);
  return worst <= slo;
}

int MaxJoinMilli(const SharingOptions& o, int max_headroom_milli, int min_capacity_milli, int min_sharers,
                 int min_sensitive, bool latency_sensitive) {
  const bool tight = min_sensitive > 0 || latency_sensitive;
  const double slo = tight ? o.sensitive_slo : std::max(o.standard_slo, o.sensitive_slo);
  if (!(slo > 0)) return -1;
  // c fits unit i only if c <= C_i a - D_i = headroom_i - C_i (1 - a), a = AdmitFraction (<= 1, the least
  // contention): every term is at its best with the set's figures (the smaller headroom too).
  const double a = tight ? AdmitFraction(o, slo, true)
                         : std::max(AdmitFraction(o, slo, false), AdmitFraction(o, o.sensitive_slo, true));
  const double bound = max_headroom_milli - min_capacity_milli * std::max(0.0, 1.0 - a);
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
