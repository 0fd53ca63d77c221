// PostgreSQL implementation of Store (postgres_store.h): one connection, owned by a writer thread that
// group-commits queued batches (each in its own savepoint) in one transaction, fenced by the lease's epoch;
// and the leader lease on a connection of its own.

#include "store/postgres_store.h"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <pthread.h>

#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "store/pg_arrays.h"
#include "store/row_codec.h"

namespace tessera {
namespace {

// Schema migrations: migration i brings the schema to version i + 1.
const char* const kPgMigrations[] = {
    R"sql(
CREATE TABLE teams (name TEXT PRIMARY KEY, guaranteed_milli BIGINT NOT NULL, limit_milli BIGINT NOT NULL,
                    over_quota_weight BIGINT NOT NULL, created_at BIGINT NOT NULL,
                    allowed_classes TEXT NOT NULL DEFAULT '', version BIGINT NOT NULL DEFAULT 1);
CREATE TABLE users (id BIGINT PRIMARY KEY, name TEXT NOT NULL UNIQUE, team TEXT NOT NULL, role TEXT NOT NULL,
                    token_hash TEXT NOT NULL UNIQUE, created_at BIGINT NOT NULL);
CREATE TABLE jobs (id BIGINT PRIMARY KEY, "user" TEXT NOT NULL, team TEXT NOT NULL, project TEXT NOT NULL,
                   name TEXT NOT NULL, class TEXT NOT NULL, priority_class TEXT NOT NULL, spec TEXT NOT NULL,
                   state TEXT NOT NULL, submitted_at BIGINT NOT NULL, started_at BIGINT NOT NULL,
                   finished_at BIGINT NOT NULL, placements TEXT NOT NULL, message TEXT NOT NULL);
CREATE TABLE job_events (seq BIGSERIAL PRIMARY KEY, job_id BIGINT NOT NULL, at BIGINT NOT NULL,
                         kind TEXT NOT NULL, detail TEXT NOT NULL);
CREATE INDEX job_events_by_job ON job_events (job_id);
CREATE TABLE idempotency_keys ("user" TEXT NOT NULL, key TEXT NOT NULL, body_hash TEXT NOT NULL,
                               job_id BIGINT NOT NULL, PRIMARY KEY ("user", key));
CREATE TABLE usage (seq BIGSERIAL PRIMARY KEY, job_id BIGINT NOT NULL, team TEXT NOT NULL,
                    project TEXT NOT NULL, queue TEXT NOT NULL, gpu_kind TEXT NOT NULL, tier BIGINT NOT NULL,
                    pool TEXT NOT NULL, node TEXT NOT NULL, compute_milli BIGINT NOT NULL,
                    memory_milli BIGINT NOT NULL, start_s BIGINT NOT NULL, end_s BIGINT NOT NULL,
                    lost_s BIGINT NOT NULL, usd_per_gpu_hour DOUBLE PRECISION NOT NULL,
                    list_usd_per_gpu_hour DOUBLE PRECISION NOT NULL);
CREATE TABLE mig_layouts (node TEXT NOT NULL, gpu_index BIGINT NOT NULL, layout TEXT NOT NULL,
                          PRIMARY KEY (node, gpu_index));
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE nodes (position BIGINT PRIMARY KEY, name TEXT NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL,
                    removed BOOLEAN NOT NULL, changed_at BIGINT NOT NULL);
CREATE TABLE audit (id BIGSERIAL PRIMARY KEY, time BIGINT NOT NULL, actor TEXT NOT NULL,
                    action TEXT NOT NULL, target TEXT NOT NULL, source TEXT NOT NULL, before TEXT NOT NULL,
                    after TEXT NOT NULL, changed BOOLEAN NOT NULL);
CREATE INDEX audit_by_target ON audit (target);
)sql",
    // 2: the leader lease (one row): holder, its URL, the fencing epoch, expiry by the database's clock.
    R"sql(
CREATE TABLE leader_lease (name TEXT PRIMARY KEY, holder TEXT NOT NULL, url TEXT NOT NULL,
                           epoch BIGINT NOT NULL, expires_at TIMESTAMPTZ NOT NULL);
INSERT INTO leader_lease VALUES ('leader', '', '', 0, '-infinity');
)sql",
    // 3: reads of jobs a replica does not keep in memory, by state and by end.
    R"sql(
CREATE INDEX jobs_by_state ON jobs (state);
CREATE INDEX jobs_by_finished ON jobs (finished_at, id);
)sql",
    // 4: usage reads of an interval, by the records' end (a recent interval reads the recent records).
    R"sql(
CREATE INDEX usage_by_end ON usage (end_s);
)sql",
};
constexpr int kPgSchemaVersion = static_cast<int>(sizeof(kPgMigrations) / sizeof(kPgMigrations[0]));
constexpr const char* kIdleTimeout = "SET idle_in_transaction_session_timeout = '1s'";
constexpr const char* kFencingCheck = "fencing check";
constexpr int64_t kMigrationLock = 0x7465737365726131;  // pg_advisory_xact_lock key ("tessera1")

// A query's result, cleared when it goes.
class PgResult {
 public:
  explicit PgResult(PGresult* r) : r_(r) {}
  ~PgResult() { PQclear(r_); }
  PgResult(const PgResult&) = delete;
  PgResult& operator=(const PgResult&) = delete;
  bool ok() const {
    const ExecStatusType s = PQresultStatus(r_);
    return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
  }
  std::string error() const {
    std::string m = r_ ? PQresultErrorMessage(r_) : "no result";
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    return m;
  }
  int rows() const { return PQntuples(r_); }
  std::string Text(int row, int col) const {
    return std::string(PQgetvalue(r_, row, col), PQgetlength(r_, row, col));
  }
  int64_t Int(int row, int col) const { return std::strtoll(PQgetvalue(r_, row, col), nullptr, 10); }
  double Real(int row, int col) const { return std::strtod(PQgetvalue(r_, row, col), nullptr); }
  bool Bool(int row, int col) const { return PQgetvalue(r_, row, col)[0] == 't'; }

