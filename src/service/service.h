#pragma once
// Service: the running control plane, a driver of the control-loop core (control/loop.h) as the simulator
// is. The core holds what decides: the job table (each job's replicas, phases and grants), the cluster's
// allocation and each queue's decayed usage; it builds the cycle's input and applies its Plan. The service
// owns the rest: the versions of each job as the API shows them, the Store (every change is durable before
// it is acknowledged) and the Backend (where jobs run); teams, users and tokens are its Identity's
// (identity.h). It runs the cycle on a timer and on
// events (submit, cancel, priority change, a job's end) and answers queries.
//
// Consistency:
//  - Every acknowledged write is durable: an operation returns only after the Store committed it.
//  - A job becomes visible (by id and in lists) only once durable; a read of one job by id sees every
//    write acknowledged before it (read-your-writes).
//  - Queue positions, reasons, estimated starts and the cluster view come from the Snapshot published after
//    each cycle (at most one cycle old; cycles run at least every `tick_s` of wall time).
// On start the state is rebuilt from the Store alone: pending jobs stay pending, running jobs keep the GPUs
// and MIG instances they held (the executor resumes them), nothing is allocated twice.
//
// Thread safety: every public method may be called from any thread.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/shared_text.h"
#include "control/backend.h"
#include "control/driver.h"
#include "control/loop.h"
#include "control/options.h"
#include "cost/cost_model.h"
#include "cost/ledger.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "sched/cluster_state.h"
#include "sched/cycle.h"
#include "sched/policy.h"
#include "sched/tenancy.h"
#include "service/api_error.h"
#include "service/chargeback.h"
#include "service/clock.h"
#include "service/cluster_summary.h"
#include "service/identity.h"
#include "service/job_book.h"
#include "service/job_record.h"
#include "service/outbox.h"
#include "service/workload_json.h"
#include "store/store.h"

namespace tessera {

// The live nodes' part of a snapshot's signatures (estimates.cc).
uint64_t NodesSignature(const Snapshot& s);
// The start estimate of pending job `j` in `info`, fresh from the cycle (`still_needed`: GPU thousandths
// it is short of its queue's limit), bounded by its queue's limit and kept from `old` (the previous
// snapshot, may be null) while nothing changed for its queue (estimates.cc).
void StabiliseEstimate(const JobRecord& j, int64_t still_needed, const Snapshot& snap, const Snapshot* old,
                       PendingInfo* info);

struct Counters {
  std::atomic<uint64_t> cycles{0}, placements{0}, preemptions{0}, mig_repartitions{0}, submissions{0},
      finished{0}, failed{0}, cancelled{0};
  // Cycle duration histogram (seconds): counts per upper bound in kCycleBuckets, plus +Inf.
  static constexpr double kCycleBuckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
  static constexpr int kNumBuckets = sizeof(kCycleBuckets) / sizeof(kCycleBuckets[0]);
  std::atomic<uint64_t> cycle_bucket[kNumBuckets + 1] = {};
  std::atomic<uint64_t> cycle_sum_us{0};
};

struct ServiceConfig {
  // The cluster as configured: it seeds an empty store; after the first start the store's cluster is used
  // (nodes change through the nodes API) and a configuration that differs is ignored (with a log line).
  Cluster cluster;
  const Catalog* catalog = nullptr;
  TenancyConfig tenancy;          // queues from a tenancy file (teams created through the API are added)
  double tick_s = 1.0;            // wall seconds between timer cycles
  double min_cycle_gap_s = 0.1;   // wall seconds between event-driven cycles (at least)
  bool background_cycles = true;  // false: cycles run only through RunCycleNow (tests)
  // The cycle's decision (no lock held) runs this much nicer than the process (Linux: per thread), so that
  // requests and the store's writer take the CPU first; 0 = on the cycle thread at its priority.
  int decide_nice = 10;
  // The policy (null = MakePolicy("tessera")) and the loop setup (control/options.h). With
  // tenancy_cycle, the tenancy's cycle options decide (setup.tenancy_cycle is set to them); without, the
  // setup's defaults do (a replayed scenario without a tenancy).
  std::shared_ptr<const Policy> policy;
  LoopSetup setup;
  bool tenancy_cycle = true;
  // Keep the driver's decisions (TakeDecisionLines).
  bool record_decisions = false;
  std::function<void(const std::string&)> log;  // operator notes (e.g. a cluster file ignored); may be empty
  // Dated price books (cost/pricebook.h); empty = PriceBook::Default() alone. Usage is priced with the book
  // valid at its start (BookValidOn): a node's configured price_per_gpu_hour, else its pool's price in that
  // book, else the book's on-demand list price of its GPU kind; ListCost from that book.
  std::vector<PriceBook> price_books;
};

// A node as the nodes API shows it.
struct NodeView {
  std::string name;
  std::string state;    // ready, cordoned, draining, drained, unhealthy
  nlohmann::json spec;  // the node as in the cluster YAML (exact integers: cpu_milli, memory_mib)
  int tasks = 0;        // tasks running there
};

// One answer of a what-if: the earliest start had the job asked for `fraction` of its GPUs.
struct WhatIfOption {
  double fraction = 1;
  // "" = `fraction` of its GPUs; "any_gpu_kind" = any GPU kind, as many GPUs; "mig_profile" = another MIG
  // profile (`mig_profile`); "spot" = checkpointable, so that spot capacity may take it too.
  std::string change;
  std::string mig_profile;       // the profile of a "mig_profile" option
  int64_t gpus = 0;              // GPUs it would ask for
  int64_t estimated_start = -1;  // service time; -1 = the cycle gives no estimate
  std::string code, message;     // why it would still wait (empty when it would start)
};

class Service {
 public:
  // Rebuilds state from `store`, starts the cycle thread. `clock` and `executor` must outlive the service.
  static Result<std::unique_ptr<Service>> Start(ServiceConfig config, std::unique_ptr<Store> store,
                                                Clock* clock, Backend* backend);
  ~Service();
  // Stops the cycle thread and closes the store (queued writes commit first).
  void Stop();

