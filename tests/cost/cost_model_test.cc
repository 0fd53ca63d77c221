#include "cost/cost_model.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "base/utc_time.h"
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cost/focus.h"
#include "cost/money.h"
#include "testing/csv.h"
#include "testing/paths.h"

namespace tessera {
namespace {

using testing::ParseCsv;

std::string SlurpOrEmpty(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Test pools: two priced pools with capacity records and one elastic on-demand pool.
PriceBook TestBook() {
  Result<PriceBook> b = PriceBook::FromYaml(R"(
on_demand_list:
  - {gpu_kind: h100-80gb, usd_per_gpu_hour: 12.0}
  - {gpu_kind: a100-80gb, usd_per_gpu_hour: 5.0}
pools:
  - {name: res-h100, tier: reserved, gpu_kind: h100-80gb, usd_per_gpu_hour: 2.0}
  - {name: spot-h100, tier: spot, gpu_kind: h100-80gb, usd_per_gpu_hour: 3.0, reclaim_notice_s: 120}
  - {name: od-a100, tier: on-demand, gpu_kind: a100-80gb, usd_per_gpu_hour: 5.0}
  - {name: own-a100, tier: owned, gpu_kind: a100-80gb, usd_per_gpu_hour: 1.5,
     owned: {gpus: 8, capex_usd: 100000, life_months: 48}}
)",
                                            "test-book");
  EXPECT_TRUE(b.ok()) << b.error();
  return *b;
}

UsageRecord Use(std::string team, std::string project, JobId job, std::string pool, Tier tier, std::string kind,
                int64_t start, int64_t end, int32_t milli = 1000) {
  UsageRecord r;
  r.team = std::move(team);
  r.project = std::move(project);
  r.queue = "q-" + r.team;
  r.job_id = job;
  r.pool = std::move(pool);
  r.tier = tier;
  r.gpu_kind = std::move(kind);
  r.node = r.pool + "-n0";
  r.start_s = start;
  r.end_s = end;
  r.compute_milli = milli;
  r.memory_milli = milli;
  return r;
}

CapacityRecord Cap(std::string pool, Tier tier, std::string kind, int gpus, int64_t start, int64_t end) {
  CapacityRecord c;
  c.pool = std::move(pool);
  c.node = c.pool + "-n0";
  c.tier = tier;
  c.gpu_kind = std::move(kind);
  c.gpus = gpus;
  c.start_s = start;
  c.end_s = end;
  return c;
}

const CostLine& Line(const std::vector<CostLine>& lines, const std::string& key) {
  for (const CostLine& l : lines) {
    if (l.key == key) return l;
  }
  ADD_FAILURE() << "no line " << key;
  static CostLine none;
  return none;
}

// Two teams share one reserved node of 2 GPUs for 10 h at $2/GPU-h ($40): A holds a GPU for 10 h
// ($20), B for 5 h ($10); 5 GPU-h ($10) nobody holds.
Ledger SmallLedger() {
  Ledger l;
  EXPECT_TRUE(l.AddCapacity(Cap("res-h100", Tier::kReserved, "h100-80gb", 2, 0, 36000)).ok());
  EXPECT_TRUE(l.AddUsage(Use("a", "llm", 1, "res-h100", Tier::kReserved, "h100-80gb", 0, 36000)).ok());
  EXPECT_TRUE(l.AddUsage(Use("b", "vision", 2, "res-h100", Tier::kReserved, "h100-80gb", 0, 18000)).ok());
  return l;
}

TEST(CostModel, IdleReportedOnItsOwnByDefault) {
  CostModel model(TestBook(), CostOptions{});
  Result<CostReport> r = model.Evaluate(SmallLedger());
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_NEAR(r->total_cost, 40, 1e-9);
  EXPECT_NEAR(r->charged_cost, 30, 1e-9);
  EXPECT_NEAR(r->idle_cost, 10, 1e-9);
  EXPECT_NEAR(r->idle_unshared_cost, 10, 1e-9);
  EXPECT_NEAR(r->idle_gpu_hours, 5, 1e-12);
  EXPECT_NEAR(Line(r->by_team, "a").TotalUsd(), 20, 1e-9);
  EXPECT_NEAR(Line(r->by_team, "b").TotalUsd(), 10, 1e-9);
  EXPECT_NEAR(Line(r->by_project, "b/vision").GpuHours(), 5, 1e-12);
  EXPECT_NEAR(Line(r->by_tier, "reserved").cost_usd, 30, 1e-9);
  EXPECT_NEAR(Line(r->by_job, "1").cost_usd, 20, 1e-9);
}

// SumUsage clips each run to each piece it meets and sums a group's held and lost seconds; the order of the
// runs does not matter; a summed record added again is kept as it is; runs of zero length are left out.
TEST(SumUsage, ClipsToPiecesAndSumsEachGroup) {
  UsageRecord a = Use("a", "llm", 1, "res-h100", Tier::kReserved, "h100-80gb", 0, 100);
  UsageRecord b = Use("a", "llm", 2, "res-h100", Tier::kReserved, "h100-80gb", 50, 250);
  b.lost_s = 120;  // clipped to 50 in [50, 100), 120 in [100, 250)
  UsageRecord c = Use("b", "vision", 3, "res-h100", Tier::kReserved, "h100-80gb", 10, 20, 500);
  UsageRecord empty = Use("a", "llm", 4, "res-h100", Tier::kReserved, "h100-80gb", 70, 70);
  const std::vector<int64_t> cuts = {0, 100, 200};
  const std::vector<UsageRecord> by_team = SumUsage({a, b, c, empty}, cuts, UsageSumKey{false, false});
  ASSERT_EQ(by_team.size(), 3u);  // a in [0, 100) and [100, 200); b's share in [0, 100)
  EXPECT_EQ(by_team[0].team, "a");
  EXPECT_EQ(by_team[0].project, "");
  EXPECT_EQ(by_team[0].job_id, 0);
  EXPECT_EQ(by_team[0].held_s, 150);
  EXPECT_EQ(by_team[0].lost_s, 50);
  EXPECT_EQ(by_team[0].start_s, 0);
  EXPECT_EQ(by_team[0].end_s, 100);
  EXPECT_EQ(by_team[1].team, "b");
  EXPECT_EQ(by_team[1].held_s, 10);
  EXPECT_EQ(by_team[2].team, "a");
  EXPECT_EQ(by_team[2].held_s, 100);
  EXPECT_EQ(by_team[2].lost_s, 100);
  EXPECT_EQ(by_team[2].start_s, 100);
  EXPECT_EQ(by_team[2].end_s, 200);
  const std::vector<UsageRecord> by_job = SumUsage({c, b, a}, cuts, UsageSumKey{true, true});
  ASSERT_EQ(by_job.size(), 4u);
  EXPECT_EQ(by_job[0].job_id, 1);
  EXPECT_EQ(by_job[0].project, "llm");
  EXPECT_EQ(SumUsage(by_team, cuts, UsageSumKey{false, false}).size(), by_team.size());
  EXPECT_EQ(SumUsage(by_team, cuts, UsageSumKey{false, false})[2].held_s, 100);
}

// A summed record costs its held seconds times its share, one invoice piece; the same as its runs priced
// one by one where each run's cost is a whole number of cents. One that spans a month's end is refused.
TEST(CostModel, ASummedRecordCostsWhatItsRunsHeld) {
  Ledger runs, summed;
  const std::vector<UsageRecord> held = {
      Use("a", "llm", 1, "res-h100", Tier::kReserved, "h100-80gb", 0, 3600),
      Use("a", "llm", 2, "res-h100", Tier::kReserved, "h100-80gb", 0, 1800),
      Use("a", "llm", 3, "res-h100", Tier::kReserved, "h100-80gb", 1800, 3600)};
  for (const UsageRecord& u : held) ASSERT_TRUE(runs.AddUsage(u).ok());
  const std::vector<UsageRecord> sums = SumUsage(held, {0, 3600}, UsageSumKey{false, false});
  ASSERT_EQ(sums.size(), 1u);
  EXPECT_EQ(sums[0].held_s, 7200);
  ASSERT_TRUE(summed.AddUsage(sums[0]).ok());
  CostModel model(TestBook(), CostOptions{});
  auto r1 = model.Evaluate(runs);
  auto r2 = model.Evaluate(summed);
  ASSERT_TRUE(r1.ok()) << r1.error();
  ASSERT_TRUE(r2.ok()) << r2.error();
  EXPECT_EQ(r2->records[0].milli_gpu_s, 7200 * 1000);
  EXPECT_EQ(r2->records[0].pieces.size(), 1u);
  EXPECT_EQ(r2->charged_cents, r1->charged_cents);
  EXPECT_EQ(r2->charged_cents, 400);  // 2 GPU-hours at $2
  UsageRecord bad = sums[0];
  bad.lost_s = 7201;
  EXPECT_FALSE(Ledger().AddUsage(bad).ok()) << "lost beyond what it held";
  Ledger across;
  CostOptions opts;
  opts.epoch_unix_s = *ParseIsoUtc("2025-01-31T23:00:00Z");
  UsageRecord month = sums[0];
  month.end_s = 7200;  // past 2025-02-01
  ASSERT_TRUE(across.AddUsage(month).ok());
  auto r3 = CostModel(TestBook(), opts).Evaluate(across);
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.error().find("spans a month's end"), std::string::npos) << r3.error();
}

TEST(CostModel, IdleSharingPolicies) {
  CostOptions prop;
  prop.idle_policy = IdlePolicy::kProportional;
  Result<CostReport> p = CostModel(TestBook(), prop).Evaluate(SmallLedger());
  ASSERT_TRUE(p.ok()) << p.error();
  // A holds 2/3 of the cost: $6.666... and $3.333... of the $10 idle, by largest remainder $6.67 + $3.33.
  EXPECT_EQ(Line(p->by_team, "a").TotalCents(), 2000 + 667);
  EXPECT_EQ(Line(p->by_team, "b").TotalCents(), 1000 + 333);
  EXPECT_EQ(p->idle_unshared_cost, 0);
  CostOptions even;
  even.idle_policy = IdlePolicy::kEven;
  Result<CostReport> e = CostModel(TestBook(), even).Evaluate(SmallLedger());
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_NEAR(Line(e->by_team, "a").TotalUsd(), 25, 1e-9);
  EXPECT_NEAR(Line(e->by_team, "b").TotalUsd(), 15, 1e-9);
  EXPECT_NEAR(e->total_cost, 40, 1e-9);
}

TEST(CostModel, IdleIsSharedWithinItsPoolNeverAcrossPools) {
  // Pool res-h100: 2 GPUs for 10 h, team a holds 1 GPU all the time ($20), 5 GPU-h idle ($10).
  // Pool own-a100: 1 GPU for 10 h nobody holds ($15 idle: the platform's own).
  // Team ads only uses elastic on-demand A100s ($10): it pays no idle at all.
  Ledger l;
  ASSERT_TRUE(l.AddCapacity(Cap("res-h100", Tier::kReserved, "h100-80gb", 2, 0, 36000)).ok());
  ASSERT_TRUE(l.AddCapacity(Cap("own-a100", Tier::kOwned, "a100-80gb", 1, 0, 36000)).ok());
  ASSERT_TRUE(l.AddUsage(Use("a", "llm", 1, "res-h100", Tier::kReserved, "h100-80gb", 0, 18000)).ok());
  ASSERT_TRUE(l.AddUsage(Use("b", "llm", 2, "res-h100", Tier::kReserved, "h100-80gb", 18000, 36000)).ok());
  ASSERT_TRUE(l.AddUsage(Use("b", "llm", 3, "res-h100", Tier::kReserved, "h100-80gb", 0, 18000, 500)).ok());
  ASSERT_TRUE(l.AddUsage(Use("ads", "ctr", 4, "od-a100", Tier::kOnDemand, "a100-80gb", 0, 7200)).ok());
  for (IdlePolicy policy : {IdlePolicy::kProportional, IdlePolicy::kEven}) {
    SCOPED_TRACE(IdlePolicyName(policy));
    CostOptions opt;
    opt.idle_policy = policy;
    Result<CostReport> r = CostModel(TestBook(), opt).Evaluate(l);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_NEAR(r->total_cost, 40 + 15 + 10, 1e-9);
    EXPECT_EQ(Line(r->by_team, "ads").idle_share_usd, 0);
    EXPECT_NEAR(r->idle_unshared_cost, 15, 1e-9);  // own-a100: nobody used it
    EXPECT_NEAR(r->idle_shared_cost, 40 - 25, 1e-9);
    // a held 5 GPU-h ($10), b 7.5 GPU-h ($15): proportional 6 / 9, even 7.5 / 7.5 of the $15 idle.
    const double a_idle = policy == IdlePolicy::kEven ? 7.5 : 6;
    EXPECT_NEAR(Line(r->by_team, "a").idle_share_usd, a_idle, 1e-9);
    EXPECT_NEAR(Line(r->by_team, "b").idle_share_usd, 15 - a_idle, 1e-9);
    ASSERT_EQ(r->by_team_pool.size(), 3u);
    for (const TeamPoolLine& tp : r->by_team_pool) {
      EXPECT_GT(tp.milli_gpu_s, 0) << tp.team << " " << tp.pool;
      if (tp.pool != "res-h100") {
        EXPECT_EQ(tp.idle_cost_usd, 0) << tp.team << " " << tp.pool;
      }
    }
    const nlohmann::json j = ToJson(*r);
    EXPECT_EQ(j["by_team_pool"].size(), 3u);
    EXPECT_EQ(j["by_team_pool"][2]["team"], "b");
    EXPECT_NEAR(j["by_team_pool"][2]["idle_cost"].get<double>(), 15 - a_idle, 1e-9);
  }
}

TEST(CostModel, MigSliceChargedByComputeFractionOrMemoryFraction) {
  // An H100 3g.40gb slice: 60 of 132 SMs (454/1000 of the compute), 4 of 8 memory slices (500/1000).
  Ledger l;
  UsageRecord r = Use("a", "chat", 7, "res-h100", Tier::kReserved, "h100-80gb", 0, 7200);
  r.compute_milli = 454;
  r.memory_milli = 500;
  ASSERT_TRUE(l.AddUsage(r).ok());
  Result<CostReport> by_compute = CostModel(TestBook(), CostOptions{}).Evaluate(l);
  ASSERT_TRUE(by_compute.ok()) << by_compute.error();
  EXPECT_EQ(by_compute->records[0].milli_gpu_s, 454 * 7200);
  EXPECT_EQ(by_compute->charged_cents, 182);  // 0.454 GPU x $2 x 2 h = $1.816, one line rounded once
  CostOptions mem;
  mem.charge_basis = ChargeBasis::kMemory;
  Result<CostReport> by_memory = CostModel(TestBook(), mem).Evaluate(l);
  ASSERT_TRUE(by_memory.ok());
  EXPECT_EQ(by_memory->charged_cents, 200);
}

TEST(CostModel, OnDemandOnlyComparisonUsesCompletedWork) {
  Ledger l;
  // 4 spot GPUs for 10 h at $3, of which 1 h each was lost to a reclaim and redone.
  for (int g = 0; g < 4; ++g) {
    UsageRecord r = Use("ml", "pretrain", 9, "spot-h100", Tier::kSpot, "h100-80gb", 0, 36000);
    r.lost_s = 3600;
    ASSERT_TRUE(l.AddUsage(r).ok());
  }
  Result<CostReport> r = CostModel(TestBook(), CostOptions{}).Evaluate(l);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_NEAR(r->total_cost, 4 * 10 * 3.0, 1e-9);
  EXPECT_NEAR(r->useful_gpu_hours, 36, 1e-12);
  EXPECT_NEAR(r->on_demand_only_cost, 36 * 12.0, 1e-9);  // completed work at the h100 list price
  EXPECT_NEAR(r->cost_saving_vs_on_demand, 1 - 120.0 / 432.0, 1e-12);
  EXPECT_NEAR(r->cost_per_useful_gpu_hour, 120.0 / 36, 1e-12);
  EXPECT_NEAR(*OnDemandOnlyCost({{"h100-80gb", 36}, {"a100-80gb", 2}}, TestBook()), 36 * 12.0 + 2 * 5.0, 1e-9);
  EXPECT_FALSE(OnDemandOnlyCost({{"tpu", 1}}, TestBook()).ok());
  EXPECT_NEAR(CostSaving(50, 100), 0.5, 1e-15);
  nlohmann::json j = ToJson(*r);
  EXPECT_NEAR(j["cost_saving_vs_on_demand"].get<double>(), r->cost_saving_vs_on_demand, 1e-15);
  EXPECT_EQ(j["by_tier"][0]["tier"], "spot");
}

TEST(CostModel, ErrorsNameWhatCannotBePricedOrReconciled) {
  {
    Ledger l;
    ASSERT_TRUE(l.AddUsage(Use("a", "p", 1, "nowhere", Tier::kSpot, "h100-80gb", 0, 10)).ok());
    Result<CostReport> r = CostModel(TestBook(), CostOptions{}).Evaluate(l);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("pool 'nowhere'"), std::string::npos) << r.error();
  }
  {
    Ledger l;  // 3 GPUs held on a 2-GPU node
    ASSERT_TRUE(l.AddCapacity(Cap("res-h100", Tier::kReserved, "h100-80gb", 2, 0, 3600)).ok());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(l.AddUsage(Use("a", "p", i, "res-h100", Tier::kReserved, "h100-80gb", 0, 3600)).ok());
    Result<CostReport> r = CostModel(TestBook(), CostOptions{}).Evaluate(l);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("pool 'res-h100': usage (3 GPU-h) exceeds its capacity (2 GPU-h)"), std::string::npos)
        << r.error();
  }
  Ledger l;
  EXPECT_NE(l.AddUsage(Use("", "p", 1, "x", Tier::kSpot, "k", 0, 1)).message().find("team: empty"), std::string::npos);
  EXPECT_NE(l.AddUsage(Use("a", "p", 1, "x", Tier::kSpot, "k", 5, 1)).message().find("end_s"), std::string::npos);
  EXPECT_NE(l.AddUsage(Use("a", "p", 1, "x", Tier::kSpot, "k", 0, 1, 1001)).message().find("compute_milli"),
            std::string::npos);
  UsageRecord lost = Use("a", "p", 1, "x", Tier::kSpot, "k", 0, 10);
  lost.lost_s = 11;
  EXPECT_NE(l.AddUsage(lost).message().find("lost_s"), std::string::npos);
  EXPECT_NE(l.AddCapacity(Cap("x", Tier::kSpot, "k", 0, 0, 1)).message().find("gpus"), std::string::npos);
}

