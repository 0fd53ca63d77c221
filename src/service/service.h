#pragma once
// Service: the running control plane, the facade over its rooms, each with its own locks:
//  - Identity (identity.h): teams, users, bearer tokens and the audit log.
//  - Chargeback (chargeback.h): the durable usage records and the usage and cost queries.
//  - JobBook (job_book.h): each job's versions as the API shows them, the idempotency keys, who may
//    submit, see and change a job, and the job reads (by id, the lists, the queue).
//  - ServiceDriver (service_driver.h): a driver of the control-loop core (control/loop.h) as the simulator
//    is. The core holds what decides: the job table (each job's replicas, phases and grants), the cluster's
//    allocation and each queue's decayed usage. The driver room runs the cycle on a timer and on events
//    (submit, cancel, priority change, a job's end), writes jobs (their new versions through the JobBook)
//    and nodes, and publishes the Snapshot.
// The Service owns the configuration, the Store (every change is durable before it is acknowledged) and
// the Backend (where jobs run), wires the rooms and delegates to them. The lock order is in
// service_driver.h: Identity's change lock, then the driver's, then the JobBook's, never the other way.
//
// Consistency:
//  - Every acknowledged write is durable: an operation returns only after the Store committed it.
//  - A job becomes visible (by id and in lists) only once durable; a read of one job by id sees every
//    write acknowledged before it (read-your-writes).
//  - Reads of jobs (Get, List, ListJobs, Queue) take the JobBook's lock only: they never wait for a cycle.
//  - Queue positions, reasons, estimated starts and the cluster view come from the Snapshot published after
//    each cycle (at most one cycle old; cycles run at least every `tick_s` of wall time).
// On start the state is rebuilt from the Store alone: pending jobs stay pending, running jobs keep the GPUs
// and MIG instances they held (the executor resumes them), nothing is allocated twice.
//
// Thread safety: every public method may be called from any thread.

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <iterator>
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

// A histogram of durations in seconds: counts per upper bound (`bounds`, then +Inf) and the sum. Lock-free.
template <size_t N>
struct DurationHistogram {
  explicit constexpr DurationHistogram(const double (&b)[N]) : bounds(b) {}
  void Observe(double s) {
    size_t k = 0;
    while (k < N && s > bounds[k]) ++k;
    bucket[k].fetch_add(1, std::memory_order_relaxed);
    sum_us.fetch_add(static_cast<uint64_t>(std::llround(s * 1e6)), std::memory_order_relaxed);
  }
  static constexpr size_t kNumBuckets = N;
  const double (&bounds)[N];
  std::atomic<uint64_t> bucket[N + 1] = {};
  std::atomic<uint64_t> sum_us{0};
};

struct Counters {
  std::atomic<uint64_t> cycles{0}, placements{0}, preemptions{0}, mig_repartitions{0}, submissions{0},
      finished{0}, failed{0}, cancelled{0};
  static constexpr double kCycleBuckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
  static constexpr double kLockBuckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                            0.005,  0.01,    0.025,  0.05,  0.1};
  DurationHistogram<std::size(kCycleBuckets)> cycle{kCycleBuckets};
  // How long a cycle holds the service lock that requests wait for: building its input (one hold per cycle)
  // and applying its plan (one hold per slice).
  DurationHistogram<std::size(kLockBuckets)> lock_input{kLockBuckets}, lock_apply{kLockBuckets};
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
  // A read-only view of the stored state (a follower replica, server/replica.h): no cycles, and nothing
  // written at start or stop (an empty store is not seeded, a node's unfinished drain is not continued).
  bool view_only = false;
  // The cycle's decision (no lock held) runs this much nicer than the process (Linux: per thread), so that
  // requests and the store's writer take the CPU first; 0 = on the cycle thread at its priority.
  int decide_nice = 10;
  // The policy (null = MakePolicy("tessera")) and the loop setup (control/options.h). With
  // tenancy_cycle, the tenancy's cycle options decide (setup.tenancy_cycle is set to them); without, the
  // setup's defaults do (a replayed scenario without a tenancy).
  std::shared_ptr<const Policy> policy;
  LoopSetup setup;
  bool tenancy_cycle = true;
  // Ended jobs (Succeeded, Failed, Cancelled) kept in memory: the most recently ended this many; the others
  // are read from the store when asked for (job_book.h). Negative: every job stays in memory.
  int64_t retain_ended_jobs = 5000;
  // With ended jobs read from the store: the idempotency keys kept in memory, the most recently made this
  // many (a replay of an older one reads it from the store).
  int64_t recent_idempotency_keys = 2048;
  // Keep the driver's decisions (TakeDecisionLines).
  bool record_decisions = false;
  std::function<void(const std::string&)> log;  // operator notes (e.g. a cluster file ignored); may be empty
  // What the backend runs each replica of job `j` as (LaunchSpec::key: e.g. a Kubernetes pod job's key),
  // element r for replica r; asked once when the job enters the loop, under the driver's lock, so it must
  // be quick and take no lock of the service. A replica past the end (or unset): the backend finds it itself.
  std::function<std::vector<std::string>(const JobRecord& j)> external_keys;
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

