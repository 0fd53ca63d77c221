#pragma once
// The text forms both stores keep a few columns in: a team's allowed priority classes (a JSON list; ""
// = the default) and a job's placements (JSON: per task its node and GPU grants).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "sched/placement.h"

namespace tessera {

std::string EncodeClasses(const std::optional<std::vector<std::string>>& c);
std::optional<std::vector<std::string>> DecodeClasses(const std::string& text);
std::string EncodePlacements(const std::vector<TaskPlacement>& tasks);
// The error names job `job`.
Result<std::vector<TaskPlacement>> DecodePlacements(const std::string& text, int64_t job);

}  // namespace tessera
