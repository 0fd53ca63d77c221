#pragma once
// Placement: where a request's tasks go, as values; NoFit: why nothing was chosen.

#include <cstdint>
#include <string>
#include <vector>

#include "base/ids.h"

namespace tessera {

// One GPU (or part of one) granted to a task.
struct GpuGrant {
  GpuId gpu = kNone;
  int milli = 1000;             // share of the GPU's compute (1000 = whole GPU or whole-GPU-equivalent)
  int64_t memory_mib = 0;       // memory reserved on the GPU / in the instance
  int16_t mig_profile = -1;     // MIG instance profile index (GpuKind::profiles), -1 = not MIG
  int8_t mig_start = -1;        // memory-slice start of the instance
  bool create_instance = false; // the instance must be created first (repartition)
  bool enable_mig = false;      // MIG mode must be switched on first (GPU is idle)
  bool disable_mig = false;     // MIG mode must be switched off first (GPU is idle, no instances)
  uint8_t destroy_mask = 0;     // idle instances (by memory-slice start bits) to destroy first
  // With mig_profile >= 0: a place in a shared instance (docs/sharing.md). `milli` and `memory_mib` are then
  // the task's own demand, summed exactly with the other sharers'; an idle (or created) instance becomes
  // shared, a busy one must already be shared.
  bool shared = false;
  bool latency_sensitive = false;  // shared: the task's class keeps compute headroom (counted per instance)
};

struct TaskPlacement {
  NodeId node = kNone;
  std::vector<GpuGrant> gpus;
};

// Topology level a gang ended up spanning (best to worst).
enum class Span : uint8_t { kOneGpu, kOneNode, kOneLeaf, kOneSpine, kCrossSpine };
const char* SpanName(Span s);

// Stable, machine-readable reasons for "did not fit".
enum class NoFitCode : uint8_t {
  kNone,
  kInvalid,                // the request itself is malformed
  kRequestExceedsCluster,  // larger than the whole cluster (or than every allowed kind / tier)
  kResources,              // not enough free GPUs / CPU / memory right now
  kMigProfileUnavailable,  // no MIG instance or free slices for the needed profile
  kMemory,                 // no GPU / instance has enough usable memory
  kTopologyUnsatisfiable,  // enough GPUs, but not within the required domain
  kFragmented,             // enough free capacity in total, but split into unusable pieces
};
const char* NoFitCodeName(NoFitCode c);

struct PlaceResult {
  bool ok = false;
  std::vector<TaskPlacement> tasks;
  Span span = Span::kOneNode;
  NoFitCode code = NoFitCode::kNone;
  std::string reason;  // where it went and why, or why nothing fits, with the numbers

  static PlaceResult NoFit(NoFitCode c, std::string why) {
    PlaceResult r;
    r.code = c;
    r.reason = std::move(why);
    return r;
  }
};

}  // namespace tessera