 private:
  PGresult* r_;
};

// One connection: plain statements and statements with text parameters.
class PgConn {
 public:
  ~PgConn() {
    if (c_) PQfinish(c_);
  }
  Status Connect(const std::string& uri, const std::string& name) {
    name_ = name;
    c_ = PQconnectdb(uri.c_str());
    if (c_ == nullptr || PQstatus(c_) != CONNECTION_OK) {
      std::string m = c_ ? PQerrorMessage(c_) : "out of memory";
      while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
      return Status::Error(fmt::format("{}: cannot connect: {}", name_, m));
    }
    PQsetNoticeProcessor(
        c_, [](void*, const char*) {}, nullptr);  // NOTICEs (IF NOT EXISTS) are not news
    return Status::Ok();
  }
  PGconn* raw() const { return c_; }
  // Runs `sql`; the error names the database.
  Status Exec(const std::string& sql) {
    PgResult r(PQexec(c_, sql.c_str()));
    if (!r.ok()) return Status::Error(fmt::format("{}: {}", name_, r.error()));
    return Status::Ok();
  }
  PgResult Query(const std::string& sql, const std::vector<std::string>& params = {}) {
    std::vector<const char*> values;
    for (const std::string& p : params) values.push_back(p.c_str());
    return PgResult(PQexecParams(c_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                                 nullptr, nullptr, 0));
  }
  Status Prepare(const char* stmt, const char* sql) {
    PgResult r(PQprepare(c_, stmt, sql, 0, nullptr));
    if (!r.ok()) return Status::Error(fmt::format("{}: prepare {}: {}", name_, stmt, r.error()));
    return Status::Ok();
  }
  const std::string& name() const { return name_; }

 private:
  PGconn* c_ = nullptr;
  std::string name_;
};

std::string S(int64_t v) { return std::to_string(v); }
std::string D(double v) { return fmt::format("{}", v); }

// Brings the schema up to date, one transaction under an advisory lock (replicas starting together wait
// for the first); the version found, or an error when it is newer than this binary.
Result<int> MigratePg(PgConn& c) {
  if (Status st = c.Exec("BEGIN"); !st.ok()) return st;
  auto fail = [&](Status st) -> Result<int> {
    (void)c.Exec("ROLLBACK");
    return st;
  };
  if (Status st = c.Exec(fmt::format("SELECT pg_advisory_xact_lock({})", kMigrationLock)); !st.ok())
    return fail(st);
  if (Status st = c.Exec("CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, "
                         "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())");
      !st.ok())
    return fail(st);
  PgResult v = c.Query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
  if (!v.ok()) return fail(Status::Error(c.name() + ": " + v.error()));
  int version = static_cast<int>(v.Int(0, 0));
  if (version > kPgSchemaVersion)
    return fail(Status::Error(
        fmt::format("{}: schema version {} is newer than this tessera ({}); use a newer tessera", c.name(),
                    version, kPgSchemaVersion)));
  for (; version < kPgSchemaVersion; ++version) {
    if (Status st = c.Exec(kPgMigrations[version]); !st.ok()) return fail(st);
    if (Status st = c.Exec(fmt::format("INSERT INTO schema_migrations (version) VALUES ({})", version + 1));
        !st.ok())
      return fail(st);
  }
  if (Status st = c.Exec("COMMIT"); !st.ok()) return st;
  return version;
}

constexpr const char* kPgJobColumns =
    "SELECT id, \"user\", team, project, name, class, priority_class, spec, state, submitted_at, started_at, "
    "finished_at, placements, message";

// The job of row `i` read with kPgJobColumns.
Result<JobRow> PgJobOf(const PgResult& r, int i) {
  JobRow j{r.Int(i, 0),  r.Text(i, 1), r.Text(i, 2), r.Text(i, 3), r.Text(i, 4),
           r.Text(i, 5), r.Text(i, 6), r.Text(i, 7), r.Text(i, 8), r.Int(i, 9),
           r.Int(i, 10), r.Int(i, 11), {},           r.Text(i, 13)};
  auto p = DecodePlacements(r.Text(i, 12), j.id);
  if (!p.ok()) return p.status();
  j.placements = std::move(p).value();
  return j;
}

// The usage record of row `i` read with kUsageColumns.
UsageRecord PgUsageOf(const PgResult& r, int i) {
  UsageRecord u;
  u.job_id = r.Int(i, 0);
  u.team = r.Text(i, 1);
  u.project = r.Text(i, 2);
  u.queue = r.Text(i, 3);
  u.gpu_kind = r.Text(i, 4);
  u.tier = static_cast<Tier>(r.Int(i, 5));
  u.pool = r.Text(i, 6);
  u.node = r.Text(i, 7);
  u.compute_milli = static_cast<int32_t>(r.Int(i, 8));
  u.memory_milli = static_cast<int32_t>(r.Int(i, 9));
  u.start_s = r.Int(i, 10);
  u.end_s = r.Int(i, 11);
  u.lost_s = r.Int(i, 12);
  u.usd_per_gpu_hour = r.Real(i, 13);
  u.list_usd_per_gpu_hour = r.Real(i, 14);
  return u;
}

class PgStore final : public PostgresStore {
 public:
  ~PgStore() override { Close(); }

