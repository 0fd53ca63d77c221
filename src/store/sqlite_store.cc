// SQLite implementation of Store: one connection, owned by a writer thread that group-commits queued
// batches (each in its own savepoint) in one transaction.

#include <fmt/format.h>
#include <pthread.h>
#include <sqlite3.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "store/row_codec.h"
#include "store/store.h"

namespace tessera {

Status Store::WriteAndWait(WriteBatch batch) {
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> f = done->get_future();
  Write(std::move(batch), [done](const Status& st) { done->set_value(st); });
  return f.get();
}

namespace {

// Schema migrations: migration i brings the schema to version i + 1.
const char* const kMigrations[] = {
    R"sql(
CREATE TABLE teams (name TEXT PRIMARY KEY, guaranteed_milli INTEGER NOT NULL, limit_milli INTEGER NOT NULL,
                    over_quota_weight INTEGER NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, team TEXT NOT NULL, role TEXT NOT NULL,
                    token_hash TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL);
CREATE TABLE jobs (id INTEGER PRIMARY KEY, user TEXT NOT NULL, team TEXT NOT NULL, project TEXT NOT NULL,
                   name TEXT NOT NULL, class TEXT NOT NULL, priority_class TEXT NOT NULL, spec TEXT NOT NULL,
                   state TEXT NOT NULL, submitted_at INTEGER NOT NULL, started_at INTEGER NOT NULL,
                   finished_at INTEGER NOT NULL, placements TEXT NOT NULL, message TEXT NOT NULL);
CREATE TABLE job_events (seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id INTEGER NOT NULL, at INTEGER NOT NULL,
                         kind TEXT NOT NULL, detail TEXT NOT NULL);
CREATE INDEX job_events_by_job ON job_events (job_id);
CREATE TABLE idempotency_keys (user TEXT NOT NULL, key TEXT NOT NULL, body_hash TEXT NOT NULL,
                               job_id INTEGER NOT NULL, PRIMARY KEY (user, key));
CREATE TABLE usage (seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id INTEGER NOT NULL, team TEXT NOT NULL,
                    project TEXT NOT NULL, queue TEXT NOT NULL, gpu_kind TEXT NOT NULL, tier INTEGER NOT NULL,
                    pool TEXT NOT NULL, node TEXT NOT NULL, compute_milli INTEGER NOT NULL,
                    memory_milli INTEGER NOT NULL, start_s INTEGER NOT NULL, end_s INTEGER NOT NULL,
                    lost_s INTEGER NOT NULL, usd_per_gpu_hour REAL NOT NULL, list_usd_per_gpu_hour REAL NOT NULL);
CREATE TABLE mig_layouts (node TEXT NOT NULL, gpu_index INTEGER NOT NULL, layout TEXT NOT NULL,
                          PRIMARY KEY (node, gpu_index));
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
)sql",
    // 2: the cluster's nodes (the store holds the cluster after the first start).
    R"sql(
CREATE TABLE nodes (position INTEGER PRIMARY KEY, name TEXT NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL,
                    removed INTEGER NOT NULL, changed_at INTEGER NOT NULL);
)sql",
    // 3: a team's allowed priority classes (JSON list; '' = the default) and version; the audit log.
    R"sql(
ALTER TABLE teams ADD COLUMN allowed_classes TEXT NOT NULL DEFAULT '';
ALTER TABLE teams ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
CREATE TABLE audit (id INTEGER PRIMARY KEY AUTOINCREMENT, time INTEGER NOT NULL, actor TEXT NOT NULL,
                    action TEXT NOT NULL, target TEXT NOT NULL, source TEXT NOT NULL, before TEXT NOT NULL,
                    after TEXT NOT NULL, changed INTEGER NOT NULL);
CREATE INDEX audit_by_target ON audit (target);
)sql",
    // 4: reads of jobs a replica does not keep in memory, by state and by end.
    R"sql(
CREATE INDEX jobs_by_state ON jobs (state);
CREATE INDEX jobs_by_finished ON jobs (finished_at, id);
)sql",
    // 5: usage reads of an interval, by the records' end (a recent interval reads the recent records).
    R"sql(
CREATE INDEX usage_by_end ON usage (end_s);
)sql",
};
constexpr int kSchemaVersion = static_cast<int>(sizeof(kMigrations) / sizeof(kMigrations[0]));

