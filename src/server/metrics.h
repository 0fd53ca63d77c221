#pragma once
// GET /metrics: the service in Prometheus text format (version 0.0.4), lint-clean for promtool. Names of
// the DCGM exporter where one exists (DCGM_FI_DEV_GPU_UTIL, DCGM_FI_PROF_GR_ENGINE_ACTIVE with
// GPU_I_PROFILE / GPU_I_ID for MIG instances), with snake_case for DCGM's camelCase labels (model_name).

#include <string>

#include "service/service.h"

namespace tessera {

std::string MetricsText(const Service& s);

}  // namespace tessera
