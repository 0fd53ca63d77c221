#pragma once
// Dense integer ids. Names are interned once at load time; hot paths index flat arrays with these.

#include <cstdint>

namespace tessera {

using NodeId = int32_t;   // index into Cluster::nodes / ClusterState node arrays
using GpuId = int32_t;    // global GPU index, nodes' GPUs are contiguous
using KindId = int16_t;   // index into Catalog::kinds
using JobId = int64_t;    // caller-chosen id of a request/job
using LeafId = int32_t;   // leaf switch index
using SpineId = int32_t;  // spine group / block index

inline constexpr int32_t kNone = -1;
// GPU shares are in thousandths of one GPU.
inline constexpr int32_t kMilliPerGpu = 1000;

}  // namespace tessera
