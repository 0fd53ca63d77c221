#include "cost/pricebook.h"

#include <gtest/gtest.h>

#include <cmath>

#include <fstream>
#include <sstream>
#include <string>
#include "test_util.h"
#include "testing/paths.h"

namespace tessera {
namespace {

using testing::Slurp;

TEST(PriceBook, DefaultsCarryHardwareFactsFigures) {
  const PriceBook& book = PriceBook::Default();
  const Pool* od = book.FindPool("aws-p5-on-demand");
  ASSERT_NE(od, nullptr);
  EXPECT_EQ(od->tier, Tier::kOnDemand);
  EXPECT_DOUBLE_EQ(od->usd_per_gpu_hour, 12.29);  // $98.32 / 8
  EXPECT_GT(od->provisioning_delay_s, 0);
  const Pool* cb = book.FindPool("aws-p5-capacity-block");
  ASSERT_NE(cb, nullptr);
  EXPECT_EQ(cb->tier, Tier::kReserved);
  EXPECT_DOUBLE_EQ(cb->usd_per_gpu_hour, 4.916);  // $39.33 / 8
  const Pool* spot = book.FindPool("aws-p5-spot");
  ASSERT_NE(spot, nullptr);
  EXPECT_EQ(spot->reclaim_notice_s, 120);  // AWS: 2 minutes
  EXPECT_EQ(book.FindPool("gcp-a3-spot")->reclaim_notice_s, 30);
  EXPECT_EQ(book.FindPool("azure-a100-80gb-spot")->reclaim_notice_s, 30);
  for (const Pool& p : book.pools()) {
    EXPECT_FALSE(p.source.empty()) << p.name;
    EXPECT_FALSE(p.date.empty()) << p.name;
  }
  EXPECT_DOUBLE_EQ(*book.OnDemandListPrice("h100-80gb"), 12.29);
  EXPECT_FALSE(book.OnDemandListPrice("no-such-gpu").ok());
}

TEST(PriceBook, OwnedPriceIsCapitalRecoveryPlusOpex) {
  const Pool* owned = PriceBook::Default().FindPool("owned-h100");
  ASSERT_NE(owned, nullptr);
  // hardware-facts 4.4: opex ~ $4k/month = colo 10 kW x $200 + 8 kW x 730 h x $0.08 x 1.3 + $1.4k.
  EXPECT_NEAR(owned->owned.OpexUsdPerMonth(), 2000 + 607.36 + 1400, 1e-9);
  // Net capex K = $300k - 10% resale / 1.08^4; recovered over 48 months at 8%/year (d = 1.08^(1/12) - 1, and
  // (1 + d)^-48 = 1.08^-4): C = K d / (1 - 1.08^-4); rate = (C + $4007.36) / (730 h x 8 GPUs), about $1.842.
  const double k = 300000 - 30000 / std::pow(1.08, 4), d = std::pow(1.08, 1 / 12.0) - 1;
  const double c = k * d / (1 - std::pow(1.08, -4));
  EXPECT_NEAR(c, 6749.2, 0.1);
  EXPECT_NEAR(owned->usd_per_gpu_hour, (c + 4007.36) / (730 * 8), 1e-9);
  EXPECT_NEAR(owned->usd_per_gpu_hour, 1.842, 0.001);
}

// The compiled-in book is the shipped file (CMake embeds it; a stale build would differ).
TEST(PriceBook, ShippedExampleEqualsTheDefaults) {
  const std::string text = Slurp(std::string(::tessera::testing::SourceDir()) + "/examples/cost/prices.yaml");
  EXPECT_EQ(text, std::string(PriceBook::DefaultYaml()));
}

TEST(PriceBook, MergeReplacesByNameAndAdds) {
  PriceBook book = PriceBook::Default();
  const size_t n = book.pools().size();
  ASSERT_TRUE(book.Merge(R"(
pools:
  - {name: aws-p5-spot, tier: spot, gpu_kind: h100-80gb, usd_per_gpu_hour: 2.5, reclaim_notice_s: 120,
     reclaim_rate_per_hour: 0.05, date: "2024-12"}
  - {name: lab-l4, tier: reserved, gpu_kind: l4-24gb, usd_per_gpu_hour: 0.4, valid_from: "2024-06-01"}
on_demand_list:
  - {gpu_kind: l4-24gb, usd_per_gpu_hour: 0.8, date: "2024-12"}
)",
                         "override.yaml")
                  .ok());
  EXPECT_EQ(book.pools().size(), n + 1);
  EXPECT_DOUBLE_EQ(book.FindPool("aws-p5-spot")->usd_per_gpu_hour, 2.5);
  EXPECT_DOUBLE_EQ(book.FindPool("aws-p5-spot")->reclaim_rate_per_hour, 0.05);
  EXPECT_DOUBLE_EQ(*book.OnDemandListPrice("l4-24gb"), 0.8);
}

TEST(PriceBook, ADatedBookRefusesAnUndatedPriceNamingTheFileAndTheEntry) {
  PriceBook book = PriceBook::Default();
  const Status st = book.Merge("pools:\n  - {name: lab-spot, tier: spot, gpu_kind: h100-80gb, usd_per_gpu_hour: 2, "
                               "reclaim_notice_s: 30}\n",
                               "undated.yaml");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("undated.yaml"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("lab-spot"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("no date and no validity window"), std::string::npos) << st.message();
  // The same entry with a window merges.
  EXPECT_TRUE(book.Merge("pools:\n  - {name: lab-spot, tier: spot, gpu_kind: h100-80gb, usd_per_gpu_hour: 2, "
                         "reclaim_notice_s: 30, valid_from: \"2024-06-01\", valid_until: \"2025-06-01\"}\n",
                         "dated.yaml")
                  .ok());
}

TEST(PriceBook, EntriesAreValidInTheirOwnWindowElseTheBooks) {
  const PriceBook& book = PriceBook::Default();  // window 2024-01-01 .. 2025-06-01
  const Pool* od = book.FindPool("aws-p5-on-demand");     // own window 2023-07-27 .. 2025-06-01
  const Pool* spot = book.FindPool("aws-p5-spot");        // a point-in-time snapshot: the book's window
  const Pool* cb = book.FindPool("aws-p5-capacity-block");  // until 2025-01-01
  ASSERT_TRUE(od && spot && cb);
  EXPECT_TRUE(book.ValidOn(od->validity, "2023-08-01"));
  EXPECT_FALSE(book.ValidOn(od->validity, "2025-06-01"));
  EXPECT_FALSE(book.ValidOn(spot->validity, "2023-08-01"));
  EXPECT_TRUE(book.ValidOn(spot->validity, "2025-05-31"));
  EXPECT_TRUE(book.ValidOn(cb->validity, "2024-12-31"));
  EXPECT_FALSE(book.ValidOn(cb->validity, "2025-01-01"));
}

TEST(PriceBook, ShippedBooksEachHoldAtOnePriceDate) {
  const std::string dir = std::string(::tessera::testing::SourceDir()) + "/examples/cost/";
  Result<PriceBook> b2024 = PriceBook::FromYaml(Slurp(dir + "prices.yaml"), "prices.yaml");
  Result<PriceBook> b2025 = PriceBook::FromYaml(Slurp(dir + "prices-2025.yaml"), "prices-2025.yaml");
  ASSERT_TRUE(b2024.ok()) << b2024.error();
  ASSERT_TRUE(b2025.ok()) << b2025.error();
  EXPECT_EQ(b2024->price_date(), "2024-12-31");
  EXPECT_EQ(b2025->price_date(), "2025-07-01");
  EXPECT_EQ(PriceBook::Default().price_date(), "2024-12-31");
  EXPECT_FALSE(b2024->allow_mixed_dates());
  EXPECT_FALSE(b2025->allow_mixed_dates());
  // The same pools in both books, each with a source; the 2025 on-demand H100 is the 45% cut.
  ASSERT_EQ(b2024->pools().size(), b2025->pools().size());
  for (const Pool& p : b2025->pools()) {
    ASSERT_NE(b2024->FindPool(p.name), nullptr) << p.name;
    EXPECT_FALSE(p.source.empty()) << p.name;
    EXPECT_EQ(PriceDateConflict(p.validity, b2025->price_date()), "") << p.name;
  }
  EXPECT_NEAR(b2025->FindPool("aws-p5-on-demand")->usd_per_gpu_hour, 98.32 * 0.55 / 8, 1e-9);
  EXPECT_NEAR(*b2025->OnDemandListPrice("h100-80gb"), 98.32 * 0.55 / 8, 1e-9);
  EXPECT_FALSE(b2025->FindPool("aws-p5-capacity-block")->validity.carried_forward.empty());
}

TEST(PriceBook, MixingPriceDatesIsAnErrorUnlessAskedFor) {
  // An entry that stopped holding before the book's date.
  const char* stale =
      "price_date: \"2025-07-01\"\n"
      "pools:\n  - name: a\n    tier: reserved\n    gpu_kind: x\n    usd_per_gpu_hour: 1\n"
      "    valid_until: \"2025-01-01\"\n";
  Result<PriceBook> b = PriceBook::FromYaml(stale, "b.yaml");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().find("b.yaml:3: pools[0]: pool 'a': the price held until 2025-01-01, before the book's "
                           "price_date 2025-07-01"),
            std::string::npos)
      << b.error();
  // An entry that starts after it.
  b = PriceBook::FromYaml("price_date: \"2024-12-31\"\non_demand_list:\n  - {gpu_kind: x, usd_per_gpu_hour: 1, "
                          "valid_from: \"2025-06-01\"}\n",
                          "b.yaml");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().find("list price of 'x': the price holds from 2025-06-01"), std::string::npos) << b.error();
  // Carried forward with a reason, or the whole book allowed to mix: accepted.
  EXPECT_TRUE(PriceBook::FromYaml(std::string(stale) + "    carried_forward: \"no later rate\"\n", "b.yaml").ok());
  EXPECT_TRUE(PriceBook::FromYaml(std::string(stale) + "allow_mixed_dates: true\n", "b.yaml").ok());
  EXPECT_FALSE(PriceBook::FromYaml(std::string(stale) + "allow_mixed_dates: maybe\n", "b.yaml").ok());
  // Merging a text of another date into the 2024 default book.
  PriceBook book = PriceBook::Default();
  Status st = book.Merge("price_date: \"2025-07-01\"\npools: []\n", "late.yaml");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("late.yaml: price_date 2025-07-01 differs from the price book's 2024-12-31"),
            std::string::npos)
      << st.message();
  // A text without a date is checked against the book's: a price from after 2024 is refused.
  st = book.Merge("pools:\n  - {name: a, tier: reserved, gpu_kind: x, usd_per_gpu_hour: 1, valid_from: \"2025-06-01\"}\n",
                  "undated.yaml");
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(book.Merge("price_date: \"2025-07-01\"\nallow_mixed_dates: true\npools: []\n", "late.yaml").ok());
  EXPECT_FALSE(PriceBook::FromYaml("price_date: 2025-13-01\n", "b.yaml").ok());
  EXPECT_FALSE(PriceBook::FromYaml("pools:\n  - {name: a, tier: reserved, gpu_kind: x, usd_per_gpu_hour: 1, "
                                   "valid_from: \"2025-06-01\", valid_until: \"2025-01-01\"}\n",
                                   "b.yaml")
                   .ok());
}

