#pragma once
// Sharing inside instances (docs/sharing.md): several inference replicas in one MIG instance (or one whole
// non-MIG GPU) and the interference model that says what it costs them. Pure functions of plain values; the
// engine (engine_policy.cc) packs with them and the simulator measures with them.
//
// Interference model (calibrated on published measurements: docs/sharing.md,
// examples/calibration/interference.csv; a test replays every point). A replica i with compute demand d_i
// (thousandths of a full GPU) shares a unit of compute C with k - 1 others; the unit's summed demand is D
// (including d_i); u = D / C, u_i = d_i / C.
// Contention needs another process with work: its cost grows with the others' count weighted by how busy
// the unit is, b = (k - 1) min(1, u) (every sharer busy, as in the published points, gives k - 1).
//   MPS (spatial sharing, kernels run concurrently): the unit behaves like one processor-sharing server whose
//     response-time tail scales with 1 / (1 - utilisation), and co-running clients contend for memory
//     bandwidth and L2: against running alone on the same unit the p99 latency grows by
//     m (1 - u_i) / (1 - u), m = 1 + mps_contention b.
//   Time-slicing (temporal sharing, one context at a time): every switch between contexts costs time, so
//     the unit does useful work only a fraction thr = 1 / (1 + switch_throughput_loss b) of the time, and a
//     request also waits for the slices of the others: the p99 latency grows by
//     f (1 - u_i) / (1 - u / thr), f = 1 + switch_overhead b.
// A replica alone (k = 1) has slowdown 1 (it is the reference). Load at or above the useful capacity
// (u >= thr(k)) is unbounded (infinity). Admission (SharerFits) multiplies the summed demand by a headroom
// >= 1, so that demand above its declared value mostly stays within the SLO.

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "sched/request.h"

namespace tessera {

enum class SharingMode : uint8_t { kTimeSlicing, kMps };

// The calibrated constants (the least-squares fit in docs/sharing.md; sharing_test.cc replays the points).
inline constexpr double kSwitchOverhead = 0.047;  // the same fitted constant as the throughput loss
inline constexpr double kSwitchThroughputLoss = 0.047;
inline constexpr double kMpsContention = 0.196;
const char* SharingModeName(SharingMode m);
Result<SharingMode> ParseSharingMode(std::string_view s);

struct SharingOptions {
  SharingMode mode = SharingMode::kTimeSlicing;  // what the device plugin offers on MIG resources (1.8)
  // Calibrated defaults (docs/sharing.md "Calibration"): the fit to the published points.
  double switch_overhead = kSwitchOverhead;              // time-slicing: p99 latency, per extra process
  double switch_throughput_loss = kSwitchThroughputLoss; // time-slicing: useful time lost, per extra process
  double mps_contention = kMpsContention;                // MPS: p99 latency, per extra client
  // Admission multiplies the unit's summed declared demand by these (>= 1): headroom for demand that runs
  // above its declared value (1 = admit on declared demand alone). Units that hold or take a latency-
  // sensitive replica use sensitive_headroom (measured: < 0.1 % of production replica-hours above their SLO
  // with the simulator's default demand model, docs/sharing.md), the others standard_headroom.
  double sensitive_headroom = 1.4;
  double standard_headroom = 1.1;
  // Admission uses the headroom the control loop learned from observed demand (LearnedHeadroom, carried by
  // the snapshot) in place of the two above, once it has learned one; false = always the configured ones.
  bool learn_headroom = true;
  // MPS with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (or HAMi's core limit): a client cannot use more than its
  // grant; demand above it queues without bound (a violation while it lasts).
  bool per_client_cap = false;
  // k8s-timeslice / k8s-mps: replicas per whole GPU (the device plugin's `replicas: N`).
  int replicas = 4;
  // p99 latency slowdown each class accepts against running alone (its SLO); packing keeps every sharer's
  // worst case within its own. Latency-sensitive replicas (production-inference) keep the most headroom.
  double sensitive_slo = 2.0;
  double standard_slo = 4.0;
  // Extra GPU memory per co-located process beyond what its request states (0: the request's memory already
  // counts its CUDA context and runtime buffers, as the generator's overhead_pct does,
  // hardware-facts.md 5.3).
  int64_t context_mib = 0;
};

// Headroom learned from observed demand (control/demand_learner.h): per class of unit, the ratio of a shared
// unit's real summed demand to its declared one at the quantile that class's admission aims for; 0 = not
// learned yet (the configured headroom holds).
struct LearnedHeadroom {
  double sensitive = 0;
  double standard = 0;
  bool operator==(const LearnedHeadroom&) const = default;
};
// `o` with each headroom replaced by the learned one where o.learn_headroom and that one is learned.
SharingOptions WithLearned(const SharingOptions& o, const LearnedHeadroom& h);

// Slowdown of one sharer (see the model above). own/summed/capacity in thousandths of a GPU.
double P99Slowdown(const SharingOptions& o, int own_milli, int summed_milli, int capacity_milli, int sharers);

// The fraction of a unit's time that does useful work with `sharers` processes at busy fraction u (summed
// demand / capacity): time-slicing's context switches; 1 under MPS and for one process.
double ThroughputFactor(const SharingOptions& o, int sharers, double u);

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
