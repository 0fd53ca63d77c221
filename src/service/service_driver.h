#pragma once
// ServiceDriver: the driver room of the service, a driver of the control-loop core (control/loop.h) as the
// simulator is. It owns the ControlLoop (the job table, the allocation, each queue's decayed usage), each
// job's slots in that table, the Driver (control/driver.h) with its listener and the outbox to the backend,
// the cycle thread and the snapshot published after each cycle. It turns the driver's reports into job
// versions, events and usage, and writes every new job version through the JobBook (job_book.h). Its
// rooms work on the same loop under the same lock: JobRoom (job_room.h) the job operations (submit,
// cancel, priority, preempt, what-if), NodeRoom (node_room.h) the nodes, CycleRoom (cycle_room.h) when and
// how cycles run, SnapshotRoom (snapshot_room.h) the snapshot published after each cycle, Restorer
// (restorer.h) the state rebuilt from the store, ReportRoom (report_room.h) the driver's reports.
//
// Locks (in the order they may be taken; never the other way):
//  1. Identity's change lock (identity.h): its team_changed hook calls TeamChanged, which takes mu_.
//  2. CycleRoom's cycle_mu_: one cycle at a time; held across a cycle, which takes mu_ for its slices.
//  3. mu_: the loop, the slots, the nodes, the effects; held for a request's check-and-write and for one
//     slice of a cycle's apply, never across a store wait once started. Identity's read lock and Chargeback's
//     lock may be taken under it (neither takes mu_).
//  4. The JobBook's locks: new versions are written under mu_ (the book takes no other lock). Reads of jobs
//     take the book's lock alone, so they never wait for mu_.
//  SnapshotRoom's snap_mu_, CycleRoom's wake_mu_ and JobRoom's whatif_mu_ are leaves (nothing is taken
//  under them).

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "control/backend.h"
#include "control/driver.h"
#include "control/loop.h"
#include "control/options.h"
#include "sched/cluster_state.h"
#include "sched/cycle.h"
#include "sched/policy.h"
#include "service/chargeback.h"
#include "service/clock.h"
#include "service/cycle_room.h"
#include "service/identity.h"
#include "service/job_book.h"
#include "service/job_record.h"
#include "service/job_room.h"
#include "service/node_room.h"
#include "service/outbox.h"
#include "service/report_room.h"
#include "service/restorer.h"
#include "service/service.h"
#include "service/snapshot_room.h"
#include "store/store.h"

namespace tessera {

class ServiceDriver {
 public:
  // `config` (its tenancy's queues grow under mu_), and every pointer, must outlive it.
  ServiceDriver(ServiceConfig* config, Store* store, Clock* clock, Backend* backend, JobBook* book,
                Identity* identity, Chargeback* chargeback);
  ~ServiceDriver();
  // The loop over `cluster` (config->cluster), the state from `loaded`, the first snapshot and, with
  // background cycles, the cycle thread.
  Status Start(const StoredState& loaded);
  // Stops the cycle thread and writes the clock and the queues' usage (the caller closes the store).
  void Stop();
  // A team created or changed (Identity's hook): its queue, seen by the next cycle.
  void TeamChanged(const TeamRow& row);

  bool Ready() const { return ready_.load(); }
  const Counters& counters() const { return counters_; }
  std::shared_ptr<const Snapshot> snapshot() const { return snapshots_->Get(); }
  int64_t Now() const { return static_cast<int64_t>(clock_->Now()); }

  // Every team's durable usage plus the running jobs' so far, over the query's interval, as written or
  // summed by the query's groups (chargeback.cc).
  Outcome<UsageLedgerOf> UsageLedger(const UsageQuery& q, bool summed) const;
  // The job writes and what-if of Service (service.h): their room (job_room.h).
  JobRoom& jobs() { return *jobs_; }
  // The nodes of Service (service.h): their room (node_room.h).
  NodeRoom& nodes() { return *nodes_; }
  const NodeRoom& nodes() const { return *nodes_; }

  // The loop as Service exposes it (service.h; loop_slots.cc); the cycles' room (cycle_room.h).
  std::vector<std::string> TakeDecisionLines();
  std::vector<JobSlot> LoopSlotsOf(int64_t id) const;
  JobPtr JobOfSlot(JobSlot slot) const;
  std::optional<bool> MayPreemptFor(JobSlot victim, int64_t for_id) const;  // Service::MayPreemptFor
  std::optional<bool> MayPreemptFor(JobSlot victim, const JobSpec& spec) const;
  CycleRoom& cycles() { return *cycles_; }
  SnapshotRoom& snapshots() { return *snapshots_; }
  Restorer& restorer() { return *restorer_; }