  // Creates user `admin` with a new token when there are no users; returns the token (else empty).
  Result<std::string> BootstrapAdmin();
  // The caller of a bearer token, or nothing.
  std::optional<Caller> Authenticate(std::string_view token) const;
  bool Ready() const { return ready_.load(); }

  Outcome<TeamView> CreateTeam(const Caller& c, const TeamRow& team);
  std::vector<TeamView> Teams(const Caller& c) const;
  Outcome<UserView> CreateUser(const Caller& c, const std::string& name, const std::string& team,
                               const std::string& role);
  std::vector<UserView> Users(const Caller& c) const;
  // A new token for `user` (the old one stops working), or, with `revoke`, none: the user can no longer
  // sign in until given a new one. An admin, or a team lead for its team's non-admin users. (admin.cc)
  Outcome<UserView> ReplaceToken(const Caller& c, const std::string& user, bool revoke);
  // Changes a team's guarantee and/or limit (GPU thousandths; a negative limit = none); admin only.
  // What-if for a pending job the caller may see: its start as asked, and with a half and a quarter of its
  // GPUs (fewer gang members, else fewer GPUs per worker), each from a cycle run on a copy of the state.
  // Computed at most once per job and cycle. (whatif.cc)
  Outcome<std::vector<WhatIfOption>> WhatIf(const Caller& c, int64_t id);
  // A change of a team (identity.h: each field given replaces the stored one; If-Match; no update lost).
  using TeamChange = tessera::TeamChange;
  Outcome<TeamView> UpdateTeam(const Caller& c, const std::string& name, const TeamChange& change);
  // The audit log (admin only), by id; `more` is set when further entries match. (admin.cc)
  Outcome<std::vector<AuditRow>> Audit(const Caller& c, const AuditQuery& q, bool* more) const;

