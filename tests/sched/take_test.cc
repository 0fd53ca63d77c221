// The one checkpoint-before-take rule (sched/take.h).
#include "sched/take.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(Take, ACheckpointComesFirstOnlyWhereDue) {
  Plan plan;
  Action& a = AppendTake({7, true, true, 600}, 9, "drain", 60, &plan);
  a.units_milli = 8000;
  ASSERT_EQ(plan.actions.size(), 2u);
  EXPECT_EQ(plan.actions[0].kind, ActionKind::kCheckpoint);
  EXPECT_EQ(plan.actions[0].job, 7);
  EXPECT_EQ(plan.actions[0].for_job, 9);
  EXPECT_NE(plan.actions[0].reason.find("600 s"), std::string::npos) << plan.actions[0].reason;
  EXPECT_EQ(plan.actions[1].kind, ActionKind::kPreempt);
  EXPECT_EQ(plan.actions[1].reason, "drain");
  EXPECT_EQ(plan.actions[1].units_milli, 8000);  // the returned action is the plan's preemption

  for (const TakeTarget& t : {TakeTarget{7, true, true, 59},       // checkpointed too recently
                              TakeTarget{7, false, true, 600},     // cannot checkpoint
                              TakeTarget{7, true, false, 600}}) {  // not running (bound, not started)
    Plan p;
    AppendTake(t, 7, "r", 60, &p);
    ASSERT_EQ(p.actions.size(), 1u);
    EXPECT_EQ(p.actions[0].kind, ActionKind::kPreempt);
  }
  Plan edge;
  AppendTake({7, true, true, 60}, 7, "r", 60, &edge);  // exactly the minimum age: due
  EXPECT_EQ(edge.actions.size(), 2u);
}

}  // namespace
}  // namespace tessera