  Status Open(const std::string& uri) {
    uri_ = uri;
    if (Status st = conn_.Connect(uri, RedactUri(uri)); !st.ok()) return st;
    auto v = MigratePg(conn_);
    if (!v.ok()) return v.status();
    version_ = *v;
    if (Status st = PrepareWrites(); !st.ok()) return st;
    writer_ = std::thread([this] { WriterLoop(); });
    return Status::Ok();
  }

  int schema_version() const override { return version_; }

  void Fence(int64_t epoch, std::function<void()> on_fenced) override {
    std::lock_guard<std::mutex> lock(q_mu_);
    fence_epoch_ = epoch;
    on_fenced_ = std::move(on_fenced);
  }

  using Store::Load;
  Result<StoredState> Load(const LoadLimits& limits) override {
    std::lock_guard<std::mutex> db_lock(db_mu_);
    StoredState s;
    s.schema_version = version_;
    // One snapshot of every table (a concurrent writer's commit is either wholly in it or not at all).
    if (Status st = conn_.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); !st.ok()) return st;
    Status st = LoadTables(&s, limits);
    (void)conn_.Exec(st.ok() ? "COMMIT" : "ROLLBACK");
    if (!st.ok()) return Status::Error(fmt::format("{}: {}", conn_.name(), st.message()));
    return s;
  }

  Result<std::vector<JobRow>> ReadJobs(const JobRowQuery& q, int64_t* total) override {
    const JobsSql sql = BuildJobsSql(q, /*postgres=*/true);
    std::lock_guard<std::mutex> db_lock(db_mu_);
    PgResult r = conn_.Query(
        std::string(kPgJobColumns) + " FROM jobs WHERE " + sql.with_cursor + " " + sql.order_limit, sql.params);
    if (!r.ok()) return Status::Error(conn_.name() + ": " + r.error());
    std::vector<JobRow> out;
    for (int i = 0; i < r.rows(); ++i) {
      auto j = PgJobOf(r, i);
      if (!j.ok()) return j.status();
      out.push_back(std::move(j).value());
    }
    if (total != nullptr) {
      PgResult n = conn_.Query("SELECT COUNT(*) FROM jobs WHERE " + sql.filters, sql.params);
      if (!n.ok()) return Status::Error(conn_.name() + ": " + n.error());
      *total = n.Int(0, 0);
    }
    return out;
  }

  Result<UsageReadResult> ReadUsage(const UsageRead& q) override {
    std::lock_guard<std::mutex> db_lock(db_mu_);
    UsageReadResult out;
    out.last_seq = q.through_seq;
    if (out.last_seq < 0) {
      PgResult last = conn_.Query(kLastUsageSeqSql);
      if (!last.ok()) return Status::Error(conn_.name() + ": " + last.error());
      out.last_seq = last.Int(0, 0);
    }
    const bool summed = !q.cuts.empty();
    const std::string sql = UsageReadSql(summed ? &q.key : nullptr, true);
    for (const auto& [lo, hi] : UsageReadSpans(q)) {
      PgResult r = conn_.Query(sql, {S(lo), S(hi), S(q.after_seq), S(out.last_seq)});
      if (!r.ok()) return Status::Error(conn_.name() + ": " + r.error());
      for (int i = 0; i < r.rows(); ++i) {
        if (!summed)
          out.records.push_back(PgUsageOf(r, i));
        else
          out.records.push_back(
              SummedUsageOf([&](int c) { return r.Int(i, c); }, [&](int c) { return r.Text(i, c); }));
      }
    }
    if (summed) out.records = SumUsage(out.records, q.cuts, q.key);
    return out;
  }

  // On a connection of its own (opened at the first look-up, again after it broke): a submission's
  // look-up never waits for the writer's commit.
  Result<std::optional<IdempotencyRow>> FindKey(const std::string& user, const std::string& key) override {
    std::lock_guard<std::mutex> lock(key_mu_);
    if (key_conn_ == nullptr || PQstatus(key_conn_->raw()) != CONNECTION_OK) {
      key_conn_ = std::make_unique<PgConn>();
      Status st = key_conn_->Connect(uri_, RedactUri(uri_));
      if (st.ok())
        st = key_conn_->Prepare(
            "find_key", "SELECT body_hash, job_id FROM idempotency_keys WHERE \"user\" = $1 AND key = $2");
      if (!st.ok()) {
        key_conn_.reset();
        return st;
      }
    }
    const char* values[] = {user.c_str(), key.c_str()};
    PgResult r(PQexecPrepared(key_conn_->raw(), "find_key", 2, values, nullptr, nullptr, 0));
    if (!r.ok()) return Status::Error(key_conn_->name() + ": " + r.error());
    if (r.rows() == 0) return std::optional<IdempotencyRow>();
    return std::optional<IdempotencyRow>(IdempotencyRow{user, key, r.Text(0, 0), r.Int(0, 1)});
  }

  Result<std::vector<std::pair<std::string, std::string>>> ReadKeyNames(const std::string& after_user,
                                                                        const std::string& after_key,
                                                                        int limit) override {
    std::lock_guard<std::mutex> db_lock(db_mu_);
    PgResult r = conn_.Query(
        "SELECT \"user\", key FROM idempotency_keys WHERE (\"user\", key) > ($1, $2) ORDER BY \"user\", key "
        "LIMIT $3",
        {after_user, after_key, S(int64_t{limit})});
    if (!r.ok()) return Status::Error(conn_.name() + ": " + r.error());
    std::vector<std::pair<std::string, std::string>> out;
    for (int i = 0; i < r.rows(); ++i) out.emplace_back(r.Text(i, 0), r.Text(i, 1));
    return out;
  }

  Result<std::vector<AuditRow>> ReadAudit(const AuditQuery& aq, bool* more) override {
    std::lock_guard<std::mutex> db_lock(db_mu_);
    PgResult r = conn_.Query(
        "SELECT id, time, actor, action, target, source, before, after, changed FROM audit WHERE id > $1 AND "
        "time >= $2 AND ($3 = '' OR actor = $3) AND ($4 = '' OR target = $4) AND ($5 = '' OR action = $5) "
        "ORDER BY id LIMIT $6",
        {S(aq.after_id), S(aq.since), aq.actor, aq.target, aq.action, S(int64_t{aq.limit} + 1)});
    if (!r.ok()) return Status::Error(conn_.name() + ": " + r.error());
    std::vector<AuditRow> out;
    for (int i = 0; i < r.rows(); ++i)
      out.push_back({r.Int(i, 0), r.Int(i, 1), r.Text(i, 2), r.Text(i, 3), r.Text(i, 4), r.Text(i, 5),
                     r.Text(i, 6), r.Text(i, 7), r.Bool(i, 8)});
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
    done(Status::Error(conn_.name() + ": store is closed"));
  }

  void Close() override {
    {
      std::lock_guard<std::mutex> lock(q_mu_);
      if (closed_) return;
      closed_ = true;
      q_cv_.notify_one();
    }
    if (writer_.joinable()) writer_.join();
  }

 private:
  struct Queued {
    WriteBatch batch;
    Done done;
  };

  Status LoadTables(StoredState* s, const LoadLimits& limits) {
    const std::string jobs = LoadedJobsCondition(limits);
    auto query = [&](const char* sql, const std::function<Status(const PgResult&, int)>& row) {
      PgResult r = conn_.Query(sql);
      if (!r.ok()) return Status::Error(r.error());
      for (int i = 0; i < r.rows(); ++i)
        if (Status st = row(r, i); !st.ok()) return st;
      return Status::Ok();
    };
    Status st = query(
        "SELECT name, guaranteed_milli, limit_milli, over_quota_weight, created_at, allowed_classes, version "
        "FROM teams ORDER BY name",
        [&](const PgResult& r, int i) {
          s->teams.push_back({r.Text(i, 0), r.Int(i, 1), r.Int(i, 2), static_cast<int>(r.Int(i, 3)),
                              r.Int(i, 4), DecodeClasses(r.Text(i, 5)), static_cast<uint64_t>(r.Int(i, 6))});
          return Status::Ok();
        });
    if (st.ok())
      st = query("SELECT id, name, team, role, token_hash, created_at FROM users ORDER BY id",
                 [&](const PgResult& r, int i) {
                   s->users.push_back(
                       {r.Int(i, 0), r.Text(i, 1), r.Text(i, 2), r.Text(i, 3), r.Text(i, 4), r.Int(i, 5)});
                   return Status::Ok();
                 });
    if (st.ok())
      st = query((std::string(kPgJobColumns) + " FROM jobs WHERE " + jobs + " ORDER BY id").c_str(),
                 [&](const PgResult& r, int i) {
                   auto j = PgJobOf(r, i);
                   if (!j.ok()) return j.status();
                   s->jobs.push_back(std::move(j).value());
                   return Status::Ok();
                 });
    if (st.ok())
      st = query("SELECT COALESCE(MAX(id), 0) FROM jobs", [&](const PgResult& r, int i) {
        s->max_job_id = r.Int(i, 0);
        return Status::Ok();
      });
    if (st.ok() && limits.history)
      st = query("SELECT \"user\", key, body_hash, job_id FROM idempotency_keys",
                 [&](const PgResult& r, int i) {
                   s->keys.push_back({r.Text(i, 0), r.Text(i, 1), r.Text(i, 2), r.Int(i, 3)});
                   return Status::Ok();
                 });
    if (st.ok() && limits.history)
      st = query((std::string(kUsageColumns) + " FROM usage ORDER BY seq").c_str(),
                 [&](const PgResult& r, int i) {
                   s->usage.push_back(PgUsageOf(r, i));
                   return Status::Ok();
                 });
    if (st.ok())
      st = query("SELECT node, gpu_index, layout FROM mig_layouts", [&](const PgResult& r, int i) {
        s->layouts.push_back({r.Text(i, 0), static_cast<int>(r.Int(i, 1)), r.Text(i, 2)});
        return Status::Ok();
      });
    if (st.ok())
      st = query("SELECT position, name, spec, state, removed, changed_at FROM nodes ORDER BY position",
                 [&](const PgResult& r, int i) {
                   s->nodes.push_back({static_cast<int>(r.Int(i, 0)), r.Text(i, 1), r.Text(i, 2),
                                       r.Text(i, 3), r.Bool(i, 4), r.Int(i, 5)});
                   return Status::Ok();
                 });
    if (st.ok())
      st = query("SELECT key, value FROM meta", [&](const PgResult& r, int i) {
        s->meta[r.Text(i, 0)] = r.Text(i, 1);
        return Status::Ok();
      });
    return st;
  }

  Status PrepareWrites() {
    const std::pair<const char*, const char*> all[] = {
        {"team",
         "INSERT INTO teams VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (name) DO UPDATE SET "
         "guaranteed_milli = $2, limit_milli = $3, over_quota_weight = $4, created_at = $5, allowed_classes "
         "= $6, "
         "version = $7"},
        {"user",
         "INSERT INTO users VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO UPDATE SET name = $2, team = "
         "$3, "
         "role = $4, token_hash = $5, created_at = $6"},
        {"job",
         "INSERT INTO jobs VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT "
         "(id) "
         "DO UPDATE SET \"user\" = $2, team = $3, project = $4, name = $5, class = $6, priority_class = $7, "
         "spec = $8, state = $9, submitted_at = $10, started_at = $11, finished_at = $12, placements = $13, "
         "message = $14"},
        {"event", "INSERT INTO job_events (job_id, at, kind, detail) VALUES ($1, $2, $3, $4)"},
        {"key", "INSERT INTO idempotency_keys VALUES ($1, $2, $3, $4)"},
        {"usage",
         "INSERT INTO usage (job_id, team, project, queue, gpu_kind, tier, pool, node, compute_milli, "
         "memory_milli, "
         "start_s, end_s, lost_s, usd_per_gpu_hour, list_usd_per_gpu_hour) VALUES ($1, $2, $3, $4, $5, $6, "
         "$7, $8, "
         "$9, $10, $11, $12, $13, $14, $15)"},
        {"layout",
         "INSERT INTO mig_layouts VALUES ($1, $2, $3) ON CONFLICT (node, gpu_index) DO UPDATE SET layout = "
         "$3"},
        {"node",
         "INSERT INTO nodes VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (position) DO UPDATE SET name = $2, "
         "spec = $3, state = $4, removed = $5, changed_at = $6"},
        {"meta", "INSERT INTO meta VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = $2"},
        {"audit",
         "INSERT INTO audit (time, actor, action, target, source, before, after, changed) VALUES "
         "($1, $2, $3, $4, $5, $6, $7, $8)"},
        // A commit group's rows of the busy tables, one statement per table (PgArrayRows), in batch order.
        {"jobs_rows",
         "INSERT INTO jobs SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], "
         "$5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::bigint[], $11::bigint[], "
         "$12::bigint[], $13::text[], $14::text[]) ON CONFLICT (id) DO UPDATE SET \"user\" = "
         "EXCLUDED.\"user\", team = EXCLUDED.team, project = EXCLUDED.project, name = EXCLUDED.name, "
         "class = EXCLUDED.class, priority_class = EXCLUDED.priority_class, spec = EXCLUDED.spec, state "
         "= EXCLUDED.state, submitted_at = EXCLUDED.submitted_at, started_at = EXCLUDED.started_at, "
         "finished_at = EXCLUDED.finished_at, placements = EXCLUDED.placements, message = "
         "EXCLUDED.message"},
        {"events_rows",
         "INSERT INTO job_events (job_id, at, kind, detail) SELECT a, b, c, d FROM unnest($1::bigint[], "
         "$2::bigint[], $3::text[], $4::text[]) WITH ORDINALITY AS r(a, b, c, d, n) ORDER BY n"},
        {"keys_rows",
         "INSERT INTO idempotency_keys SELECT * FROM unnest($1::text[], $2::text[], $3::text[], "
         "$4::bigint[])"},
        {"usage_rows",
         "INSERT INTO usage (job_id, team, project, queue, gpu_kind, tier, pool, node, compute_milli, "
         "memory_milli, start_s, end_s, lost_s, usd_per_gpu_hour, list_usd_per_gpu_hour) SELECT a, b, c, "
         "d, e, f, g, h, i, j, k, l, m, o, p FROM unnest($1::bigint[], $2::text[], $3::text[], "
         "$4::text[], $5::text[], $6::bigint[], $7::text[], $8::text[], $9::bigint[], $10::bigint[], "
         "$11::bigint[], $12::bigint[], $13::bigint[], $14::float8[], $15::float8[]) WITH ORDINALITY AS "
         "r(a, b, c, d, e, f, g, h, i, j, k, l, m, o, p, n) ORDER BY n"},
        {"audit_rows",
         "INSERT INTO audit (time, actor, action, target, source, before, after, changed) SELECT a, b, "
         "c, d, e, f, g, h FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], "
         "$6::text[], $7::text[], $8::boolean[]) WITH ORDINALITY AS r(a, b, c, d, e, f, g, h, n) ORDER "
         "BY n"},
        {"fence", "SELECT epoch FROM leader_lease WHERE name = 'leader' FOR SHARE"},
        // Fails (division by zero) unless the lease is at epoch $1; holds the row's share lock to the commit.
        {"fence_check",
         "SELECT 1 / (CASE WHEN epoch = $1 THEN 1 ELSE 0 END) FROM leader_lease WHERE name = 'leader' FOR "
         "SHARE"},
    };
    for (const auto& [name, sql] : all)
      if (Status st = conn_.Prepare(name, sql); !st.ok()) return st;
    return Status::Ok();
  }

  // Sends one prepared statement with its parameters; `what` names it in an error.
  using Sender = std::function<Status(const char* stmt, const std::vector<std::string>& params,
                                      const std::string& what)>;

  // Every statement of a batch, through `run`: the rarely written tables, then the busy ones.
  Status Apply(const WriteBatch& b, const Sender& run) {
    Status st = ApplyRare(b, run);
    for (size_t i = 0; st.ok() && i < b.jobs.size(); ++i) {
      const JobRow& j = b.jobs[i];
      st = run(
          "job",
          {S(j.id), j.user, j.team, j.project, j.name, j.cls, j.priority_class, j.spec_json, j.state,
           S(j.submitted_at), S(j.started_at), S(j.finished_at), EncodePlacements(j.placements), j.message},
          fmt::format("job {}", j.id));
    }
    for (size_t i = 0; st.ok() && i < b.events.size(); ++i) {
      const JobEventRow& e = b.events[i];
      st = run("event", {S(e.job_id), S(e.at), e.kind, e.detail}, fmt::format("job {} event", e.job_id));
    }
    for (size_t i = 0; st.ok() && i < b.keys.size(); ++i) {
      const IdempotencyRow& k = b.keys[i];
      st = run("key", {k.user, k.key, k.body_hash, S(k.job_id)}, fmt::format("idempotency key '{}'", k.key));
    }
    for (size_t i = 0; st.ok() && i < b.usage.size(); ++i)
      st = run("usage", UsageValues(b.usage[i]), fmt::format("usage of job {}", b.usage[i].job_id));
    for (size_t i = 0; st.ok() && i < b.audit.size(); ++i) {
      const AuditRow& a = b.audit[i];
      st = run("audit",
               {S(a.time), a.actor, a.action, a.target, a.source, a.before, a.after, a.changed ? "t" : "f"},
               "audit");
    }
    return st;
  }

  static std::vector<std::string> UsageValues(const UsageRecord& u) {
    return {S(u.job_id),
            u.team,
            u.project,
            u.queue,
            u.gpu_kind,
            S(static_cast<int>(u.tier)),
            u.pool,
            u.node,
            S(u.compute_milli),
            S(u.memory_milli),
            S(u.start_s),
            S(u.end_s),
            S(u.lost_s),
            D(u.usd_per_gpu_hour),
            D(u.list_usd_per_gpu_hour)};
  }

  // Teams, users, MIG layouts, nodes and meta rows of a batch, a statement each.
  Status ApplyRare(const WriteBatch& b, const Sender& run) {
    Status st;
    for (size_t i = 0; st.ok() && i < b.teams.size(); ++i) {
      const TeamRow& t = b.teams[i];
      st = run("team",
               {t.name, S(t.guaranteed_milli), S(t.limit_milli), S(t.over_quota_weight), S(t.created_at),
                EncodeClasses(t.allowed_classes), S(static_cast<int64_t>(t.version))},
               "team '" + t.name + "'");
    }
    for (size_t i = 0; st.ok() && i < b.users.size(); ++i) {
      const UserRow& u = b.users[i];
      st = run("user", {S(u.id), u.name, u.team, u.role, u.token_hash, S(u.created_at)},
               "user '" + u.name + "'");
    }
    for (size_t i = 0; st.ok() && i < b.layouts.size(); ++i)
      st = run("layout", {b.layouts[i].node, S(b.layouts[i].gpu_index), b.layouts[i].layout}, "MIG layout");
    for (size_t i = 0; st.ok() && i < b.nodes.size(); ++i) {
      const NodeRow& n = b.nodes[i];
      st = run("node", {S(n.position), n.name, n.spec_json, n.state, n.removed ? "t" : "f", S(n.changed_at)},
               "node '" + n.name + "'");
    }
    for (auto it = b.meta.begin(); st.ok() && it != b.meta.end(); ++it)
      st = run("meta", {it->first, it->second}, "meta");
    return st;
  }

  // A whole group without savepoints: the rare tables row by row in batch order, then one statement per
  // busy table over every batch (PgArrayRows; rows in batch order). A job written twice in the group keeps
  // its last row, as the row by row upserts would leave it.
  Status ApplyGroupRows(const std::deque<Queued>& group, const Sender& run) {
    Status st;
    for (size_t b = 0; st.ok() && b < group.size(); ++b) st = ApplyRare(group[b].batch, run);
    std::unordered_map<int64_t, const JobRow*> last_job;
    for (const Queued& q : group)
      for (const JobRow& j : q.batch.jobs) last_job[j.id] = &j;
    PgArrayRows jobs(14), events(4), keys(4), usage(15), audit(8);
    for (const Queued& q : group) {
      for (const JobRow& j : q.batch.jobs)
        if (last_job[j.id] == &j)
          jobs.Add({S(j.id), j.user, j.team, j.project, j.name, j.cls, j.priority_class, j.spec_json, j.state,
                    S(j.submitted_at), S(j.started_at), S(j.finished_at), EncodePlacements(j.placements),
                    j.message});
      for (const JobEventRow& e : q.batch.events) events.Add({S(e.job_id), S(e.at), e.kind, e.detail});
      for (const IdempotencyRow& k : q.batch.keys) keys.Add({k.user, k.key, k.body_hash, S(k.job_id)});
      for (const UsageRecord& u : q.batch.usage) {
        const std::vector<std::string> v = UsageValues(u);
        usage.Add(
            {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13], v[14]});
      }
      for (const AuditRow& a : q.batch.audit)
        audit.Add(
            {S(a.time), a.actor, a.action, a.target, a.source, a.before, a.after, a.changed ? "t" : "f"});
    }
    const std::pair<const char*, const PgArrayRows*> busy[] = {{"jobs_rows", &jobs},
                                                               {"events_rows", &events},
                                                               {"keys_rows", &keys},
                                                               {"usage_rows", &usage},
                                                               {"audit_rows", &audit}};
    for (const auto& [stmt, rows] : busy)
      if (st.ok() && rows->rows() > 0)
        st = run(stmt, rows->Literals(), fmt::format("{} ({})", stmt, rows->rows()));
    return st;
  }

  // One round trip (libpq's pipeline mode), then one sync. With `whole_epoch` >= 0: BEGIN, the fencing
  // check at that epoch (0 = none), the whole group without savepoints (ApplyGroupRows), COMMIT. Else
  // batches `from`..`to` (exclusive) of a group, each as SAVEPOINT, its statements, RELEASE. The first
  // statement that failed is the error (the server skips everything after it up to the sync, and the
  // transaction is then aborted). A failure of the connection itself goes to `conn_error`.
  Status ApplyPipelined(const std::deque<Queued>& group, size_t from, size_t to, Status* conn_error,
                        int64_t whole_epoch = -1) {
    PGconn* c = conn_.raw();
    if (PQenterPipelineMode(c) != 1)
      return *conn_error = Status::Error(conn_.name() + ": " + PQerrorMessage(c));
    std::vector<std::string> whats;
    auto send_sql = [&](const char* sql) {
      if (PQsendQueryParams(c, sql, 0, nullptr, nullptr, nullptr, nullptr, 0) != 1)
        return Status::Error(conn_.name() + ": " + PQerrorMessage(c));
      whats.push_back(sql);
      return Status::Ok();
    };
    Sender send = [&](const char* stmt, const std::vector<std::string>& p, const std::string& what) {
      std::vector<const char*> values;
      for (const std::string& v : p) values.push_back(v.c_str());
      if (PQsendQueryPrepared(c, stmt, static_cast<int>(values.size()), values.data(), nullptr, nullptr, 0) !=
          1)
        return Status::Error(conn_.name() + ": " + PQerrorMessage(c));
      whats.push_back(what);
      return Status::Ok();
    };
    Status sent;
    if (whole_epoch >= 0) sent = send_sql("BEGIN");
    if (sent.ok() && whole_epoch > 0) sent = send("fence_check", {S(whole_epoch)}, kFencingCheck);
    if (sent.ok() && whole_epoch >= 0) sent = ApplyGroupRows(group, send);
    for (size_t i = from; sent.ok() && whole_epoch < 0 && i < to; ++i) {
      sent = send_sql("SAVEPOINT batch");
      if (sent.ok()) sent = Apply(group[i].batch, send);
      if (sent.ok()) sent = send_sql("RELEASE SAVEPOINT batch");
    }
    if (sent.ok() && whole_epoch >= 0) sent = send_sql("COMMIT");
    if (PQpipelineSync(c) != 1 && sent.ok()) sent = Status::Error(conn_.name() + ": " + PQerrorMessage(c));
    Status first = ReadPipeline(whats);
    if (PQexitPipelineMode(c) != 1 || !sent.ok() || PQstatus(c) != CONNECTION_OK)
      *conn_error = sent.ok() ? Status::Error(conn_.name() + ": " + PQerrorMessage(c)) : sent;
    return first;
  }

  // The results of the pipelined statements `whats` up to the sync: the first error, naming its statement.
  Status ReadPipeline(const std::vector<std::string>& whats) {
    PGconn* c = conn_.raw();
    Status first;
    for (size_t i = 0; i < whats.size(); ++i) {
      PGresult* r = PQgetResult(c);
      if (r == nullptr) break;
      if (PQresultStatus(r) == PGRES_FATAL_ERROR && first.ok()) {
        std::string m = PQresultErrorMessage(r);
        while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
        first = Status::Error(whats[i] + ": " + m);
      }
      PQclear(r);
      while ((r = PQgetResult(c)) != nullptr) PQclear(r);  // the end of this statement's results
    }
    for (PGresult* r = PQgetResult(c); r != nullptr; r = PQgetResult(c)) {  // the sync
      const bool sync = PQresultStatus(r) == PGRES_PIPELINE_SYNC;
      PQclear(r);
      if (sync) break;
    }
    return first;
  }

  // BEGIN and, when fenced, the epoch check.
  Status Begin(int64_t epoch, bool* fenced) {
    Status st = conn_.Exec("BEGIN");
    if (st.ok() && epoch > 0) {
      st = CheckFence(epoch);
      *fenced = !st.ok() && st.message().rfind("fenced", 0) == 0;
    }
    return st;
  }

  // Inside the group's transaction: the lease's epoch, share-locked to the commit, must be ours.
  Status CheckFence(int64_t epoch) {
    std::vector<const char*> none;
    PgResult r(PQexecPrepared(conn_.raw(), "fence", 0, none.data(), nullptr, nullptr, 0));
    if (!r.ok()) return Status::Error(fmt::format("{}: fencing check: {}", conn_.name(), r.error()));
    const int64_t stored = r.rows() == 1 ? r.Int(0, 0) : -1;
    if (stored == epoch) return Status::Ok();
    return Status::Error(
        fmt::format("fenced: this replica led at epoch {}, the database is at epoch {}; not the "
                    "leader any more",
                    epoch, stored));
  }

  // One group: BEGIN, the fence, each batch in a savepoint, COMMIT; the per-batch results (or the
  // group's error for all).
  Status CommitGroup(std::deque<Queued>& group, int64_t epoch, std::vector<Status>* results, bool* fenced) {
    std::lock_guard<std::mutex> db_lock(db_mu_);
    // A leader's transaction left open (the process stopped mid-commit: SIGSTOP, a paused VM) must not hold
    // the lease's share lock, and so every takeover, for longer than this. Not for an unfenced store: a
    // follower's long Load may pause between its queries.
    if (epoch > 0 && !idle_timeout_set_) idle_timeout_set_ = conn_.Exec(kIdleTimeout).ok();
    // BEGIN, the fencing check, the whole group and COMMIT in one round trip; should a statement fail, the
    // group again batch by batch, each in a savepoint (a round trip each), so that the failed one alone is
    // rolled back.
    Status commit;
    Status all = ApplyPipelined(group, 0, group.size(), &commit, epoch);
    if (commit.ok() && all.ok()) return Status::Ok();
    if (commit.ok() && all.message().rfind(kFencingCheck, 0) == 0) {
      (void)conn_.Exec("ROLLBACK");
      commit = Begin(epoch, fenced);  // the check again, for the epoch it found
      if (commit.ok()) commit = Status::Error(conn_.name() + ": fencing check: the lease's epoch changed");
    } else if (commit.ok()) {
      (void)conn_.Exec("ROLLBACK");
      commit = Begin(epoch, fenced);
      for (size_t i = 0; commit.ok() && i < group.size(); ++i) {
        (*results)[i] = ApplyPipelined(group, i, i + 1, &commit);
        if (commit.ok() && !(*results)[i].ok()) commit = conn_.Exec("ROLLBACK TO SAVEPOINT batch");
        if (commit.ok() && !(*results)[i].ok()) commit = conn_.Exec("RELEASE SAVEPOINT batch");
      }
    }
    if (commit.ok()) commit = conn_.Exec("COMMIT");
    if (!commit.ok()) (void)conn_.Exec("ROLLBACK");
    if (!commit.ok() && PQstatus(conn_.raw()) == CONNECTION_BAD) {  // the next group tries a new connection
      PQreset(conn_.raw());
      idle_timeout_set_ = false;
      if (PQstatus(conn_.raw()) == CONNECTION_OK) (void)PrepareWrites();
    }
    return commit;
  }

  // Calls the fencing callback once (it must not block: the writer runs it).
  void TellFenced() {
    std::function<void()> f;
    {
      std::lock_guard<std::mutex> lock(q_mu_);
      f = std::move(on_fenced_);
      on_fenced_ = nullptr;
    }
    if (f) f();
  }

  void WriterLoop() {
    pthread_setname_np(pthread_self(), "tessera-pgwrite");
    for (;;) {
      std::deque<Queued> group;
      int64_t epoch = 0;
      {
        std::unique_lock<std::mutex> lock(q_mu_);
        q_cv_.wait(lock, [&] { return closed_ || !queue_.empty(); });
        if (queue_.empty()) return;
        group.swap(queue_);
        epoch = fence_epoch_;
      }
      std::vector<Status> results(group.size());
      bool fenced = false;
      Status commit = CommitGroup(group, epoch, &results, &fenced);
      // The owner hears it was fenced before any refused writer hears its answer.
      if (fenced) TellFenced();
      for (size_t i = 0; i < group.size(); ++i) group[i].done(commit.ok() ? results[i] : commit);
    }
  }

  PgConn conn_;
  int version_ = 0;
  std::mutex db_mu_;  // the connection: the writer, Load, ReadAudit
  std::string uri_;
  std::mutex key_mu_;  // FindKey's connection
  std::unique_ptr<PgConn> key_conn_;
  std::mutex q_mu_;
  std::condition_variable q_cv_;
  std::deque<Queued> queue_;
  bool closed_ = false;
  int64_t fence_epoch_ = 0;  // 0 = not fenced (q_mu_)
  bool idle_timeout_set_ = false;  // on this connection (db_mu_)
  std::function<void()> on_fenced_;
  std::thread writer_;
};

