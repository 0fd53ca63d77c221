// What only the PostgreSQL store does, on a real server (tests/testing/postgres_server.h): replicas that
// open an empty database at once settle its schema; the leader lease (one holder, the epoch only grows,
// expiry by the database's clock); fencing (a deposed leader's writes are refused whole and it is told).
#include "store/postgres_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "testing/postgres_server.h"

namespace tessera {
namespace {

std::string FreshPostgres() {
  testing::PostgresServer& server = testing::PostgresServer::Shared();
  std::string uri = server.NewDatabase();
  EXPECT_FALSE(uri.empty()) << "PostgreSQL: " << server.error();
  return uri;
}

JobRow PgJob(int64_t id) {
  JobRow j;
  j.id = id;
  j.user = "ana";
  j.team = "vision";
  j.name = "j" + std::to_string(id);
  j.spec_json = "{}";
  j.state = "Pending";
  return j;
}

TEST(PostgresStore, ReplicasOpeningAnEmptyDatabaseAtOnceAllSucceed) {
  const std::string uri = FreshPostgres();
  ASSERT_FALSE(uri.empty());
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  std::vector<std::string> errors(4);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      auto s = OpenPostgresStore(uri);
      if (s.ok() && (*s)->schema_version() == 4) ++ok;
      if (!s.ok()) errors[i] = s.error();
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 4) << errors[0] << errors[1] << errors[2] << errors[3];
}

TEST(PostgresStore, AnUnreachableDatabaseIsAnErrorWithoutThePassword) {
  auto s = OpenPostgresStore("postgresql://tessera:secret@127.0.0.1:1/none?connect_timeout=2");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("postgresql://tessera@127.0.0.1:1/none"), std::string::npos) << s.error();
  EXPECT_EQ(s.error().find("secret"), std::string::npos);
  auto bad = OpenPostgresStore("postgresql://[::1");
  EXPECT_FALSE(bad.ok());
}

TEST(PostgresStore, TheLeaseHasOneHolderAndItsEpochOnlyGrows) {
  const std::string uri = FreshPostgres();
  ASSERT_FALSE(uri.empty());
  ASSERT_TRUE(OpenPostgresStore(uri).ok());  // the schema
  auto a = LeaderLease::Open(uri, "a", "http://a");
  auto b = LeaderLease::Open(uri, "b", "http://b");
  ASSERT_TRUE(a.ok() && b.ok());
  auto ea = (*a)->TryAcquire(0.5);
  ASSERT_TRUE(ea.ok()) << ea.error();
  EXPECT_EQ(*ea, 1);
  auto eb = (*b)->TryAcquire(0.5);
  ASSERT_TRUE(eb.ok());
  EXPECT_EQ(*eb, 0);  // held
  auto seen = (*b)->Read();
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(seen->url, "http://a");
  EXPECT_TRUE(seen->live);
  EXPECT_TRUE(*(*a)->Renew(1, 0.5));
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // a stops renewing: the lease runs out
  EXPECT_FALSE((*b)->Read()->live);
  eb = (*b)->TryAcquire(5);
  ASSERT_TRUE(eb.ok());
  EXPECT_EQ(*eb, 2);
  EXPECT_FALSE(*(*a)->Renew(1, 5));  // a's term is over
  EXPECT_EQ(*(*a)->TryAcquire(5), 0);
  ASSERT_TRUE((*b)->Release(2).ok());  // a clean shutdown: free at once
  EXPECT_EQ(*(*a)->TryAcquire(5), 3);
}

TEST(PostgresStore, ADeposedLeadersWritesAreRefusedAndItIsTold) {
  const std::string uri = FreshPostgres();
  ASSERT_FALSE(uri.empty());
  auto store = OpenPostgresStore(uri);
  ASSERT_TRUE(store.ok()) << store.error();
  auto mine = LeaderLease::Open(uri, "old", "http://old");
  auto other = LeaderLease::Open(uri, "new", "http://new");
  ASSERT_TRUE(mine.ok() && other.ok());
  const int64_t epoch = *(*mine)->TryAcquire(0.2);
  ASSERT_EQ(epoch, 1);
  std::atomic<int> told{0};
  (*store)->Fence(epoch, [&] { ++told; });
  WriteBatch first;
  first.jobs.push_back(PgJob(1));
  ASSERT_TRUE((*store)->WriteAndWait(std::move(first)).ok());  // while it leads
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(*(*other)->TryAcquire(5), 2);  // another replica took over
  WriteBatch late;
  late.jobs.push_back(PgJob(2));
  late.usage.push_back(UsageRecord{});
  Status st = (*store)->WriteAndWait(std::move(late));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("fenced"), std::string::npos) << st.message();
  EXPECT_EQ(told.load(), 1);
  auto loaded = (*store)->Load();
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->jobs.size(), 1u);  // nothing of the late batch
  EXPECT_TRUE(loaded->usage.empty());
  WriteBatch again;
  again.jobs.push_back(PgJob(3));
  EXPECT_FALSE((*store)->WriteAndWait(std::move(again)).ok());  // still refused
  EXPECT_EQ(told.load(), 1);                                    // told once
}

}  // namespace
}  // namespace tessera
