// The chargeback room on its own: durable records and the running jobs' usage priced over an interval with
// every node's capacity; an admin sees each team and the idle capacity, a team its rows and its share of
// idle.
#include "service/chargeback.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "base/utc_time.h"
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

// A query's interval is cut where a calendar month begins (and where a book's window does), so that each
// summed record lies on one month's invoice.
TEST(ChargebackTest, CutsFallOnMonthStarts) {
  const std::vector<PriceBook> books = {PriceBook::Default()};
  Chargeback cb(&Catalog::Default(), &books);
  const int64_t from = *ParseIsoUtc("2025-01-30T12:00:00Z"), to = *ParseIsoUtc("2025-03-02T00:00:00Z");
  const std::vector<int64_t> cuts = cb.Cuts(from, to);
  ASSERT_GE(cuts.size(), 4u);
  EXPECT_EQ(cuts.front(), from);
  EXPECT_EQ(cuts.back(), to);
  EXPECT_NE(std::find(cuts.begin(), cuts.end(), *ParseIsoUtc("2025-02-01T00:00:00Z")), cuts.end());
  EXPECT_NE(std::find(cuts.begin(), cuts.end(), *ParseIsoUtc("2025-03-01T00:00:00Z")), cuts.end());
  EXPECT_TRUE(std::is_sorted(cuts.begin(), cuts.end()));
  EXPECT_EQ(cb.Cuts(100, 200), (std::vector<int64_t>{100, 200}));
}

// Rows priced from the runs summed by the query's groups hold exactly the GPU-hours of the runs one by one,
// and cost the same within a cent per run (each run is no longer rounded on its own).
TEST(ChargebackTest, SummedRowsHoldWhatTheRunsHeld) {
  auto cluster = LoadClusterYaml(kChargebackCluster, "test", Catalog::Default());
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  const std::vector<PriceBook> books = {PriceBook::Default()};
  Chargeback cb(&Catalog::Default(), &books);
  std::vector<UsageRecord> runs;
  for (int i = 0; i < 60; ++i) {
    UsageRecord u = Held(i % 3 ? "a" : "b", 37 * i, 37 * i + 17 + i);
    u.job_id = i;
    u.project = i % 2 ? "p" : "q";
    runs.push_back(u);
  }
  for (const char* group_by : {"team", "project", "job"}) {
    UsageQuery q;
    q.group_by = group_by;
    q.from = 0;
    q.to = 3000;
    auto raw = cb.Ledger(q, runs, 0, *cluster, 3000);
    auto summed = cb.Ledger(q, SumUsage(runs, cb.Cuts(0, 3000), SumKeyOf(q)), 0, *cluster, 3000);
    ASSERT_TRUE(raw.ok() && summed.ok());
    EXPECT_LT(summed->ledger.usage().size(), std::string(group_by) == "job" ? 61u : 5u);
    auto r1 = cb.Rows(Caller{"admin", "", Role::kAdmin}, q, raw.value());
    auto r2 = cb.Rows(Caller{"admin", "", Role::kAdmin}, q, summed.value());
    ASSERT_TRUE(r1.ok() && r2.ok());
    ASSERT_EQ(r1->size(), r2->size()) << group_by;
    for (size_t i = 0; i < r1->size(); ++i) {
      const UsageRow &x = r1.value()[i], &y = r2.value()[i];
      EXPECT_EQ(std::tie(x.team, x.project, x.job, x.idle), std::tie(y.team, y.project, y.job, y.idle));
      EXPECT_NEAR(x.gpu_hours, y.gpu_hours, 1e-12) << group_by << " " << x.team;
      EXPECT_NEAR(x.cost, y.cost, 0.01 * 60) << group_by << " " << x.team;
    }
  }
}

}  // namespace
}  // namespace tessera
