#pragma once
// ReportRoom: what each report of the driver (control/driver.h) means for a job and the store, a room of
// ServiceDriver (service_driver.h). It is the Driver's listener: an applied bind makes a job running (once
// all its replicas hold their grants; starting until launched), a preemption or an interruption puts it
// back in the queue with the run's usage, a completion or failure ends it; counters, the reasons of binds
// and preemptions, and the GPUs whose MIG layout changed are kept with the new versions. Reports arrive
// only while the driver applies a plan or handles what is due, through the methods below, which collect
// the effects and write them (one batch per call).
//
// Everything runs under the driver's lock.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "control/driver.h"
#include "sched/cycle.h"
#include "service/job_record.h"
#include "store/store.h"

namespace tessera {

class ServiceDriver;

class ReportRoom final : public DriverListener {
 public:
  explicit ReportRoom(ServiceDriver* driver);

  // One slice `part` of a cycle's plan applied through the driver at `now` and its effects written (the
  // clock and usage meta with them every 16th cycle that writes nothing else); returns the jobs bound and
  // in *wrote whether any job changed.
  int ApplySliceLocked(const Plan& part, int64_t now, bool last, bool* wrote);
  // `plan` (takes only: ControlLoop::AppendTakeOf) applied through the driver now; its job versions into
  // *changed and its events and usage into *b, for the caller to write.
  void ApplyTakesLocked(const Plan& plan, int64_t now, WriteBatch* b, std::vector<JobPtr>* changed);
  // Backend events and timers due at `now`, written. Returns whether anything changed.
  bool DueLocked(int64_t now);
  // The next version of `j` ended in `state` at `at`; adds its usage (when it ran) and an event to *b.
  JobPtr FinishLocked(const JobRecord& j, JobState state, int64_t at, const std::string& message,
                      WriteBatch* b);

  // DriverListener: the reports, under the lock, while one of the calls above runs.
  void OnApplied(const Applied& a, int64_t now) override;
  void OnStarted(JobSlot j, int64_t now, double, bool in_flight) override;
  void OnReleased(const Released& r, int64_t now, ReleaseCause cause, int64_t) override;
  void OnBackendEvent(const BackendEvent& e) override;

 private:
  // The effects of one call: new versions, their writes, the plan (slice) being applied for the actions'
  // reasons, and the GPUs whose MIG layout may have changed.
  struct Fx {
    WriteBatch b;
    std::vector<JobPtr> changed;
    const Plan* plan = nullptr;
    size_t index = 0;  // the plan's next action
    std::set<GpuId> relayout;
  };
  // The next version of `j` back in the queue after its run stopped (`why`), with the run's usage.
  JobPtr RequeuedLocked(const JobRecord& j, const std::string& why, int64_t now, WriteBatch* b);
  // The job's latest version including those of the current effects.
  JobPtr CurrentLocked(int64_t id) const;
  void ChangedLocked(JobPtr next);
  // Writes the effects (and the clock and usage meta when `meta`).
  void FlushLocked(Fx* fx, int64_t now, bool meta);

  ServiceDriver* const d_;
  Fx* fx_ = nullptr;                       // the effects the reports go to (set during a call)
  std::map<int64_t, std::string> reason_;  // live job -> the reason of its last bind or preemption
};

}  // namespace tessera
