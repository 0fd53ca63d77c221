// The SQLite store's own behaviour: WAL checkpoints, an unopenable path. What every store does is in
// store_conformance_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "store/store.h"

namespace tessera {
namespace {

std::string SqliteTempDb(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("tessera-store-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto p = dir / name;
  std::filesystem::remove(p);
  return p.string();
}

JobRow SqliteJob(int64_t id) {
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

// Checkpoints run beside the writer: a long run of commits moves its pages into the database file and the
// WAL stays bounded (with checkpoints disabled and none run, the WAL held every page: 97 MB after 20,000
// submissions in a load run), and everything committed is there after a reopen.
TEST(SqliteStore, CheckpointsKeepTheWalBounded) {
  const std::string path = SqliteTempDb("checkpoint.db");
  constexpr int kJobs = 3000;
  {
    auto s = OpenSqliteStore(path);
    ASSERT_TRUE(s.ok());
    for (int i = 0; i < kJobs; ++i) {
      WriteBatch b;
      JobRow j = SqliteJob(1 + i);
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
