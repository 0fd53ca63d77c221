#pragma once
// A job as POST /api/v1/jobs takes it: one workload entry in JSON, the schema of examples/workloads/*.yaml
// (model/workload.h) plus `mig_profile` (one MIG instance of that profile per replica). Types are checked
// strictly (an integer field takes a JSON integer); errors name the field.

#include <nlohmann/json.hpp>
#include <string>

#include "model/workload.h"
#include "service/api_error.h"

namespace tessera {

struct JobSpec {
  Workload workload;
  std::string mig_profile;  // empty = none
  nlohmann::json body;      // the entry as accepted
};

// `name`, `project` and `team`: at most this many bytes of UTF-8 without control characters.
inline constexpr size_t kMaxLabelBytes = 128;

Outcome<JobSpec> ParseJobSpec(const nlohmann::json& body);

}  // namespace tessera
