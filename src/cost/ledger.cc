#include "cost/ledger.h"

#include <fmt/format.h>

#include "cost/pricebook.h"

namespace tessera {

std::string PoolKey(const UsageRecord& r) { return r.pool.empty() ? std::string(TierKey(r.tier)) : r.pool; }

Status Ledger::AddUsage(UsageRecord r) {
  auto fail = [&](const char* field, const std::string& msg) {
    return Status::Error(fmt::format("usage record #{} (job {}, team '{}'): {}: {}", usage_.size(), r.job_id,
                                     r.team, field, msg));
  };
  if (r.team.empty()) return fail("team", "empty");
  if (r.gpu_kind.empty()) return fail("gpu_kind", "empty");
  if (r.compute_milli <= 0 || r.compute_milli > kMilliPerGpu) {
    return fail("compute_milli", fmt::format("{} not in 1..1000", r.compute_milli));
  }
  if (r.memory_milli <= 0 || r.memory_milli > kMilliPerGpu) {
    return fail("memory_milli", fmt::format("{} not in 1..1000", r.memory_milli));
  }
  if (r.end_s < r.start_s) return fail("end_s", fmt::format("{} before start_s {}", r.end_s, r.start_s));
  if (r.lost_s < 0 || r.lost_s > r.end_s - r.start_s) {
    return fail("lost_s", fmt::format("{} not in 0..{}", r.lost_s, r.end_s - r.start_s));
  }
  usage_.push_back(std::move(r));
  return Status::Ok();
}

Status Ledger::AddCapacity(CapacityRecord c) {
  auto fail = [&](const char* field, const std::string& msg) {
    return Status::Error(
        fmt::format("capacity record #{} (pool '{}', node '{}'): {}: {}", capacity_.size(), c.pool, c.node, field, msg));
  };
  if (c.pool.empty()) return fail("pool", "empty");
  if (c.gpus <= 0) return fail("gpus", fmt::format("{} must be positive", c.gpus));
  if (c.end_s < c.start_s) return fail("end_s", fmt::format("{} before start_s {}", c.end_s, c.start_s));
  capacity_.push_back(std::move(c));
  return Status::Ok();
}

}  // namespace tessera
