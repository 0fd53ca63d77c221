// The Store contract, run against every store: SQLite (a file) and PostgreSQL (a real server this test
// process starts, tests/testing/postgres_server.h). Round trip of every table, upserts by key, atomic
// batches inside a group commit (a reused idempotency key fails its batch alone), concurrent writers, the
// audit log's filters and cursor, usage records in order, a schema newer than the binary refused, reads of
// jobs (filters, orders, cursor) and loads within a retention of ended jobs, and the service on top:
// idempotency keys, team versions (If-Match) and usage across a restart, and the same answers whether its
// ended jobs stay in memory or are read from the store; usage records read by interval and keys one by one,
// and the service's usage queries and key replays answered from the store as from memory.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <future>
#include <random>
#include <thread>
#include <tuple>

#include "service/manual_clock.h"
#include "service/service.h"
#include "service/simulated_backend.h"
#include "store/postgres_store.h"
#include "store/store.h"
#include "testing/postgres_server.h"

namespace tessera {
namespace {

// Where a store lives, for the typed suite: Prepare() makes an empty one, Open() opens it (again).
struct SqliteLocation {
  static constexpr const char* kName = "sqlite";
  std::string path;
  bool Prepare(std::string* why) {
    static std::atomic<int> next{0};
    auto dir = std::filesystem::temp_directory_path() / ("tessera-conformance-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    path = (dir / ("s" + std::to_string(next++) + ".db")).string();
    std::filesystem::remove(path);
    return true;
  }
  Result<std::unique_ptr<Store>> Open() { return OpenSqliteStore(path); }
  std::string Sql(const std::string& sql) {
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    char* err = nullptr;
    std::string e;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) e = err ? err : "error";
    sqlite3_free(err);
    sqlite3_close(db);
    return e;
  }
};

struct PostgresLocation {
  static constexpr const char* kName = "postgresql";
  std::string uri, db;
  bool Prepare(std::string* why) {
    testing::PostgresServer& server = testing::PostgresServer::Shared();
    uri = server.NewDatabase();
    if (uri.empty()) *why = "PostgreSQL: " + server.error();
    const size_t from = uri.find("localhost/") + 10;
    db = uri.substr(from, uri.find('?') - from);
    return !uri.empty();
  }
  Result<std::unique_ptr<Store>> Open() {
    auto s = OpenPostgresStore(uri);
    if (!s.ok()) return s.status();
    return std::unique_ptr<Store>(std::move(s).value());
  }
  std::string Sql(const std::string& sql) { return testing::PostgresServer::Shared().Sql(sql, db); }
};

JobRow ConformanceJob(int64_t id) {
  JobRow j;
  j.id = id;
  j.user = "ana";
  j.team = "vision";
  j.project = "p";
  j.name = "job-" + std::to_string(id);
  j.cls = "training";
  j.priority_class = "training";
  j.spec_json = "{}";
  j.state = "Pending";
  j.submitted_at = 100 + id;
  return j;
}

template <typename Location>
class StoreConformance : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    ASSERT_TRUE(where_.Prepare(&why)) << why;
  }
  std::unique_ptr<Store> Open() {
    auto s = where_.Open();
    EXPECT_TRUE(s.ok()) << s.error();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  // A service on this store (2 x 8 H100, no background cycles) keeping `retain` ended jobs and
  // `recent_keys` durable idempotency keys in memory (0: the service's default).
  std::unique_ptr<Service> OpenService(Clock* clock, Backend* backend, int64_t retain,
                                       int64_t recent_keys = 0) {
    ServiceConfig cfg;
    cfg.catalog = &Catalog::Default();
    auto cl = LoadClusterYaml(
        "name: t\ndefaults: {gpu: h100-80gb, gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch, "
        "spine: s, tier: reserved}\nnodes:\n  - {name: node, count: 2, leaf: leaf-0}\n",
        "test", Catalog::Default());
    cfg.cluster = *cl;
    cfg.background_cycles = false;
    cfg.retain_ended_jobs = retain;
    if (recent_keys > 0) cfg.recent_idempotency_keys = recent_keys;
    auto store = Open();
    if (!store) return nullptr;
    auto svc = Service::Start(std::move(cfg), std::move(store), clock, backend);
    EXPECT_TRUE(svc.ok()) << svc.error();
    return svc.ok() ? std::move(svc).value() : nullptr;
  }
  Location where_;
};

using Locations = ::testing::Types<SqliteLocation, PostgresLocation>;
class LocationNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    return T::kName;
  }
};
TYPED_TEST_SUITE(StoreConformance, Locations, LocationNames);

WriteBatch EveryTable() {
  WriteBatch b;
  b.teams.push_back({"vision", 8000, 16000, 2, 5, std::vector<std::string>{"training", "batch"}, 3});
  b.users.push_back({1, "ana", "vision", "team-lead", "abc123", 6});
  JobRow j = ConformanceJob(1);
  j.state = "Running";
  j.started_at = 200;
  j.message = "it's \"quoted\"\n";
  TaskPlacement t;
  t.node = 1;
  GpuGrant g;
  g.gpu = 9;
  g.milli = 1000;
  g.memory_mib = 4096;
  GpuGrant m;
  m.gpu = 10;
  m.milli = 142;
  m.mig_profile = 3;
  m.mig_start = 4;
  t.gpus = {g, m};
  j.placements = {t};
  b.jobs.push_back(j);
  b.events.push_back({1, 200, "Started", "bound"});
  b.keys.push_back({"ana", "key-1", "hash", 1});
  UsageRecord u;
  u.team = "vision";
  u.job_id = 1;
  u.gpu_kind = "h100-80gb";
  u.tier = Tier::kSpot;
  u.node = "n1";
  u.start_s = 200;
  u.end_s = 260;
  u.usd_per_gpu_hour = 2.5;
  b.usage.push_back(u);
  b.layouts.push_back({"n1", 2, "3g.40gb@4"});
  b.meta["clock_s"] = "123";
  b.nodes.push_back({0, "n0", R"({"name":"n0","gpus":8})", "drained", true, 7});
  b.nodes.push_back({1, "n1", R"({"name":"n1","gpus":4})", "cordoned", false, 8});
  b.audit.push_back(
      {0, 50, "admin", "team.create", "team:vision", "127.0.0.1", "", R"({"name":"vision"})", true});
  return b;
}