// Bad input table: each text must fail with an error naming the source, the line and the field.
TEST(PriceBook, BadConfigsNameTheField) {
  struct Case {
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {"pools:\n  - {name: a, tier: spot, gpu_kind: h100-80gb, usd_per_gpu_hour: 1}\n",
       "bad.yaml:2: pools[0].reclaim_notice_s: missing"},
      {"pools:\n  - {name: a, tier: cheap, gpu_kind: h100-80gb, usd_per_gpu_hour: 1}\n", "pools[0].tier: 'cheap' is not one of"},
      {"pools:\n  - {name: a, tier: reserved, gpu_kind: h100-80gb, usd_per_gpu_hour: -3}\n",
       "bad.yaml:2: pools[0].usd_per_gpu_hour: expected a number >= 0, got \"-3\""},
      {"pools:\n  - {name: a, tier: reserved, gpu_kind: h100-80gb, usd_per_gpu_hour: cheap}\n",
       "pools[0].usd_per_gpu_hour: expected a number"},
      {"pools:\n  - {name: a, tier: reserved, gpu_kind: h100-80gb}\n", "bad.yaml:2: pools[0].usd_per_gpu_hour: required"},
      {"pools:\n  - {name: a, tier: reserved, gpu_kind: h100-80gb, usd_per_gpu_hour: 1, prise: 2}\n",
       "pools[0].prise: unknown field"},
      {"pools:\n  - {name: a, tier: reserved, gpu_kind: h100-80gb, usd_per_gpu_hour: 1, reclaim_notice_s: 30}\n",
       "pools[0].reclaim_notice_s: only spot pools"},
      {"pools:\n  - {name: o, tier: owned, gpu_kind: h100-80gb}\n", "pools[0].owned: missing"},
      {"pools:\n  - name: o\n    tier: owned\n    gpu_kind: h100-80gb\n    owned: {gpus: 8, capex_usd: 1, life_months: 48, pue: 0.5}\n",
       "bad.yaml:5: pools[0].owned.pue: expected a number in [1, 10], got \"0.5\""},
      {"pools:\n  - {name: a, tier: reserved, gpu_kind: x, usd_per_gpu_hour: 1}\n  - {name: a, tier: reserved, gpu_kind: x, "
       "usd_per_gpu_hour: 1}\n",
       "pools[1].name: duplicate pool 'a'"},
      {"on_demand_list:\n  - {gpu_kind: h100-80gb}\n", "bad.yaml:2: on_demand_list[0].usd_per_gpu_hour: required"},
      {"pools: {name: a}\n", "pools: expected a list"},
      {"poools: []\n", "poools: unknown field"},
      {"pools: [\n", "bad.yaml:2: YAML syntax error"},
  };
  for (const Case& c : cases) {
    Result<PriceBook> book = PriceBook::FromYaml(c.text, "bad.yaml");
    ASSERT_FALSE(book.ok()) << c.text;
    EXPECT_NE(book.error().find(c.expect), std::string::npos) << "got: " << book.error() << "\nwant: " << c.expect;
  }
}

}  // namespace
}  // namespace tessera