  // `team`: the team an admin names (others: empty or their own). `idempotency_key` may be empty.
  // `created` tells whether this call made the job.
  Outcome<JobView> Submit(const Caller& c, const JobSpec& spec, const std::string& idempotency_key,
                          bool* created = nullptr);
  Outcome<JobView> Get(const Caller& c, int64_t id) const;
  Outcome<JobView> Cancel(const Caller& c, int64_t id);
  Outcome<JobView> SetPriority(const Caller& c, int64_t id, const std::string& priority_class);
  // Visible jobs with id > after_id, in id order, at most `limit`; filters empty = any. `more` is set when
  // further jobs match.
  std::vector<JobView> List(const Caller& c, const std::string& state, const std::string& team,
                            const std::string& project, int64_t after_id, int limit, bool* more) const;
  // One page of the visible jobs matching `q`, in its order (jobs_list.cc).
  JobPage ListJobs(const Caller& c, const JobQuery& q) const;
  std::vector<QueueEntry> Queue(const Caller& c) const;
  Outcome<std::vector<UsageRow>> Usage(const Caller& c, const UsageQuery& q) const;
  // FOCUS CSV of the usage (an admin: all; others: their team's records).
  Outcome<std::string> UsageFocusCsv(const Caller& c, const UsageQuery& q) const;

  // Nodes (nodes.cc), admin only (403 otherwise); unknown or removed names are 404. AddNode takes a node as
  // in the cluster YAML, as JSON text (its leaf and spine must exist). Cordon: nothing new lands there;
  // Drain: cordon, then stop and requeue every job with a task there (the node shows draining until
  // nothing runs there, then drained); Uncordon: a cordoned or drained node is ready again; Remove: 409
  // (FailedPrecondition) while anything runs there, else the node goes (its id stays a tombstone). Each
  // change is durable when it returns and triggers a cycle.
  Outcome<std::vector<NodeView>> ListNodes(const Caller& c) const;
  Outcome<NodeView> AddNode(const Caller& c, const std::string& spec_json);
  Outcome<NodeView> CordonNode(const Caller& c, const std::string& name);
  Outcome<NodeView> UncordonNode(const Caller& c, const std::string& name);
  Outcome<NodeView> DrainNode(const Caller& c, const std::string& name);
  Outcome<NodeView> RemoveNode(const Caller& c, const std::string& name);
  // Each node's state by id ("removed" for a tombstone), for the cluster view.
  std::vector<std::string> NodeStates() const;

  std::shared_ptr<const Snapshot> snapshot() const;
  const Counters& counters() const { return counters_; }
  // The cluster as at start (from the store); the live one is snapshot()->cluster->cluster().
  const Cluster& cluster() const { return config_.cluster; }
  const Catalog& catalog() const { return *config_.catalog; }
  const std::vector<PriorityClass>& priority_classes() const { return config_.tenancy.priority_classes; }
  int64_t Now() const { return static_cast<int64_t>(clock_->Now()); }
  // Pending and running jobs per team (from the live table).
  std::map<std::string, std::pair<int64_t, int64_t>> JobCountsByTeam() const;
  // Runs one cycle now and waits until its changes are durable and visible (tests; the cycle thread runs
  // cycles on its own).
  void RunCycleNow();

  // Driving the loop instant by instant on the service's clock (service/replay.h; background_cycles off):
  // the next instant, one instant with `arrivals` submitting through the API path, the jobs waiting, and
  // the decisions recorded so far as JSON lines (control/decisions.h; job = the job's name).
  int64_t NextInstant(int64_t now, int64_t owner_next_s, int64_t horizon_s, bool* tick) const;
  bool RunInstant(int64_t now, bool tick, InstantSource& arrivals);
  size_t WaitingJobs() const;
  std::vector<std::string> TakeDecisionLines();
  // The control loop's jobs (slots) of a job: one per replica, or the gang; empty for an unknown job.
  std::vector<JobSlot> LoopSlotsOf(int64_t id) const;
  // The job a slot of the control loop's table belongs to (its current version), or null; and a node's
  // name by id (empty for an unknown id). Backends that name jobs and nodes outside Tessera use them.
  JobPtr JobOfSlot(JobSlot slot) const;
  std::string NodeName(NodeId n) const;
  // Running jobs that cannot be evicted now (a backend's disruption budgets refuse it): the cycles after
  // this call choose no victim among them. Replaces the previous set; unknown ids are ignored.
  void SetEvictionBlocked(std::set<int64_t> ids);