// The FOCUS export of `ledger` bills exactly the report's total, in BilledCost and in EffectiveCost; each
// reservation's Used + Unused EffectiveCost equals its purchase; unit price x quantity = cost on every row;
// every billing period is one calendar month (UTC).
void CheckFocusTiesOut(const CostModel& model, const Ledger& ledger, const CostReport& r, int trial) {
  Result<std::string> csv = model.FocusCsv(ledger);
  ASSERT_TRUE(csv.ok()) << csv.error();
  const auto rows = ParseCsv(*csv);
  ASSERT_GE(rows.size(), 1 + ledger.usage().size() + 1) << "trial " << trial;  // + the reservation purchase
  const auto col = [&](const char* name) {
    return static_cast<size_t>(std::find(rows[0].begin(), rows[0].end(), name) - rows[0].begin());
  };
  const auto cents = [](const std::string& v) { return std::llround(std::stod(v) * 100); };
  int64_t billed = 0, effective = 0;
  std::map<std::string, int64_t> bought, used_unused;
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto& row = rows[i];
    ASSERT_EQ(row.size(), rows[0].size());
    billed += cents(row[col("BilledCost")]);
    effective += cents(row[col("EffectiveCost")]);
    const std::string id = row[col("CommitmentDiscountId")];
    if (row[col("ChargeCategory")] == "Purchase") bought[id] += cents(row[col("BilledCost")]);
    else if (!id.empty()) used_unused[id] += cents(row[col("EffectiveCost")]);
    if (row[col("ChargeCategory")] == "Usage") {
      EXPECT_LE(cents(row[col("BilledCost")]), cents(row[col("ListCost")])) << i;
    }
    const double q = std::stod(row[col("PricingQuantity")]), up = std::stod(row[col("ContractedUnitPrice")]);
    EXPECT_NEAR(q * up, std::stod(row[col("ContractedCost")]), 0.005 + (q + up) * 5e-7 + 1e-9) << "row " << i;
    const std::string start = row[col("BillingPeriodStart")];
    EXPECT_EQ(start.substr(8), "01T00:00:00Z") << "row " << i;
    EXPECT_LE(start, row[col("ChargePeriodStart")]);
    EXPECT_GE(row[col("BillingPeriodEnd")], row[col("ChargePeriodEnd")]);
  }
  EXPECT_EQ(billed, r.total_cents) << "trial " << trial;
  EXPECT_EQ(effective, r.total_cents) << "trial " << trial;
  EXPECT_FALSE(bought.empty());
  for (const auto& [id, paid] : bought) EXPECT_EQ(used_unused[id], paid) << id << " trial " << trial;
}

