#pragma once
// Topology cost model: the step time of a data-parallel training gang as a pure function of where its
// GPUs sit, the gradient size and the compute time of one step (hardware-facts.md 3.4-3.6).
//
//   t_allreduce = S * 2(n-1)/n / busbw          (nccl-tests all-reduce, 3.4)
//   t_step      = t_compute + max(0, t_allreduce - overlap * t_compute)      (3.6 rule of thumb)
//
// busbw is the bus bandwidth of the slowest level the gang spans:
//   one GPU                      -> no all-reduce (t_allreduce = 0)
//   one node, NVSwitch baseboard -> nvswitch_busbw_gbs (8x H100/H200 ring 367, NVLS 482; A100 234.9 GB/s)
//   one node, NVLink pair        -> nvlink_pair_busbw_gbs (H100 PCIe pair + bridge ~116 GB/s)
//   one node, PCIe only          -> pcie_busbw_gbs (~28 GB/s measured on an 8-GPU PCIe box)
//   several nodes, one leaf      -> min(NetworkBusbw(nodes), injection_factor * slowest node's injection)
//                                   where injection = gang GPUs on that node x NIC GB/s per GPU
//   several leaves, one spine    -> the same / leaf_oversubscription (leaf uplinks shared)
//   several spine groups         -> the same / (leaf_oversubscription * cross_spine_oversubscription)
// NetworkBusbw interpolates (log-linearly in node count) the measured Azure ND H100 v5 sweep (3.5,
// static routing): 2 nodes 482, 4: 350.3, 8: 373.8, 16: 274.8, 32: 243.4, 48: 228.9, 64: 235.0 GB/s; beyond
// 64 nodes the 64-node figure. Every figure is a parameter (FabricParams); the defaults come from 3.5.
// Pure: no I/O, no clock, no globals.

#include <utility>
#include <vector>

#include "model/catalog.h"
#include "sched/placement.h"

namespace tessera {

struct FabricParams {
  double nvswitch_busbw_gbs = 367;       // 8x H200 ring (3.5); H100 SXM is the same baseboard
  double nvlink_pair_busbw_gbs = 116;    // H100 PCIe pair with NVLink bridge (3.5, nccl #1161)
  double pcie_busbw_gbs = 28;            // 8x PCIe-only all-reduce (3.5, nccl #1639)
  // Measured multi-node busbw by node count (3.5, Azure ND H100 v5, 8x NDR, static routing).
  std::vector<std::pair<int, double>> network_busbw_by_nodes = {
      {2, 482.0}, {4, 350.3}, {8, 373.8}, {16, 274.8}, {32, 243.4}, {48, 228.9}, {64, 235.0}};
  // Cross-node busbw is capped at this multiple of the slowest node's injection bandwidth (3.6: "capped by
  // per-node NIC bandwidth"). 1.25 because the measured 2-node figure (482 GB/s) exceeds the 400 GB/s
  // injection of 8x NDR by ~1.2x (hierarchical/NVLS algorithms), see docs/simulator.md.
  double injection_factor = 1.25;
  double leaf_oversubscription = 1.0;         // leaf uplink oversubscription (Cluster::spine_oversubscription)
  double cross_spine_oversubscription = 1.0;  // extra factor between spine groups
  double overlap = 0.0;                        // fraction of compute that can hide communication (0..1)
};

// Where a gang's GPUs are: the span, the GPU count, and per node the number of gang GPUs there.
struct GangLayout {
  Span span = Span::kOneGpu;
  Interconnect interconnect = Interconnect::kNvSwitch;  // of the (slowest) node, for one-node gangs
  int gpus = 1;
  std::vector<int> gpus_per_node;     // one entry per node used
  double nic_gbps_per_gpu = 400;      // slowest node's NIC line rate per GPU, Gb/s
};

struct StepTime {
  double compute_s = 0;
  double allreduce_s = 0;
  double step_s = 0;
  double busbw_gbs = 0;   // 0 when there is no all-reduce
  double Efficiency() const { return step_s > 0 ? compute_s / step_s : 1.0; }
};

// Interpolated multi-node busbw for `nodes` nodes (>= 2) from params.network_busbw_by_nodes.
double NetworkBusbw(const FabricParams& params, int nodes);
// Bus bandwidth of the slowest level the gang spans (0 for a single GPU).
double GangBusbw(const FabricParams& params, const GangLayout& layout);
// t = bytes * 2(n-1)/n / busbw; 0 for n <= 1.
double AllReduceSeconds(double bytes, int n, double busbw_gbs);
// The model above. `grad_bytes` = S (e.g. 2 bytes x parameters for bf16 gradients).
StepTime ComputeStepTime(const FabricParams& params, const GangLayout& layout, double grad_bytes, double compute_s);

}  // namespace tessera
