// The jobs room on its own: a version is visible only once committed, a failed first write is forgotten,
// the visibility rules, the idempotency keys (the recent ones in memory, the others read from a store),
// and readers that run beside a writer.
#include "service/job_book.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "store/store.h"

namespace tessera {
namespace {

JobPtr Version(int64_t id, uint64_t version, const std::string& team, JobState state = JobState::kPending) {
  auto j = std::make_shared<JobRecord>();
  j->id = id;
  j->version = version;
  j->team = team;
  j->user = team + "-user";
  j->name = "job" + std::to_string(id);
  j->state = state;
  return j;
}

const Caller kAdmin{"admin", "", Role::kAdmin};

TEST(JobBook, AVersionIsVisibleOnlyOnceCommitted) {
  JobBook book;
  const Snapshot snap;
  JobPtr v1 = Version(1, book.NextVersion(), "a");
  EXPECT_EQ(book.SetCurrent({v1}), std::vector<bool>{true});
  EXPECT_EQ(book.Current(1), v1);
  EXPECT_EQ(book.Visible(1), nullptr);
  EXPECT_EQ(book.Get(kAdmin, 1, snap).error().code, ErrorCode::kNotFound);
  bool more = true;
  EXPECT_TRUE(book.List(kAdmin, "", "", "", 0, 10, &more, snap).empty());
  EXPECT_EQ(book.Commit({v1}, {true}, true), std::vector<bool>{true});
  ASSERT_TRUE(book.Get(kAdmin, 1, snap).ok());
  EXPECT_EQ(book.Get(kAdmin, 1, snap).value().job, v1);

  // A second version is visible after its commit; a late commit of an older one changes nothing.
  JobPtr v2 = Version(1, book.NextVersion(), "a", JobState::kRunning);
  EXPECT_EQ(book.SetCurrent({v2}), std::vector<bool>{false});
  EXPECT_EQ(book.Visible(1), v1);
  EXPECT_EQ(book.Commit({v2}, {false}, true), std::vector<bool>{false});
  EXPECT_EQ(book.Commit({v1}, {false}, true), std::vector<bool>{false});
  EXPECT_EQ(book.Visible(1), v2);
  EXPECT_EQ(book.ListJobs(kAdmin, JobQuery{}, snap).total, 1);
}

TEST(JobBook, ActiveCountsPerTeamFollowEveryVersion) {
  JobBook book;
  using Counts = std::map<std::string, std::pair<int64_t, int64_t>>;
  book.Restore(Version(1, book.NextVersion(), "a", JobState::kRunning));
  book.Restore(Version(2, book.NextVersion(), "b", JobState::kSucceeded));
  EXPECT_EQ(book.ActiveByTeam(), (Counts{{"a", {0, 1}}}));
  book.SetCurrent({Version(3, book.NextVersion(), "a"), Version(4, book.NextVersion(), "b")});
  EXPECT_EQ(book.ActiveByTeam(), (Counts{{"a", {1, 1}}, {"b", {1, 0}}}));
  book.SetCurrent({Version(3, book.NextVersion(), "a", JobState::kRunning)});
  book.SetCurrent({Version(1, book.NextVersion(), "a", JobState::kCancelled)});
  EXPECT_EQ(book.ActiveByTeam(), (Counts{{"a", {0, 1}}, {"b", {1, 0}}}));
  // A first write that failed is forgotten, and so is its count.
  JobPtr j5 = Version(5, book.NextVersion(), "b");
  const std::vector<bool> fresh = book.SetCurrent({j5});
  EXPECT_EQ(book.ActiveByTeam(), (Counts{{"a", {0, 1}}, {"b", {2, 0}}}));
  book.Commit({j5}, fresh, false);
  EXPECT_EQ(book.ActiveByTeam(), (Counts{{"a", {0, 1}}, {"b", {1, 0}}}));
}

// The queue digests kept as versions change equal those computed afresh from every job's latest version
// (random versions of 60 jobs over 3 queues, fixed seed), and the signature of a queue changes with any
// change to one of its unfinished jobs.
TEST(JobBook, QueueDigestsFollowEveryVersion) {
  JobBook book;
  std::mt19937_64 rng(7);
  std::map<int64_t, JobPtr> latest;
  using Ends = std::vector<std::vector<std::pair<int64_t, int64_t>>>;
  auto afresh = [&](std::vector<std::multiset<std::pair<int64_t, int64_t>>>* ends) {
    ends->assign(3, {});
    for (const auto& [id, j] : latest)
      if (j && j->state == JobState::kRunning && j->duration_s > 0 && j->started_at >= 0)
        (*ends)[j->queue].insert({j->started_at + j->duration_s, j->placements[0].gpus[0].milli});
  };
  const JobState states[] = {JobState::kPending, JobState::kRunning, JobState::kSucceeded,
                             JobState::kCancelled};
  std::vector<uint64_t> previous;
  for (int step = 0; step < 400; ++step) {
    const int64_t id = 1 + static_cast<int64_t>(rng() % 60);
    auto j = std::make_shared<JobRecord>(*Version(id, book.NextVersion(), "a", states[rng() % 4]));
    j->queue = static_cast<int>(id % 3);
    j->duration_s = static_cast<int64_t>(rng() % 3) * 100;  // 0: none declared
    j->started_at = j->state == JobState::kRunning ? static_cast<int64_t>(rng() % 1000) : -1;
    j->placements = {TaskPlacement{0, {GpuGrant{0, static_cast<int>(1 + rng() % 1000)}}}};
    const std::vector<bool> fresh = book.SetCurrent({j});
    const bool failed = fresh[0] && rng() % 8 == 0;  // a first write that failed: forgotten
    book.Commit({j}, fresh, !failed);
    if (!failed) latest[id] = j;
    std::vector<uint64_t> sig;
    Ends ends;
    book.QueueDigests(3, &sig, &ends);
    std::vector<std::multiset<std::pair<int64_t, int64_t>>> want;
    afresh(&want);
    using EndList = std::vector<std::pair<int64_t, int64_t>>;
    for (size_t q = 0; q < 3; ++q) EXPECT_EQ(ends[q], EndList(want[q].begin(), want[q].end())) << step;
    const size_t q = static_cast<size_t>(j->queue);
    if (!previous.empty() && failed) EXPECT_EQ(sig, previous) << "step " << step;
    if (!previous.empty() && !failed && !Terminal(j->state))
      EXPECT_NE(sig[q], previous[q]) << "step " << step;
    previous = sig;
  }
  // Every job ended: nothing left in any queue.
  for (auto& [id, j] : latest) {
    auto end = std::make_shared<JobRecord>(*j);
    end->version = book.NextVersion();
    end->state = JobState::kSucceeded;
    book.Commit({end}, book.SetCurrent({end}), true);
  }
  std::vector<uint64_t> sig;
  Ends ends;
  book.QueueDigests(4, &sig, &ends);
  EXPECT_EQ(sig, std::vector<uint64_t>(4, 0));
  EXPECT_EQ(ends, Ends(4));
}

TEST(JobBook, AFailedFirstWriteIsForgottenAndPendingJobsCarryTheSnapshotsInfo) {
  JobBook book;
  JobPtr j = Version(book.PeekId(), book.NextVersion(), "a");
  book.TakeId(j->id);
  EXPECT_EQ(book.PeekId(), 2);
  const std::vector<bool> fresh = book.SetCurrent({j});
  EXPECT_EQ(book.Commit({j}, fresh, false), std::vector<bool>{false});
  EXPECT_EQ(book.Current(1), nullptr);

  Snapshot snap;
  snap.pending[2].pool_position = 7;
  JobPtr k = Version(2, book.NextVersion(), "a");
  book.Restore(k);
  EXPECT_EQ(book.PeekId(), 3);
  auto v = book.Get(kAdmin, 2, snap);
  ASSERT_TRUE(v.ok());
  ASSERT_TRUE(v.value().pending.has_value());
  EXPECT_EQ(v.value().pending->pool_position, 7);
}

TEST(JobBook, WhoMaySubmitSeeAndChange) {
  const JobPtr job = Version(1, 1, "a");
  const JobRecord& j = *job;
  const Caller lead{"lee", "a", Role::kTeamLead}, own{"a-user", "a", Role::kMember},
      other{"bo", "a", Role::kMember}, viewer{"vi", "a", Role::kViewer}, outsider{"os", "b", Role::kAdmin};
  EXPECT_TRUE(JobBook::CanSee(viewer, j));
  EXPECT_FALSE(JobBook::CanSee(Caller{"x", "b", Role::kMember}, j));
  EXPECT_TRUE(JobBook::CanSee(outsider, j));  // an admin sees every team's jobs
  EXPECT_TRUE(JobBook::CanChange(lead, j));
  EXPECT_TRUE(JobBook::CanChange(own, j));
  EXPECT_FALSE(JobBook::CanChange(other, j));
  EXPECT_FALSE(JobBook::CanChange(viewer, j));
  EXPECT_EQ(JobBook::SubmitTeam(own, "").value(), "a");
  EXPECT_EQ(JobBook::SubmitTeam(own, "b").error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(JobBook::SubmitTeam(viewer, "").error().code, ErrorCode::kPermissionDenied);
  EXPECT_FALSE(JobBook::SubmitTeam(kAdmin, "").ok());
  EXPECT_EQ(JobBook::SubmitTeam(kAdmin, "b").value(), "b");
}

TEST(JobBook, IdempotencyKeysAreDurableWithTheirJobOrForgotten) {
  JobBook book;
  const JobBook::IdemKey key{"ana", "k1"}, other{"ana", "k2"};
  EXPECT_FALSE(book.FindKey(key).has_value());
  book.PutKey(key, {"hash", 1, false});
  book.PutKey(other, {"hash2", 2, false});
  ASSERT_TRUE(book.FindKey(key).has_value());
  EXPECT_FALSE(book.FindKey(key)->durable);
  book.SettleKey(key, true);
  book.SettleKey(other, false);
  EXPECT_TRUE(book.FindKey(key)->durable);
  EXPECT_EQ(book.FindKey(key)->job_id, 1);
  EXPECT_FALSE(book.FindKey(other).has_value());
}

// With a store, durable keys beyond the recent ones leave memory (oldest first) and are read from the store;
// a key not yet durable never leaves.
TEST(JobBook, KeysBeyondTheRecentOnesAreReadFromTheStore) {
  auto store = OpenSqliteStore(":memory:");
  ASSERT_TRUE(store.ok()) << store.error();
  JobBook book;
  book.Page(
      store->get(), 0, [](const JobRow&) { return JobPtr(); }, 2);
  ASSERT_TRUE(book.KeysInStore());
  const JobBook::IdemKey k1{"ana", "k1"}, k2{"ana", "k2"}, k3{"ana", "k3"}, k4{"bo", "k4"};
  WriteBatch b;
  b.keys.push_back({"ana", "k1", "h1", 1});
  ASSERT_TRUE((*store)->WriteAndWait(std::move(b)).ok());
  book.PutKey(k1, {"h1", 1, false});
  book.PutKey(k2, {"h2", 2, false});
  book.PutKey(k3, {"h3", 3, false});
  book.PutKey(k4, {"h4", 4, false});
  book.SettleKey(k1, true);
  book.SettleKey(k2, true);
  EXPECT_EQ(book.KeysEvicted(), 0u);
  book.SettleKey(k3, true);  // k1 leaves
  EXPECT_EQ(book.KeysEvicted(), 1u);
  EXPECT_FALSE(book.FindKey(k1).has_value());
  EXPECT_TRUE(book.FindKey(k2).has_value());
  EXPECT_TRUE(book.FindKey(k4).has_value());  // not durable yet: stays
  EXPECT_EQ(book.KeysInMemory(), 3u);
  auto stored = book.StoredKey(k1);
  ASSERT_TRUE(stored.ok()) << stored.error();
  ASSERT_TRUE(stored->has_value());
  EXPECT_EQ((*stored)->job_id, 1);
  EXPECT_EQ((*stored)->body_hash, "h1");
  EXPECT_TRUE((*stored)->durable);
  auto missing = book.StoredKey(k2);  // in memory only (this test wrote k1 alone)
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  JobBook unpaged;  // without a store every key stays
  for (int i = 0; i < 5; ++i) {
    unpaged.PutKey({"ana", std::to_string(i)}, {"h", i, false});
    unpaged.SettleKey({"ana", std::to_string(i)}, true);
  }
  EXPECT_FALSE(unpaged.KeysInStore());
  EXPECT_EQ(unpaged.KeysInMemory(), 5u);
  EXPECT_EQ(unpaged.KeysEvicted(), 0u);
}

// The filter of keys held only in the store: filled from the store at its first use (keys a previous
// process wrote), then by every key that leaves memory; a key in neither is new without a store read.
TEST(JobBook, TheStoredKeyFilterKnowsEveryKeyOnlyTheStoreHolds) {
  auto store = OpenSqliteStore(":memory:");
  ASSERT_TRUE(store.ok()) << store.error();
  WriteBatch b;
  for (int i = 0; i < 25005; ++i) b.keys.push_back({"ana", "old-" + std::to_string(i), "h", i + 1});
  ASSERT_TRUE((*store)->WriteAndWait(std::move(b)).ok());  // more than two pages of the scan
  JobBook book;
  book.Page(
      store->get(), 0, [](const JobRow&) { return JobPtr(); }, 1);
  for (const char* k : {"old-0", "old-12345", "old-25004"}) {
    auto m = book.MaybeStoredKey({"ana", k});
    ASSERT_TRUE(m.ok()) << m.error();
    EXPECT_TRUE(*m) << k;
  }
  EXPECT_FALSE(*book.MaybeStoredKey({"ana", "new"}));
  EXPECT_FALSE(*book.MaybeStoredKey({"bo", "old-0"}));  // another user's key of the same name
  const JobBook::IdemKey n1{"ana", "n1"}, n2{"ana", "n2"};
  book.PutKey(n1, {"h", 1, false});
  book.PutKey(n2, {"h", 2, false});
  book.SettleKey(n1, true);
  EXPECT_FALSE(*book.MaybeStoredKey(n1));  // in memory: not in the filter
  book.SettleKey(n2, true);                // n1 leaves memory
  EXPECT_TRUE(*book.MaybeStoredKey(n1));
  EXPECT_FALSE(*book.MaybeStoredKey(n2));
}

// Readers beside a writer that makes and commits versions: a reader never sees a job's visible version go
// back, and every visible version was committed.
TEST(JobBook, ReadersBesideAWriterSeeCommittedVersionsInOrder) {
  JobBook book;
  const Snapshot snap;
  constexpr int kJobs = 8, kRounds = 300;
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r)
    readers.emplace_back([&] {
      std::vector<uint64_t> seen(kJobs + 1, 0);
      while (!done.load()) {
        for (int64_t id = 1; id <= kJobs; ++id) {
          auto v = book.Get(kAdmin, id, snap);
          if (!v.ok()) continue;
          if (v.value().job->version < seen[id]) bad.fetch_add(1);
          seen[id] = v.value().job->version;
        }
        (void)book.ListJobs(kAdmin, JobQuery{}, snap);
      }
    });
  for (int round = 0; round < kRounds; ++round) {
    std::vector<JobPtr> next;
    for (int64_t id = 1; id <= kJobs; ++id) next.push_back(Version(id, book.NextVersion(), "a"));
    const std::vector<bool> fresh = book.SetCurrent(next);
    book.Commit(next, fresh, true);
  }
  done.store(true);
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(book.ListJobs(kAdmin, JobQuery{}, snap).total, kJobs);
  for (int64_t id = 1; id <= kJobs; ++id) EXPECT_EQ(book.Visible(id), book.Current(id));
}

}  // namespace
}  // namespace tessera