TEST(CostModel, UsageIsPricedOnlyWithABookValidAtItsTime) {
  Ledger l;
  ASSERT_TRUE(l.AddUsage(Use("ops", "p", 1, "aws-p5-on-demand", Tier::kOnDemand, "h100-80gb", 0, 36000)).ok());
  const std::string dir = std::string(::tessera::testing::SourceDir()) + "/examples/cost/";
  Result<PriceBook> b2025 = PriceBook::FromYaml(SlurpOrEmpty(dir + "prices-2025.yaml"), "prices-2025.yaml");
  ASSERT_TRUE(b2025.ok()) << b2025.error();
  CostOptions opt;
  opt.enforce_validity = true;
  opt.epoch_unix_s = 1756684800;  // 2025-09-01T00:00:00Z: after the 2024 book's on-demand price ended
  Result<CostReport> alone = CostModel(PriceBook::Default(), opt).Evaluate(l);
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.error().find("2025-09-01T00:00:00Z"), std::string::npos) << alone.error();
  EXPECT_NE(alone.error().find("outside the validity"), std::string::npos) << alone.error();
  // With both books loaded, September 2025 is priced from the 2025 book, September 2024 from the 2024 one.
  const CostModel both(std::vector<PriceBook>{PriceBook::Default(), *b2025}, opt);
  Result<CostReport> r = both.Evaluate(l);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->total_cents, 6760);  // 10 GPU-h x $6.7595
  EXPECT_EQ(r->records[0].book, 1u);
  opt.epoch_unix_s = 1725148800;  // 2024-09-01T00:00:00Z
  Result<CostReport> r24 = CostModel(std::vector<PriceBook>{PriceBook::Default(), *b2025}, opt).Evaluate(l);
  ASSERT_TRUE(r24.ok()) << r24.error();
  EXPECT_EQ(r24->total_cents, 12290);  // 10 GPU-h x $12.29
  EXPECT_EQ(r24->records[0].book, 0u);
}