// Creates the database file 0600 if it is missing, and makes an existing one (and its -wal, -shm) 0600.
Status PrivateFiles(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Error(fmt::format("{}: cannot open database: {}", path, std::strerror(errno)));
  const int rc = ::fchmod(fd, 0600);
  ::close(fd);
  if (rc != 0) return Status::Error(fmt::format("{}: cannot make the database 0600: {}", path, std::strerror(errno)));
  for (const char* suffix : {"-wal", "-shm", "-journal"}) (void)::chmod((path + suffix).c_str(), 0600);
  return Status::Ok();
}

// A prepared statement, reset after each use.
class Stmt {
 public:
  Stmt() = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() { sqlite3_finalize(s_); }
  Status Prepare(sqlite3* db, const char* sql) {
    db_ = db;
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s_, nullptr) != SQLITE_OK)
      return Status::Error(fmt::format("prepare '{}': {}", sql, sqlite3_errmsg(db)));
    return Status::Ok();
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& Bind(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }
  Stmt& Bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  // Runs to completion (a write).
  Status Run() {
    const int rc = sqlite3_step(s_);
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
    if (rc != SQLITE_DONE) return Status::Error(sqlite3_errmsg(db_));
    return Status::Ok();
  }
  bool Step() { return sqlite3_step(s_) == SQLITE_ROW; }
  void Reset() { sqlite3_reset(s_); }
  int64_t Int(int c) const { return sqlite3_column_int64(s_, c); }
  double Real(int c) const { return sqlite3_column_double(s_, c); }
  std::string Text(int c) const {
    const unsigned char* t = sqlite3_column_text(s_, c);
    return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(s_, c)) : std::string();
  }

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* s_ = nullptr;
};

constexpr const char* kFindKeySql =
    "SELECT body_hash, job_id FROM idempotency_keys WHERE user = ?1 AND key = ?2";

constexpr const char* kJobColumns =
    "SELECT id, user, team, project, name, class, priority_class, spec, state, submitted_at, started_at, "
    "finished_at, placements, message";

// The job of a row read with kJobColumns.
Result<JobRow> JobOf(const Stmt& q) {
  JobRow j{q.Int(0), q.Text(1), q.Text(2),  q.Text(3),  q.Text(4),  q.Text(5), q.Text(6),
           q.Text(7), q.Text(8), q.Int(9), q.Int(10), q.Int(11), {},        q.Text(13)};
  auto p = DecodePlacements(q.Text(12), j.id);
  if (!p.ok()) return p.status();
  j.placements = std::move(p).value();
  return j;
}

// The usage record of a row read with kUsageColumns.
UsageRecord SqliteUsageOf(const Stmt& q) {
  UsageRecord u;
  u.job_id = q.Int(0);
  u.team = q.Text(1);
  u.project = q.Text(2);
  u.queue = q.Text(3);
  u.gpu_kind = q.Text(4);
  u.tier = static_cast<Tier>(q.Int(5));
  u.pool = q.Text(6);
  u.node = q.Text(7);
  u.compute_milli = static_cast<int32_t>(q.Int(8));
  u.memory_milli = static_cast<int32_t>(q.Int(9));
  u.start_s = q.Int(10);
  u.end_s = q.Int(11);
  u.lost_s = q.Int(12);
  u.usd_per_gpu_hour = q.Real(13);
  u.list_usd_per_gpu_hour = q.Real(14);
  return u;
}

class SqliteStore final : public Store {
 public:
  ~SqliteStore() override {
    Close();
    stmts_.reset();
    key_stmt_.reset();
    if (key_db_) sqlite3_close(key_db_);
    if (db_) sqlite3_close(db_);
  }

  Status Open(const std::string& path) {
    path_ = path;
    if (path != ":memory:" && !path.empty())
      if (Status st = PrivateFiles(path); !st.ok()) return st;
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK)
      return Status::Error(fmt::format("{}: cannot open database: {}", path, db_ ? sqlite3_errmsg(db_) : "?"));
    sqlite3_busy_timeout(db_, 5000);
    for (const char* p : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"})
      if (Status st = Exec(p); !st.ok()) return st;
    if (Status st = Migrate(); !st.ok()) return st;
    stmts_ = std::make_unique<Statements>();
    if (Status st = stmts_->Prepare(db_); !st.ok()) return Status::Error(path + ": " + st.message());
    if (Status st = StartCheckpointer(); !st.ok()) return st;
    writer_ = std::thread([this] { WriterLoop(); });
    return Status::Ok();
  }

