#pragma once
// Readers for the Alibaba GPU 2023 "openb" trace (../shared/traces/alibaba-gpu-2023/README.md).
//
// Node list (`sn,cpu_milli,memory_mib,gpu,model`): one Cluster node per row, GPU kind from the catalog
// alias of `model` (G1/G2/G3, P100, T4, V100M16, V100M32, A10), PCIe, one leaf, reserved tier.
// Pod list (`name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,...]`): one single-task Request
// per row, in the harness forms of sched/fgd_policy.h:
//   num_gpu == 0                       -> CPU-only (gpus_per_task 0, gpu_milli 0)
//   num_gpu == 1 and gpu_milli < 1000  -> a share of one GPU (gpus_per_task 0, gpu_milli)
//   gpu_milli == 1000                  -> num_gpu whole GPUs
// `gpu_spec` ("A|B") becomes kind_mask. Columns are found by header name; extra columns are ignored.
// Numbers are plain decimal integers, range-checked before any cast; node names (`sn`) are unique; every
// row has the header's width. Errors name the source, the line and the field: "FILE:LINE: field 'gpu_milli': ...".

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "sched/request.h"

namespace tessera {

Result<Cluster> ParseOpenbNodes(std::string_view text, std::string_view source, const Catalog& catalog);

struct OpenbPods {
  std::vector<Request> requests;  // Request::id = row index (0-based)
  std::vector<std::string> names;
};
Result<OpenbPods> ParseOpenbPods(std::string_view text, std::string_view source, const Catalog& catalog);

}  // namespace tessera