TEST(Money, LargestRemainderSumsExactlyAndStaysWithinACent) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t total = static_cast<int64_t>(rng() % 1000000) - 1000;
    std::vector<Int128> w;
    for (size_t i = 0, n = 1 + rng() % 20; i < n; ++i) w.push_back(static_cast<Int128>(rng() % 1000000));
    const std::vector<int64_t> parts = LargestRemainder(total, w);
    int64_t sum = 0;
    Int128 wsum = 0;
    for (Int128 x : w) wsum += x;
    for (size_t i = 0; i < parts.size(); ++i) {
      sum += parts[i];
      const double quota = wsum == 0 ? static_cast<double>(total) / static_cast<double>(w.size())
                                     : static_cast<double>(total) * static_cast<double>(w[i]) / static_cast<double>(wsum);
      EXPECT_LT(std::fabs(static_cast<double>(parts[i]) - quota), 1.0) << trial;
    }
    EXPECT_EQ(sum, total) << trial;
  }
  EXPECT_EQ(CentsHalfUp(kAtomsPerCent / 2), 1);
  EXPECT_EQ(CentsHalfUp(-kAtomsPerCent / 2), -1);
  EXPECT_EQ(CentsHalfUp(kAtomsPerCent / 2 - 1), 0);
  EXPECT_EQ(FormatCents(-7), "-0.07");
  EXPECT_EQ(FormatCents(123456), "1234.56");
}