TYPED_TEST(StoreConformance, RoundTripsEveryTable) {
  int version = 0;
  {
    auto s = this->Open();
    ASSERT_NE(s, nullptr);
    version = s->schema_version();
    EXPECT_GT(version, 0);
    ASSERT_TRUE(s->WriteAndWait(EveryTable()).ok());
  }
  auto s = this->Open();  // reopened: the migrations do not run again
  ASSERT_NE(s, nullptr);
  auto st = s->Load();
  ASSERT_TRUE(st.ok()) << st.error();
  EXPECT_EQ(st->schema_version, version);
  ASSERT_EQ(st->teams.size(), 1u);
  EXPECT_EQ(st->teams[0].limit_milli, 16000);
  EXPECT_EQ(st->teams[0].over_quota_weight, 2);
  EXPECT_EQ(st->teams[0].version, 3u);
  EXPECT_EQ(st->teams[0].allowed_classes, (std::vector<std::string>{"training", "batch"}));
  ASSERT_EQ(st->users.size(), 1u);
  EXPECT_EQ(st->users[0].token_hash, "abc123");
  ASSERT_EQ(st->jobs.size(), 1u);
  const JobRow& j = st->jobs[0];
  EXPECT_EQ(j.state, "Running");
  EXPECT_EQ(j.message, "it's \"quoted\"\n");
  ASSERT_EQ(j.placements.size(), 1u);
  ASSERT_EQ(j.placements[0].gpus.size(), 2u);
  EXPECT_EQ(j.placements[0].node, 1);
  EXPECT_EQ(j.placements[0].gpus[1].mig_profile, 3);
  EXPECT_EQ(j.placements[0].gpus[1].mig_start, 4);
  EXPECT_EQ(j.placements[0].gpus[1].milli, 142);
  EXPECT_EQ(j.placements[0].gpus[0].memory_mib, 4096);
  ASSERT_EQ(st->keys.size(), 1u);
  EXPECT_EQ(st->keys[0].job_id, 1);
  ASSERT_EQ(st->usage.size(), 1u);
  EXPECT_EQ(st->usage[0].tier, Tier::kSpot);
  EXPECT_EQ(st->usage[0].end_s, 260);
  EXPECT_DOUBLE_EQ(st->usage[0].usd_per_gpu_hour, 2.5);
  ASSERT_EQ(st->layouts.size(), 1u);
  EXPECT_EQ(st->layouts[0].layout, "3g.40gb@4");
  EXPECT_EQ(st->meta["clock_s"], "123");
  ASSERT_EQ(st->nodes.size(), 2u);
  EXPECT_TRUE(st->nodes[0].removed);
  EXPECT_EQ(st->nodes[0].state, "drained");
  EXPECT_EQ(st->nodes[1].spec_json, R"({"name":"n1","gpus":4})");
  EXPECT_FALSE(st->nodes[1].removed);
  EXPECT_EQ(st->nodes[1].changed_at, 8);
  bool more = true;
  auto audit = s->ReadAudit(AuditQuery{}, &more);
  ASSERT_TRUE(audit.ok()) << audit.error();
  ASSERT_EQ(audit->size(), 1u);
  EXPECT_FALSE(more);
  EXPECT_EQ((*audit)[0].after, R"({"name":"vision"})");
  EXPECT_TRUE((*audit)[0].changed);
}

// Teams, users, jobs, nodes, layouts and meta are replaced by their key: a team's new version, a user's
// rotated token, a job's new state, a node's new state.
TYPED_TEST(StoreConformance, UpsertsReplaceRowsByKey) {
  auto s = this->Open();
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->WriteAndWait(EveryTable()).ok());
  WriteBatch later;
  later.teams.push_back({"vision", 4000, -1, 1, 5, std::nullopt, 4});
  later.users.push_back({1, "ana", "vision", "team-lead", "rotated", 6});
  JobRow j = ConformanceJob(1);
  j.state = "Succeeded";
  j.finished_at = 300;
  later.jobs.push_back(j);
  later.nodes.push_back({1, "n1", R"({"name":"n1","gpus":4})", "ready", false, 9});
  later.layouts.push_back({"n1", 2, ""});
  later.meta["clock_s"] = "456";
  ASSERT_TRUE(s->WriteAndWait(std::move(later)).ok());
  auto st = s->Load();
  ASSERT_TRUE(st.ok()) << st.error();
  ASSERT_EQ(st->teams.size(), 1u);
  EXPECT_EQ(st->teams[0].version, 4u);
  EXPECT_EQ(st->teams[0].guaranteed_milli, 4000);
  EXPECT_EQ(st->teams[0].allowed_classes, std::nullopt);
  ASSERT_EQ(st->users.size(), 1u);
  EXPECT_EQ(st->users[0].token_hash, "rotated");
  ASSERT_EQ(st->jobs.size(), 1u);
  EXPECT_EQ(st->jobs[0].state, "Succeeded");
  EXPECT_TRUE(st->jobs[0].placements.empty());
  ASSERT_EQ(st->nodes.size(), 2u);
  EXPECT_EQ(st->nodes[1].state, "ready");
  ASSERT_EQ(st->layouts.size(), 1u);
  EXPECT_EQ(st->layouts[0].layout, "");
  EXPECT_EQ(st->meta["clock_s"], "456");
}

