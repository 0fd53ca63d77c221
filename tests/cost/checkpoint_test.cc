#include "cost/checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tessera {
namespace {

TEST(YoungDaly, IsSqrtTwoCostTimesMtbf) {
  // C = 300 s, MTBF = 10 h: sqrt(2 * 300 * 36000) = 4647.58 s.
  EXPECT_NEAR(YoungDalyIntervalS(300, 36000), 4647.58, 0.01);
  EXPECT_NEAR(YoungDalyIntervalS(60, 3600), std::sqrt(2.0 * 60 * 3600), 1e-9);
  // From a rate: 0.1 reclaims per hour = MTBF 36000 s.
  EXPECT_NEAR(YoungDalyIntervalForRateS(300, 0.1), 4647.58, 0.01);
}

TEST(YoungDaly, NeverReclaimedMeansNoCheckpointInterval) {
  EXPECT_TRUE(std::isinf(YoungDalyIntervalForRateS(300, 0)));
  EXPECT_TRUE(std::isinf(YoungDalyIntervalS(300, INFINITY)));
  EXPECT_EQ(YoungDalyIntervalS(0, 3600), 0);
}

TEST(GangLossRate, SumsTheRatesOfNodesWhoseNoticeDoesNotCoverTheWrite) {
  // A 4-node gang on 30 s-notice nodes at 0.02/h each: any reclaim stops the gang, 0.08/h in all.
  const std::vector<NodeReclaim> short_notice(4, NodeReclaim{0.02, 30});
  EXPECT_NEAR(GangLossRatePerHour(short_notice, 60, false), 0.08, 1e-12);
  // Its interval is shorter than a single node's by sqrt(4).
  EXPECT_NEAR(YoungDalyIntervalForRateS(60, 0.02) / YoungDalyIntervalForRateS(60, 0.08), 2.0, 1e-9);
  // 120 s notice covers a 60 s write: reclaims lose no work, no periodic checkpoint is needed...
  const std::vector<NodeReclaim> covered(4, NodeReclaim{0.01, 120});
  EXPECT_EQ(GangLossRatePerHour(covered, 60, false), 0);
  EXPECT_TRUE(std::isinf(YoungDalyIntervalForRateS(60, GangLossRatePerHour(covered, 60, false))));
  // ...unless asked for, then they count like the others.
  EXPECT_NEAR(GangLossRatePerHour(covered, 60, true), 0.04, 1e-12);
  // Mixed gang: only the uncovered node counts; never-reclaimed nodes add nothing.
  EXPECT_NEAR(GangLossRatePerHour({{0.01, 120}, {0.02, 30}, {0, 0}}, 60, false), 0.02, 1e-12);
  // A write longer than the notice is not covered.
  EXPECT_NEAR(GangLossRatePerHour(covered, 121, false), 0.04, 1e-12);
}

TEST(YoungDaly, DalyHigherOrderIsCloseWhenCheckpointsAreCheap) {
  const double yd = YoungDalyIntervalS(10, 1e6);
  EXPECT_NEAR(DalyIntervalS(10, 1e6) / yd, 1.0, 0.01);
  // Checkpoint as long as two MTBFs: Daly says checkpoint every MTBF.
  EXPECT_EQ(DalyIntervalS(100, 50), 50);
}

TEST(YoungDaly, MinimisesExpectedWaste) {
  CheckpointCostModel m;
  m.checkpoint_cost_s = 120;
  m.restart_cost_s = 60;
  m.mtbf_s = 8 * 3600;
  m.notice_s = 30;  // too short to checkpoint on notice
  m.interval_s = YoungDalyIntervalS(m.checkpoint_cost_s, m.mtbf_s);
  const double best = ExpectedWasteFraction(m);
  for (double f : {0.25, 0.5, 0.8, 1.25, 2.0, 4.0}) {
    CheckpointCostModel other = m;
    other.interval_s = m.interval_s * f;
    EXPECT_GT(ExpectedWasteFraction(other), best) << "interval factor " << f;
  }
  // At the optimum, writing and losing cost the same: C / tau == (tau / 2) / M.
  EXPECT_NEAR(m.checkpoint_cost_s / m.interval_s, (m.interval_s / 2) / m.mtbf_s, 1e-12);
}

TEST(LostWork, HalfAnIntervalUnlessTheNoticeAllowsACheckpoint) {
  CheckpointCostModel m;
  m.interval_s = 1800;
  m.checkpoint_cost_s = 90;
  m.mtbf_s = 36000;
  m.notice_s = 30;  // GCP/Azure notice: too short for a 90 s checkpoint
  EXPECT_FALSE(CheckpointsOnNotice(m));
  EXPECT_DOUBLE_EQ(ExpectedLostWorkPerReclaimS(m), 900);
  m.notice_s = 120;  // AWS notice: checkpoint on notice, lose nothing
  EXPECT_TRUE(CheckpointsOnNotice(m));
  EXPECT_DOUBLE_EQ(ExpectedLostWorkPerReclaimS(m), 0);
}

}  // namespace
}  // namespace tessera