// Property: random ledgers (fixed seed) reconcile exactly under every idle policy.
TEST(CostModel, RandomLedgersReconcile) {
  const PriceBook book = TestBook();
  std::mt19937_64 rng(20250105);
  const std::vector<std::string> teams = {"search", "ads", "research", "infra", "x,\"quoted\" team"};
  struct PoolSpec {
    const char* name;
    Tier tier;
    const char* kind;
    bool elastic;
  };
  const PoolSpec pools[] = {{"res-h100", Tier::kReserved, "h100-80gb", false},
                            {"spot-h100", Tier::kSpot, "h100-80gb", false},
                            {"own-a100", Tier::kOwned, "a100-80gb", false},
                            {"od-a100", Tier::kOnDemand, "a100-80gb", true}};
  for (int trial = 0; trial < 30; ++trial) {
    Ledger ledger;
    std::map<std::string, int64_t> cap_mgs;
    std::map<std::string, double> cap_usd;
    JobId job = 0;
    for (const PoolSpec& ps : pools) {
      const double price = book.FindPool(ps.name)->usd_per_gpu_hour;
      const int nodes = 1 + static_cast<int>(rng() % 3);
      for (int n = 0; n < nodes; ++n) {
        const int gpus = 1 + static_cast<int>(rng() % 8);
        const int64_t up = static_cast<int64_t>(rng() % 5000);
        const int64_t down = up + 1 + static_cast<int64_t>(rng() % 200000);
        if (!ps.elastic) {
          CapacityRecord c = Cap(ps.name, ps.tier, ps.kind, gpus, up, down);
          c.node = fmt::format("{}-n{}", ps.name, n);
          ASSERT_TRUE(ledger.AddCapacity(c).ok());
          cap_mgs[ps.name] += int64_t{gpus} * 1000 * (down - up);
          cap_usd[ps.name] += static_cast<double>(gpus) * static_cast<double>(down - up) / 3600.0 * price;
        }
        for (int g = 0; g < gpus; ++g) {
          // Random segments of this GPU's uptime, each held by 0-3 tenants whose shares sum to <= 1000.
          int64_t t = up;
          while (t < down) {
            const int64_t end = std::min(down, t + 1 + static_cast<int64_t>(rng() % 40000));
            const int holders = static_cast<int>(rng() % 4);
            int left = 1000;
            for (int h = 0; h < holders && left > 0; ++h) {
              const int share = holders == 1 ? 1000 : 1 + static_cast<int>(rng() % static_cast<uint64_t>(left));
              left -= share;
              UsageRecord r = Use(teams[rng() % teams.size()], fmt::format("p{}", rng() % 4), ++job, ps.name, ps.tier,
                                  ps.kind, t, end, share);
              r.memory_milli = std::max(1, std::min(1000, share + static_cast<int>(rng() % 100)));
              r.lost_s = static_cast<int64_t>(rng() % static_cast<uint64_t>(end - t + 1));
              r.node = fmt::format("{}-n{}", ps.name, n);
              ASSERT_TRUE(ledger.AddUsage(r).ok());
              if (ps.elastic) {
                cap_mgs[ps.name] += int64_t{share} * (end - t);
                cap_usd[ps.name] += share / 1000.0 * static_cast<double>(end - t) / 3600.0 * price;
              }
            }
            t = end;
          }
        }
      }
    }
    int64_t want_cap = 0;
    double want_total = 0;
    for (const auto& [k, v] : cap_mgs) want_cap += v;
    for (const auto& [k, v] : cap_usd) want_total += v;
    for (IdlePolicy policy : {IdlePolicy::kNone, IdlePolicy::kProportional, IdlePolicy::kEven}) {
      CostOptions opt;
      opt.idle_policy = policy;
      opt.epoch_unix_s = 1738281600;  // 2025-01-31T00:00:00Z: records cross the month end
      const CostModel model(book, opt);
      Result<CostReport> r = model.Evaluate(ledger);
      ASSERT_TRUE(r.ok()) << r.error();
      // Rounded once per invoice line (a record's month) and per capacity: within a cent per line of exact.
      const double lines = static_cast<double>(2 * ledger.usage().size() + r->pools.size());
      EXPECT_NEAR(r->total_cost, want_total, 0.005 * lines + 1e-9 * want_total) << "trial " << trial;
      // Exact in integers: held by teams + idle == capacity; every statement ties out to the cent.
      int64_t team_mgs = 0, idle_mgs = 0, pool_total = 0, pool_idle = 0;
      for (const CostLine& l : r->by_team) team_mgs += l.milli_gpu_s;
      for (const PoolLine& p : r->pools) {
        idle_mgs += p.idle_milli_gpu_s;
        pool_total += p.capacity_cents;
        pool_idle += p.idle_cents;
        EXPECT_EQ(p.allocated_cents + p.idle_cents, p.capacity_cents) << p.pool;
      }
      EXPECT_EQ(team_mgs + idle_mgs, want_cap) << "trial " << trial;
      EXPECT_EQ(pool_total, r->total_cents);
      EXPECT_EQ(pool_idle, r->idle_cents);
      EXPECT_EQ(r->charged_cents + r->idle_cents, r->total_cents);
      EXPECT_EQ(r->idle_shared_cents + r->idle_unshared_cents, r->idle_cents);
      if (policy == IdlePolicy::kNone) EXPECT_EQ(r->idle_unshared_cents, r->idle_cents);
      for (const auto* table : {&r->by_team, &r->by_project, &r->by_job, &r->by_gpu_kind, &r->by_tier}) {
        int64_t total = r->idle_unshared_cents, cost = 0, idle = 0;
        for (const CostLine& l : *table) {
          total += l.TotalCents();
          cost += l.cost_cents;
          idle += l.idle_share_cents;
          EXPECT_EQ(std::llround(l.TotalUsd() * 100), l.cost_cents + l.idle_share_cents);
        }
        EXPECT_EQ(total, r->total_cents) << "trial " << trial;
        EXPECT_EQ(cost, r->charged_cents);
        EXPECT_EQ(idle, r->idle_shared_cents);
      }
      CheckFocusTiesOut(model, ledger, *r, trial);
    }
  }
}