TYPED_TEST(StoreConformance, AFailedBatchLeavesNothingAndOthersCommit) {
  auto s = this->Open();
  ASSERT_NE(s, nullptr);
  WriteBatch first;
  first.jobs.push_back(ConformanceJob(1));
  first.keys.push_back({"ana", "k", "h", 1});
  ASSERT_TRUE(s->WriteAndWait(std::move(first)).ok());
  // Several batches queued together: the one reusing the key fails as a whole (its job row too).
  std::vector<std::future<Status>> results;
  for (int64_t id = 2; id <= 4; ++id) {
    WriteBatch b;
    b.jobs.push_back(ConformanceJob(id));
    b.keys.push_back({"ana", id == 3 ? "k" : "k" + std::to_string(id), "h", id});
    b.audit.push_back({0, id, "ana", "job.submit", "job:" + std::to_string(id), "", "", "{}", true});
    auto p = std::make_shared<std::promise<Status>>();
    results.push_back(p->get_future());
    s->Write(std::move(b), [p](const Status& st) { p->set_value(st); });
  }
  EXPECT_TRUE(results[0].get().ok());
  EXPECT_FALSE(results[1].get().ok());
  EXPECT_TRUE(results[2].get().ok());
  auto st = s->Load();
  ASSERT_TRUE(st.ok());
  std::vector<int64_t> ids;
  for (const JobRow& j : st->jobs) ids.push_back(j.id);
  EXPECT_EQ(ids, (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(st->keys.size(), 3u);
  bool more = false;
  auto audit = s->ReadAudit(AuditQuery{}, &more);
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 2u);  // the failed batch's audit entry went with it
  EXPECT_EQ((*audit)[0].target, "job:2");
  EXPECT_EQ((*audit)[1].target, "job:4");
}

// Batches queued together (the writer commits what queued behind its last commit as one group): every
// batch's events, audit entries and usage in the order written, a job written by several batches keeps
// the last one's row, and text with quotes, backslashes, braces, commas and non-ASCII letters comes back
// as written.
TYPED_TEST(StoreConformance, BatchesQueuedTogetherKeepOrderLastRowsAndText) {
  auto s = this->Open();
  ASSERT_NE(s, nullptr);
  const std::string odd = "a \"quoted\" {brace}, back\\slash\\\" NULL é";
  std::vector<std::future<Status>> results;
  for (int i = 0; i < 40; ++i) {
    WriteBatch b;
    JobRow j = ConformanceJob(1 + i % 2);
    j.message = odd + std::to_string(i);
    j.spec_json = R"({"name":"x\"y","n":)" + std::to_string(i) + "}";
    b.jobs.push_back(j);
    b.events.push_back({1 + i % 2, i, "Changed", odd + std::to_string(i)});
    b.audit.push_back({0, i, "ana", "job.change", "job:" + std::to_string(i), odd, "", "{}", i % 3 == 0});
    UsageRecord u;
    u.job_id = 100 - i;
    u.team = odd;
    u.usd_per_gpu_hour = i / 7.0;
    b.usage.push_back(u);
    auto p = std::make_shared<std::promise<Status>>();
    results.push_back(p->get_future());
    s->Write(std::move(b), [p](const Status& st) { p->set_value(st); });
  }
  for (auto& r : results) ASSERT_TRUE(r.get().ok());
  auto st = s->Load();
  ASSERT_TRUE(st.ok()) << st.error();
  ASSERT_EQ(st->jobs.size(), 2u);
  EXPECT_EQ(st->jobs[0].message, odd + "38");
  EXPECT_EQ(st->jobs[1].message, odd + "39");
  EXPECT_EQ(st->jobs[1].spec_json, R"({"name":"x\"y","n":39})");
  ASSERT_EQ(st->usage.size(), 40u);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(st->usage[i].job_id, 100 - i);
    EXPECT_EQ(st->usage[i].team, odd);
    EXPECT_EQ(st->usage[i].usd_per_gpu_hour, i / 7.0);
  }
  bool more = false;
  AuditQuery all;
  all.limit = 100;
  auto audit = s->ReadAudit(all, &more);
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 40u);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ((*audit)[i].time, i);
    EXPECT_EQ((*audit)[i].source, odd);
    EXPECT_EQ((*audit)[i].changed, i % 3 == 0);
  }
}

TYPED_TEST(StoreConformance, ConcurrentWritersAreAllDurable) {
  {
    auto s = this->Open();
    ASSERT_NE(s, nullptr);
    std::vector<std::thread> threads;
    std::atomic<int> failed{0};
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 25; ++i) {
          WriteBatch b;
          b.jobs.push_back(ConformanceJob(1 + t * 25 + i));
          b.events.push_back({1 + t * 25 + i, 1, "Submitted", ""});
          if (!s->WriteAndWait(std::move(b)).ok()) ++failed;
        }
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(failed.load(), 0);
    s->Close();
    WriteBatch late;
    late.jobs.push_back(ConformanceJob(999));
    EXPECT_FALSE(s->WriteAndWait(std::move(late)).ok());  // closed
  }
  auto s = this->Open();
  ASSERT_NE(s, nullptr);
  auto st = s->Load();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->jobs.size(), 200u);
}

