#pragma once
// Reader for the Alibaba GPU-disaggregated DLRM serving trace (cluster-trace-gpu-v2025,
// ../shared/traces/alibaba-dlrm-2025/README.md): one row per inference instance.
//
// Mapping to Tessera trace jobs (one job per HN row; CN rows have no GPU and are counted, not returned):
//   class inference, team = app_name, tasks 1, gpus_per_task = gpu_request (1), whole GPU;
//   cpu_milli = cpu_request x 1000, host_memory_mib = memory_request GiB x 1024;
//   submit_s = creation_time (empty: existed at trace start -> 0);
//   duration_s = deletion_time - creation_time (empty deletion: outlived the trace -> -1, runs forever);
//   compute_milli = options.compute_milli (the trace has no GPU-utilisation column; an assumption).
// Columns are found by header name; extra columns are ignored. Plain comma-separated values (no quoting):
// a quote, a missing column or a bad number is an error "FILE:LINE: field 'x': ...".

#include <string_view>
#include <vector>

#include "base/status.h"
#include "sim/trace.h"

namespace tessera {

struct DlrmOptions {
  int compute_milli = 300;      // assumed compute use of one instance (no such column in the trace)
  int64_t gpu_memory_mib = 0;   // assumed GPU memory need (0 = unknown, any GPU fits)
  bool include_cpu_rows = false;  // CN rows as CPU-only jobs are not supported by the simulator yet
};

struct DlrmTrace {
  std::vector<TraceJob> jobs;   // HN rows, in file order, ids = 0-based data row index
  int64_t cpu_rows = 0;         // CN rows skipped
  int64_t trace_end_s = 0;      // largest time seen in the file
};

Result<DlrmTrace> ParseDlrmTrace(std::string_view text, std::string_view source, const DlrmOptions& options = {});

}  // namespace tessera
