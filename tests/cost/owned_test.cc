// One view of owned hardware: the chargeback rate of an owned pool and the break-even share OwnedFinanceAt.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "cost/breakeven.h"
#include "cost/pricebook.h"
#include "test_util.h"
#include "testing/paths.h"

namespace tessera {
namespace {

using testing::Slurp;

OwnedCost Server() {
  OwnedCost o;
  o.gpus = 8;
  o.capex_usd = 300000;
  o.life_months = 48;
  o.avg_power_kw = 8;
  o.idle_power_kw = 2.5;
  o.usd_per_kwh = 0.08;
  o.pue = 1.3;
  o.colo_kw = 10;
  o.colo_usd_per_kw_month = 200;
  o.other_ops_usd_per_month = 1400;
  return o;
}

TEST(OwnedFinance, WithoutFinanceItIsTheStraightLineRate) {
  const OwnedCost o = Server();
  const OwnedFinance f = OwnedFinanceAt(o, 1.0);
  EXPECT_DOUBLE_EQ(f.capital_per_month, 300000.0 / 48);
  EXPECT_NEAR(o.UsdPerGpuHour(), (300000.0 / 48 + 4007.36) / (730 * 8), 1e-12);
}

// The capital recovery C is the level payment whose discounted sum over the life is the net capex K.
TEST(OwnedFinance, CapitalRecoveryRepaysNetCapexOverTheLife) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int trial = 0; trial < 100; ++trial) {
    OwnedCost o = Server();
    o.discount_rate_per_year = 0.2 * unit(rng);
    o.resale_fraction = 0.4 * unit(rng);
    o.life_months = 12 + std::floor(60 * unit(rng));
    const OwnedFinance f = OwnedFinanceAt(o, 1.0);
    double pv = 0;
    for (int k = 1; k <= o.life_months; ++k) pv += f.capital_per_month / std::pow(1 + f.monthly_discount_rate, k);
    SCOPED_TRACE(trial);
    EXPECT_NEAR(pv, f.net_capex, 1e-6 * f.net_capex);
    EXPECT_NEAR(f.net_capex, o.capex_usd - o.resale_fraction * o.capex_usd / std::pow(1 + o.discount_rate_per_year,
                                                                                     o.life_months / 12.0),
                1e-6);
    // Cost of capital raises the rate above the straight line of the net capex; power follows utilisation.
    if (o.discount_rate_per_year > 0) EXPECT_GT(f.capital_per_month, f.net_capex / o.life_months);
    const double u = unit(rng);
    EXPECT_NEAR(OwnedFinanceAt(o, 1.0).usd_per_gpu_hour - OwnedFinanceAt(o, u).usd_per_gpu_hour,
                (8 - 2.5) * (1 - u) * 730 * 0.08 * 1.3 / (730 * 8), 1e-12);
  }
}

// The shipped price books charge owned-h100 back with the finance of the break-even example: the same rate.
TEST(OwnedFinance, BooksAndBreakEvenExampleAgree) {
  const std::string dir = std::string(::tessera::testing::SourceDir()) + "/examples/cost/";
  Result<BreakEvenConfig> cfg = ParseBreakEvenYaml(Slurp(dir + "breakeven-h100.yaml"), "breakeven-h100.yaml");
  ASSERT_TRUE(cfg.ok()) << cfg.error();
  const double rate = OwnedFinanceAt(cfg->owned, 1.0).usd_per_gpu_hour;
  for (const char* file : {"prices.yaml", "prices-2025.yaml"}) {
    Result<PriceBook> book = PriceBook::FromYaml(Slurp(dir + file), file);
    ASSERT_TRUE(book.ok()) << book.error();
    const Pool* p = book->FindPool("owned-h100");
    ASSERT_NE(p, nullptr);
    EXPECT_DOUBLE_EQ(p->usd_per_gpu_hour, rate) << file;
    EXPECT_EQ(p->owned.discount_rate_per_year, cfg->owned.discount_rate_per_year);
    EXPECT_EQ(p->owned.resale_fraction, cfg->owned.resale_fraction);
  }
  EXPECT_DOUBLE_EQ(PriceBook::Default().FindPool("owned-h100")->usd_per_gpu_hour, rate);
  EXPECT_GT(rate, Server().UsdPerGpuHour());  // 8% cost of capital costs more than the 10% resale gives back
}

TEST(OwnedFinance, BadOwnedPoolsNameTheField) {
  const std::string pool = R"(price_date: "2025-01-01"
pools:
  - name: mine
    tier: owned
    gpu_kind: h100-80gb
    provider: onprem
    date: "2025-01-01"
    owned: {gpus: 8, capex_usd: 1000, life_months: 48, avg_power_kw: 2, )";
  for (auto [extra, want] : {std::pair{"idle_power_kw: 3}", "owned.idle_power_kw: 3 exceeds avg_power_kw"},
                             std::pair{"utilization: 0}", "owned.utilization: expected a number in"},
                             std::pair{"discount_rate_per_year: 2}", "owned.discount_rate_per_year: expected"},
                             std::pair{"resale: 0.1}", "owned.resale: unknown field"}}) {
    Result<PriceBook> b = PriceBook::FromYaml(pool + extra + "\n", "p.yaml");
    ASSERT_FALSE(b.ok()) << extra;
    EXPECT_NE(b.error().find(want), std::string::npos) << b.error();
  }
}

}  // namespace
}  // namespace tessera