TYPED_TEST(StoreConformance, AuditFiltersAndPagesById) {
  auto s = this->Open();
  ASSERT_NE(s, nullptr);
  WriteBatch b;
  for (int i = 0; i < 7; ++i)
    b.audit.push_back({0, 100 + i, i % 2 ? "ana" : "admin", i < 3 ? "team.create" : "job.cancel",
                       "job:" + std::to_string(i % 3), "10.0.0.1", "", "{}", i != 6});
  ASSERT_TRUE(s->WriteAndWait(std::move(b)).ok());
  bool more = false;
  AuditQuery q;
  q.limit = 3;
  auto page1 = s->ReadAudit(q, &more);
  ASSERT_TRUE(page1.ok()) << page1.error();
  ASSERT_EQ(page1->size(), 3u);
  EXPECT_TRUE(more);
  q.after_id = page1->back().id;
  auto page2 = s->ReadAudit(q, &more);
  ASSERT_TRUE(page2.ok());
  ASSERT_EQ(page2->size(), 3u);
  EXPECT_GT(page2->front().id, page1->back().id);
  EXPECT_EQ(page2->front().time, 103);
  q.after_id = page2->back().id;
  auto page3 = s->ReadAudit(q, &more);
  ASSERT_EQ(page3->size(), 1u);
  EXPECT_FALSE(more);
  EXPECT_FALSE(page3->front().changed);
  AuditQuery f;
  f.actor = "ana";
  f.action = "job.cancel";
  f.since = 104;
  auto filtered = s->ReadAudit(f, &more);
  ASSERT_TRUE(filtered.ok());
  ASSERT_EQ(filtered->size(), 1u);  // times 103 (ana, cancel) is before `since`; 105 is ana's other
  EXPECT_EQ(filtered->front().time, 105);
  AuditQuery by_target;
  by_target.target = "job:0";
  auto targets = s->ReadAudit(by_target, &more);
  ASSERT_EQ(targets->size(), 3u);  // i = 0, 3, 6
}

TYPED_TEST(StoreConformance, UsageRecordsKeepTheirOrderAndValues) {
  auto s = this->Open();
  ASSERT_NE(s, nullptr);
  for (int i = 0; i < 3; ++i) {
    WriteBatch b;
    for (int k = 0; k < 2; ++k) {
      UsageRecord u;
      u.job_id = 10 - i * 2 - k;  // written in an order that is not the job ids'
      u.team = "vision";
      u.queue = "vision";
      u.gpu_kind = "a100-80gb";
      u.compute_milli = 142 + k;
      u.memory_milli = 125;
      u.start_s = 1000 + i;
      u.end_s = 1000 + i + 3600;
      u.lost_s = k;
      u.usd_per_gpu_hour = 1.0 / 3.0;
      u.list_usd_per_gpu_hour = -1;
      b.usage.push_back(u);
    }
    ASSERT_TRUE(s->WriteAndWait(std::move(b)).ok());
  }
  auto st = s->Load();
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->usage.size(), 6u);
  for (int n = 0; n < 6; ++n) {
    EXPECT_EQ(st->usage[n].job_id, 10 - n);
    EXPECT_EQ(st->usage[n].compute_milli, 142 + n % 2);
    EXPECT_EQ(st->usage[n].lost_s, n % 2);
    EXPECT_EQ(st->usage[n].usd_per_gpu_hour, 1.0 / 3.0);  // exactly
    EXPECT_EQ(st->usage[n].list_usd_per_gpu_hour, -1);
  }
}

// Usage records are read by interval (those meeting [from, to), in the order written), idempotency keys one
// by one, and a load without the history leaves both out.
TYPED_TEST(StoreConformance, ReadsUsageByIntervalAndKeysOneByOne) {
  auto s = this->Open();
  ASSERT_NE(s, nullptr);
  const std::pair<int64_t, int64_t> spans[] = {{100, 200}, {50, 100}, {150, 160}, {300, 400}, {200, 300}};
  WriteBatch b;
  for (size_t i = 0; i < std::size(spans); ++i) {
    UsageRecord u;
    u.job_id = static_cast<JobId>(10 + i);
    u.team = "vision";
    u.node = "node-" + std::to_string(i);
    u.gpu_kind = "h100-80gb";
    u.start_s = spans[i].first;
    u.end_s = spans[i].second;
    b.usage.push_back(u);
  }
  b.keys.push_back({"ana", "k-1", "hash-1", 10});
  b.keys.push_back({"bo", "k-2", "hash-2", 11});
  ASSERT_TRUE(s->WriteAndWait(std::move(b)).ok());
  auto ids = [&](int64_t from, int64_t to, int64_t after = 0, int64_t through = -1) {
    auto r = s->ReadUsage(UsageRead{from, to, after, through});
    EXPECT_TRUE(r.ok()) << r.error();
    std::vector<int64_t> out;
    if (r.ok())
      for (const UsageRecord& u : r->records) out.push_back(u.job_id);
    return out;
  };
  EXPECT_EQ(ids(0, 1000), (std::vector<int64_t>{10, 11, 12, 13, 14}));
  EXPECT_EQ(ids(100, 200), (std::vector<int64_t>{10, 12}));  // [50, 100) and [200, 300) only touch it
  EXPECT_EQ(ids(199, 201), (std::vector<int64_t>{10, 14}));
  EXPECT_EQ(ids(400, 500), (std::vector<int64_t>{}));
  auto all = s->ReadUsage(UsageRead{0, 1000});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->records[3].node, "node-3");
  EXPECT_EQ(all->records[3].start_s, 300);
  // The records written after a read's last number are those a read from there gets, and only those.
  UsageRecord more = all->records[0];
  more.job_id = 20;
  WriteBatch next;
  next.usage.push_back(more);
  ASSERT_TRUE(s->WriteAndWait(std::move(next)).ok());
  EXPECT_EQ(ids(0, 1000, all->last_seq), (std::vector<int64_t>{20}));
  EXPECT_EQ(ids(0, 1000, 0, all->last_seq), (std::vector<int64_t>{10, 11, 12, 13, 14}));
  EXPECT_EQ(ids(0, 1000, all->last_seq, all->last_seq), (std::vector<int64_t>{}));
  auto k = s->FindKey("ana", "k-1");
  ASSERT_TRUE(k.ok()) << k.error();
  ASSERT_TRUE(k->has_value());
  EXPECT_EQ((*k)->body_hash, "hash-1");
  EXPECT_EQ((*k)->job_id, 10);
  auto other = s->FindKey("ana", "k-2");  // another user's key
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->has_value());
  // A key written after the first look-up is found by the next.
  WriteBatch later;
  later.keys.push_back({"ana", "k-2", "hash-3", 12});
  ASSERT_TRUE(s->WriteAndWait(std::move(later)).ok());
  auto found = s->FindKey("ana", "k-2");
  ASSERT_TRUE(found.ok());
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->job_id, 12);
  // Every key's name, in (user, key) order, page by page.
  using Names = std::vector<std::pair<std::string, std::string>>;
  auto first = s->ReadKeyNames("", "", 2);
  ASSERT_TRUE(first.ok()) << first.error();
  EXPECT_EQ(*first, (Names{{"ana", "k-1"}, {"ana", "k-2"}}));
  auto rest = s->ReadKeyNames("ana", "k-2", 2);
  ASSERT_TRUE(rest.ok()) << rest.error();
  EXPECT_EQ(*rest, (Names{{"bo", "k-2"}}));
  LoadLimits lean;
  lean.history = false;
  auto l = s->Load(lean);
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->usage.empty());
  EXPECT_TRUE(l->keys.empty());
  auto full = s->Load();
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->usage.size(), 6u);
  EXPECT_EQ(full->keys.size(), 3u);
}