// One node as the loop's policy judges one task of a job it does not run (the Kubernetes extender's /filter
// and /prioritize, answered from the loop's view).
struct NodeRank {
  std::string node;
  bool fits = false;  // the policy places the task there on the allocation now, with only that node allowed
  int rank = -1;  // 0: the policy's first choice among the nodes asked; 1: its choice without that one; ...
                  // -1: past the ranks asked for, or it does not fit
  std::string reason;  // why it does not fit (the policy's reason, with the numbers)
};

class ServiceDriver;

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
  // The same, and whether an invalid token was valid once (identity.h).
  TokenCheck CheckToken(std::string_view token) const;
  bool Ready() const;

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
  // Computed at most once per job and cycle. (job_room.h)
  Outcome<std::vector<WhatIfOption>> WhatIf(const Caller& c, int64_t id);
  // Admin only. One task of `spec` (checked as a submission would be; nothing is submitted) judged on the
  // nodes `names` as the loop's allocation is now: whether each fits (the loop's policy with only that node
  // allowed) and the order the policy chooses among those that fit, for its first `ranked` choices. A name
  // the cluster does not have does not fit; a node named twice is judged once (ranked at its first entry).
  // (node_fit.cc)
  Outcome<std::vector<NodeRank>> RankNodes(const Caller& c, const JobSpec& spec,
                                           const std::vector<std::string>& names, int ranked) const;
  // A change of a team (identity.h: each field given replaces the stored one; If-Match; no update lost).
  using TeamChange = tessera::TeamChange;
  Outcome<TeamView> UpdateTeam(const Caller& c, const std::string& name, const TeamChange& change);
  // The audit log (admin only), by id; `more` is set when further entries match. (admin.cc)
  Outcome<std::vector<AuditRow>> Audit(const Caller& c, const AuditQuery& q, bool* more) const;
  // Records an audit entry by `c` without a stored change (a refused request, sessions a cap ended; `after`
  // JSON text); durable when it returns. (admin.cc)
  Status RecordAudit(const Caller& c, std::string action, std::string target, std::string after,
                     bool changed);

  // `team`: the team an admin names (others: empty or their own). `idempotency_key` may be empty.
  // `created` tells whether this call made the job. It returns once the job is durable, unless
  // `on_durable` is given: then a job this call made (`*created`) is returned as soon as its write is
  // queued, and `on_durable` is called once with the write's status (on the store's thread, after the job
  // became visible); nothing may be told of the job before a good status. `on_durable` is not called when
  // the call made no job (refused, or an idempotent replay: returned once durable, as without it).
  Outcome<JobView> Submit(const Caller& c, const JobSpec& spec, const std::string& idempotency_key,
                          bool* created = nullptr, std::function<void(const Status&)> on_durable = nullptr);
  // Many jobs by one caller (a driver's intake: no idempotency keys), stored in one durable write; one
  // outcome per spec, in order, each as Submit would answer it. Returns once the accepted are durable.
  std::vector<Outcome<JobView>> SubmitAll(const Caller& c, const std::vector<JobSpec>& specs);
  Outcome<JobView> Get(const Caller& c, int64_t id) const;
  Outcome<JobView> Cancel(const Caller& c, int64_t id);
  Outcome<JobView> SetPriority(const Caller& c, int64_t id, const std::string& priority_class);
  // Preempts running job `id` for `reason`, a backend's own need (a node drained for a MIG repartition):
  // its whole group is stopped through the preemption path, as a cycle's preemption (the backend is told
  // "preempted"), and goes back to the queue at its submit-time place; never Succeeded, Failed or
  // Cancelled for it. A job that holds no capacity is left as it is. Admin only. (job_room.h)
  Outcome<JobView> Preempt(const Caller& c, int64_t id, const std::string& reason);
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

  // Nodes (node_room.h), admin only (403 otherwise); unknown or removed names are 404. AddNode takes a node
  // as in the cluster YAML, as JSON text (its leaf and spine must exist). Cordon: nothing new lands there;
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
  // Holds `gpus` whole GPUs of node `name` back from placement (capacity that something outside Tessera,
  // another scheduler's pods, uses now): that many of its GPUs are cordoned one by one, those held already
  // first, then idle ones; its other GPU cordons are lifted. Work on a held GPU keeps running and its
  // capacity is held once it ends. Not stored (a driver sets it again after a restart); no audit entry.
  // Returns the GPUs held (at most the node's). Admin only; 404 for an unknown node. (node_room.h)
  Outcome<int> HoldGpus(const Caller& c, const std::string& name, int gpus);
  // Holds `cpu_milli` and `memory_mib` of node `name`'s host capacity back from placement (what pods outside
  // Tessera use there), replacing the previous hold; what Tessera's tasks use stays theirs (the driver asks
  // again). The node keeps its place: no remove and re-add. Not stored, no audit entry. Returns what is held.
  // Admin only; 404 for an unknown node, 400 for negative amounts. (node_room.h)
  Outcome<std::pair<int64_t, int64_t>> HoldHost(const Caller& c, const std::string& name, int64_t cpu_milli,
                                                int64_t memory_mib);
  // Each node's state by id ("removed" for a tombstone), for the cluster view.
  std::vector<std::string> NodeStates() const;

  std::shared_ptr<const Snapshot> snapshot() const;
  const Counters& counters() const;
  // The cluster as at start (from the store); the live one is snapshot()->cluster->cluster().
  const Cluster& cluster() const { return config_.cluster; }
  const Catalog& catalog() const { return *config_.catalog; }
  const std::vector<PriorityClass>& priority_classes() const { return config_.tenancy.priority_classes; }
  int64_t Now() const { return static_cast<int64_t>(clock_->Now()); }
  // Jobs held in memory: the live ones and the retained ended ones (ServiceConfig::retain_ended_jobs).
  size_t JobsInMemory() const { return book_.InMemory(); }
  // Pending and running jobs per team (every team listed; from the job book, without the driver lock).
  std::map<std::string, std::pair<int64_t, int64_t>> JobCountsByTeam() const;
  // Runs one cycle now and waits until its changes are durable and visible (tests; the cycle thread runs
  // cycles on its own).
  void RunCycleNow();

  // Driving the loop instant by instant on the service's clock (replay/replay.h; background_cycles off):
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
  // The loop's preemption rule asked for a backend's drain (control/loop.h MayPreemptFor): whether the
  // job of slot `victim` may be preempted now for job `for_id` (its first pending replica); nullopt when
  // `victim` holds no grants or `for_id` has no pending replica (the loop has no answer).
  std::optional<bool> MayPreemptFor(JobSlot victim, int64_t for_id) const;
  // The same for a job not submitted (an extender's pod), as `spec` would be submitted to its team's queue;
  // nullopt also when the spec does not build (no such team, a bad field).
  std::optional<bool> MayPreemptFor(JobSlot victim, const JobSpec& spec) const;
  // Running jobs that cannot be evicted now (a backend's disruption budgets refuse it): the cycles after
  // this call choose no victim among them. Replaces the previous set; unknown ids are ignored.
  void SetEvictionBlocked(std::set<int64_t> ids);
  // The nodes (by name) each pending job may go to, for constraints the engine does not model (Kubernetes'
  // node filters, judged by the driver): the cycles after this call place the job only there. Replaces the
  // previous map. A job absent from it may go to any node, or, with `absent_nowhere`, is not considered
  // (no placement, no pending verdict) until a later call names it (a driver that judges every job before
  // it may run); null = any node. Jobs may share one set.
  using NodeNames = std::shared_ptr<const std::set<std::string>>;
  void SetJobNodes(std::map<int64_t, NodeNames> nodes, bool absent_nowhere = false);

 private:
  Service(ServiceConfig config, std::unique_ptr<Store> store, Clock* clock, Backend* backend);

  // The configuration; its tenancy's queues grow under the driver's lock once started.
  ServiceConfig config_;
  std::unique_ptr<Store> store_;
  Clock* clock_;
  Backend* backend_;
  // The rooms, each with its own locks (the order in service_driver.h): usage and cost; teams, users and
  // tokens; the jobs' versions and reads; the loop, the cycle, the nodes and the job writes.
  std::unique_ptr<Chargeback> chargeback_;
  std::unique_ptr<Identity> identity_;
  JobBook book_;
  std::unique_ptr<ServiceDriver> driver_;
  std::mutex stop_mu_;
  bool stopped_ = false;  // under stop_mu_
};

}  // namespace tessera
