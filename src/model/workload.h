#pragma once
// Workload model: what users submit (inference replicas, batch inference, training gangs, interactive /
// fractional work) and the memory profile that turns a model description into MiB per GPU
// (hardware-facts.md section 5).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "model/catalog.h"

namespace YAML {
class Node;
}

namespace tessera {

enum class WorkloadClass : uint8_t { kInference, kBatchInference, kTraining, kInteractive };
const char* WorkloadClassName(WorkloadClass c);
Result<WorkloadClass> ParseWorkloadClass(std::string_view s);

enum class Precision : uint8_t { kFp32, kBf16, kFp8, kInt8, kInt4 };
Result<Precision> ParsePrecision(std::string_view s);
// Weight bytes per parameter, in thousandths (int4 = 500 plus 3% for scales = 515).
int64_t WeightMilliBytesPerParam(Precision p);

// A description from which memory per GPU is estimated.
struct MemoryDescription {
  double params_billion = 0;      // model parameters, in billions
  Precision precision = Precision::kBf16;
  bool training = false;
  int optimizer_bytes_per_param = 16;  // mixed-precision AdamW (ZeRO accounting); 18 for stas00 accounting
  int zero_stage = 0;             // 0..3, sharding over the data-parallel degree
  int data_parallel = 1;
  int tensor_parallel = 1;        // weights split over this many GPUs
  int64_t kv_cache_mib = 0;       // explicit KV-cache budget per replica (inference)
  int64_t activation_mib = 0;     // declared activations per GPU (training)
  int overhead_pct = 15;          // CUDA context, allocator fragmentation, runtime buffers

  bool operator==(const MemoryDescription&) const = default;
};

// Memory per GPU in MiB for the description (rounded up).
int64_t EstimateMemoryMib(const MemoryDescription& d);

struct Workload {
  std::string name;
  WorkloadClass cls = WorkloadClass::kInference;
  std::string team;
  std::string project;
  std::string priority_class;      // e.g. production-inference, training
  int replicas = 1;                // inference replicas (independent tasks)
  int workers = 1;                 // training gang size (all or nothing)
  int gpus_per_worker = 1;         // whole GPUs per worker; 0 for fractional / MIG work
  int gpu_milli = 1000;            // compute share per task when fractional (1..1000)
  int64_t memory_mib = 0;          // memory per GPU (explicit, or from `memory`)
  std::optional<MemoryDescription> memory;
  int64_t cpu_milli = 0;           // per worker / replica
  int64_t host_memory_mib = 0;     // per worker / replica
  std::vector<std::string> gpu_kinds;  // allowed kinds (ids or aliases); empty = any
  int64_t checkpoint_interval_s = 0;
  int64_t duration_s = 0;
  // The user's time limit: what the scheduler plans reservations and backfill with (an estimate, as in Slurm);
  // 0 = the duration itself.
  int64_t time_limit_s = 0;
  bool latency_sensitive = false;
  bool checkpointable = false;

  bool operator==(const Workload&) const = default;
};

// Parses a workload file: a YAML list (or a map with `workloads:`) of workloads. Memory is resolved from
// `memory` when no explicit `memory_mib` is given.
Result<std::vector<Workload>> LoadWorkloadsYaml(std::string_view text, std::string_view source);
// One workload entry (a map) of such a file; `path` names it in messages ("workloads[0]").
Result<Workload> ParseWorkload(const YAML::Node& y, std::string_view source, const std::string& path);

// Smallest MIG profile (fewest memory slices, then fewest compute slices) of `kind` whose usable memory
// covers `memory_mib` and whose compute fraction covers `compute_milli`; media profiles are skipped.
// Returns -1 when none does.
int SmallestCoveringProfile(const GpuKind& kind, int64_t memory_mib, int compute_milli);

}  // namespace tessera