class PgLease final : public LeaderLease {
 public:
  PgLease(std::string id, std::string url) : id_(std::move(id)), url_(std::move(url)) {}
  Status Open(const std::string& uri) { return conn_.Connect(uri, RedactUri(uri)); }

  Result<LeaseState> Read() override {
    PgResult r = Query(
        "SELECT holder, url, epoch, expires_at > clock_timestamp() FROM leader_lease WHERE name = 'leader'",
        {});
    if (!r.ok()) return Status::Error(conn_.name() + ": lease: " + r.error());
    if (r.rows() != 1) return Status::Error(conn_.name() + ": lease: no lease row (schema not migrated?)");
    return LeaseState{r.Text(0, 0), r.Text(0, 1), r.Int(0, 2), r.Bool(0, 3)};
  }

  Result<int64_t> TryAcquire(double seconds) override {
    PgResult r = Query(
        "UPDATE leader_lease SET holder = $1, url = $2, epoch = epoch + 1, expires_at = clock_timestamp() + "
        "make_interval(secs => $3) WHERE name = 'leader' AND (expires_at <= clock_timestamp() OR holder = "
        "$1) "
        "RETURNING epoch",
        {id_, url_, D(seconds)});
    if (!r.ok()) return Status::Error(conn_.name() + ": lease: " + r.error());
    return r.rows() == 1 ? r.Int(0, 0) : int64_t{0};
  }

