// The chargeback room on its own: durable records and the running jobs' usage priced over an interval with
// every node's capacity; an admin sees each team and the idle capacity, a team its rows and its share of
// idle.
#include "service/chargeback.h"

#include <gtest/gtest.h>

#include <map>

#include "cost/pricebook.h"
#include "model/catalog.h"
#include "store/store.h"

namespace tessera {
namespace {

constexpr const char* kChargebackCluster = R"(name: c
defaults: {gpus: 2, cpu: 64, memory_gib: 256, interconnect: nvswitch, spine: s, leaf: leaf-0, tier: on-demand}
nodes:
  - {name: n0, gpu: h100-80gb, price_per_gpu_hour: 2.0}
)";

UsageRecord Held(const std::string& team, int64_t start, int64_t end) {
  UsageRecord u;
  u.team = team;
  u.project = "p";
  u.job_id = 1;
  u.gpu_kind = "h100-80gb";
  u.tier = Tier::kOnDemand;
  u.node = "n0";
  u.start_s = start;
  u.end_s = end;
  return u;
}

TEST(ChargebackTest, TeamsPayWhatTheyHeldAndShareIdleInProportion) {
  auto cluster = LoadClusterYaml(kChargebackCluster, "test", Catalog::Default());
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  const std::vector<PriceBook> books = {PriceBook::Default()};
  Chargeback cb(&Catalog::Default(), &books);
  cb.Restore({Held("a", 0, 3600)}, 0);
  cb.Add({Held("b", 0, 1800)});
  int64_t start = -1;
  std::vector<UsageRecord> usage = cb.Records(&start);
  EXPECT_EQ(start, 0);
  ASSERT_EQ(usage.size(), 2u);
  usage.push_back(Held("b", 1800, 3600));  // a running job's usage so far
  auto built = cb.Ledger(UsageQuery{}, usage, start, *cluster, 3600);
  ASSERT_TRUE(built.ok()) << built.error().message;
  // Two GPUs for an hour at $2: $4 of capacity; a and b each held one GPU-hour, nothing was idle.
  auto admin = cb.Rows(Caller{"admin", "", Role::kAdmin}, UsageQuery{}, built.value());
  ASSERT_TRUE(admin.ok());
  double total = 0;
  for (const UsageRow& r : admin.value()) {
    EXPECT_FALSE(r.idle) << r.team;
    EXPECT_DOUBLE_EQ(r.gpu_hours, 1.0) << r.team;
    total += r.cost;
  }
  EXPECT_NEAR(total, 4.0, 1e-9);
  // Over two hours, the second is idle: shared in proportion to use (half each).
  auto two = cb.Ledger(UsageQuery{}, usage, start, *cluster, 7200);
  ASSERT_TRUE(two.ok());
  auto team_a = cb.Rows(Caller{"ana", "a", Role::kMember}, UsageQuery{}, two.value());
  ASSERT_TRUE(team_a.ok());
  double a_cost = 0, a_idle = 0;
  for (const UsageRow& r : team_a.value()) {
    EXPECT_EQ(r.team, "a");
    a_cost += r.cost;
    if (r.idle) a_idle += r.cost;
  }
  EXPECT_NEAR(a_idle, 2.0, 1e-9);
  EXPECT_NEAR(a_cost, 4.0, 1e-9);
  UsageQuery backwards;
  backwards.from = 100;
  backwards.to = 50;
  auto bad = cb.Ledger(backwards, usage, start, *cluster, 3600);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "to");
  auto csv = cb.FocusCsv(Caller{"ana", "a", Role::kMember}, built.value());
  ASSERT_TRUE(csv.ok());
  EXPECT_EQ(csv.value().find(",b,"), std::string::npos) << "a team's CSV holds only its own rows";
}

