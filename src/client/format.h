#pragma once
// Workload files to the API's JSON, and the API's JSON to squeue-like tables.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "base/status.h"

namespace tessera::client {

// One mapping (a workload entry, a node as in the cluster YAML) from a YAML or JSON file (a mapping, or a list holding exactly one mapping), as the
// JSON body of POST /api/v1/jobs. YAML scalars become numbers, booleans or null where they read as such
// (quoted ones stay strings). Errors name the file.
Result<nlohmann::json> ReadWorkloadFile(const std::string& path);
Result<nlohmann::json> WorkloadFromText(const std::string& text, const std::string& path);
// The same for any one mapping; `what` describes it in the error ("one node (a mapping with name, gpu, ...)").
Result<nlohmann::json> MappingFromText(const std::string& text, const std::string& path, const std::string& what);

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
// `TEAM GUARANTEED LIMIT ALLOCATED FAIR_SHARE` (GPUs) for {"teams": [...]} of GET /api/v1/teams.
std::string TeamsTable(const nlohmann::json& teams);
// `USER TEAM ROLE TOKEN` (active or revoked) for {"users": [...]} of GET /api/v1/users.
std::string UsersTable(const nlohmann::json& users);
// One user as created or given a new token: name, team, role, and the token (shown once) when present.
std::string UserDetail(const nlohmann::json& user);
// `FRACTION GPUS START REASON` for the options of GET /api/v1/jobs/{id}/whatif.
std::string WhatIfTable(const nlohmann::json& whatif);
// Totals, then `NODE KIND LEAF TIER GPUS ALLOCATED MIG` per node of GET /api/v1/cluster; MIG lists each MIG
// GPU's instances as profile@start (an asterisk marks a busy one).
std::string ClusterTable(const nlohmann::json& cluster);

// `NODE STATE KIND GPUS LEAF SPINE TIER TASKS` for {"nodes": [...]} of GET /api/v1/nodes, or one node.
std::string NodesTable(const nlohmann::json& nodes);

// squeue's state codes: PD, R, CD, F, CA, PR (Preempted); other states as they are.
std::string StateCode(const std::string& state);
// squeue's time format: [D-]HH:MM:SS, or MM:SS under an hour.
std::string FormatAge(int64_t seconds);

}  // namespace tessera::client
