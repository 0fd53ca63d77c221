#include "cost/breakeven.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "test_util.h"
#include "testing/paths.h"

namespace tessera {
namespace {

using testing::Slurp;

const std::string kExample = std::string(::tessera::testing::SourceDir()) + "/examples/cost/breakeven-h100.yaml";

BreakEvenResult ExampleResult(BreakEvenConfig* cfg_out = nullptr) {
  Result<BreakEvenConfig> cfg = ParseBreakEvenYaml(Slurp(kExample), kExample);
  EXPECT_TRUE(cfg.ok()) << cfg.error();
  if (cfg_out) *cfg_out = *cfg;
  return ComputeBreakEven(*cfg);
}

const BreakEvenRow& Row(const BreakEvenResult& r, const std::string& prefix, double util) {
  for (const BreakEvenRow& row : r.rows) {
    if (row.alternative.rfind(prefix, 0) == 0 && row.utilization == util) return row;
  }
  ADD_FAILURE() << "no row " << prefix << " at " << util;
  static BreakEvenRow none;
  return none;
}

TEST(BreakEven, Formula) {
  // Undiscounted: K / M.
  EXPECT_DOUBLE_EQ(BreakEvenMonths(300000, 71773.6 - 4007.36, 0), 300000 / (71773.6 - 4007.36));
  EXPECT_TRUE(std::isinf(BreakEvenMonths(300000, 0, 0)));  // margin exactly 0: never
  EXPECT_TRUE(std::isinf(BreakEvenMonths(300000, -100, 0.01)));
  // Discounted: the present value of m months of margin equals K.
  const double k = 250000, m = 12000, d = 0.0064;
  const double months = BreakEvenMonths(k, m, d);
  EXPECT_NEAR(m * (1 - std::pow(1 + d, -months)) / d, k, 1e-6);
  EXPECT_GT(months, k / m);
  // The discounted margin never repays K when K d >= M (the margin only covers the interest).
  EXPECT_TRUE(std::isinf(BreakEvenMonths(k, k * d, d)));
}

// The example with its finance switched off: discount 0, no resale, flat power.
BreakEvenConfig Undiscounted() {
  BreakEvenConfig cfg;
  ExampleResult(&cfg);
  cfg.owned.discount_rate_per_year = 0;
  cfg.owned.resale_fraction = 0;
  cfg.owned.idle_power_kw = -1;
  return cfg;
}

// hardware-facts.md 4.4 table: ~4.4 / ~9.5, ~8.5 / ~19, ~12 / (29, see below), ~28 / never within life.
TEST(BreakEven, ReproducesHardwareFactsTableUndiscounted) {
  BreakEvenResult r = ComputeBreakEven(Undiscounted());
  EXPECT_NEAR(r.opex_per_month, 4007.36, 1e-6);  // "opex ~ $4k/month"
  EXPECT_NEAR(Row(r, "AWS p5.48xlarge on-demand (pre", 1.0).monthly_rent, 71773.6, 1e-6);  // "$71.8k/mo"
  EXPECT_NEAR(Row(r, "AWS p5.48xlarge on-demand (pre", 1.0).months, 4.4, 0.05);
  EXPECT_NEAR(Row(r, "AWS p5.48xlarge on-demand (pre", 0.5).months, 9.5, 0.15);  // exact 9.41
  EXPECT_NEAR(Row(r, "AWS p5.48xlarge on-demand with", 1.0).months, 8.5, 0.1);
  EXPECT_NEAR(Row(r, "AWS p5.48xlarge on-demand with", 0.5).months, 19, 0.2);
  EXPECT_NEAR(Row(r, "AWS Capacity Block", 1.0).months, 12, 0.2);
  // The fact sheet's ~29 months scales the Capacity Block's rent by utilisation; a committed block is paid
  // every hour, so with flat power it breaks even exactly as at 100%.
  EXPECT_TRUE(Row(r, "AWS Capacity Block", 0.5).committed);
  EXPECT_DOUBLE_EQ(Row(r, "AWS Capacity Block", 0.5).months, Row(r, "AWS Capacity Block", 1.0).months);
  EXPECT_NEAR(Row(r, "GPU-cloud market", 1.0).months, 28, 0.5);
  const BreakEvenRow& market_half = Row(r, "GPU-cloud market", 0.5);
  EXPECT_FALSE(market_half.never);
  EXPECT_TRUE(market_half.beyond_life);  // "never within 3-4 yr life"
}

TEST(BreakEven, CommittedCapacityBreaksEvenNoLaterAtLowUtilisation) {
  BreakEvenResult r = ExampleResult();
  const BreakEvenRow& full = Row(r, "AWS Capacity Block", 1.0);
  const BreakEvenRow& half = Row(r, "AWS Capacity Block", 0.5);
  EXPECT_NEAR(full.rent_paid, half.rent_paid, 1e-9 * full.rent_paid);  // paid whether used
  // Power follows utilisation: half as busy saves (busy - idle) / 2 of the draw.
  EXPECT_NEAR(full.opex - half.opex, (8 - 2.5) * 0.5 * 730 * 0.08 * 1.3, 1e-9);
  EXPECT_LT(half.months, full.months);
  // Pay-as-you-go rent follows utilisation, so there 50% is later.
  EXPECT_GT(Row(r, "AWS p5.48xlarge on-demand (pre", 0.5).months, Row(r, "AWS p5.48xlarge on-demand (pre", 1.0).months);
}

TEST(BreakEven, DiscountingDelaysAndResaleAdvancesTheBreakEven) {
  BreakEvenConfig plain = Undiscounted();
  plain.owned.idle_power_kw = 2.5;
  BreakEvenConfig discounted = plain;
  discounted.owned.discount_rate_per_year = 0.08;
  BreakEvenConfig resold = plain;
  resold.owned.resale_fraction = 0.1;
  const BreakEvenResult a = ComputeBreakEven(plain), b = ComputeBreakEven(discounted), c = ComputeBreakEven(resold);
  EXPECT_NEAR(c.net_capex, 300000 - 30000, 1e-6);  // resale at i = 0 is worth its face value
  EXPECT_NEAR(b.monthly_discount_rate, std::pow(1.08, 1 / 12.0) - 1, 1e-15);
  for (size_t i = 0; i < a.rows.size(); ++i) {
    SCOPED_TRACE(a.rows[i].alternative);
    if (a.rows[i].never) continue;
    EXPECT_GT(b.rows[i].months, a.rows[i].months);
    EXPECT_LT(c.rows[i].months, a.rows[i].months);
    // Undiscounted with a constant rent, the months are K / margin: a tenth less capex, a tenth sooner. Under a
    // price path the margin changes over time, so only the order holds.
    if (a.rows[i].rent_paid_last == a.rows[i].rent_paid) EXPECT_NEAR(c.rows[i].months, a.rows[i].months * 0.9, 1e-9);
  }
}

TEST(BreakEven, NeverWhenRentPaidDoesNotCoverOpex) {
  BreakEvenConfig cfg;
  ExampleResult(&cfg);
  cfg.utilizations = {0.25};  // $14.6k * 0.25 = $3.65k < opex at 25%
  BreakEvenResult r = ComputeBreakEven(cfg);
  const BreakEvenRow& row = Row(r, "GPU-cloud market", 0.25);
  EXPECT_TRUE(row.never);
  EXPECT_LT(row.monthly_margin, 0);
  const std::string text = FormatBreakEvenText(cfg, r);
  EXPECT_NE(text.find("never (rent paid <= opex)"), std::string::npos);
  const nlohmann::json j = BreakEvenJson(cfg, r);
  EXPECT_TRUE(j["rows"].back()["months"].is_null());
  EXPECT_EQ(j["rows"].back()["utilisation"], 0.25);
}

TEST(BreakEven, TextPrintsEveryAssumptionWithItsSource) {
  BreakEvenConfig cfg;
  BreakEvenResult r = ExampleResult(&cfg);
  const std::string text = FormatBreakEvenText(cfg, r);
  EXPECT_NE(text.find("4.2 months"), std::string::npos) << text;
  for (const char* s : {"$300,000", "SemiAnalysis, May 2023", "CBRE", "PUE", "$4,007.36", "730", "$98.32/h",
                        "Jul 27 2023", "$39.33/h", "8%/year", "10% of capex", "idle power draw", "2.5 kW",
                        "(committed, 182-day term)", "capital recovery C", "chargeback rate at 100%"}) {
    EXPECT_NE(text.find(s), std::string::npos) << s;
  }
}

TEST(BreakEven, BadConfigsNameTheField) {
  struct Case {
    const char* text;
    const char* expect;
  };
  const char* kOwned = "owned: {gpus: 8, capex_usd: 300000, life_months: 48}\n";
  const Case cases[] = {
      {"alternatives: [{name: a, tier: spot, usd_per_hour: 1}]\n", "owned: missing"},
      {"owned: {gpus: 8, life_months: 48}\nalternatives: [{name: a, tier: spot, usd_per_hour: 1}]\n",
       "b.yaml:1: owned.capex_usd: required"},
      {"owned: {gpus: 8, capex_usd: {value: -1, source: x}, life_months: 48}\nalternatives: [{name: a, tier: spot, "
       "usd_per_hour: 1}]\n",
       "b.yaml:1: owned.capex_usd.value: expected a number >= 0, got \"-1\""},
      {"owned: {gpus: 8, capex_usd: 1, life_months: 48}\nalternatives: [{name: a, tier: free, usd_per_hour: 1}]\n",
       "alternatives[0].tier: 'free' is not one of"},
      {"owned: {gpus: 8, capex_usd: 1, life_months: 48}\nalternatives: [{name: a, tier: spot}]\n",
       "alternatives[0].usd_per_hour: give exactly one"},
      {"owned: {gpus: 8, capex_usd: 1, life_months: 48}\nalternatives: [{name: a, tier: spot, usd_per_hour: 1, "
       "discount: 1.5}]\n",
       "b.yaml:2: alternatives[0].discount: expected a number in [0, 0.999], got \"1.5\""},
      {"owned: {gpus: 1e30, capex_usd: 1, life_months: 48}\nalternatives: [{name: a, tier: spot, usd_per_hour: 1}]\n",
       "b.yaml:1: owned.gpus: expected an integer in [1, 1048576], got \"1e30\""},
      {"owned: {gpus: 8, capex_usd: .nan, life_months: 48}\nalternatives: [{name: a, tier: spot, usd_per_hour: 1}]\n",
       "b.yaml:1: owned.capex_usd: expected a number >= 0, got \".nan\""},
      {"owned: {gpus: 8, capex_usd: 1, life_months: .inf}\nalternatives: [{name: a, tier: spot, usd_per_hour: 1}]\n",
       "b.yaml:1: owned.life_months: expected a number"},
      {"owned: {gpus: 8, capex_usd: 1, life_months: 48}\nalternatives: [{name: a, tier: spot, usd_per_hour: [x, [y]]}]\n",
       "b.yaml:2: alternatives[0].usd_per_hour: expected a number >= 0, got a list"},
      {"owned: {gpus: 8, capex_usd: 1, life_months: 48}\nalternatives: [{name: {k: v}, tier: spot, usd_per_hour: 1}]\n",
       "b.yaml:2: alternatives[0].name: expected text, got a map"},
      {"owned: [1]\nalternatives: [{name: a, tier: spot, usd_per_hour: 1}]\n", "b.yaml:1: owned: expected a map, got a list"},
      {"owned: {gpus: 8, capex_usd: 1, life_months: 48}\nalternatives: {a: 1}\n", "b.yaml:2: alternatives: expected a non-empty list"},
      {"owned: {gpus: 8, capex_usd: 1, life_months: 48}\nalternatives: &a [*a]\n", "b.yaml:2: alternatives[0]: expected a map"},
      {"owned: {gpus: 8\n", "b.yaml:2: YAML syntax error"},
      {"- a\n- b\n", "b.yaml:1: expected a map, got a list"},
      {"owned: {gpus: 8, capex_usd: 1, life_months: 48}\nutilizations: [1.0, 2]\nalternatives: [{name: a, tier: spot, "
       "usd_per_hour: 1}]\n",
       "b.yaml:2: utilizations[1]: expected a number in (0, 1]"},
      {"owned: {gpus: 8, capex_usd: 1, life_months: 48, watts: 3}\nalternatives: [{name: a, tier: spot, usd_per_hour: "
       "1}]\n",
       "owned.watts: unknown field"},
      {"owned: {gpus: 8, capex_usd: 1, life_months: 48, avg_power_kw: 2, idle_power_kw: 3}\nalternatives: [{name: a, "
       "tier: spot, usd_per_hour: 1}]\n",
       "idle_power_kw (3) exceeds avg_power_kw"},
      {"owned: {gpus: 8, capex_usd: 1, life_months: 48}\nalternatives: [{name: a, tier: spot, usd_per_hour: 1, "
       "committed: maybe}]\n",
       "alternatives[0].committed: expected true or false"},
      {"owned: {gpus: 8, capex_usd: 1, life_months: 48}\nhours_per_month: 720\nalternatives: [{name: a, tier: spot, "
       "usd_per_hour: 1}]\n",
       "hours_per_month: only 730"},
      {"owned: {gpus: 8, capex_usd: 1, life_months: 48}\nalternatives: [{name: a, tier: reserved, usd_per_hour: 1, "
       "commitment_type: Capacity Block}]\n",
       "alternatives[0].term_days: a Capacity Block lasts 1-182 days"},
      {"owned: {gpus: 8, capex_usd: 1, life_months: 48}\nalternatives: [{name: a, tier: reserved, usd_per_hour: 1, "
       "commitment_type: Capacity Block, term_days: 183}]\n",
       "alternatives[0].term_days: a Capacity Block lasts 1-182 days"},
      {"owned: {gpus: 8, capex_usd: 1, life_months: 48}\nalternatives: [{name: a, tier: spot, usd_per_hour: 1, "
       "term_days: 30}]\n",
       "alternatives[0].term_days: only committed alternatives have a term"},
      {"owned: {gpus: 8, capex_usd: 1, life_months: 48}\nalternatives: [{name: a, tier: spot, usd_per_hour: 1, "
       "price_path: [{from: 2025-06-01, cut: 0.45}]}]\n",
       "alternatives[0].price_path[0].from: a price path needs a top-level start_date"},
      {"start_date: 2025-07-01\nowned: {gpus: 8, capex_usd: 1, life_months: 48}\nalternatives: [{name: a, tier: spot, "
       "usd_per_hour: 1, price_path: [{from: 2025-06-01, cut: 0.45}]}]\n",
       "from: 2025-06-01 is before start_date 2025-07-01"},
      {"start_date: 2025-01-01\nowned: {gpus: 8, capex_usd: 1, life_months: 48}\nalternatives: [{name: a, tier: spot, "
       "usd_per_hour: 1, price_path: [{from: 2025-06-01, cut: 0.45, factor: 0.5}]}]\n",
       "price_path[0].factor: give exactly one of factor and cut"},
      {"start_date: 2025-13-01\nowned: {gpus: 8, capex_usd: 1, life_months: 48}\nalternatives: [{name: a, tier: spot, "
       "usd_per_hour: 1}]\n",
       "start_date: '2025-13-01' is not a date"},
  };
  (void)kOwned;
  for (const Case& c : cases) {
    Result<BreakEvenConfig> cfg = ParseBreakEvenYaml(c.text, "b.yaml");
    ASSERT_FALSE(cfg.ok()) << c.text;
    EXPECT_NE(cfg.error().find(c.expect), std::string::npos) << "got: " << cfg.error() << "\nwant: " << c.expect;
  }
}

// End to end through the binary: `tessera cost breakeven` prints months.
TEST(BreakEven, CommandPrintsMonths) {
  const std::string cmd = std::string(::tessera::testing::TesseraBinary()) + " cost breakeven --config " + kExample + " --utilization 1.0 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe.get())) out.append(buf, n);
  EXPECT_NE(out.find("4.2 months"), std::string::npos) << out;
  EXPECT_EQ(out.find(" 50%"), std::string::npos) << "--utilization 1.0 replaces the config's list";
}

// A piecewise-constant margin: the discounted margin up to the returned month repays K exactly, and one piece
// gives the closed form. Seeded random paths.
TEST(BreakEven, PathRepaysNetCapexExactlyAtTheBreakEven) {
  std::mt19937_64 rng(20250601);
  std::uniform_real_distribution<double> margin(-5000, 40000), gap(0.5, 30), rate(0, 0.012);
  auto pv = [](const std::vector<MarginPiece>& p, double d, double m) {  // discounted margin of months [0, m)
    double sum = 0;
    for (size_t k = 0; k < p.size(); ++k) {
      const double a = p[k].from, b = std::min(m, k + 1 < p.size() ? p[k + 1].from : m);
      if (b <= a) break;
      sum += d > 0 ? p[k].margin * (std::pow(1 + d, -a) - std::pow(1 + d, -b)) / d : p[k].margin * (b - a);
    }
    return sum;
  };
  int finite = 0;
  for (int trial = 0; trial < 500; ++trial) {
    const double d = trial % 5 == 0 ? 0 : rate(rng), k = 300000;
    std::vector<MarginPiece> pieces = {{0, margin(rng)}};
    for (int n = rng() % 4; n > 0; --n) pieces.push_back({pieces.back().from + gap(rng), margin(rng)});
    const double m = BreakEvenMonthsOnPath(k, pieces, d);
    SCOPED_TRACE(trial);
    if (pieces.size() == 1) EXPECT_DOUBLE_EQ(m, BreakEvenMonths(k, pieces[0].margin, d));
    if (std::isinf(m)) {
      EXPECT_LT(pv(pieces, d, pieces.back().from + 10000), k * (1 + 1e-9));  // never repaid within 10,000 months
      continue;
    }
    ++finite;
    EXPECT_NEAR(pv(pieces, d, m), k, 1e-6 * k);
    EXPECT_LT(pv(pieces, d, m * (1 - 1e-6)), k);  // and not before
  }
  EXPECT_GT(finite, 100);
}

// The June 2025 cut as a price path: the pre-cut rent until 2025-06-01, the cut one after. The break-even
// falls between the constant pre-cut and the constant post-cut rent; a committed alternative keeps its price
// until its term ends, so a shorter term passes the cut on sooner.
TEST(BreakEven, RentCutAtADate) {
  BreakEvenConfig cfg;
  ExampleResult(&cfg);
  cfg.start_date = "2025-01-01";
  const BreakEvenResult before = ComputeBreakEven(cfg);
  ASSERT_TRUE(AddRentCut(&cfg, "pre June 2025", "2025-06-01", 0.45).ok());
  ASSERT_TRUE(AddRentCut(&cfg, "Capacity Block", "2025-06-01", 0.45).ok());
  const BreakEvenResult cut = ComputeBreakEven(cfg);
  const double pre = Row(before, "AWS p5.48xlarge on-demand (pre", 0.5).months;
  const double path = Row(cut, "AWS p5.48xlarge on-demand (pre", 0.5).months;
  const double post = Row(before, "AWS p5.48xlarge on-demand with", 0.5).months;
  EXPECT_GT(path, pre);
  EXPECT_LT(path, post);
  // Before the cut (151 days = 4.96 months) nothing changes: the 100% row breaks even in 4.2 months.
  EXPECT_DOUBLE_EQ(Row(cut, "AWS p5.48xlarge on-demand (pre", 1.0).months,
                   Row(before, "AWS p5.48xlarge on-demand (pre", 1.0).months);
  EXPECT_NEAR(Row(cut, "AWS p5.48xlarge on-demand (pre", 0.5).rent_paid_last,
              Row(before, "AWS p5.48xlarge on-demand with", 0.5).rent_paid, 1e-6);
  // The Capacity Block (182-day term): the cut reaches it at its first renewal, 2025-07-02.
  const BreakEvenRow& block = Row(cut, "AWS Capacity Block", 1.0);
  EXPECT_NEAR(block.term_months, 182 / (365.0 / 12), 1e-12);
  EXPECT_GT(block.months, Row(before, "AWS Capacity Block", 1.0).months);
  BreakEvenConfig short_term = cfg;
  for (RentAlternative& a : short_term.alternatives)
    if (a.commitment_type == "Capacity Block") a.term_days = 14;
  const double block_14 = Row(ComputeBreakEven(short_term), "AWS Capacity Block", 1.0).months;
  EXPECT_GT(block_14, block.months);  // renewed after 14 days: pays the cut price sooner
  // Errors name the flag's problem.
  EXPECT_FALSE(AddRentCut(&cfg, "no such alternative", "2025-06-01", 0.45).ok());
  EXPECT_FALSE(AddRentCut(&cfg, "", "2024-06-01", 0.45).ok());  // before the start
  EXPECT_FALSE(AddRentCut(&cfg, "", "2025-06-01", 1.5).ok());
  BreakEvenConfig undated;
  ExampleResult(&undated);
  undated.start_date.clear();
  EXPECT_NE(AddRentCut(&undated, "", "2025-06-01", 0.45).message().find("no start_date"), std::string::npos);
}

// One view of owned hardware: a renter paying the owned unit's chargeback rate for every hour (committed)
// breaks even with buying it exactly at the end of its life, whatever the finance and the utilisation.
TEST(BreakEven, ChargebackRateBreaksEvenAtTheEndOfTheLife) {
  std::mt19937_64 rng(48);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int trial = 0; trial < 200; ++trial) {
    BreakEvenConfig cfg;
    ExampleResult(&cfg);
    cfg.owned.discount_rate_per_year = trial % 4 == 0 ? 0 : 0.15 * unit(rng);
    cfg.owned.resale_fraction = 0.3 * unit(rng);
    cfg.owned.life_months = 24 + std::floor(48 * unit(rng));
    const double u = 0.1 + 0.9 * unit(rng);
    cfg.utilizations = {u};
    RentAlternative at_rate;
    at_rate.name = "the owned unit's own chargeback rate";
    at_rate.tier = "reserved";
    at_rate.committed = true;
    at_rate.usd_per_hour = OwnedFinanceAt(cfg.owned, u).usd_per_gpu_hour * cfg.owned.gpus;
    cfg.alternatives = {at_rate};
    const BreakEvenResult r = ComputeBreakEven(cfg);
    SCOPED_TRACE(trial);
    EXPECT_NEAR(r.rows[0].months, cfg.owned.life_months, 1e-6);
  }
}

// End to end: --start and --rent-cut change the answer; a bad --rent-cut is an error naming the flag.
TEST(BreakEven, CommandTakesARentCut) {
  auto run = [](const std::string& args) {
    const std::string cmd = std::string(::tessera::testing::TesseraBinary()) + " cost breakeven --config " + kExample + " " + args + " 2>&1";
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
    std::string out;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, pipe.get())) out.append(buf, n);
    return out;
  };
  const std::string cut = run("--json --start 2025-01-01 --rent-cut 'pre June 2025=2025-06-01:0.45'");
  const nlohmann::json j = nlohmann::json::parse(cut.substr(cut.find('{')));
  EXPECT_EQ(j["start_date"], "2025-01-01");
  EXPECT_EQ(j["alternatives"][0]["price_path"][0]["factor"], 0.55);
  EXPECT_GT(j["rows"][1]["months"].get<double>(), 8.9);
  EXPECT_NE(run("--rent-cut 2025-06-01").find("--rent-cut '2025-06-01': expected"), std::string::npos);
}

}  // namespace
}  // namespace tessera
