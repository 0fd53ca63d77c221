#pragma once
// Restorer: the driver's state rebuilt from the store, a room of ServiceDriver (service_driver.h). On start
// it restores teams and users (a stored quota wins over the tenancy file's), the MIG layouts, the service
// clock (never before the stored time), the ledger's start, the queues' decayed usage and the idempotency
// keys, then the loop's table from the stored jobs: pending ones in the queue in id order, running ones on
// the grants (and MIG instances) they held, which the backend adopts. It also turns a stored job row into a
// record for the JobBook's pager.
//
// Its methods run under the driver's lock (Restore and PageIn take it).

#include <memory>
#include <string>

#include "base/status.h"
#include "service/job_record.h"
#include "store/store.h"

namespace tessera {

class ServiceDriver;

class Restorer {
 public:
  explicit Restorer(ServiceDriver* driver);
  // Everything above from `s`; an error names the stored row that no longer applies.
  Status Restore(const StoredState& s);
  // Stored job `row` as a record (null when it no longer parses): the JobBook's pager.
  JobPtr PageIn(const JobRow& row) const;

 private:
  void RestoreLayoutsLocked(const StoredState& s);
  Status RestoreMetaLocked(const StoredState& s);
  // Each queue's decayed usage as kept in the store's meta (ignored when unreadable).
  void RestoreUsageLocked(const std::string& meta);
  Status RestoreJobLocked(const JobRow& row);
  Result<std::shared_ptr<JobRecord>> RecordOfRowLocked(const JobRow& row) const;
  Status ResumeLocked(const JobRecord& j);

  ServiceDriver* const d_;
};

}  // namespace tessera
