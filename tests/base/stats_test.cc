#include "base/stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace tessera {
namespace {

TEST(Median, SmallCases) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({4}), 4);
  EXPECT_EQ(Median({3, 1}), 2);
  EXPECT_EQ(Median({5, 1, 3}), 3);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({-1, -1, 7}), -1);
}

// Property: at most half the values lie strictly below the median, at most half strictly above, whatever
// the input order.
TEST(Median, BalancesRandomInputs) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<double> v(1 + rng() % 20);
    for (double& x : v) x = static_cast<double>(rng() % 1000);
    const double m = Median(v);
    const auto below = std::count_if(v.begin(), v.end(), [&](double x) { return x < m; });
    const auto above = std::count_if(v.begin(), v.end(), [&](double x) { return x > m; });
    EXPECT_LE(2 * below, static_cast<long>(v.size())) << "round " << round;
    EXPECT_LE(2 * above, static_cast<long>(v.size())) << "round " << round;
    std::shuffle(v.begin(), v.end(), rng);
    EXPECT_EQ(Median(v), m);
  }
}

}  // namespace
}  // namespace tessera