  // WAL checkpoints run on a connection of their own, on their own thread (PASSIVE: they never block the
  // writer), instead of inside the commit that crosses the WAL's size limit, which held back every request
  // of its group (commits of 8-12 ms were timed under load, most likely these). Durability is the WAL's
  // (synchronous=FULL), as before.
  Status StartCheckpointer() {
    if (sqlite3_open_v2(path_.c_str(), &ckpt_db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) !=
        SQLITE_OK)
      return Status::Error(
          fmt::format("{}: cannot open database: {}", path_, ckpt_db_ ? sqlite3_errmsg(ckpt_db_) : "?"));
    sqlite3_busy_timeout(ckpt_db_, 5000);
    // A fresh connection knows the file is in WAL mode only once it has read it (else checkpoints are
    // no-ops).
    char* err = nullptr;
    if (sqlite3_exec(ckpt_db_, "PRAGMA journal_mode=WAL", nullptr, nullptr, &err) != SQLITE_OK) {
      Status st =
          Status::Error(fmt::format("{}: {}", path_, err ? err : "cannot open the checkpoint connection"));
      sqlite3_free(err);
      return st;
    }
    if (Status st = Exec("PRAGMA wal_autocheckpoint=0"); !st.ok()) return st;
    sqlite3_wal_hook(
        db_,
        [](void* self, sqlite3*, const char*, int pages) {
          static_cast<SqliteStore*>(self)->OnWalCommit(pages);
          return SQLITE_OK;
        },
        this);
    checkpointer_ = std::thread([this] { CheckpointLoop(); });
    return Status::Ok();
  }

  // The WAL hook, on the writer thread after each commit, with the WAL's size in pages. Asks the
  // checkpointer once at the limit and once half-way to twice it (not after every commit: the WAL stays
  // above the limit until it is reset, and each checkpoint ends in an fsync); at twice the limit the writer
  // finishes one itself (see WriterLoop).
  void OnWalCommit(int pages) {
    if (pages < ckpt_asked_at_) ckpt_asked_at_ = 0;  // the WAL was reset
    if (pages >= kCheckpointPages && pages >= ckpt_asked_at_ + kCheckpointPages / 2) {
      ckpt_asked_at_ = pages;
      RequestCheckpoint();
    }
    if (pages >= 2 * kCheckpointPages) writer_checkpoint_due_ = true;
  }

  void RequestCheckpoint() {
    std::lock_guard<std::mutex> lock(ckpt_mu_);
    ckpt_wanted_ = true;
    ckpt_cv_.notify_one();
  }

