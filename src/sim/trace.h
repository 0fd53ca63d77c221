#pragma once
// Tessera's own trace format (docs/simulator.md): JSON Lines. Line 1 is a header object
//   {"format": "tessera-trace", "version": 1, ...free-form provenance fields...}
// and every further non-empty line is one job (TraceJob below, field names as in ToJson). Readers reject
// unknown fields and wrong types with "FILE:LINE: field 'x': ..." errors.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/catalog.h"
#include "model/workload.h"
#include "sched/request.h"

namespace tessera {

inline constexpr int kTraceVersion = 1;

// One job of a trace: an inference replica (one task) or a training gang (`tasks` workers).
struct TraceJob {
  int64_t id = 0;
  int64_t submit_s = 0;                 // arrival time (backlog mode: order in the stream)
  WorkloadClass cls = WorkloadClass::kInference;
  std::string team = "default";
  int priority = 0;
  int tasks = 1;                        // gang members (all or nothing)
  int gpus_per_task = 1;                // whole GPUs per task; 0 = sub-GPU (one MIG instance or a share)
  int compute_milli = 1000;             // compute a task really uses per GPU, thousandths of a full GPU
  int64_t memory_mib = 0;               // GPU memory a task needs per GPU (its OOM threshold)
  int64_t cpu_milli = 0;                // per task
  int64_t host_memory_mib = 0;          // per task
  std::vector<std::string> gpu_kinds;   // allowed kinds; empty = any
  int64_t duration_s = 0;               // ideal run time (one GPU per worker at full speed); -1 = runs forever
  // Training step-time inputs (topology cost model): gradient bytes and compute seconds per step.
  double grad_bytes = 0;
  double step_compute_s = 0;
  bool checkpointable = false;
  // Descriptive (not used by the engine): model size and precision, for reports.
  double params_billion = 0;
  std::string precision;
  bool light = false;                   // inference: a light replica (compute 0.05-0.2)
  // Inference: a production (latency-sensitive) replica; its SLO class is production-inference.
  bool latency_sensitive = false;
  // Cancelled this many seconds after it arrives (a running job is stopped then, a waiting one leaves the
  // queue; sim/trace_cancels.h); -1 = never.
  int64_t cancel_s = -1;

  int GpuRequests() const { return tasks * (gpus_per_task == 0 ? 1 : gpus_per_task); }
};

// The engine request for a job (sub-GPU jobs ask for `compute_milli` and `memory_mib`).
Result<Request> ToRequest(const TraceJob& job, const Catalog& catalog);

std::string TraceHeaderJson(std::string_view provenance_json);
std::string TraceJobToJson(const TraceJob& job);
// Whole trace text: header line (with `provenance` merged in; may be "{}") plus one line per job.
std::string WriteTrace(const std::vector<TraceJob>& jobs, std::string_view provenance_json);
// Parses trace text; `source` names it in errors ("FILE:LINE: field 'x': ...").
Result<std::vector<TraceJob>> ReadTrace(std::string_view text, std::string_view source);

}  // namespace tessera