// A summed read is what SumUsage makes of the records it covers, for any cuts and grouping: random
// records (fixed seed) of a few teams, projects, jobs, nodes and shares, some with lost time, some of zero
// length, some across a cut.
TYPED_TEST(StoreConformance, SummedUsageReadsSumAsSumUsageDoes) {
  auto s = this->Open();
  ASSERT_NE(s, nullptr);
  std::mt19937_64 rng(7);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  std::vector<UsageRecord> written;
  WriteBatch b;
  for (int i = 0; i < 400; ++i) {
    UsageRecord u;
    u.job_id = pick(1, 40);
    u.team = fmt::format("team-{}", u.job_id % 3);
    u.project = fmt::format("p{}", u.job_id % 5);
    u.queue = "q";
    u.gpu_kind = pick(0, 1) ? "h100-80gb" : "a100-80gb";
    u.tier = pick(0, 1) ? Tier::kOnDemand : Tier::kSpot;
    u.pool = pick(0, 1) ? "" : "pool-a";
    u.node = "node-" + std::to_string(pick(0, 3));
    u.compute_milli = pick(0, 1) ? 1000 : 143;
    u.memory_milli = u.compute_milli == 1000 ? 1000 : 125;
    u.start_s = pick(0, 10000);
    u.end_s = u.start_s + (pick(0, 9) == 0 ? 0 : pick(1, 3000));
    u.lost_s = pick(0, 2) == 0 ? pick(0, u.end_s - u.start_s) : 0;
    u.usd_per_gpu_hour = 2.5;
    written.push_back(u);
    b.usage.push_back(u);
  }
  ASSERT_TRUE(s->WriteAndWait(std::move(b)).ok());
  const std::vector<std::vector<int64_t>> cut_sets = {{0, 13000}, {1000, 4000, 4001, 9000}, {2500, 2600}};
  for (const auto& cuts : cut_sets)
    for (UsageSumKey key : {UsageSumKey{false, false}, UsageSumKey{true, false}, UsageSumKey{true, true}}) {
      UsageRead read{cuts.front(), cuts.back(), 0, -1, cuts, key};
      auto got = s->ReadUsage(read);
      ASSERT_TRUE(got.ok()) << got.error();
      const std::vector<UsageRecord> want = SumUsage(written, cuts, key);
      ASSERT_EQ(got->records.size(), want.size()) << cuts.size() << " cuts";
      ASSERT_FALSE(want.empty());
      for (size_t i = 0; i < want.size(); ++i) {
        const UsageRecord &g = got->records[i], &w = want[i];
        EXPECT_EQ(std::tie(g.team, g.project, g.job_id, g.gpu_kind, g.pool, g.node),
                  std::tie(w.team, w.project, w.job_id, w.gpu_kind, w.pool, w.node));
        EXPECT_EQ(g.tier, w.tier);
        EXPECT_EQ(std::tie(g.compute_milli, g.memory_milli, g.start_s, g.end_s, g.held_s, g.lost_s),
                  std::tie(w.compute_milli, w.memory_milli, w.start_s, w.end_s, w.held_s, w.lost_s))
            << "group " << i << " of " << g.team << "/" << g.node;
      }
    }
}

TYPED_TEST(StoreConformance, ASchemaNewerThanTheBinaryIsRefused) {
  int version = 0;
  {
    auto s = this->Open();
    ASSERT_NE(s, nullptr);
    version = s->schema_version();
  }
  ASSERT_EQ(this->where_.Sql("INSERT INTO schema_migrations (version, applied_at) VALUES (" +
                             std::to_string(version + 1) + ", " +
                             (std::string(TypeParam::kName) == "sqlite" ? "0" : "now()") + ")"),
            "");
  auto again = this->where_.Open();
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().find("newer than this tessera"), std::string::npos) << again.error();
}