  void CheckpointLoop() {
    pthread_setname_np(pthread_self(), "tessera-ckpt");
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(ckpt_mu_);
        ckpt_cv_.wait(lock, [&] { return ckpt_wanted_ || ckpt_stop_; });
        if (ckpt_stop_) return;
        ckpt_wanted_ = false;
      }
      // Busy (another checkpoint, or a reader pinning frames) only postpones it to the next request.
      (void)sqlite3_wal_checkpoint_v2(ckpt_db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    }
  }

  void StopCheckpointer() {
    {
      std::lock_guard<std::mutex> lock(ckpt_mu_);
      ckpt_stop_ = true;
      ckpt_cv_.notify_one();
    }
    if (checkpointer_.joinable()) checkpointer_.join();
    if (ckpt_db_) sqlite3_close(ckpt_db_);
    ckpt_db_ = nullptr;
  }

  // The connection key reads go to (opened at its first use). REQUIRES: key_mu_ held.
  Status OpenKeyReader() {
    if (sqlite3_open_v2(path_.c_str(), &key_db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) !=
        SQLITE_OK) {
      Status st =
          Status::Error(fmt::format("cannot open database: {}", key_db_ ? sqlite3_errmsg(key_db_) : "?"));
      sqlite3_close(key_db_);
      key_db_ = nullptr;
      return st;
    }
    sqlite3_busy_timeout(key_db_, 5000);
    key_stmt_ = std::make_unique<Stmt>();
    return key_stmt_->Prepare(key_db_, kFindKeySql);
  }

  int schema_version() const override { return version_; }

  using Store::Load;
  Result<StoredState> Load(const LoadLimits& limits) override {
    std::lock_guard<std::mutex> db_lock(db_mu_);
    const std::string jobs = LoadedJobsCondition(limits);
    StoredState s;
    s.schema_version = version_;
    Status st = Query(
        "SELECT name, guaranteed_milli, limit_milli, over_quota_weight, created_at, allowed_classes, version FROM teams",
        [&](Stmt& q) {
          s.teams.push_back({q.Text(0), q.Int(1), q.Int(2), static_cast<int>(q.Int(3)), q.Int(4),
                             DecodeClasses(q.Text(5)), static_cast<uint64_t>(q.Int(6))});
          return Status::Ok();
        });
    if (st.ok())
      st = Query("SELECT id, name, team, role, token_hash, created_at FROM users ORDER BY id", [&](Stmt& q) {
        s.users.push_back({q.Int(0), q.Text(1), q.Text(2), q.Text(3), q.Text(4), q.Int(5)});
        return Status::Ok();
      });
    if (st.ok())
      st = Query(
          (std::string(kJobColumns) + " FROM jobs WHERE " + jobs + " ORDER BY id").c_str(), [&](Stmt& q) {
            auto j = JobOf(q);
            if (!j.ok()) return j.status();
            s.jobs.push_back(std::move(j).value());
            return Status::Ok();
          });
    if (st.ok())
      st = Query("SELECT COALESCE(MAX(id), 0) FROM jobs", [&](Stmt& q) {
        s.max_job_id = q.Int(0);
        return Status::Ok();
      });
    if (st.ok() && limits.history)
      st = Query("SELECT user, key, body_hash, job_id FROM idempotency_keys", [&](Stmt& q) {
        s.keys.push_back({q.Text(0), q.Text(1), q.Text(2), q.Int(3)});
        return Status::Ok();
      });
    if (st.ok() && limits.history)
      st = Query((std::string(kUsageColumns) + " FROM usage ORDER BY seq").c_str(), [&](Stmt& q) {
        s.usage.push_back(SqliteUsageOf(q));
        return Status::Ok();
      });
    if (st.ok())
      st = Query("SELECT node, gpu_index, layout FROM mig_layouts", [&](Stmt& q) {
        s.layouts.push_back({q.Text(0), static_cast<int>(q.Int(1)), q.Text(2)});
        return Status::Ok();
      });
    if (st.ok())
      st = Query("SELECT position, name, spec, state, removed, changed_at FROM nodes ORDER BY position", [&](Stmt& q) {
        s.nodes.push_back({static_cast<int>(q.Int(0)), q.Text(1), q.Text(2), q.Text(3), q.Int(4) != 0, q.Int(5)});
        return Status::Ok();
      });
    if (st.ok())
      st = Query("SELECT key, value FROM meta", [&](Stmt& q) {
        s.meta[q.Text(0)] = q.Text(1);
        return Status::Ok();
      });
    if (!st.ok()) return Status::Error(fmt::format("{}: {}", path_, st.message()));
    return s;
  }

  Result<std::vector<JobRow>> ReadJobs(const JobRowQuery& jq, int64_t* total) override {
    const JobsSql sql = BuildJobsSql(jq, /*postgres=*/false);
    std::lock_guard<std::mutex> db_lock(db_mu_);
    auto run = [&](const std::string& text, const std::function<Status(Stmt&)>& row) {
      Stmt q;
      if (Status st = q.Prepare(db_, text.c_str()); !st.ok()) return st;
      for (size_t i = 0; i < sql.params.size(); ++i) q.Bind(static_cast<int>(i + 1), sql.params[i]);
      while (q.Step())
        if (Status st = row(q); !st.ok()) return st;
      return Status::Ok();
    };
    std::vector<JobRow> out;
    Status st = run(std::string(kJobColumns) + " FROM jobs WHERE " + sql.with_cursor + " " + sql.order_limit,
                    [&](Stmt& q) {
                      auto j = JobOf(q);
                      if (!j.ok()) return j.status();
                      out.push_back(std::move(j).value());
                      return Status::Ok();
                    });
    if (st.ok() && total != nullptr)
      st = run("SELECT COUNT(*) FROM jobs WHERE " + sql.filters, [&](Stmt& q) {
        *total = q.Int(0);
        return Status::Ok();
      });
    if (!st.ok()) return Status::Error(path_ + ": " + st.message());
    return out;
  }

  Result<UsageReadResult> ReadUsage(const UsageRead& r) override {
    std::lock_guard<std::mutex> db_lock(db_mu_);
    UsageReadResult out;
    out.last_seq = r.through_seq;
    Status st = out.last_seq >= 0 ? Status::Ok() : Query(kLastUsageSeqSql, [&](Stmt& q) {
      out.last_seq = q.Int(0);
      return Status::Ok();
    });
    const bool summed = !r.cuts.empty();
    Stmt q;
    if (st.ok()) st = q.Prepare(db_, UsageReadSql(summed ? &r.key : nullptr, false).c_str());
    for (const auto& [lo, hi] : UsageReadSpans(r)) {
      if (!st.ok()) break;
      q.Reset();
      q.Bind(1, lo).Bind(2, hi).Bind(3, r.after_seq).Bind(4, out.last_seq);
      while (q.Step()) {
        if (!summed)
          out.records.push_back(SqliteUsageOf(q));
        else
          out.records.push_back(
              SummedUsageOf([&](int c) { return q.Int(c); }, [&](int c) { return q.Text(c); }));
      }
    }
    if (!st.ok()) return Status::Error(path_ + ": " + st.message());
    if (summed) out.records = SumUsage(out.records, r.cuts, r.key);
    return out;
  }

  // On a connection of its own (a file's): a submission's look-up never waits for the writer's commit.
  Result<std::optional<IdempotencyRow>> FindKey(const std::string& user, const std::string& key) override {
    std::optional<IdempotencyRow> out;
    Status st = OnKeyReader([&](sqlite3*, Stmt& find) {
      find.Bind(1, user).Bind(2, key);
      if (find.Step()) out = IdempotencyRow{user, key, find.Text(0), find.Int(1)};
      find.Reset();
      return Status::Ok();
    });
    if (!st.ok()) return st;
    return out;
  }

  Result<std::vector<std::pair<std::string, std::string>>> ReadKeyNames(const std::string& after_user,
                                                                        const std::string& after_key,
                                                                        int limit) override {
    std::vector<std::pair<std::string, std::string>> out;
    Status st = OnKeyReader([&](sqlite3* db, Stmt&) {
      Stmt q;
      if (Status p = q.Prepare(db,
                               "SELECT user, key FROM idempotency_keys WHERE (user, key) > (?1, ?2) "
                               "ORDER BY user, key LIMIT ?3");
          !p.ok())
        return p;
      q.Bind(1, after_user).Bind(2, after_key).Bind(3, int64_t{limit});
      while (q.Step()) out.emplace_back(q.Text(0), q.Text(1));
      return Status::Ok();
    });
    if (!st.ok()) return st;
    return out;
  }

  // Runs `read(db, find_key_statement)` on the key reader's connection (a file's own, opened at the first
  // use, so that key reads never wait for the writer's commit), or on the main one for an in-memory store.
  Status OnKeyReader(const std::function<Status(sqlite3*, Stmt&)>& read) {
    if (path_.empty() || path_ == ":memory:") {
      std::lock_guard<std::mutex> db_lock(db_mu_);
      Stmt q;
      Status st = q.Prepare(db_, kFindKeySql);
      if (st.ok()) st = read(db_, q);
      return st.ok() ? st : Status::Error(path_ + ": " + st.message());
    }
    std::lock_guard<std::mutex> lock(key_mu_);
    if (key_db_ == nullptr || key_stmt_ == nullptr) {
      if (Status st = OpenKeyReader(); !st.ok()) {
        key_stmt_.reset();
        if (key_db_) sqlite3_close(key_db_);
        key_db_ = nullptr;
        return Status::Error(path_ + ": " + st.message());
      }
    }
    Status st = read(key_db_, *key_stmt_);
    return st.ok() ? st : Status::Error(path_ + ": " + st.message());
  }

  Result<std::vector<AuditRow>> ReadAudit(const AuditQuery& aq, bool* more) override {
    std::lock_guard<std::mutex> db_lock(db_mu_);
    Stmt q;
    if (Status st = q.Prepare(db_,
                              "SELECT id, time, actor, action, target, source, before, after, changed FROM audit "
                              "WHERE id > ?1 AND time >= ?2 AND (?3 = '' OR actor = ?3) AND (?4 = '' OR target = ?4) "
                              "AND (?5 = '' OR action = ?5) ORDER BY id LIMIT ?6");
        !st.ok())
      return Status::Error(path_ + ": " + st.message());
    q.Bind(1, aq.after_id).Bind(2, aq.since).Bind(3, aq.actor).Bind(4, aq.target).Bind(5, aq.action);
    q.Bind(6, int64_t{aq.limit} + 1);
    std::vector<AuditRow> out;
    while (q.Step())
      out.push_back({q.Int(0), q.Int(1), q.Text(2), q.Text(3), q.Text(4), q.Text(5), q.Text(6), q.Text(7), q.Int(8) != 0});
    *more = static_cast<int>(out.size()) > aq.limit;
    if (*more) out.pop_back();
    return out;
  }

  void Write(WriteBatch batch, Done done) override {
    {
      std::lock_guard<std::mutex> lock(q_mu_);
      if (!closed_) {
        queue_.push_back({std::move(batch), std::move(done)});
        q_cv_.notify_one();
        return;
      }
    }
    done(Status::Error(path_ + ": store is closed"));
  }

  void Close() override {
    {
      std::lock_guard<std::mutex> lock(q_mu_);
      if (closed_) return;
      closed_ = true;
      q_cv_.notify_one();
    }
    if (writer_.joinable()) writer_.join();
    StopCheckpointer();
  }

 private:
  struct Queued {
    WriteBatch batch;
    Done done;
  };

  struct Statements {
    Stmt team, user, job, event, key, usage, layout, node, meta, audit, savepoint, release, rollback_to;
    Stmt begin, commit, rollback;
    Status Prepare(sqlite3* db) {
      const std::pair<Stmt*, const char*> all[] = {
          {&team, "INSERT OR REPLACE INTO teams VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"},
          {&audit, "INSERT INTO audit (time, actor, action, target, source, before, after, changed) VALUES "
                   "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"},
          {&user, "INSERT OR REPLACE INTO users VALUES (?1, ?2, ?3, ?4, ?5, ?6)"},
          {&job, "INSERT OR REPLACE INTO jobs VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"},
          {&event, "INSERT INTO job_events (job_id, at, kind, detail) VALUES (?1, ?2, ?3, ?4)"},
          {&key, "INSERT INTO idempotency_keys VALUES (?1, ?2, ?3, ?4)"},
          {&usage,
           "INSERT INTO usage (job_id, team, project, queue, gpu_kind, tier, pool, node, compute_milli, memory_milli, "
           "start_s, end_s, lost_s, usd_per_gpu_hour, list_usd_per_gpu_hour) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
           "?9, ?10, ?11, ?12, ?13, ?14, ?15)"},
          {&layout, "INSERT OR REPLACE INTO mig_layouts VALUES (?1, ?2, ?3)"},
          {&node, "INSERT OR REPLACE INTO nodes VALUES (?1, ?2, ?3, ?4, ?5, ?6)"},
          {&meta, "INSERT OR REPLACE INTO meta VALUES (?1, ?2)"},
          {&savepoint, "SAVEPOINT batch"},
          {&release, "RELEASE batch"},
          {&rollback_to, "ROLLBACK TO batch"},
          {&begin, "BEGIN IMMEDIATE"},
          {&commit, "COMMIT"},
          {&rollback, "ROLLBACK"},
      };
      for (const auto& [s, sql] : all)
        if (Status st = s->Prepare(db, sql); !st.ok()) return st;
      return Status::Ok();
    }
  };

  Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string m = fmt::format("{}: {}: {}", path_, sql, err ? err : "error");
      sqlite3_free(err);
      return Status::Error(m);
    }
    return Status::Ok();
  }

  Status Query(const char* sql, const std::function<Status(Stmt&)>& row) {
    Stmt q;
    if (Status st = q.Prepare(db_, sql); !st.ok()) return st;
    while (q.Step())
      if (Status st = row(q); !st.ok()) return st;
    return Status::Ok();
  }

  Status Migrate() {
    if (Status st = Exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                         "applied_at INTEGER NOT NULL)");
        !st.ok())
      return st;
    version_ = 0;
    if (Status st = Query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
                          [&](Stmt& q) {
                            version_ = static_cast<int>(q.Int(0));
                            return Status::Ok();
                          });
        !st.ok())
      return st;
    if (version_ > kSchemaVersion)
      return Status::Error(fmt::format("{}: schema version {} is newer than this tessera ({})", path_, version_,
                                       kSchemaVersion));
    for (int v = version_; v < kSchemaVersion; ++v) {
      if (Status st = Exec("BEGIN IMMEDIATE"); !st.ok()) return st;
      Status st = Exec(kMigrations[v]);
      if (st.ok())
        st = Exec(fmt::format("INSERT INTO schema_migrations VALUES ({}, strftime('%s','now'))", v + 1).c_str());
      if (!st.ok()) {
        (void)Exec("ROLLBACK");
        return st;
      }
      if (Status c = Exec("COMMIT"); !c.ok()) return c;
      version_ = v + 1;
    }
    return Status::Ok();
  }

  Status Apply(const WriteBatch& b) {
    Statements& s = *stmts_;
    for (const TeamRow& t : b.teams)
      if (Status st = s.team.Bind(1, t.name).Bind(2, t.guaranteed_milli).Bind(3, t.limit_milli)
                          .Bind(4, int64_t{t.over_quota_weight}).Bind(5, t.created_at)
                          .Bind(6, EncodeClasses(t.allowed_classes)).Bind(7, static_cast<int64_t>(t.version)).Run();
          !st.ok())
        return Status::Error("team '" + t.name + "': " + st.message());
    for (const UserRow& u : b.users)
      if (Status st = s.user.Bind(1, u.id).Bind(2, u.name).Bind(3, u.team).Bind(4, u.role).Bind(5, u.token_hash)
                          .Bind(6, u.created_at).Run();
          !st.ok())
        return Status::Error("user '" + u.name + "': " + st.message());
    for (const JobRow& j : b.jobs)
      if (Status st = s.job.Bind(1, j.id).Bind(2, j.user).Bind(3, j.team).Bind(4, j.project).Bind(5, j.name)
                          .Bind(6, j.cls).Bind(7, j.priority_class).Bind(8, j.spec_json).Bind(9, j.state)
                          .Bind(10, j.submitted_at).Bind(11, j.started_at).Bind(12, j.finished_at)
                          .Bind(13, EncodePlacements(j.placements)).Bind(14, j.message).Run();
          !st.ok())
        return Status::Error(fmt::format("job {}: {}", j.id, st.message()));
    for (const JobEventRow& e : b.events)
      if (Status st = s.event.Bind(1, e.job_id).Bind(2, e.at).Bind(3, e.kind).Bind(4, e.detail).Run(); !st.ok())
        return Status::Error(fmt::format("job {} event: {}", e.job_id, st.message()));
    for (const IdempotencyRow& k : b.keys)
      if (Status st = s.key.Bind(1, k.user).Bind(2, k.key).Bind(3, k.body_hash).Bind(4, k.job_id).Run(); !st.ok())
        return Status::Error(fmt::format("idempotency key '{}': {}", k.key, st.message()));
    for (const UsageRecord& u : b.usage)
      if (Status st = s.usage.Bind(1, u.job_id).Bind(2, u.team).Bind(3, u.project).Bind(4, u.queue)
                          .Bind(5, u.gpu_kind).Bind(6, int64_t{static_cast<int>(u.tier)}).Bind(7, u.pool)
                          .Bind(8, u.node).Bind(9, int64_t{u.compute_milli}).Bind(10, int64_t{u.memory_milli})
                          .Bind(11, u.start_s).Bind(12, u.end_s).Bind(13, u.lost_s).Bind(14, u.usd_per_gpu_hour)
                          .Bind(15, u.list_usd_per_gpu_hour).Run();
          !st.ok())
        return Status::Error(fmt::format("usage of job {}: {}", u.job_id, st.message()));
    for (const MigLayoutRow& l : b.layouts)
      if (Status st = s.layout.Bind(1, l.node).Bind(2, int64_t{l.gpu_index}).Bind(3, l.layout).Run(); !st.ok())
        return Status::Error("MIG layout: " + st.message());
    for (const NodeRow& n : b.nodes)
      if (Status st = s.node.Bind(1, int64_t{n.position}).Bind(2, n.name).Bind(3, n.spec_json).Bind(4, n.state)
                          .Bind(5, int64_t{n.removed ? 1 : 0}).Bind(6, n.changed_at).Run();
          !st.ok())
        return Status::Error("node '" + n.name + "': " + st.message());
    for (const auto& [k, v] : b.meta)
      if (Status st = s.meta.Bind(1, k).Bind(2, v).Run(); !st.ok()) return Status::Error("meta: " + st.message());
    for (const AuditRow& a : b.audit)
      if (Status st = s.audit.Bind(1, a.time).Bind(2, a.actor).Bind(3, a.action).Bind(4, a.target).Bind(5, a.source)
                          .Bind(6, a.before).Bind(7, a.after).Bind(8, int64_t{a.changed}).Run();
          !st.ok())
        return Status::Error("audit: " + st.message());
    return Status::Ok();
  }

  // One transaction for the whole group, without savepoints; should a batch fail, the group again with
  // each batch in a savepoint, so that the failed one alone is rolled back. The per-batch results go to
  // `results`; the commit's status is returned.
  Status CommitGroup(const std::deque<Queued>& group, std::vector<Status>* results) {
    Statements& s = *stmts_;
    Status commit = s.begin.Run();
    bool failed = false;
    for (size_t i = 0; commit.ok() && !failed && i < group.size(); ++i) failed = !Apply(group[i].batch).ok();
    if (commit.ok() && failed) {
      (void)s.rollback.Run();
      commit = s.begin.Run();
      for (size_t i = 0; commit.ok() && i < group.size(); ++i) {
        (void)s.savepoint.Run();
        (*results)[i] = Apply(group[i].batch);
        if (!(*results)[i].ok()) (void)s.rollback_to.Run();
        (void)s.release.Run();
      }
    }
    if (commit.ok()) commit = s.commit.Run();
    if (!commit.ok()) (void)s.rollback.Run();
    return commit;
  }

  // Takes everything queued, commits it as one transaction (CommitGroup), then reports.
  void WriterLoop() {
    pthread_setname_np(pthread_self(), "tessera-writer");
    for (;;) {
      std::deque<Queued> group;
      {
        std::unique_lock<std::mutex> lock(q_mu_);
        q_cv_.wait(lock, [&] { return closed_ || !queue_.empty(); });
        if (queue_.empty()) return;
        group.swap(queue_);
      }
      std::vector<Status> results(group.size());
      Status commit;
      {
        std::lock_guard<std::mutex> db_lock(db_mu_);
        commit = CommitGroup(group, &results);
      }
      for (size_t i = 0; i < group.size(); ++i) group[i].done(commit.ok() ? results[i] : commit);
      // Under a steady stream of commits a background checkpoint never catches up with the WAL's end, and
      // the WAL is reset only once every frame is in the database: at twice the size, the writer finishes
      // the checkpoint itself (most frames are already copied), after answering its group.
      if (writer_checkpoint_due_) {
        writer_checkpoint_due_ = false;
        std::lock_guard<std::mutex> db_lock(db_mu_);
        (void)sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
      }
    }
  }

  std::string path_;
  sqlite3* db_ = nullptr;
  int version_ = 0;
  std::unique_ptr<Statements> stmts_;
  std::mutex db_mu_;  // the connection: the writer, or Load
  std::mutex key_mu_;  // FindKey's connection and statement
  sqlite3* key_db_ = nullptr;
  std::unique_ptr<Stmt> key_stmt_;
  std::mutex q_mu_;
  std::condition_variable q_cv_;
  std::deque<Queued> queue_;
  bool closed_ = false;
  std::thread writer_;
  static constexpr int kCheckpointPages = 1000;  // SQLite's default autocheckpoint size
  sqlite3* ckpt_db_ = nullptr;                   // the checkpointer's connection
  std::mutex ckpt_mu_;
  std::condition_variable ckpt_cv_;
  bool ckpt_wanted_ = false, ckpt_stop_ = false;
  // The writer thread only (the WAL hook runs in its commits).
  bool writer_checkpoint_due_ = false;
  int ckpt_asked_at_ = 0;  // WAL pages when the checkpointer was last asked
  std::thread checkpointer_;
};

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path) {
  auto s = std::make_unique<SqliteStore>();
  if (Status st = s->Open(path); !st.ok()) return st;
  return std::unique_ptr<Store>(std::move(s));
}

}  // namespace tessera
