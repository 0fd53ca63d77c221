#pragma once
// What NVIDIA's DRA driver (gpu.nvidia.com) publishes with the DynamicMIG feature gate, generated from a
// catalog GPU kind (kubernetes-contracts.md 8.4), for tests and `tessera bench dra`: per GPU the full GPU
// "gpu-<minor>" and every MIG placement "gpu-<minor>-mig-<profile without dots>-<GI profile id>-<start>", all
// consuming from the counter set "gpu-<minor>-counter-set" (memory-slice-<i>, multiprocessors, copy-engines,
// ofa-engines, memory). The driver's other engine counters (decoders, encoders, JPEG) are left out: they
// never bind on their own on the GPUs modelled here; ofa-engines keeps one +me profile (or a 7g) per GPU.
// Split layout (Kubernetes 1.35+): one counter slice then one slice per GPU; combined (1.34): each GPU's
// slice carries its set.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/catalog.h"

namespace tessera {

struct NvidiaSliceOptions {
  int gpus = 8;
  bool split_layout = true;
  int64_t generation = 1;
  bool full_gpu = true;     // announce "gpu-<minor>" besides the MIG placements
  std::vector<int> minors;  // the GPUs' minors; empty = 0..gpus-1
};

std::vector<nlohmann::json> NvidiaDynamicMigSlices(const GpuKind& kind, const std::string& node,
                                                   const NvidiaSliceOptions& options);
// The DeviceClasses gpu.nvidia.com (type gpu) and mig.nvidia.com (type mig) of the driver's Helm chart.
std::vector<nlohmann::json> NvidiaDeviceClasses();
// "1g.10gb+me" -> "1g10gb-me" (the driver's device-name form of a profile).
std::string NvidiaProfileToken(const std::string& profile);

}  // namespace tessera