// Jobs read by filters, in each order with a keyset cursor; a load within a retention leaves out the ended
// jobs beyond the most recently ended (not their keys), and still names the highest id.
TYPED_TEST(StoreConformance, ReadsJobsAndLoadsWithinARetention) {
  auto s = this->Open();
  ASSERT_NE(s, nullptr);
  WriteBatch b;
  const std::vector<std::pair<const char*, int64_t>> states = {{"Succeeded", 500}, {"Running", -1},
                                                               {"Failed", 400},    {"Cancelled", 600},
                                                               {"Pending", -1},    {"Succeeded", 300}};
  for (size_t i = 0; i < states.size(); ++i) {
    JobRow j = ConformanceJob(static_cast<int64_t>(i) + 1);
    j.state = states[i].first;
    j.finished_at = states[i].second;
    if (j.id == 3) {
      j.user = "Bob";
      j.project = "Quantum";
    }
    b.jobs.push_back(j);
    b.keys.push_back({"ana", "k" + std::to_string(j.id), "h", j.id});
  }
  ASSERT_TRUE(s->WriteAndWait(std::move(b)).ok());
  auto ids = [](const Result<std::vector<JobRow>>& rows) {
    std::vector<int64_t> out;
    if (rows.ok())
      for (const JobRow& r : *rows) out.push_back(r.id);
    return out;
  };
  JobRowQuery q;
  q.states = {"Succeeded", "Failed", "Cancelled"};
  q.order = "finished_at";
  q.limit = 2;
  int64_t total = 0;
  auto first = s->ReadJobs(q, &total);
  ASSERT_TRUE(first.ok()) << first.error();
  EXPECT_EQ(ids(first), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(total, 4);
  q.has_after = true;
  q.after_key = 500;
  q.after_id = 1;
  EXPECT_EQ(ids(s->ReadJobs(q, nullptr)), (std::vector<int64_t>{3, 6}));
  JobRowQuery by_id;
  by_id.has_after = true;
  by_id.after_id = 2;
  by_id.limit = 3;
  EXPECT_EQ(ids(s->ReadJobs(by_id, &total)), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(total, 6);
  JobRowQuery search;
  search.search = "bob";
  EXPECT_EQ(ids(s->ReadJobs(search, nullptr)), (std::vector<int64_t>{3}));
  search.search = "quant";
  EXPECT_EQ(ids(s->ReadJobs(search, nullptr)), (std::vector<int64_t>{3}));
  search.search = "job-5";
  EXPECT_EQ(ids(s->ReadJobs(search, nullptr)), (std::vector<int64_t>{5}));
  JobRowQuery one;
  one.id = 2;
  EXPECT_EQ(ids(s->ReadJobs(one, nullptr)), (std::vector<int64_t>{2}));
  JobRowQuery other;
  other.team = "other";
  EXPECT_EQ(ids(s->ReadJobs(other, &total)), (std::vector<int64_t>{}));
  EXPECT_EQ(total, 0);
  auto loaded = s->Load(LoadLimits{2});
  ASSERT_TRUE(loaded.ok()) << loaded.error();
  std::vector<int64_t> got, keyed;
  for (const JobRow& r : loaded->jobs) got.push_back(r.id);
  for (const IdempotencyRow& k : loaded->keys) keyed.push_back(k.job_id);
  std::sort(keyed.begin(), keyed.end());
  EXPECT_EQ(got, (std::vector<int64_t>{1, 2, 4, 5}));  // live, and the two ended last (4 at 600, 1 at 500)
  EXPECT_EQ(keyed, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));  // every key: a replay names its job
  EXPECT_EQ(loaded->max_job_id, 6);
  EXPECT_EQ(s->Load()->jobs.size(), 6u);
}

// What the API shows of a job, for comparing answers.
std::string JobText(const JobView& v) {
  const JobRecord& j = *v.job;
  return fmt::format("{} {} {} {} {} {} {} {} {} {} {} {} {} {} {}", j.id, JobStateName(j.state), j.name, j.team,
                     j.project, j.user, j.priority_class, TotalGpus(j), j.request.tasks * j.replicas,
                     j.submitted_at, j.started_at, j.finished_at, j.placements.size(), j.message,
                     v.pending.has_value());
}

std::string PageText(const JobPage& p) {
  std::string out = fmt::format("total {} more {}:", p.total, p.more);
  for (const JobView& v : p.jobs) out += " [" + JobText(v) + "]";
  return out;
}

// Every read a client makes of jobs, as text: each job by id (and one past the last), pages of several
// queries walked with their cursor, the id-ordered list, a key's replay, a cancel and a priority change of
// an ended job.
std::string JobAnswers(Service& svc, const Caller& ana, const JobSpec& spec, int64_t last) {
  std::string out;
  for (int64_t id = 1; id <= last + 1; ++id) {
    auto g = svc.Get(ana, id);
    out += g.ok() ? JobText(g.value()) : "404";
    out += "\n";
  }
  std::vector<JobQuery> queries(5);
  queries[1].states = {JobState::kSucceeded};
  queries[2].states = {JobState::kRunning, JobState::kCancelled};
  queries[2].sort = JobSort::kEnded;
  queries[3].search = "J-2";
  queries[3].sort = JobSort::kSubmitted;
  queries[4].team = "vision";
  queries[4].sort = JobSort::kStarted;
  for (JobQuery q : queries) {
    q.limit = 2;
    for (int page = 0; page < 10; ++page) {
      JobPage p = svc.ListJobs(ana, q);
      out += PageText(p) + "\n";
      if (!p.more || p.jobs.empty()) break;
      q.has_after = true;
      q.after_id = p.jobs.back().job->id;
      q.after_key = JobSortKey(*p.jobs.back().job, q.sort);
    }
  }
  bool more = false;
  for (const JobView& v : svc.List(ana, "", "", "", 1, 3, &more)) out += JobText(v) + "\n";
  for (const JobView& v : svc.List(ana, "Succeeded", "vision", "p", 0, 100, &more)) out += JobText(v) + "\n";
  out += fmt::format("more {}\n", more);
  bool created = true;
  auto replay = svc.Submit(ana, spec, "key-1", &created);
  out += replay.ok() ? fmt::format("replay {} {}\n", replay->job->id, created) : "replay failed\n";
  auto cancel = svc.Cancel(ana, 1);
  out += cancel.ok() ? "cancel " + JobText(cancel.value()) + "\n" : "cancel " + cancel.error().message + "\n";
  auto pc = svc.SetPriority(ana, 1, "batch");
  out += pc.ok() ? "priority ok\n" : fmt::format("priority {}\n", static_cast<int>(pc.error().code));
  return out;
}

// A service that keeps one ended job in memory answers every read of jobs as one that keeps them all.
TYPED_TEST(StoreConformance, ServiceAnswersTheSameWithEndedJobsInTheStore) {
  testing::ManualClock clock;
  SimulatedBackend backend(&clock);
  auto open = [&](int64_t retain) { return this->OpenService(&clock, &backend, retain); };
  const Caller admin{"admin", "", Role::kAdmin};
  const Caller ana{"ana", "vision", Role::kTeamLead};
  auto spec_of = [](int i, int gpus) {
    return ParseJobSpec({{"name", fmt::format("j-{}", i)},
                         {"class", "training"},
                         {"workers", 1},
                         {"gpus_per_worker", gpus},
                         {"memory_gib", 40},
                         {"project", i % 2 ? "p" : "q"},
                         {"duration_s", 100 * i}});
  };
  std::string kept, paged;
  int64_t last = 0;
  {
    auto svc = open(1);
    ASSERT_NE(svc, nullptr);
    ASSERT_TRUE(svc->BootstrapAdmin().ok());
    ASSERT_TRUE(svc->CreateTeam(admin, TeamRow{"vision", 16000, -1, 1, 0}).ok());
    ASSERT_TRUE(svc->CreateUser(admin, "ana", "vision", "team-lead").ok());
    for (int i = 1; i <= 6; ++i) {
      auto r = svc->Submit(ana, spec_of(i, 2).value(), i == 1 ? "key-1" : "");
      ASSERT_TRUE(r.ok()) << r.error().message;
      last = r->job->id;
      clock.now_ += 1;
      svc->RunCycleNow();
    }
    auto big = svc->Submit(ana, spec_of(7, 8).value(), "");  // waits for GPUs
    ASSERT_TRUE(big.ok());
    last = big->job->id;
    ASSERT_TRUE(svc->Cancel(ana, 5).ok());
    clock.now_ += 320;
    svc->RunCycleNow();  // 1, 2, 3 succeed
    EXPECT_EQ(svc->JobsInMemory(), 4u);  // 4, 6, 7 live, one ended kept
    paged = JobAnswers(*svc, ana, spec_of(1, 2).value(), last);
  }
  auto svc = open(-1);
  ASSERT_NE(svc, nullptr);
  EXPECT_EQ(svc->JobsInMemory(), static_cast<size_t>(last));
  svc->RunCycleNow();  // the pending job's reasons, as the first service had them
  kept = JobAnswers(*svc, ana, spec_of(1, 2).value(), last);
  EXPECT_EQ(paged, kept);
  EXPECT_NE(kept.find("Succeeded"), std::string::npos);
  EXPECT_NE(kept.find("Cancelled"), std::string::npos);
  EXPECT_NE(kept.find("replay 1 false"), std::string::npos) << kept;
  ASSERT_TRUE(svc->Cancel(ana, last).ok());  // the highest id ends
  svc.reset();
  auto again = open(0);  // no ended job in memory after a restart; the next id still follows the highest
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->JobsInMemory(), 2u);
  auto next = again->Submit(ana, spec_of(8, 1).value(), "");
  ASSERT_TRUE(next.ok()) << next.error().message;
  EXPECT_EQ(next->job->id, last + 1);
  bool created = true;
  auto replay = again->Submit(ana, spec_of(1, 2).value(), "key-1", &created);  // its job is not in memory
  ASSERT_TRUE(replay.ok()) << replay.error().message;
  EXPECT_FALSE(created);
  EXPECT_EQ(replay->job->id, 1);
  EXPECT_EQ(JobStateName(replay->job->state), std::string("Succeeded"));
}

