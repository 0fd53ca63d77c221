// SQLite store: round trip of every table, atomic batches inside a group commit, concurrent writers,
// reopening (migrations run once).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "store/store.h"

namespace tessera {
namespace {

std::string TempDb(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("tessera-store-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto p = dir / name;
  std::filesystem::remove(p);
  return p.string();
}

JobRow Job(int64_t id) {
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

TEST(SqliteStore, RoundTripsEveryTable) {
  const std::string path = TempDb("roundtrip.db");
  {
    auto s = OpenSqliteStore(path);
    ASSERT_TRUE(s.ok()) << s.error();
    EXPECT_EQ((*s)->schema_version(), 3);
    WriteBatch b;
    b.teams.push_back({"vision", 8000, 16000, 2, 5});
    b.users.push_back({1, "ana", "vision", "team-lead", "abc123", 6});
    JobRow j = Job(1);
    j.state = "Running";
    j.started_at = 200;
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
    ASSERT_TRUE((*s)->WriteAndWait(std::move(b)).ok());
    WriteBatch later;  // a node's row is replaced by its position
    later.nodes.push_back({1, "n1", R"({"name":"n1","gpus":4})", "ready", false, 9});
    ASSERT_TRUE((*s)->WriteAndWait(std::move(later)).ok());
  }
  auto s = OpenSqliteStore(path);
  ASSERT_TRUE(s.ok()) << s.error();
  auto st = (*s)->Load();
  ASSERT_TRUE(st.ok()) << st.error();
  EXPECT_EQ(st->schema_version, 3);
  ASSERT_EQ(st->teams.size(), 1u);
  EXPECT_EQ(st->teams[0].limit_milli, 16000);
  EXPECT_EQ(st->teams[0].over_quota_weight, 2);
  ASSERT_EQ(st->users.size(), 1u);
  EXPECT_EQ(st->users[0].token_hash, "abc123");
  ASSERT_EQ(st->jobs.size(), 1u);
  const JobRow& j = st->jobs[0];
  EXPECT_EQ(j.state, "Running");
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
  EXPECT_EQ(st->nodes[0].name, "n0");
  EXPECT_TRUE(st->nodes[0].removed);
  EXPECT_EQ(st->nodes[0].state, "drained");
  EXPECT_EQ(st->nodes[1].position, 1);
  EXPECT_EQ(st->nodes[1].spec_json, R"({"name":"n1","gpus":4})");
  EXPECT_EQ(st->nodes[1].state, "ready");
  EXPECT_FALSE(st->nodes[1].removed);
  EXPECT_EQ(st->nodes[1].changed_at, 9);
}

TEST(SqliteStore, AFailedBatchLeavesNothingAndOthersCommit) {
  auto s = OpenSqliteStore(TempDb("atomic.db"));
  ASSERT_TRUE(s.ok());
  WriteBatch first;
  first.jobs.push_back(Job(1));
  first.keys.push_back({"ana", "k", "h", 1});
  ASSERT_TRUE((*s)->WriteAndWait(std::move(first)).ok());
  // Several batches queued together: the one reusing the key fails as a whole (its job row too).
  std::vector<std::future<Status>> results;
  for (int64_t id = 2; id <= 4; ++id) {
    WriteBatch b;
    b.jobs.push_back(Job(id));
    b.keys.push_back({"ana", id == 3 ? "k" : "k" + std::to_string(id), "h", id});
    auto p = std::make_shared<std::promise<Status>>();
    results.push_back(p->get_future());
    (*s)->Write(std::move(b), [p](const Status& st) { p->set_value(st); });
  }
  EXPECT_TRUE(results[0].get().ok());
  EXPECT_FALSE(results[1].get().ok());
  EXPECT_TRUE(results[2].get().ok());
  auto st = (*s)->Load();
  ASSERT_TRUE(st.ok());
  std::vector<int64_t> ids;
  for (const JobRow& j : st->jobs) ids.push_back(j.id);
  EXPECT_EQ(ids, (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(st->keys.size(), 3u);
}

TEST(SqliteStore, ConcurrentWritersAreAllDurable) {
  const std::string path = TempDb("concurrent.db");
  {
    auto s = OpenSqliteStore(path);
    ASSERT_TRUE(s.ok());
    std::vector<std::thread> threads;
    std::atomic<int> failed{0};
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 50; ++i) {
          WriteBatch b;
          b.jobs.push_back(Job(1 + t * 50 + i));
          if (!(*s)->WriteAndWait(std::move(b)).ok()) ++failed;
        }
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(failed.load(), 0);
    (*s)->Close();
    WriteBatch late;
    late.jobs.push_back(Job(999));
    EXPECT_FALSE((*s)->WriteAndWait(std::move(late)).ok());  // closed
  }
  auto s = OpenSqliteStore(path);
  ASSERT_TRUE(s.ok());
  auto st = (*s)->Load();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->jobs.size(), 400u);
}

// Checkpoints run beside the writer: a long run of commits moves its pages into the database file and the
// WAL stays bounded (with checkpoints disabled and none run, the WAL held every page: 97 MB after 20,000
// submissions in a load run), and everything committed is there after a reopen.
TEST(SqliteStore, CheckpointsKeepTheWalBounded) {
  const std::string path = TempDb("checkpoint.db");
  constexpr int kJobs = 3000;
  {
    auto s = OpenSqliteStore(path);
    ASSERT_TRUE(s.ok());
    for (int i = 0; i < kJobs; ++i) {
      WriteBatch b;
      JobRow j = Job(1 + i);
      j.spec_json = std::string(2000, 'x');  // about half a page per job, a commit each
      b.jobs.push_back(j);
      ASSERT_TRUE((*s)->WriteAndWait(std::move(b)).ok());
    }
    // The checkpointer runs on its own thread: give it a moment to finish the last one it was asked for.
    for (int t = 0; t < 200 && std::filesystem::file_size(path) < 2'000'000; ++t)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_GT(std::filesystem::file_size(path), 2'000'000u) << "nothing was checkpointed into the database";
    EXPECT_LT(std::filesystem::file_size(path + "-wal"), 16'000'000u) << "the WAL was never reset";
  }
  auto s = OpenSqliteStore(path);
  ASSERT_TRUE(s.ok());
  auto st = (*s)->Load();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->jobs.size(), static_cast<size_t>(kJobs));
}

TEST(SqliteStore, UnopenablePathIsAnError) {
  auto s = OpenSqliteStore("/nonexistent-dir/x/y.db");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("/nonexistent-dir/x/y.db"), std::string::npos);
}

}  // namespace
}  // namespace tessera