 private:
  Service(ServiceConfig config, std::unique_ptr<Store> store, Clock* clock, Backend* backend);
  Status Restore(const StoredState& s);
  void RestoreLayoutsLocked(const StoredState& s);
  Status RestoreMetaLocked(const StoredState& s);
  Status RestoreJobLocked(const JobRow& row);
  // Nodes (nodes.cc). The cluster from the store's nodes into config->cluster (kept when the store has none).
  static Status LoadStoredCluster(const StoredState& s, ServiceConfig* config);
  // After Restore: seeds an empty store with the configured nodes, else applies the stored node states.
  Status RestoreNodes(const StoredState& s);
  NodeId FindNodeLocked(const std::string& name) const;  // a live node by name, or -1
  std::string NodeStateLocked(NodeId n) const;
  NodeView NodeViewLocked(NodeId n) const;
  NodeRow NodeRowLocked(NodeId n, int64_t now) const;
  void RecountKindsLocked();  // kind_stats_ over the live nodes
  // Stops and requeues, through the preemption path, every running job with a task on node `n`.
  void DrainJobsLocked(NodeId n, int64_t now, WriteBatch* b, std::vector<JobPtr>* changed);
  // A change of live node `name` by an admin: `change` (under the lock) changes it and adds its writes;
  // the node's row is written with them; returns the node once durable, and wakes the cycle.
  using NodeChangeFn = std::function<std::optional<ApiError>(NodeId, WriteBatch*, std::vector<JobPtr>*)>;
  // Applies `change` to the named node and commits it with an audit entry `action` (node.cordon, ...).
  Outcome<NodeView> ChangeNode(const Caller& c, const std::string& name, const std::string& action,
                               const NodeChangeFn& change);
  // Stores node n, the batch and its audit entry (`before`: the node's state before, "" for a new node).
  Outcome<NodeView> CommitNodeLocked(std::unique_lock<std::mutex>* lock, const Caller& c,
                                     const std::string& action, const std::string& before, NodeId n,
                                     WriteBatch b, std::vector<JobPtr> changed);
  Status ResumeLocked(const JobRecord& j);
  int EnsureQueue(const std::string& team, const TeamRow* row);
  // The what-if's requests for what else the job could ask (another MIG profile, spot), from its spec.
  std::vector<std::pair<WhatIfOption, Request>> AlternativesLocked(const JobRecord& job) const;
  Outcome<Request> BuildRequest(const JobSpec& spec, const std::string& team, int64_t id, int* queue,
                                std::string* priority_class) const;
  std::vector<UsageRecord> UsageOf(const JobRecord& j, int64_t end_s) const;
  // Every team's durable usage plus the running jobs' so far, over the query's interval (chargeback.cc).
  Outcome<UsageLedgerOf> UsageLedger(const UsageQuery& q) const;
  // What a commit makes visible: job versions (fresh = first version of a job), usage records.
  struct Effects {
    std::vector<JobPtr> next;
    std::vector<bool> fresh;
    std::vector<UsageRecord> usage;
  };
  // Makes `next` the current versions and queues their write with `batch`. After the commit the store's
  // writer applies the Effects (versions visible, new pending jobs in the pending set, usage in the ledger)
  // and then calls `done` (if any): a caller that waits for `done` reads its own write. (Applying them on
  // each request's thread made every request of a commit group queue for the service lock at once.)
  void PutLocked(std::vector<JobPtr> next, WriteBatch batch, std::function<void(const Status&)> done);
  void ApplyEffects(const Effects& e, const Status& st);
  // A change of job `id` by `c` (verb names it in a refusal): 404 unless the job is durable and visible to
  // `c`, 403 without the right; else `change` (under the lock) returns the next version and its writes
  // (none: nothing to change), which is written; returns the job once that is durable and visible.
  using ChangeFn = std::function<Outcome<JobPtr>(const JobRecord&, WriteBatch*)>;
  Outcome<JobView> ChangeJob(const Caller& c, int64_t id, const char* verb, const ChangeFn& change);
  uint64_t NextVersion() { return book_.NextVersion(); }
  // The job's slots in the loop's table (empty until its first version is durable and it is added).
  const std::vector<JobSlot>& ReplicasLocked(int64_t id) const;
  void CycleLoop();
  void RunOneCycle();
  // Adds the replicas of `j` to the loop's table; `queued`: they enter the queue at the job's submit time.
  void AddToLoopLocked(const JobRecord& j, bool queued);
  // The loop's cycle input for `now` into *in, over `working`, a copy of its allocation that the caller
  // keeps (an existing `working`, and the memory of an earlier input in *in, are reused).
  void BuildInputLocked(int64_t now, std::unique_ptr<ClusterState>* working, CycleInput* in);
  // A copy of the loop's allocation for a snapshot, in a recycled buffer where one is free.
  std::shared_ptr<const ClusterState> RecycledClusterLocked();
  // Each queue's decayed usage as kept in the store's meta, and back (ignored when unreadable).
  std::string UsageMetaLocked() const;
  void RestoreUsageLocked(const std::string& meta);
  // Running jobs (by id, ascending): the ones whose replicas hold capacity in the loop.
  std::vector<int64_t> RunningLocked() const;
  AuditRow AuditOf(const Caller& c, std::string action, std::string target, std::string before,
                   std::string after, bool changed) const {
    return identity_->AuditOf(c, std::move(action), std::move(target), std::move(before), std::move(after),
                              changed);
  }
  // Stores the service clock with `b` when `at` is past what is stored (so that after a crash every new
  // timestamp is later than every acknowledged one). Under mu_.
  void KeepClockLocked(int64_t at, WriteBatch* b);
  // The next version of `j` ended in `state` at `at`; the loop releases what it held; adds usage and an
  // event.
  JobPtr FinishLocked(const JobRecord& j, JobState state, int64_t at, const std::string& message,
                      WriteBatch* b);
  // What the driver reports (control/driver.h), turned into job versions, events and usage in the current
  // effects (fx_, set by the caller that holds the lock): see cycle.cc.
  class Listener final : public DriverListener {
   public:
    explicit Listener(Service* s) : s_(s) {}
    void OnApplied(const Applied& a, int64_t now) override { s_->OnBoundLocked(a, now); }
    void OnStarted(JobSlot j, int64_t now, double, bool in_flight) override {
      s_->OnStartedLocked(j, now, in_flight);
    }
    void OnReleased(const Released& r, int64_t now, ReleaseCause cause, int64_t) override {
      s_->OnReleasedLocked(r, now, cause);
    }
    void OnBackendEvent(const BackendEvent& e) override { s_->OnBackendEventLocked(e); }