// The service on each store: an idempotency key names its job across a restart, a stale If-Match is
// refused, and a finished job's usage is recorded once.
TYPED_TEST(StoreConformance, ServiceKeysVersionsAndUsageSurviveARestart) {
  testing::ManualClock clock;
  SimulatedBackend backend(&clock);
  auto open = [&] { return this->OpenService(&clock, &backend, ServiceConfig{}.retain_ended_jobs); };
  const Caller admin{"admin", "", Role::kAdmin};
  const Caller ana{"ana", "vision", Role::kTeamLead};
  auto spec = ParseJobSpec({{"name", "j"},
                            {"class", "training"},
                            {"workers", 1},
                            {"gpus_per_worker", 2},
                            {"memory_gib", 40},
                            {"project", "p"},
                            {"duration_s", 600}});
  ASSERT_TRUE(spec.ok());
  int64_t id = 0;
  uint64_t version = 0;
  {
    auto svc = open();
    ASSERT_NE(svc, nullptr);
    ASSERT_TRUE(svc->BootstrapAdmin().ok());
    auto team = svc->CreateTeam(admin, TeamRow{"vision", 8000, -1, 1, 0});
    ASSERT_TRUE(team.ok()) << team.error().message;
    ASSERT_TRUE(svc->CreateUser(admin, "ana", "vision", "team-lead").ok());
    bool created = false;
    auto r = svc->Submit(ana, spec.value(), "key-1", &created);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(created);
    id = r->job->id;
    svc->RunCycleNow();
    clock.now_ += 600;
    svc->RunCycleNow();
    auto done = svc->Get(ana, id);
    ASSERT_TRUE(done.ok());
    EXPECT_EQ(JobStateName(done->job->state), std::string("Succeeded"));
    TeamChange change;
    change.guaranteed_milli = 16000;
    auto updated = svc->UpdateTeam(admin, "vision", change);
    ASSERT_TRUE(updated.ok());
    version = updated->version;
  }
  auto svc = open();
  ASSERT_NE(svc, nullptr);
  bool created = true;
  auto again = svc->Submit(ana, spec.value(), "key-1", &created);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_FALSE(created);
  EXPECT_EQ(again->job->id, id);
  TeamChange stale;
  stale.limit_milli = 32000;
  stale.if_version = version - 1;
  auto refused = svc->UpdateTeam(admin, "vision", stale);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kPreconditionFailed);
  stale.if_version = version;
  EXPECT_TRUE(svc->UpdateTeam(admin, "vision", stale).ok());
  UsageQuery q;
  q.group_by = "job";
  q.to = static_cast<int64_t>(clock.now_);
  auto usage = svc->Usage(admin, q);
  ASSERT_TRUE(usage.ok()) << usage.error().message;
  double gpu_hours = 0;
  for (const UsageRow& row : usage.value())
    if (!row.idle) gpu_hours += row.gpu_hours;
  EXPECT_NEAR(gpu_hours, 2 * 600 / 3600.0, 1e-9);  // 2 GPUs for 600 s, once
}

