// The admission headroom learned from observed demand: nothing before enough samples, the quantile of the
// observed ratio within one bin, never below 1 nor above the cap, one histogram per class of unit, bad
// ratios ignored, old observations forgotten by halving; the loop hands it to the cycle's snapshot.
#include "control/demand_learner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/random.h"
#include "control/loop.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "sched/test_util.h"

namespace tessera {
namespace {

constexpr double kBin = 1.005;  // one bin's width ratio

TEST(DemandLearner, QuantileOfTheObservedRatioOnceEnoughWereSeen) {
  DemandLearning o;
  o.min_samples = 1000;
  DemandLearner d(o);
  SeededRng rng(7);
  std::vector<double> seen;
  for (int i = 0; i < 999; ++i) {
    const double r = 0.8 + 1.2 * UnitInterval(rng.Next());  // uniform on [0.8, 2.0)
    d.Observe(r, false);
    seen.push_back(r);
  }
  EXPECT_EQ(d.Headroom().standard, 0) << "nothing learned before min_samples";
  d.Observe(1.0, false);
  seen.push_back(1.0);
  std::sort(seen.begin(), seen.end());
  const double truth = seen[static_cast<size_t>(std::ceil(o.standard_quantile * seen.size())) - 1];
  const double h = d.Headroom().standard;
  EXPECT_GE(h, truth) << "read at the bin's upper edge";
  EXPECT_LE(h, truth * kBin * kBin);
  EXPECT_EQ(d.Headroom().sensitive, 0) << "the other class saw nothing";
}

TEST(DemandLearner, ClampedToOneAndTheCapAndBadRatiosIgnored) {
  DemandLearning o;
  o.min_samples = 10;
  o.max_headroom = 2.5;
  DemandLearner d(o);
  for (double bad : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) d.Observe(bad, true);
  EXPECT_EQ(d.samples(true), 0);
  for (int i = 0; i < 10; ++i) d.Observe(0.5, true), d.Observe(9.0, false);
  EXPECT_EQ(d.Headroom().sensitive, 1.0) << "demand below the declared never admits beyond it";
  EXPECT_EQ(d.Headroom().standard, 2.5) << "capped";
}

TEST(DemandLearner, ForgetsByHalvingSoThatAChangedWorkloadIsFollowed) {
  DemandLearning o;
  o.standard_quantile = 0.5;
  DemandLearner d(o);
  for (int i = 0; i < (1 << 20); ++i) d.Observe(1.2, false);
  EXPECT_LT(d.samples(false), 1 << 20) << "halved at 2^20";
  EXPECT_NEAR(d.Headroom().standard, 1.2, 1.2 * (kBin - 1) + 1e-12);
  for (int i = 0; i < (1 << 20); ++i) d.Observe(1.6, false);
  EXPECT_NEAR(d.Headroom().standard, 1.6, 1.6 * (kBin - 1) + 1e-12) << "the newer demand is the median now";
}

TEST(DemandLearner, TheLoopHandsItToTheCyclesSnapshot) {
  const Cluster c = testing::MakeCluster(1, 8, "h100-80gb");
  auto s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok());
  LoopOptions lo;
  lo.demand_learning.min_samples = 100;
  ControlLoop loop(std::move(*s), {QueueConfig{}}, lo);
  EXPECT_EQ(loop.BuildInput(0).snapshot->learned_headroom(), LearnedHeadroom{});
  for (int i = 0; i < 100; ++i) loop.ObserveDemand(1.3, true), loop.ObserveDemand(1.1, false);
  const LearnedHeadroom h = loop.BuildInput(10).snapshot->learned_headroom();
  EXPECT_NEAR(h.sensitive, 1.3, 1.3 * (kBin - 1) + 1e-12);
  EXPECT_NEAR(h.standard, 1.1, 1.1 * (kBin - 1) + 1e-12);
}

}  // namespace
}  // namespace tessera