   private:
    Service* s_;
  };
  struct Fx {
    WriteBatch b;
    std::vector<JobPtr> changed;
    const Plan* plan = nullptr;  // the plan (slice) being applied, for the actions' reasons
    size_t index = 0;            // its next action
    std::set<GpuId> relayout;    // GPUs whose MIG layout may have changed
  };
  // The job's latest version including those of the current effects.
  JobPtr CurrentLocked(int64_t id) const;
  // Whether the service added `slot` to the loop's table; the id of the job it belongs to (REQUIRES: added).
  bool HasSlotLocked(JobSlot slot) const {
    return slot.value() >= 0 && slot.value() < static_cast<int32_t>(job_of_slot_.size());
  }
  int64_t IdOfSlotLocked(JobSlot slot) const { return job_of_slot_[slot.value()]; }
  void ChangedLocked(JobPtr next);
  // Writes the effects (and the clock and usage meta when `meta`).
  void FlushLocked(Fx* fx, int64_t now, bool meta);
  void OnBoundLocked(const Applied& a, int64_t now);
  void OnStartedLocked(JobSlot s, int64_t now, bool in_flight);
  void OnReleasedLocked(const Released& r, int64_t now, ReleaseCause cause);
  void OnBackendEventLocked(const BackendEvent& e);
  // The next version of `j` back in the queue after its run stopped (`why`), with the run's usage.
  JobPtr RequeuedLocked(const JobRecord& j, const std::string& why, int64_t now, WriteBatch* b);
  // Backend events and timers due at `now`, written. Returns whether anything changed.
  bool DueLocked(int64_t now);
  // One cycle at `now` (decide without the lock, apply in slices); returns the jobs bound.
  int CycleAt(int64_t now);
  // Publishes the snapshot after a cycle (plan) or a restore (null). Begin, under the lock, takes the
  // allocation (copied when it changed) and the current version of each pending job of the plan; Finish,
  // without the lock, orders the queue and publishes.
  void PublishLocked(const Plan* plan, int64_t now);
  // Each queue's signature and running jobs' expected ends into `snap` (estimates.cc).
  void QueueSignaturesLocked(Snapshot* snap) const;
  // A pending status's job and the gang whose reservation it waits behind (null: none), read under mu_.
  struct PendingRef {
    JobPtr job, reservation;
  };
  std::shared_ptr<Snapshot> BeginSnapshotLocked(const Plan* plan, int64_t now, std::vector<PendingRef>* jobs);
  void FinishSnapshot(std::shared_ptr<Snapshot> snap, const Plan* plan, const std::vector<PendingRef>& jobs);
  Plan DecideInBackground(const CycleInput& in) const;
  // Where a plan is cut into slices applied one lock hold each: ascending action indexes from 0 to its size
  // (at least one slice, possibly empty).
  std::vector<size_t> SliceCuts(const Plan& plan) const;
  void Notify();