std::string UsageText(Service& svc, const Caller& c, int64_t from, int64_t to) {
  UsageQuery q;
  q.group_by = "job";
  q.from = from;
  q.to = to;
  auto rows = svc.Usage(c, q);
  if (!rows.ok()) return "error " + rows.error().message;
  std::string out;
  for (const UsageRow& r : rows.value())
    out += fmt::format("{} {} {} {} {} {:.9f} {:.9f}\n", r.team, r.project, r.job, r.tier, r.idle,
                       r.gpu_hours, r.cost);
  return out;
}

// A service whose ended jobs, usage records and idempotency keys stay in the store answers usage queries
// as one that holds them all, and replays a key that left its memory.
TYPED_TEST(StoreConformance, ServiceReadsUsageAndOldKeysFromTheStore) {
  testing::ManualClock clock;
  SimulatedBackend backend(&clock);
  auto open = [&](int64_t retain) { return this->OpenService(&clock, &backend, retain, 1); };
  const Caller admin{"admin", "", Role::kAdmin};
  const Caller ana{"ana", "vision", Role::kTeamLead};
  auto spec_of = [](int i) {
    return ParseJobSpec({{"name", fmt::format("u-{}", i)},
                         {"class", "training"},
                         {"workers", 1},
                         {"gpus_per_worker", i},
                         {"memory_gib", 40},
                         {"project", i % 2 ? "p" : "q"},
                         {"duration_s", 100 * i}});
  };
  const int64_t t0 = static_cast<int64_t>(clock.now_);
  std::string paged_all, paged_part;
  int64_t end = 0;
  {
    auto svc = open(0);
    ASSERT_NE(svc, nullptr);
    ASSERT_TRUE(svc->BootstrapAdmin().ok());
    ASSERT_TRUE(svc->CreateTeam(admin, TeamRow{"vision", 16000, -1, 1, 0}).ok());
    ASSERT_TRUE(svc->CreateUser(admin, "ana", "vision", "team-lead").ok());
    for (int i = 1; i <= 4; ++i) {
      auto r = svc->Submit(ana, spec_of(i).value(), fmt::format("key-{}", i));
      ASSERT_TRUE(r.ok()) << r.error().message;
      EXPECT_EQ(r->job->id, i);
      svc->RunCycleNow();
      clock.now_ += 60;
    }
    clock.now_ += 400;
    svc->RunCycleNow();  // all four ended: none in memory
    EXPECT_EQ(svc->JobsInMemory(), 0u);
    end = static_cast<int64_t>(clock.now_);
    paged_all = UsageText(*svc, admin, -1, end);
    paged_part = UsageText(*svc, ana, t0 + 90, t0 + 250);
    // key-1 left memory (one recent key kept): its replay is read from the store.
    bool created = true;
    auto replay = svc->Submit(ana, spec_of(1).value(), "key-1", &created);
    ASSERT_TRUE(replay.ok()) << replay.error().message;
    EXPECT_FALSE(created);
    EXPECT_EQ(replay->job->id, 1);
    auto reused = svc->Submit(ana, spec_of(2).value(), "key-1", &created);
    ASSERT_FALSE(reused.ok());
    EXPECT_EQ(reused.error().code, ErrorCode::kIdempotencyMismatch);
    auto fresh = svc->Submit(ana, spec_of(1).value(), "key-5", &created);
    ASSERT_TRUE(fresh.ok()) << fresh.error().message;
    EXPECT_TRUE(created);
    EXPECT_EQ(fresh->job->id, 5);
  }
  EXPECT_NE(paged_all.find("vision p 1 "), std::string::npos) << paged_all;
  EXPECT_NE(paged_all.find("vision q 4 "), std::string::npos) << paged_all;
  auto svc = open(-1);  // every job, usage record and key in memory
  ASSERT_NE(svc, nullptr);
  EXPECT_EQ(UsageText(*svc, admin, -1, end), paged_all);
  EXPECT_EQ(UsageText(*svc, ana, t0 + 90, t0 + 250), paged_part);
  bool created = true;
  auto replay = svc->Submit(ana, spec_of(1).value(), "key-1", &created);
  ASSERT_TRUE(replay.ok());
  EXPECT_FALSE(created);
  EXPECT_EQ(replay->job->id, 1);
}

}  // namespace
}  // namespace tessera