TEST(Focus, HeaderAndARowParseBack) {
  Ledger l;
  UsageRecord r = Use("ml, \"core\"", "llm-70b", 42, "spot-h100", Tier::kSpot, "h100-80gb", 3600, 3600 + 5400);
  r.queue = "training";
  r.node = "spot-node-7";
  ASSERT_TRUE(l.AddUsage(r).ok());
  CostOptions opt;
  opt.epoch_unix_s = *ParseIsoUtc("2025-03-01T00:00:00Z");
  Result<std::string> csv = CostModel(TestBook(), opt).FocusCsv(l);
  ASSERT_TRUE(csv.ok()) << csv.error();
  const auto rows = ParseCsv(*csv);
  ASSERT_EQ(rows.size(), 2u);  // spot is elastic here: no idle row, no purchase
  ASSERT_EQ(rows[0], FocusColumns());
  for (const char* c : {"BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd", "BilledCost",
                        "EffectiveCost", "ListCost", "ContractedCost", "ConsumedQuantity", "ConsumedUnit",
                        "PricingCategory", "ChargeCategory", "ResourceId", "ResourceType", "ServiceName",
                        "SubAccountId", "SubAccountName", "Tags", "x_GpuKind", "x_Tier", "x_AllocatedGpuHours",
                        "x_IdleShareCost"}) {
    EXPECT_NE(std::find(rows[0].begin(), rows[0].end(), c), rows[0].end()) << c;
  }
  std::map<std::string, std::string> row;
  for (size_t i = 0; i < rows[0].size(); ++i) row[rows[0][i]] = rows[1][i];
  EXPECT_EQ(row["ChargePeriodStart"], "2025-03-01T01:00:00Z");
  EXPECT_EQ(row["ChargePeriodEnd"], "2025-03-01T02:30:00Z");
  EXPECT_EQ(row["BillingPeriodStart"], "2025-03-01T00:00:00Z");  // a calendar month
  EXPECT_EQ(row["BillingPeriodEnd"], "2025-04-01T00:00:00Z");
  EXPECT_DOUBLE_EQ(std::stod(row["ConsumedQuantity"]), 1.5);
  EXPECT_EQ(row["ConsumedUnit"], "GPU-Hours");
  EXPECT_DOUBLE_EQ(std::stod(row["BilledCost"]), 4.5);    // 1.5 h x $3
  EXPECT_DOUBLE_EQ(std::stod(row["ListCost"]), 18.0);     // 1.5 h x $12 list
  EXPECT_EQ(row["PricingCategory"], "Dynamic");
  EXPECT_EQ(row["ChargeCategory"], "Usage");
  EXPECT_EQ(row["ServiceName"], "GPU servers");  // the test book's pools name no provider
  EXPECT_EQ(row["ProviderName"], "Unknown");
  EXPECT_EQ(row["SubAccountId"], "ml, \"core\"");
  EXPECT_EQ(row["ResourceId"], "spot-node-7");
  EXPECT_EQ(row["x_Tier"], "spot");
  EXPECT_EQ(row["x_GpuKind"], "h100-80gb");
  nlohmann::json tags = nlohmann::json::parse(row["Tags"]);
  EXPECT_EQ(tags["project"], "llm-70b");
  EXPECT_EQ(tags["queue"], "training");
  EXPECT_STREQ(FocusPricingCategory(Tier::kOnDemand), "Standard");
  EXPECT_STREQ(FocusPricingCategory(Tier::kReserved), "Committed");
  EXPECT_STREQ(FocusPricingCategory(Tier::kOwned), "Other");
}