  Result<bool> Renew(int64_t epoch, double seconds) override {
    PgResult r = Query(
        "UPDATE leader_lease SET expires_at = clock_timestamp() + make_interval(secs => $3) WHERE name = "
        "'leader' "
        "AND holder = $1 AND epoch = $2 RETURNING epoch",
        {id_, S(epoch), D(seconds)});
    if (!r.ok()) return Status::Error(conn_.name() + ": lease: " + r.error());
    return r.rows() == 1;
  }

  Status Release(int64_t epoch) override {
    PgResult r = Query(
        "UPDATE leader_lease SET expires_at = clock_timestamp() WHERE name = 'leader' AND holder = $1 AND "
        "epoch = $2",
        {id_, S(epoch)});
    return r.ok() ? Status::Ok() : Status::Error(conn_.name() + ": lease: " + r.error());
  }

 private:
  // A query, reconnecting once when the connection broke.
  PgResult Query(const char* sql, const std::vector<std::string>& params) {
    if (PQstatus(conn_.raw()) == CONNECTION_BAD) PQreset(conn_.raw());
    return conn_.Query(sql, params);
  }
  PgConn conn_;
  std::string id_, url_;
};

}  // namespace

std::string RedactUri(const std::string& uri) {
  // postgresql://user:password@host... -> postgresql://user@host...
  const size_t scheme = uri.find("://");
  const size_t at = uri.find('@', scheme == std::string::npos ? 0 : scheme + 3);
  if (scheme == std::string::npos || at == std::string::npos) return uri;
  const size_t colon = uri.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return uri;
  return uri.substr(0, colon) + uri.substr(at);
}

Result<std::unique_ptr<PostgresStore>> OpenPostgresStore(const std::string& uri) {
  auto s = std::make_unique<PgStore>();
  if (Status st = s->Open(uri); !st.ok()) return st;
  return std::unique_ptr<PostgresStore>(std::move(s));
}

Result<std::unique_ptr<LeaderLease>> LeaderLease::Open(const std::string& uri, std::string id,
                                                       std::string url) {
  auto l = std::make_unique<PgLease>(std::move(id), std::move(url));
  if (Status st = l->Open(uri); !st.ok()) return st;
  return std::unique_ptr<LeaderLease>(std::move(l));
}

}  // namespace tessera