 private:
  // What a commit makes visible: job versions (fresh = first version of a job), usage records.
  struct Effects {
    std::vector<JobPtr> next;
    std::vector<bool> fresh;
    std::vector<UsageRecord> usage;
  };
  friend class NodeRoom;  // rooms of the driver: they work on its loop under mu_
  friend class JobRoom;
  friend class CycleRoom;
  friend class SnapshotRoom;
  friend class Restorer;
  friend class ReportRoom;

  // The team's queue (made when new; a row's quota applied). Under mu_.
  int EnsureQueue(const std::string& team, const TeamRow* row);
  // Each queue's decayed usage as kept in the store's meta (Restorer reads it back).
  std::string UsageMetaLocked() const;

  // Job writes (service_driver.cc).
  // Makes `next` the current versions in the JobBook and queues their write with `batch`. After the
  // commit the store's writer applies the Effects (versions visible, new pending jobs in the loop, usage
  // in the ledger) and then calls `done` (if any): a caller that waits for `done` reads its own write.
  void PutLocked(std::vector<JobPtr> next, WriteBatch batch, std::function<void(const Status&)> done);
  void ApplyEffects(const Effects& e, const Status& st);
  // A job `c` may see, read from the JobBook (its lock only).
  Outcome<JobView> Get(const Caller& c, int64_t id) const { return book_->Get(c, id, *snapshot()); }
  uint64_t NextVersion() { return book_->NextVersion(); }
  // Stores the service clock with `b` when `at` is past what is stored (so that after a crash every new
  // timestamp is later than every acknowledged one). Under mu_.
  void KeepClockLocked(int64_t at, WriteBatch* b);
  AuditRow AuditOf(const Caller& c, std::string action, std::string target, std::string before,
                   std::string after, bool changed) const {
    return identity_->AuditOf(c, std::move(action), std::move(target), std::move(before), std::move(after),
                              changed);
  }

  // The jobs in the loop's table (loop_slots.cc).
  // Adds the replicas of `j` to the loop's table; `queued`: they enter the queue at the job's submit time.
  void AddToLoopLocked(const JobRecord& j, bool queued);
  // The job's slots in the loop's table (empty until its first version is durable and it is added).
  const std::vector<JobSlot>& ReplicasLocked(int64_t id) const;
  // Running jobs (by id, ascending): the ones whose replicas hold capacity in the loop.
  std::vector<int64_t> RunningLocked() const;
  std::vector<UsageRecord> UsageOf(const JobRecord& j, int64_t end_s) const;
  // A usage query's records with a store: those `read` names and the running jobs' at `now` (chargeback.cc).
  Status UsageFromStore(const UsageRead& read, int64_t now, std::vector<UsageRecord>* usage,
                        Cluster* cluster) const;
  // Whether the service added `slot` to the loop's table; the id of the job it belongs to (REQUIRES: added).
  bool HasSlotLocked(JobSlot slot) const {
    return slot.value() >= 0 && slot.value() < static_cast<int32_t>(job_of_slot_.size());
  }
  int64_t IdOfSlotLocked(JobSlot slot) const { return job_of_slot_[slot.value()]; }
  // Whether the service added `slot` and it holds grants now (bound or running).
  bool HoldsLocked(JobSlot slot) const;
  void Notify() { cycles_->Notify(); }

  ServiceConfig* const config_;  // its tenancy's queues grow under mu_ once started
  Store* const store_;
  Clock* const clock_;
  Backend* const backend_;
  JobBook* const book_;
  Identity* const identity_;
  Chargeback* const chargeback_;
  Counters counters_;
  std::atomic<bool> ready_{false};

  mutable std::mutex mu_;
  std::unique_ptr<ControlLoop> loop_;  // job table, allocation and decayed usage of the current versions
  std::vector<int64_t> job_of_slot_;   // by the loop's job slot: the job id
  std::vector<std::vector<JobSlot>> replicas_;  // index id - 1: the job's slots in the loop's table
  std::shared_ptr<const Policy> policy_;
  std::unique_ptr<OutboxBackend> outbox_;  // the driver's backend: calls queued under mu_, made after it
  std::unique_ptr<Driver> driver_;         // the driver rules over loop_
  std::unique_ptr<NodeRoom> nodes_;    // the nodes' room (node_room.h)
  std::unique_ptr<JobRoom> jobs_;      // the job operations' room (job_room.h)
  std::unique_ptr<CycleRoom> cycles_;  // the cycles' room (cycle_room.h)
  std::unique_ptr<SnapshotRoom> snapshots_;  // the published snapshot's room (snapshot_room.h)
  std::unique_ptr<Restorer> restorer_;       // the restore from the store (restorer.h)
  std::unique_ptr<ReportRoom> reports_;      // the driver's listener (report_room.h)
  bool stopped_ = false;               // Stop ran
  int64_t stored_clock_ = 0;   // the clock position last written
  bool state_changed_ = true;  // allocation changed since the last published snapshot
  uint64_t cycle_seq_ = 0;
};

}  // namespace tessera