TEST(Focus, CsvQuoting) {
  EXPECT_EQ(CsvField("plain"), "plain");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
}

TEST(LedgerYaml, ExampleParsesAndBadRecordsNameTheField) {
  std::ifstream in(std::string(::tessera::testing::SourceDir()) + "/examples/cost/ledger-day.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  Result<Ledger> l = ParseLedgerYaml(ss.str(), "ledger-day.yaml");
  ASSERT_TRUE(l.ok()) << l.error();
  EXPECT_EQ(l->capacity().size(), 1u);
  EXPECT_EQ(l->usage().size(), 12u);
  Result<CostReport> r = CostModel(PriceBook::Default(), CostOptions{}).Evaluate(*l);
  ASSERT_TRUE(r.ok()) << r.error();
  // 8 GPUs x 24 h x $4.916 reserved + 80 spot GPU-h x $3.25 + 6 on-demand GPU-h x $5.12.
  // $943.872 + $260 + $30.72, each pool rounded once: $943.87 + $260.00 + $30.72.
  EXPECT_EQ(r->total_cents, 94387 + 26000 + 3072);
  struct Case {
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {"usage:\n  - {team: a, job_id: 1, gpu_kind: k, tier: spot, start_s: 0}\n", "l.yaml:2: usage[0].end_s: required"},
      {"usage:\n  - {team: a, job_id: 1, gpu_kind: k, tier: spot, start_s: 5, end_s: 1}\n",
       "l.yaml:2: usage[0]: usage record #0 (job 1, team 'a'): end_s: 1 before start_s 5"},
      {"usage:\n  - {team: a, job_id: 1, gpu_kind: k, tier: spot, start_s: 0, end_s: 1, compute_milli: 0}\n",
       "l.yaml:2: usage[0].compute_milli: expected an integer in [1, 1000], got \"0\""},
      {"usage:\n  - {team: a, job_id: x, gpu_kind: k, tier: spot, start_s: 0, end_s: 1}\n",
       "usage[0].job_id: expected an integer"},
      {"capacity:\n  - {pool: p, tier: spot, gpus: 8, start_s: 0, end_s: 1, cost: 3}\n", "capacity[0].cost: unknown field"},
      {"capacity:\n  - {pool: p, tier: rented, gpus: 8, start_s: 0, end_s: 1}\n", "capacity[0].tier: 'rented' is not one of"},
  };
  for (const Case& c : cases) {
    Result<Ledger> bad = ParseLedgerYaml(c.text, "l.yaml");
    ASSERT_FALSE(bad.ok()) << c.text;
    EXPECT_NE(bad.error().find(c.expect), std::string::npos) << "got: " << bad.error() << "\nwant: " << c.expect;
  }
}

}  // namespace
}  // namespace tessera
