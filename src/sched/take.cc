#include "sched/take.h"

#include <fmt/format.h>

namespace tessera {

Action& AppendTake(const TakeTarget& t, JobId for_job, std::string reason, int64_t min_age_s, Plan* plan) {
  if (t.checkpointable && t.running && t.since_checkpoint_s >= min_age_s) {
    Action ck;
    ck.kind = ActionKind::kCheckpoint;
    ck.job = t.job;
    ck.for_job = for_job;
    ck.reason = fmt::format("checkpoint before preemption ({} s since the last one)", t.since_checkpoint_s);
    plan->actions.push_back(std::move(ck));
  }
  Action a;
  a.kind = ActionKind::kPreempt;
  a.job = t.job;
  a.for_job = for_job;
  a.reason = std::move(reason);
  plan->actions.push_back(std::move(a));
  return plan->actions.back();
}

}  // namespace tessera