  struct KindStats {
    int max_gpus = 0;  // GPUs of the largest node of the kind
    int total_gpus = 0;
  };

  ServiceConfig config_;
  std::vector<KindStats> kind_stats_;  // by KindId (live nodes; under mu_ once started)
  // Per node id, what the allocation state does not hold (under mu_).
  struct NodeEntry {
    bool draining = false;   // a drain was asked (drained once nothing runs there)
    bool unhealthy = false;  // reported unhealthy (kept cordoned)
  };
  std::vector<NodeEntry> node_entries_;
  std::unique_ptr<Store> store_;
  Clock* clock_;
  Backend* backend_;
  std::unique_ptr<OutboxBackend> outbox_;  // the driver's backend: calls queued under mu_, made after it
  std::shared_ptr<const Policy> policy_;
  std::unique_ptr<Listener> listener_;
  std::unique_ptr<Driver> driver_;         // the driver rules over loop_ (under mu_)
  Fx* fx_ = nullptr;                       // the effects the driver's reports go to (under mu_)
  std::map<int64_t, std::string> reason_;  // job -> the reason of its last bind or preemption
  std::set<int64_t> eviction_blocked_;     // jobs no cycle may preempt now (SetEvictionBlocked)
  Counters counters_;
  std::atomic<bool> ready_{false};

  // Teams, users, tokens and the audit entries' shape (identity.h): its own locks, never held with mu_
  // taken after them except by its team_changed hook.
  std::unique_ptr<Identity> identity_;
  std::unique_ptr<Chargeback> chargeback_;  // durable usage records and the usage queries (chargeback.h)
  int64_t stored_clock_ = 0;                // the clock position last written (mu_)
  mutable std::mutex mu_;
  JobBook book_;  // the jobs' versions and the read queries (job_book.h): its own lock, taken after mu_
  std::vector<std::vector<JobSlot>> replicas_;  // index id - 1: the job's slots in the loop's table
  std::unique_ptr<ControlLoop> loop_;  // job table, allocation and decayed usage of the current versions
  std::vector<int64_t> job_of_slot_;   // by the loop's job slot: the job id
  bool state_changed_ = true;          // allocation changed since the last published snapshot
  uint64_t cycle_seq_ = 0;
  std::shared_ptr<const Snapshot> snapshot_;
  mutable std::mutex snap_mu_;
  // Cluster states kept for reuse by snapshots (a buffer is reused once only this list holds it).
  static constexpr size_t kSpareClusters = 4;
  std::vector<std::shared_ptr<ClusterState>> spare_clusters_;
  std::mutex cycle_mu_;                          // one cycle at a time (the timer's, or RunCycleNow)
  std::unique_ptr<ClusterState> cycle_working_;  // the cycle's working allocation, reused
  CycleInput cycle_in_;                          // the cycle's input, its memory reused

  std::mutex whatif_mu_;
  std::map<int64_t, std::pair<uint64_t, std::vector<WhatIfOption>>> whatif_cache_;  // job -> (cycle, answer)

  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool wake_ = false;
  std::atomic<bool> wake_posted_{false};  // a Notify is on its way or wake_ is set (see Notify)
  bool stop_ = false;
  std::thread cycle_thread_;
};

}  // namespace tessera
