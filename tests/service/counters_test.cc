// The service's duration histograms: each observation lands in the first bucket whose bound holds it (or
// +Inf), and the sum adds its microseconds.
#include <gtest/gtest.h>

#include "service/service.h"

namespace tessera {
namespace {

TEST(DurationHistogram, CountsEachObservationInItsBucket) {
  Counters c;
  c.lock_apply.Observe(0.00005);  // <= 0.0001
  c.lock_apply.Observe(0.0001);   // on a bound: that bucket
  c.lock_apply.Observe(0.003);    // <= 0.005
  c.lock_apply.Observe(5);        // +Inf
  const auto& h = c.lock_apply;
  ASSERT_EQ(h.kNumBuckets, std::size(Counters::kLockBuckets));
  EXPECT_EQ(h.bucket[0].load(), 2u);
  EXPECT_EQ(h.bucket[5].load(), 1u);  // bounds: 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005
  EXPECT_EQ(h.bucket[h.kNumBuckets].load(), 1u);
  EXPECT_EQ(h.sum_us.load(), 50u + 100u + 3000u + 5000000u);
  EXPECT_EQ(c.lock_input.sum_us.load(), 0u);
  c.cycle.Observe(0.02);
  EXPECT_EQ(c.cycle.bucket[4].load(), 1u);  // <= 0.025
}

}  // namespace
}  // namespace tessera
