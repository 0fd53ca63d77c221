#include "server/history.h"

#include <random>

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(UtilisationHistory, KeepsTimeOrderAndCapacity) {
  UtilisationHistory h(3);
  h.Record({10, 8, 1000, 1});
  h.Record({10, 8, 2000, 2});  // same time: ignored
  h.Record({5, 8, 3000, 3});   // earlier: ignored
  h.Record({20, 8, 4000, 4});
  h.Record({30, 8, 5000, 5});
  h.Record({40, 8, 6000, 6});
  ASSERT_EQ(h.Size(), 3u);
  auto all = h.Range(-1, -1, 0);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].t, 20);
  EXPECT_EQ(all[2].allocated_milli, 6000);
}

TEST(UtilisationHistory, RangeIsInclusiveAndBounded) {
  UtilisationHistory h;
  for (int t = 0; t < 100; ++t) h.Record({t, 16, t * 10, t % 16});
  auto r = h.Range(10, 19, 0);
  ASSERT_EQ(r.size(), 10u);
  EXPECT_EQ(r.front().t, 10);
  EXPECT_EQ(r.back().t, 19);
  EXPECT_TRUE(h.Range(200, 300, 0).empty());
  EXPECT_TRUE(h.Range(50, 40, 0).empty());
}

// Thinning keeps at most max_points, in time order, each a mean of real samples (so within their range).
TEST(UtilisationHistory, ThinningPreservesOrderAndBoundsOnRandomData) {
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    UtilisationHistory h;
    int64_t t = 0, lo = INT64_MAX, hi = 0;
    const int n = 1 + static_cast<int>(rng() % 3000);
    for (int i = 0; i < n; ++i) {
      t += 1 + rng() % 5;
      const int64_t a = rng() % 64000;
      lo = std::min(lo, a), hi = std::max(hi, a);
      h.Record({t, 64, a, a / 1000});
    }
    const size_t max_points = 1 + rng() % 400;
    auto r = h.Range(-1, -1, max_points);
    ASSERT_LE(r.size(), max_points);
    if (static_cast<size_t>(n) <= max_points) {
      ASSERT_EQ(r.size(), static_cast<size_t>(n));
    }
    for (size_t i = 0; i < r.size(); ++i) {
      if (i) {
        EXPECT_LT(r[i - 1].t, r[i].t);
      }
      EXPECT_GE(r[i].allocated_milli, lo);
      EXPECT_LE(r[i].allocated_milli, hi);
      EXPECT_EQ(r[i].total_gpus, 64);
    }
  }
}

}  // namespace
}  // namespace tessera
