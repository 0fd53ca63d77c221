#pragma once
// GET /metrics: the service in Prometheus text format (version 0.0.4), lint-clean for promtool. Every name
// is Tessera's own (tessera_*): the GPU figures are what Tessera accounts, not device measurements, so they
// never take a hardware exporter's names (tessera_gpu_utilization_ratio, tessera_gpu_allocated_ratio,
// tessera_mig_instance_busy with mig_profile / mig_start).

#include <string>

#include "service/cluster_summary.h"
#include "service/service.h"

namespace tessera {

std::string MetricsText(const Service& s);
// The per-GPU and per-MIG-instance gauges of one cluster summary (part of MetricsText).
std::string GpuMetricsText(const ClusterSummary& cs);

}  // namespace tessera
