#pragma once
// Store: Tessera's durable state behind one interface (SQLite now; another database later). It holds
// teams, users (token hashes only), the cluster's nodes, jobs with their event history and placements, MIG
// layouts, the usage
// ledger, idempotency keys and the schema version.
//
// Contract:
//  - Load() returns everything stored, for a process that rebuilds its state at start; Load(limits) leaves
//    out the ended jobs (Succeeded, Failed, Cancelled) beyond the most recently ended `retain_ended` (every
//    idempotency key is loaded: a replay names its job even when the job is not), unless limits.history is
//    false: then no usage record and no idempotency key is loaded (ReadUsage and FindKey read them where
//    needed). ReadJobs reads any job later (a replica keeps only some in memory).
//  - Write(batch, done) is one state change: all of the batch or none of it becomes durable. Batches are
//    applied in the order Write was called; `done` runs (on the store's writer thread) only after the
//    transaction holding the batch committed durably, or with the error that rejected it. Concurrent
//    batches may share one transaction (group commit), each inside its own savepoint.
//  - Close() commits what was queued and stops the writer; later writes fail.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cost/ledger.h"
#include "sched/placement.h"

namespace tessera {

struct TeamRow {
  std::string name;
  int64_t guaranteed_milli = 0;  // GPU units in thousandths
  int64_t limit_milli = -1;      // -1 = no limit
  int over_quota_weight = 1;
  int64_t created_at = 0;        // service time, Unix seconds
  // Priority classes the team's jobs may use; nullopt = the default (every class but production-inference).
  std::optional<std::vector<std::string>> allowed_classes;
  uint64_t version = 1;          // +1 on every change (the team's ETag)
};

struct UserRow {
  int64_t id = 0;
  std::string name;
  std::string team;          // empty for an admin without a team
  std::string role;          // admin, team-lead, member, viewer
  std::string token_hash;    // hex SHA-256 of the bearer token
  int64_t created_at = 0;
};

struct JobRow {
  int64_t id = 0;
  std::string user;
  std::string team;
  std::string project;
  std::string name;
  std::string cls;               // workload class name
  std::string priority_class;
  std::string spec_json;         // the workload entry as accepted (normalised JSON)
  std::string state;             // Pending, Running, Succeeded, Failed, Cancelled
  int64_t submitted_at = 0;
  int64_t started_at = -1;       // -1 = not started (or requeued)
  int64_t finished_at = -1;
  std::vector<TaskPlacement> placements;  // where it runs (nodes and GPUs as dense ids of the cluster)
  std::string message;           // why it ended or was requeued
};

struct JobEventRow {
  int64_t job_id = 0;
  int64_t at = 0;
  std::string kind;    // Submitted, Started, Preempted, Succeeded, Failed, Cancelled, PriorityChanged
  std::string detail;
};

struct IdempotencyRow {
  std::string user;
  std::string key;
  std::string body_hash;
  int64_t job_id = 0;
};

// The MIG layout of one GPU: its instances as "profile@start" joined by commas ("" = MIG off).
struct MigLayoutRow {
  std::string node;
  int gpu_index = 0;
  std::string layout;
};

// One node of the cluster. After the first start the cluster lives in the store (the configuration only
// seeds an empty one). `position` is the node's dense id in the cluster (placements name nodes and GPUs by
// these ids): a removed node stays as a tombstone at its position, so no id shifts across a restart.
struct NodeRow {
  int position = 0;
  std::string name;
  std::string spec_json;  // the node as in the cluster YAML, as JSON
  std::string state;      // ready, cordoned, draining, drained, unhealthy
  bool removed = false;
  int64_t changed_at = 0;
};

// One entry of the audit log: who changed what, when, from where; before and after as JSON text.
struct AuditRow {
  int64_t id = 0;          // assigned by the store, increasing
  int64_t time = 0;        // service time, Unix seconds
  std::string actor, action, target, source;
  std::string before, after;  // JSON ("" = none)
  bool changed = true;     // false: the request changed nothing (a no-op)
};

struct AuditQuery {
  std::string actor, target, action;  // "" = any
  int64_t since = -1;                 // time >= since
  int64_t after_id = 0;               // id > after_id (the cursor)
  int limit = 100;
};

struct StoredState {
  int schema_version = 0;
  int64_t max_job_id = 0;               // the highest job id stored (loaded or not)
  std::vector<TeamRow> teams;
  std::vector<UserRow> users;
  std::vector<JobRow> jobs;             // by id
  std::vector<IdempotencyRow> keys;
  std::vector<UsageRecord> usage;       // in the order written
  std::vector<MigLayoutRow> layouts;
  std::vector<NodeRow> nodes;           // by position
  std::map<std::string, std::string> meta;
};

// What Load leaves out: ended jobs beyond the `retain_ended` most recently ended (by finished_at, then id).
// Negative: nothing left out.
// `history` false: the usage records and idempotency keys are left out (they grow with the history).
struct LoadLimits {
  int64_t retain_ended = -1;
  bool history = true;
};

// A read of stored jobs: the filters (empty = any), the order and a keyset cursor, at most `limit` rows.
struct JobRowQuery {
  int64_t id = 0;                   // > 0: that job alone
  std::vector<std::string> states;  // state names; empty = any
  std::string team, project;
  // Lower-case text: a substring of the lower-cased name, project or user, or the job's id in decimal.
  std::string search;
  // The order: "id" ascending, or newest first by "submitted_at", "started_at", "finished_at" (then id).
  std::string order = "id";
  // Resume after the row with this sort key and id.
  bool has_after = false;
  int64_t after_key = 0, after_id = 0;
  int limit = 100;
};

// A read of usage records: those meeting [from, to) (end_s > from and start_s < to) written after record
// number `after_seq` and up to number `through_seq` (-1: the last one written), either as written (no cuts)
// or summed as SumUsage (cost/ledger.h) sums them with `cuts` and `key`, in SumUsage's order.
struct UsageRead {
  int64_t from = 0, to = 0;
  int64_t after_seq = 0, through_seq = -1;
  std::vector<int64_t> cuts;  // empty: the records as written, in the order written
  UsageSumKey key;
};

struct UsageReadResult {
  std::vector<UsageRecord> records;
  // The number of the last record written when the read was made (or `through_seq`): a later read with
  // after_seq = last_seq gets exactly those written since. Records are numbered in the order their writes
  // commit.
  int64_t last_seq = 0;
};

// One state change. Teams, users and jobs are upserted by name / id, nodes by position; events, keys and
// usage appended.
struct WriteBatch {
  std::vector<TeamRow> teams;
  std::vector<UserRow> users;
  std::vector<JobRow> jobs;
  std::vector<JobEventRow> events;
  std::vector<IdempotencyRow> keys;
  std::vector<UsageRecord> usage;
  std::vector<MigLayoutRow> layouts;
  std::vector<NodeRow> nodes;
  std::map<std::string, std::string> meta;
  std::vector<AuditRow> audit;

