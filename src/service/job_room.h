#pragma once
// JobRoom: the job operations of the service, a room of ServiceDriver (service_driver.h): submissions (one
// or many in one durable write, with idempotency keys), cancel, priority changes, an owner's preemption and
// the what-if of a pending job; and the one check of a job's spec against the cluster and tenancy that
// builds its engine request (also used when the driver restores jobs).
//
// It works on the driver's loop under the driver's lock (mu_): methods named ...Locked need it held, the
// others take it, once per call. Every new job version is written through the driver (PutLocked); a write
// returns once it is durable (or the store failed: 503). Reads of jobs do not come here (JobBook).

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sched/request.h"
#include "service/job_record.h"
#include "service/service.h"
#include "service/workload_json.h"
#include "store/store.h"

namespace tessera {

class ServiceDriver;

class JobRoom {
 public:
  explicit JobRoom(ServiceDriver* driver);

  // The job writes and what-if of Service (service.h).
  Outcome<JobView> Submit(const Caller& c, const JobSpec& spec, const std::string& idempotency_key,
                          bool* created, std::function<void(const Status&)> on_durable = nullptr);
  std::vector<Outcome<JobView>> SubmitAll(const Caller& c, const std::vector<JobSpec>& specs);
  Outcome<JobView> Cancel(const Caller& c, int64_t id);
  Outcome<JobView> SetPriority(const Caller& c, int64_t id, const std::string& priority_class);
  Outcome<JobView> Preempt(const Caller& c, int64_t id, const std::string& reason);
  Outcome<std::vector<WhatIfOption>> WhatIf(const Caller& c, int64_t id);
  Outcome<std::vector<NodeRank>> RankNodes(const Caller& c, const JobSpec& spec,
                                           const std::vector<std::string>& names, int ranked) const;

  // The spec of job `id` of `team` checked against the cluster's GPU kinds and the tenancy: its engine
  // request, its queue and priority class, or the field and reason it is refused for (with `queue` null, the
  // team's queue is neither looked up nor required). Under the lock.
  Outcome<Request> BuildRequestLocked(const JobSpec& spec, const std::string& team, int64_t id, int* queue,
                                      std::string* priority_class) const;

 private:
  // The error a submission to `team` gets when no such team exists (else nullopt). Under the lock.
  std::optional<ApiError> UnknownTeamLocked(const std::string& team) const;
  // A new pending job of `team` from `spec` (its id taken, its Submitted event and audit entry added to
  // `b`); nothing is stored or visible yet. Under the lock.
  Outcome<JobPtr> NewJobLocked(const Caller& c, const JobSpec& spec, const std::string& team,
                               const std::string& body, WriteBatch* b);
  // An ended job `id` that memory no longer holds, read from the store (before the lock); else null.
  JobPtr PageInEnded(int64_t id) const;
  // Job `id` as a change sees it: its current version once it is durable and visible, else the ended job
  // `stored` paged in (may be null). Under the lock.
  JobPtr VisibleLocked(int64_t id, const JobPtr& stored) const;
  // A change of job `id` by `c` (verb names it in a refusal): 404 unless the job is durable and visible to
  // `c`, 403 without the right; else `change` (under the lock) returns the next version and its writes
  // (none: nothing to change), which is written; returns the job once that is durable and visible.
  using ChangeFn = std::function<Outcome<JobPtr>(const JobRecord&, WriteBatch*)>;
  Outcome<JobView> ChangeJob(const Caller& c, int64_t id, const char* verb, const ChangeFn& change);
  // The what-if's requests for what else the job could ask (another MIG profile, spot), from its spec.
  std::vector<std::pair<WhatIfOption, Request>> AlternativesLocked(const JobRecord& job) const;

  ServiceDriver* const d_;
  std::mutex whatif_mu_;  // a leaf: nothing is taken under it
  std::map<int64_t, std::pair<uint64_t, std::vector<WhatIfOption>>> whatif_cache_;  // job -> (cycle, answer)
};

}  // namespace tessera
