#include "base/random.h"

#include <gtest/gtest.h>

#include <vector>

namespace tessera {
namespace {

// The reference SplitMix64 sequence for seed 0 (splitmix64.c by Sebastiano Vigna).
TEST(SeededRng, MatchesTheReferenceSequence) {
  SeededRng rng(0);
  EXPECT_EQ(rng.Next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(rng.Next(), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(rng.Next(), 0x06c45d188009454fULL);
}

TEST(SeededRng, NextIsTheMixOfTheAdvancedState) {
  for (uint64_t seed : {0ULL, 1ULL, 42ULL, 0xffffffffffffffffULL}) {
    SeededRng rng(seed);
    EXPECT_EQ(rng.Next(), SplitMix64Mix(seed + kSplitMix64Gamma));
    EXPECT_EQ(rng.Next(), SplitMix64Mix(seed + 2 * kSplitMix64Gamma));
  }
}

TEST(SeededRng, BelowStaysInRangeAndCoversIt) {
  for (uint64_t n : {1ULL, 2ULL, 3ULL, 7ULL, 1000ULL}) {
    SeededRng rng(n);
    std::vector<int> seen(n <= 7 ? n : 0, 0);  // small ranges: every value must come up in 2000 draws
    for (int k = 0; k < 2000; ++k) {
      const uint64_t x = rng.Below(n);
      ASSERT_LT(x, n);
      if (x < seen.size()) ++seen[x];
    }
    for (size_t v = 0; v < seen.size(); ++v) EXPECT_GT(seen[v], 0) << "n " << n << " value " << v;
  }
}

TEST(UnitInterval, Bounds) {
  EXPECT_EQ(UnitInterval(0), 0.0);
  EXPECT_LT(UnitInterval(~0ULL), 1.0);
  EXPECT_EQ(UnitInterval(1ULL << 63), 0.5);
}

}  // namespace
}  // namespace tessera