  bool empty() const {
    return teams.empty() && users.empty() && jobs.empty() && events.empty() && keys.empty() && usage.empty() &&
           layouts.empty() && nodes.empty() && meta.empty() && audit.empty();
  }
};

class Store {
 public:
  using Done = std::function<void(const Status&)>;
  virtual ~Store() = default;
  Result<StoredState> Load() { return Load(LoadLimits{}); }
  virtual Result<StoredState> Load(const LoadLimits& limits) = 0;
  // The jobs matching `q` in its order, at most q.limit; `total` (may be null) gets how many match the
  // filters, the cursor aside.
  virtual Result<std::vector<JobRow>> ReadJobs(const JobRowQuery& q, int64_t* total) = 0;
  // The usage records `q` names, as written or summed (a summed read's memory follows its groups, not the
  // records: the database sums them).
  virtual Result<UsageReadResult> ReadUsage(const UsageRead& q) = 0;
  // The idempotency key (user, key) as stored, or nullopt.
  virtual Result<std::optional<IdempotencyRow>> FindKey(const std::string& user, const std::string& key) = 0;
  // At most `limit` stored keys' (user, key) after (after_user, after_key) in (user, key) order: a scan of
  // every key in pages (start from two empty strings), for a filter of the keys not held in memory.
  virtual Result<std::vector<std::pair<std::string, std::string>>> ReadKeyNames(const std::string& after_user,
                                                                                const std::string& after_key,
                                                                                int limit) = 0;
  virtual void Write(WriteBatch batch, Done done) = 0;
  virtual void Close() = 0;
  virtual int schema_version() const = 0;
  // Audit entries matching `q`, by id; `more` is set when further ones match.
  virtual Result<std::vector<AuditRow>> ReadAudit(const AuditQuery& q, bool* more) = 0;
  // Write, then wait for its commit.
  Status WriteAndWait(WriteBatch batch);
};

// Opens (creating if needed) a SQLite database in WAL mode with synchronous=FULL and brings its schema up
// to date through the migrations table. The file (and so its -wal and -shm, which SQLite creates with the
// database's mode) is made 0600. The error names the path and the problem.
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path);

// A read-only view of `base` (which must outlive it): Load, ReadAudit and schema_version are base's, every
// Write is refused with `why` (on the view's own thread, as every store answers), Close leaves base open. A
// replica that follows another builds its view of the state on one.
std::unique_ptr<Store> ReadOnlyView(Store* base, std::string why);

}  // namespace tessera
