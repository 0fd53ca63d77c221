#pragma once
// Sharing inside instances (docs/sharing.md): several inference replicas in one MIG instance (or one whole
// non-MIG GPU) and the interference model that says what it costs them. Pure functions of plain values; the
// engine (engine_policy.cc) packs with them and the simulator measures with them.
//
// Interference model. A replica i with compute demand d_i (thousandths of a full GPU) shares a unit of
// compute C with others; the unit's summed demand is D (including d_i) over k sharers; u = D / C, u_i = d_i /
// C.
//   MPS (spatial sharing, kernels run concurrently): the unit behaves like one processor-sharing server,
//   whose
//     response-time tail scales with 1 / (1 - utilisation); against running alone on the same unit the p99
//     latency grows by (1 - u_i) / (1 - u).
//   Time-slicing (temporal sharing, one context at a time): the same queueing term times (1 + o (k - 1)), o
//     being the context-switch overhead per additional process (an [UNVERIFIED] assumption, configurable).
// A replica alone (k = 1) has slowdown 1. Summed demand at or above C is unbounded (infinity).

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "sched/request.h"

namespace tessera {

enum class SharingMode : uint8_t { kTimeSlicing, kMps };
const char* SharingModeName(SharingMode m);
Result<SharingMode> ParseSharingMode(std::string_view s);

struct SharingOptions {
  SharingMode mode = SharingMode::kTimeSlicing;  // what the device plugin offers on MIG resources (1.8)
  double switch_overhead = 0.02;  // time-slicing: latency overhead per additional process [UNVERIFIED]
  // p99 latency slowdown each class accepts against running alone (its SLO); packing keeps every sharer's
  // worst case within its own. Latency-sensitive replicas (production-inference) keep the most headroom.
  double sensitive_slo = 2.0;
  double standard_slo = 4.0;
  // Extra GPU memory per co-located process beyond what its request states (0: the request's memory already
  // counts its CUDA context and runtime buffers, as the generator's overhead_pct does,
  // hardware-facts.md 5.3).
  int64_t context_mib = 0;
};

// Slowdown of one sharer (see the model above). own/summed/capacity in thousandths of a GPU.
double P99Slowdown(const SharingOptions& o, int own_milli, int summed_milli, int capacity_milli, int sharers);

// The worst slowdown any sharer of a unit can see (own demand -> 0): the bound packing checks.
double WorstSlowdown(const SharingOptions& o, int summed_milli, int capacity_milli, int sharers);

// Whether a unit of `capacity_milli` can take one more sharer of `milli` when it holds `summed_milli` over
// `sharers` tasks, `sensitive` of them latency-sensitive: every sharer's worst case stays within its SLO.
bool SharerFits(const SharingOptions& o, int summed_milli, int sharers, int sensitive, int capacity_milli,
                int milli, bool latency_sensitive);

// An upper bound on the demand one more sharer may bring to any unit of a set, from the set's largest
// headroom (capacity minus summed demand), smallest capacity, fewest sharers and fewest latency-sensitive
// ones. The model depends on u and k only, so a newcomer of demand c fits unit i only if
// c <= headroom_i - capacity_i * g(k_i + 1) / slo_i (g: 1, or the time-slicing factor), and every term is
// at its best here. One thousandth of slack covers rounding.
int MaxJoinMilli(const SharingOptions& o, int max_headroom_milli, int min_capacity_milli, int min_sharers,
                 int min_sensitive, bool latency_sensitive);

// How many replicas of this demand fit one unit of `capacity_milli` compute and `usable_mib` memory.
int SharersThatFit(const SharingOptions& o, int capacity_milli, int64_t usable_mib, int milli,
                   int64_t memory_mib, bool latency_sensitive);

// A request that may share an instance: one sub-GPU task of an inference class that allows sharing.
bool MayShare(const Request& r);

}  // namespace tessera
