#include "control/job_table.h"

#include <algorithm>

namespace tessera {

const char* JobPhaseName(JobPhase p) {
  switch (p) {
    case JobPhase::kFuture: return "future";
    case JobPhase::kPending: return "pending";
    case JobPhase::kBound: return "bound";
    case JobPhase::kRunning: return "running";
    case JobPhase::kTerminating: return "terminating";
    case JobPhase::kDone: return "done";
    case JobPhase::kFailed: return "failed";
  }
  return "?";
}

JobSlot JobTable::Add(ControlJob job) {
  const JobSlot slot(size());
  job.request.id = EngineId(slot);
  jobs_.push_back(std::move(job));
  return slot;
}

void JobTable::InsertPendingBySubmit(JobSlot j) {
  const int64_t submit = (*this)[j].submit_s;
  auto pos =
      std::find_if(pending_.begin(), pending_.end(), [&](JobSlot p) { return (*this)[p].submit_s > submit; });
  pending_.insert(pos, j);
}

void JobTable::ErasePending(const std::vector<JobSlot>& jobs) {
  if (jobs.empty()) return;
  std::set<JobSlot> rm(jobs.begin(), jobs.end());
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [&](JobSlot p) { return rm.count(p) > 0; }),
                 pending_.end());
}

}  // namespace tessera