// A GPU kind the price book has no on-demand list price for (an L40S) is charged at its node's price and its
// list cost is that cost: never an error that would fail every usage answer.
TEST(ChargebackTest, AKindWithoutAListPriceIsChargedNotAnError) {
  const std::vector<PriceBook> books = {PriceBook::Default()};
  ASSERT_EQ(books[0].FindListPrice("l40s-48gb"), nullptr) << "pick a kind the default book does not list";
  auto cluster = LoadClusterYaml(R"(name: c
defaults: {gpus: 2, cpu: 64, memory_gib: 256, interconnect: pcie, spine: s, leaf: leaf-0, tier: reserved}
nodes:
  - {name: n0, gpu: l40s-48gb, price_per_gpu_hour: 1.5}
  - {name: n1, gpu: l40s-48gb}
)", "test", Catalog::Default());
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  Chargeback cb(&Catalog::Default(), &books);
  UsageRecord priced = Held("a", 0, 3600), unpriced = Held("b", 0, 3600);
  priced.gpu_kind = unpriced.gpu_kind = "l40s-48gb";
  priced.tier = unpriced.tier = Tier::kReserved;
  unpriced.node = "n1";
  auto built = cb.Ledger(UsageQuery{}, {priced, unpriced}, 0, *cluster, 3600);
  ASSERT_TRUE(built.ok()) << built.error().message;
  auto rows = cb.Rows(Caller{"admin", "", Role::kAdmin}, UsageQuery{}, built.value());
  ASSERT_TRUE(rows.ok());
  double a = 0, b = 0;
  for (const UsageRow& r : rows.value()) (r.team == "a" ? a : b) += r.idle ? 0 : r.cost;
  EXPECT_NEAR(a, 1.5, 1e-9);
  EXPECT_NEAR(b, 0.0, 1e-9);
}

// Usage wholly outside [from, to) counts nothing: a job that started after `to`, or ended before `from`
// (it was once charged the gap between them).
TEST(ChargebackTest, UsageOutsideTheIntervalCountsNothing) {
  auto cluster = LoadClusterYaml(kChargebackCluster, "test", Catalog::Default());
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  const std::vector<PriceBook> books = {PriceBook::Default()};
  Chargeback cb(&Catalog::Default(), &books);
  const std::vector<UsageRecord> usage = {Held("early", 0, 600), Held("inside", 1000, 1600),
                                          Held("late", 3000, 3600)};
  UsageQuery q;
  q.from = 900;
  q.to = 2000;
  auto built = cb.Ledger(q, usage, 0, *cluster, 3600);
  ASSERT_TRUE(built.ok()) << built.error().message;
  auto rows = cb.Rows(Caller{"admin", "", Role::kAdmin}, q, built.value());
  ASSERT_TRUE(rows.ok());
  std::map<std::string, double> hours;
  for (const UsageRow& r : rows.value())
    if (!r.idle) hours[r.team] += r.gpu_hours;
  EXPECT_DOUBLE_EQ(hours["inside"], 600.0 / 3600);
  EXPECT_DOUBLE_EQ(hours["early"], 0.0);
  EXPECT_DOUBLE_EQ(hours["late"], 0.0);
}

// With a store the room keeps only recent groups of records, numbered: a query adds the groups added since
// its store read began that the read did not see, and is told when some have left memory.
TEST(ChargebackTest, WithAStoreRecentGroupsFillWhatAStoreReadMissed) {
  auto store = OpenSqliteStore(":memory:");
  ASSERT_TRUE(store.ok()) << store.error();
  const std::vector<PriceBook> books = {PriceBook::Default()};
  Chargeback cb(&Catalog::Default(), &books);
  cb.UseStore(store->get());
  cb.Restore({}, 0);
  UsageRecord a = Held("a", 0, 100), b = Held("b", 50, 150), c = Held("c", 60, 160);
  b.job_id = 2;
  c.job_id = 3;
  cb.Add({a, a});  // one job's two GPUs on one node: identical records
  const uint64_t after = cb.Added();
  cb.Add({b});
  cb.Add({c});
  int64_t start = -1;
  EXPECT_TRUE(cb.Records(&start).empty());    // the records are the store's
  std::vector<UsageRecord> read = {a, a, b};  // a read that saw b's write but not c's
  ASSERT_TRUE(cb.AddRecentTo(after, &read));
  ASSERT_EQ(read.size(), 4u);
  EXPECT_EQ(read.back().team, "c");
  std::vector<UsageRecord> none;  // a read that saw nothing, begun before the first group
  ASSERT_TRUE(cb.AddRecentTo(0, &none));
  EXPECT_EQ(none.size(), 4u);
  for (int i = 0; i < 5000; ++i) {
    UsageRecord u = Held("d", i, i + 1);
    u.job_id = 100 + i;
    cb.Add({u});
  }
  std::vector<UsageRecord> late;
  EXPECT_FALSE(cb.AddRecentTo(after, &late));  // b's and c's groups are no longer kept
  EXPECT_TRUE(cb.AddRecentTo(cb.Added(), &late));
  EXPECT_TRUE(late.empty());
}

}  // namespace
}  // namespace tessera
