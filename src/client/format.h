#pragma once
// Workload files to the API's JSON, and the API's JSON to squeue-like tables.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace tessera::client {

// One workload entry from a YAML or JSON file (a mapping, or a list holding exactly one mapping), as the
// JSON body of POST /api/v1/jobs. YAML scalars become numbers, booleans or null where they read as such
// (quoted ones stay strings). Errors name the file.
Result<nlohmann::json> ReadWorkloadFile(const std::string& path);
Result<nlohmann::json> WorkloadFromText(const std::string& text, const std::string& path);

// `JOBID TEAM NAME USER ST AGE GPUS NODES(REASON)`: one row per job of {"jobs": [...]}; AGE is
// now - submitted_at (`now_unix` in seconds since the epoch); NODES for placed jobs, (REASON code) for
// pending ones.
std::string JobsTable(const nlohmann::json& jobs, int64_t now_unix);
// One job, one `field: value` line each.
std::string JobDetail(const nlohmann::json& job);
// `POS JOBID TEAM NAME USER PRIORITY GPUS START REASON` for {"jobs": [...]} of GET /api/v1/queue.
std::string QueueTable(const nlohmann::json& queue);
// `TEAM PROJECT JOB TIER GPU_HOURS COST` for {"rows": [...]} of GET /api/v1/usage.
std::string UsageTable(const nlohmann::json& usage);

// squeue's state codes: PD, R, CD, F, CA, PR (Preempted); other states as they are.
std::string StateCode(const std::string& state);
// squeue's time format: [D-]HH:MM:SS, or MM:SS under an hour.
std::string FormatAge(int64_t seconds);

}  // namespace tessera::client
