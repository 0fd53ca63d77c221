// The control-loop core: job phases through decide/apply/start/complete, preemption with a grace period,
// work kept at checkpoints, conflicts, the CycleInput it builds, and decayed usage on hand-computed cases.
#include "control/loop.h"

#include <gtest/gtest.h>

#include <cmath>

#include "control/usage.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "sched/policy.h"

namespace tessera {
namespace {

Cluster OneNode(int gpus) {
  Cluster c;
  c.name = "test";
  Node n;
  n.name = "n0";
  n.kind = Catalog::Default().Find("h100-80gb");
  n.gpu_count = gpus;
  n.cpu_milli = 64000;
  n.memory_mib = 512 * 1024;
  n.interconnect = Interconnect::kNvSwitch;
  c.nodes.push_back(n);
  c.leaf_names.push_back("leaf0");
  c.spine_names.push_back("spine0");
  return c;
}

ControlJob Job(int gpus, int priority, double work_s, int queue = 0) {
  ControlJob j;
  j.request.cls = WorkloadClass::kTraining;
  j.request.tasks = 1;
  j.request.gpus_per_task = gpus;
  j.request.gpu_memory_mib = 40000;
  j.request.cpu_milli = 1000;
  j.request.host_memory_mib = 1024;
  j.request.priority = priority;
  j.queue = queue;
  j.remaining_work_s = work_s;
  j.checkpointable = true;
  return j;
}

Action Act(ActionKind kind, JobId job, JobId for_job = 0) {
  Action a;
  a.kind = kind;
  a.job = job;
  a.for_job = for_job;
  return a;
}

class LoopTest : public ::testing::Test {
 protected:
  ControlLoop MakeLoop(int gpus, LoopOptions o = {}, int queues = 1) {
    cluster_ = OneNode(gpus);
    auto st = ClusterState::Build(cluster_, Catalog::Default());
    EXPECT_TRUE(st.ok()) << st.error();
    std::vector<QueueConfig> qs;
    for (int q = 0; q < queues; ++q) {
      QueueConfig c;
      c.name = "q" + std::to_string(q);
      qs.push_back(c);
    }
    return ControlLoop(std::move(st).value(), qs, o);
  }
  const Policy& policy() {
    if (!policy_) policy_ = std::move(MakePolicy("k8s-default")).value();
    return *policy_;
  }
  Cluster cluster_;
  std::unique_ptr<Policy> policy_;
};

TEST_F(LoopTest, BindStartCompleteReleases) {
  ControlLoop loop = MakeLoop(8);
  const JobSlot a = loop.Add(Job(4, 100, 500));
  EXPECT_EQ(loop.jobs()[a].request.id, EngineId(a));
  loop.Submit(a, 10);
  ASSERT_EQ(loop.jobs().pending().size(), 1u);
  std::vector<Applied> seen;
  auto applied = loop.Apply(loop.Decide(10, policy()), 10, [&](const Applied& x) { seen.push_back(x); });
  ASSERT_EQ(applied.size(), 1u);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(applied[0].kind, ActionKind::kBind);
  EXPECT_TRUE(applied[0].done && applied[0].first_bind);
  EXPECT_EQ(applied[0].granted_s, 10);
  EXPECT_TRUE(loop.jobs().pending().empty());
  EXPECT_EQ(loop.jobs()[a].phase, JobPhase::kBound);
  EXPECT_EQ(loop.jobs()[a].held_milli, 4000);
  EXPECT_EQ(loop.state().AllocatedMilli(), 4000);
  // At half speed, 500 s of work take 1000 s.
  EXPECT_EQ(loop.Start(a, 20, 0.5), 1020);
  EXPECT_EQ(loop.jobs()[a].phase, JobPhase::kRunning);
  const uint32_t epoch = loop.jobs()[a].epoch;
  Released r = loop.Complete(a, 1020);
  EXPECT_EQ(r.from, JobPhase::kRunning);
  EXPECT_EQ(r.start_s, 20);
  EXPECT_EQ(r.held_milli, 4000);
  EXPECT_EQ(loop.jobs()[a].phase, JobPhase::kDone);
  EXPECT_EQ(loop.jobs()[a].epoch, epoch + 1);
  EXPECT_EQ(loop.state().AllocatedMilli(), 0);
  EXPECT_TRUE(loop.jobs().holding().empty());
  EXPECT_TRUE(loop.state().CheckInvariants().ok());
}

// Users who over-estimate by 4x are read at the ratio the loop has observed once 20 jobs have completed:
// the pending job's planned duration is its limit times the learned scale (the geometric mean of run time /
// limit), and a running job past that estimate is expected to end any moment.
TEST_F(LoopTest, TimeLimitsAreScaledByWhatCompletedJobsShowed) {
  LoopOptions o;
  o.expected_ends = true;
  ControlLoop loop = MakeLoop(8, o);
  for (int i = 0; i < ControlLoop::kLearnAfter; ++i) {
    ControlJob j = Job(1, 100, 100);
    j.time_limit_factor = i % 2 ? 2.0 : 8.0;  // geometric mean of the ratios: 1/4
    const JobSlot s = loop.Add(std::move(j));
    loop.Submit(s, 0);
    EXPECT_DOUBLE_EQ(loop.LimitScale(), 1.0) << "nothing learned before " << ControlLoop::kLearnAfter;
    loop.Apply(loop.Decide(i * 100, policy()), i * 100);
    loop.Start(s, i * 100, 1.0);
    loop.Complete(s, i * 100 + 100);
  }
  EXPECT_NEAR(loop.LimitScale(), 0.25, 1e-12);
  ControlJob next = Job(1, 100, 1000);
  next.time_limit_factor = 4.0;
  const JobSlot n = loop.Add(std::move(next));
  loop.Submit(n, 5000);
  CycleInput in = loop.BuildInput(5000);
  ASSERT_EQ(in.pending.size(), 1u);
  EXPECT_NEAR(in.pending[0].expected_duration_s, 1000, 1) << "4x the run time, read at 1/4 (rounded up)";
  loop.Apply(loop.Decide(5000, policy()), 5000);
  loop.Start(n, 5000, 1.0);
  EXPECT_NEAR(loop.BuildInput(5500).running[0].expected_end_s, 6000, 1);
}

// An input built into one used before equals a fresh one: running entries reused in place carry nothing of
// the jobs they held before (fewer running jobs, other grants, an expected end that is now unknown).
TEST_F(LoopTest, InputBuiltIntoAnEarlierOneEqualsAFreshOne) {
  LoopOptions o;
  o.drain_times = true;
  o.expected_ends = true;
  ControlLoop loop = MakeLoop(8, o);
  std::vector<JobSlot> slots;
  for (int i = 0; i < 4; ++i) {
    slots.push_back(loop.Add(Job(i < 2 ? 2 : 1, 100, i == 3 ? -1 : 100.0 * (i + 1))));
    loop.Submit(slots.back(), 0);
  }
  loop.Apply(loop.Decide(0, policy()), 0);
  for (JobSlot s : slots) loop.Start(s, 0, 1.0);
  CycleInput reused = loop.BuildInput(0);
  ASSERT_EQ(reused.running.size(), 4u);
  loop.Complete(slots[0], 100);
  loop.Complete(slots[1], 200);
  const JobSlot late = loop.Add(Job(1, 50, 700));
  loop.Submit(late, 200);
  loop.BuildInput(300, &reused);
  const CycleInput fresh = loop.BuildInput(300);
  ASSERT_EQ(reused.running.size(), fresh.running.size());
  for (size_t i = 0; i < fresh.running.size(); ++i) {
    const RunningJob& a = reused.running[i];
    const RunningJob& b = fresh.running[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.expected_end_s, b.expected_end_s) << "job " << b.id;
    EXPECT_EQ(a.gpu_milli, b.gpu_milli);
    ASSERT_EQ(a.tasks.size(), b.tasks.size());
    for (size_t t = 0; t < b.tasks.size(); ++t) {
      EXPECT_EQ(a.tasks[t].node, b.tasks[t].node);
      ASSERT_EQ(a.tasks[t].gpus.size(), b.tasks[t].gpus.size());
      for (size_t g = 0; g < b.tasks[t].gpus.size(); ++g) EXPECT_EQ(a.tasks[t].gpus[g].gpu, b.tasks[t].gpus[g].gpu);
    }
  }
  ASSERT_EQ(reused.pending.size(), 1u);
  EXPECT_EQ(reused.pending[0].request.id, fresh.pending[0].request.id);
  EXPECT_EQ(reused.drain_s, fresh.drain_s);
  EXPECT_EQ(reused.vacating_milli, fresh.vacating_milli);
  EXPECT_EQ(reused.now_s, 300);
}

// ReserveInput grows an input's lists ahead of BuildInput (which then writes into them without growing),
// keeps the running entries it moves, and never shrinks.
TEST_F(LoopTest, ReservedInputIsBuiltWithoutGrowing) {
  ControlLoop loop = MakeLoop(8);
  std::vector<JobSlot> slots;
  for (int i = 0; i < 3; ++i) {
    slots.push_back(loop.Add(Job(1, 100, 100)));
    loop.Submit(slots.back(), 0);
  }
  loop.Apply(loop.Decide(0, policy()), 0);
  CycleInput in = loop.BuildInput(0);
  ASSERT_EQ(in.running.size(), 3u);
  const JobId first = in.running[0].id;
  ControlLoop::ReserveInput(&in, 40, 30);
  EXPECT_GE(in.pending.capacity(), 40u);
  EXPECT_GE(in.running.capacity(), 30u);
  ASSERT_EQ(in.running.size(), 3u);  // moved, not dropped
  EXPECT_EQ(in.running[0].id, first);
  EXPECT_EQ(in.running[0].tasks.size(), 1u);
  for (int i = 0; i < 40; ++i) loop.Submit(loop.Add(Job(8, 100, 100)), 1);
  const PendingJob* pending = in.pending.data();
  const RunningJob* running = in.running.data();
  loop.BuildInput(1, &in);
  EXPECT_EQ(in.pending.size(), 40u);
  EXPECT_EQ(in.pending.data(), pending);
  EXPECT_EQ(in.running.data(), running);
  ControlLoop::ReserveInput(&in, 1, 1);
  EXPECT_EQ(in.pending.data(), pending);
  EXPECT_EQ(in.pending.size(), 40u);
}

TEST_F(LoopTest, BindOfAJobNotPendingIsAConflict) {
  ControlLoop loop = MakeLoop(8);
  const JobSlot a = loop.Add(Job(4, 100, 500));
  loop.Submit(a, 0);
  Plan plan = loop.Decide(0, policy());
  loop.Apply(plan, 0);
  auto again = loop.Apply(plan, 0);  // the same bind twice
  ASSERT_EQ(again.size(), 1u);
  EXPECT_TRUE(again[0].conflict);
  Plan unknown;
  unknown.actions.push_back(Act(ActionKind::kPreempt, 99));
  EXPECT_TRUE(loop.Apply(unknown, 0)[0].conflict);
  EXPECT_EQ(loop.state().AllocatedMilli(), 4000);
}

TEST_F(LoopTest, PreemptionKeepsCheckpointedWorkAndRequeuesBySubmitTime) {
  ControlLoop loop = MakeLoop(8);
  const JobSlot a = loop.Add(Job(8, 100, 1000));
  const JobSlot b = loop.Add(Job(8, 100, 50));
  loop.Submit(a, 0);
  loop.Apply(loop.Decide(0, policy()), 0);
  loop.Start(a, 0, 1.0);
  loop.Submit(b, 5);
  Plan ck;
  ck.actions.push_back(Act(ActionKind::kCheckpoint, EngineId(a)));
  EXPECT_TRUE(loop.Apply(ck, 300)[0].done);
  Plan pre;
  pre.actions.push_back(Act(ActionKind::kPreempt, EngineId(a), EngineId(b)));
  auto out = loop.Apply(pre, 400);
  ASSERT_TRUE(out[0].released.has_value());
  EXPECT_EQ(out[0].lost_since_s, 300);  // the work since the checkpoint is lost
  EXPECT_DOUBLE_EQ(loop.jobs()[a].remaining_work_s, 700);
  // Back in the queue ahead of b (submitted earlier).
  ASSERT_EQ(loop.jobs().pending().size(), 2u);
  EXPECT_EQ(loop.jobs().pending()[0], a);
  EXPECT_EQ(loop.jobs()[a].phase, JobPhase::kPending);
  EXPECT_EQ(loop.state().AllocatedMilli(), 0);
}

TEST_F(LoopTest, PreemptionWithoutTakerHoldsForTheGracePeriod) {
  LoopOptions o;
  o.termination_grace_s = 30;
  ControlLoop loop = MakeLoop(8, o);
  const JobSlot a = loop.Add(Job(8, 100, 1000));
  loop.Submit(a, 0);
  loop.Apply(loop.Decide(0, policy()), 0);
  loop.Start(a, 0, 1.0);
  Plan pre;
  pre.actions.push_back(Act(ActionKind::kPreempt, EngineId(a), -1));
  auto out = loop.Apply(pre, 100);
  EXPECT_FALSE(out[0].released.has_value());
  EXPECT_EQ(out[0].vacate_s, 130);
  EXPECT_EQ(loop.jobs()[a].phase, JobPhase::kTerminating);
  EXPECT_DOUBLE_EQ(loop.jobs()[a].remaining_work_s, 1000);  // never checkpointed: starts over
  CycleInput in = loop.BuildInput(110);
  EXPECT_TRUE(in.running.empty());
  EXPECT_EQ(in.vacating_milli, 8000);
  Released r = loop.Requeue(a, 130);
  EXPECT_EQ(r.from, JobPhase::kTerminating);
  EXPECT_EQ(loop.jobs()[a].phase, JobPhase::kPending);
  EXPECT_EQ(loop.state().AllocatedMilli(), 0);
}

TEST_F(LoopTest, InputCarriesExpectedEndsAndDrainTimes) {
  LoopOptions o;
  o.expected_ends = true;
  o.drain_times = true;
  ControlLoop loop = MakeLoop(8, o);
  ControlJob ja = Job(4, 100, 100);
  ja.time_limit_factor = 2;  // the cycle sees a time limit twice the work
  const JobSlot a = loop.Add(ja);
  const JobSlot b = loop.Add(Job(8, 100, 300));
  loop.Submit(a, 0);
  loop.Apply(loop.Decide(0, policy()), 0);
  loop.Start(a, 0, 1.0);
  loop.Submit(b, 10);
  CycleInput in = loop.BuildInput(10);
  ASSERT_EQ(in.running.size(), 1u);
  EXPECT_EQ(in.running[0].expected_end_s, 200);
  ASSERT_EQ(in.pending.size(), 1u);
  EXPECT_EQ(in.pending[0].expected_duration_s, 300);
  EXPECT_EQ(in.pending[0].request.expected_end_s, 310);
  EXPECT_EQ(in.pending[0].request.id, EngineId(b));
  ASSERT_EQ(in.drain_s.size(), 1u);
  EXPECT_EQ(in.drain_s[0], 200);
  EXPECT_FALSE(in.snapshot->has_drain_times()) << "drain times travel in the input, not on the state";
}

TEST(QueueUsage, DecaysWithTheHalfLifeOnAHandComputedCase) {
  // Half-life 100 s. Queue 0 holds 1000 units for 100 s, nothing for 100 s, then 2000 units for 50 s:
  //   t=100: 0 * 2^-1 + 1000 * 100 = 100000
  //   t=200: 100000 * 2^-1 + 0 = 50000
  //   t=250: 50000 * 2^-0.5 + 2000 * 50 = 135355.339...
  QueueUsage u(2, 100, 0);
  u.AddHeld(0, 1000);
  u.AdvanceTo(100);
  EXPECT_DOUBLE_EQ(u.usage()[0], 100000);
  u.AddHeld(0, -1000);
  u.AdvanceTo(200);
  EXPECT_DOUBLE_EQ(u.usage()[0], 50000);
  u.AddHeld(0, 2000);
  u.AdvanceTo(250);
  EXPECT_NEAR(u.usage()[0], 50000 / std::sqrt(2.0) + 100000, 1e-6);
  EXPECT_DOUBLE_EQ(u.usage()[1], 0);
  u.AdvanceTo(240);  // the past changes nothing
  EXPECT_NEAR(u.usage()[0], 50000 / std::sqrt(2.0) + 100000, 1e-6);
}

TEST_F(LoopTest, UsageOfHeldGpusReachesTheCycle) {
  LoopOptions o;
  o.track_usage = true;
  o.cycle.usage_half_life_s = 3600;
  ControlLoop loop = MakeLoop(8, o, 2);
  const JobSlot a = loop.Add(Job(2, 100, 10000, 1));
  loop.Submit(a, 0);
  loop.Apply(loop.Decide(0, policy()), 0);
  CycleInput in = loop.BuildInput(3600);  // 2 GPUs (2000 units) held for one half-life
  ASSERT_EQ(in.historical_usage.size(), 2u);
  EXPECT_DOUBLE_EQ(in.historical_usage[0], 0);
  EXPECT_DOUBLE_EQ(in.historical_usage[1], 2000.0 * 3600);
  loop.Complete(a, 3600);
  in = loop.BuildInput(7200);  // nothing held for another half-life: halved
  EXPECT_DOUBLE_EQ(in.historical_usage[1], 1000.0 * 3600);
  LoopOptions off;
  ControlLoop plain = MakeLoop(8, off, 2);
  EXPECT_EQ(plain.BuildInput(0).historical_usage, std::vector<double>(2, 0.0));
}

// A driver restarting rebuilds the table: a running job resumes on its recorded grants (nothing can be
// allocated twice), usage counts from the restart, and the decayed history comes back from the store.
TEST_F(LoopTest, ResumeTakesRecordedGrantsOnceAndUsageIsRestored) {
  LoopOptions o;
  o.track_usage = true;
  o.expected_ends = true;
  o.cycle.usage_half_life_s = 3600;
  ControlLoop first = MakeLoop(8, o, 2);
  const JobSlot a = first.Add(Job(6, 100, 1000, 1));
  first.Submit(a, 0);
  first.Apply(first.Decide(0, policy()), 0);
  first.Start(a, 0, 1.0);
  const std::vector<TaskPlacement> grants = first.jobs()[a].tasks;

  ControlLoop loop = MakeLoop(8, o, 2);
  loop.RestoreUsage({0, 5000.0 * 3600}, 100);
  const JobSlot r = loop.Add(Job(6, 100, 1000, 1));
  ASSERT_TRUE(loop.Resume(r, grants, 0, 100, 1.0).ok());
  EXPECT_EQ(loop.jobs()[r].phase, JobPhase::kRunning);
  EXPECT_EQ(loop.jobs()[r].end_s, 1000);
  EXPECT_EQ(loop.state().AllocatedMilli(), 6000);
  EXPECT_EQ(loop.jobs().holding().count(r), 1u);
  // The same grants again do not fit: an error, nothing taken.
  const JobSlot twice = loop.Add(Job(6, 100, 1000, 1));
  EXPECT_FALSE(loop.Resume(twice, grants, 0, 100, 1.0).ok());
  EXPECT_EQ(loop.jobs()[twice].phase, JobPhase::kFuture);
  EXPECT_EQ(loop.state().AllocatedMilli(), 6000);
  EXPECT_TRUE(loop.state().CheckInvariants().ok());
  // One half-life later: the restored history halved plus what the resumed job held since the restart.
  CycleInput in = loop.BuildInput(3700);
  EXPECT_NEAR(in.historical_usage[1], 2500.0 * 3600 + 6000.0 * 3600, 1e-6);
  ASSERT_EQ(in.running.size(), 1u);
  EXPECT_EQ(in.running[0].expected_end_s, 3701) << "past its end (1000): expected to end any moment";
  EXPECT_EQ(loop.BuildInput(900).running[0].expected_end_s, 1000);
}

TEST_F(LoopTest, WithdrawLeavesTheQueueOrReleasesTheGrants) {
  ControlLoop loop = MakeLoop(8);
  const JobSlot a = loop.Add(Job(8, 100, 500));
  const JobSlot b = loop.Add(Job(8, 100, 500));
  loop.Submit(a, 0);
  loop.Submit(b, 1);
  loop.Apply(loop.Decide(1, policy()), 1);
  ASSERT_EQ(loop.jobs()[a].phase, JobPhase::kBound);
  ASSERT_EQ(loop.jobs().pending(), std::vector<JobSlot>{b});
  EXPECT_EQ(loop.Withdraw(b, 2).job, kNoSlot);
  EXPECT_TRUE(loop.jobs().pending().empty());
  EXPECT_EQ(loop.jobs()[b].phase, JobPhase::kFailed);
  Released r = loop.Withdraw(a, 3);
  EXPECT_EQ(r.job, a);
  EXPECT_EQ(r.held_milli, 8000);
  EXPECT_EQ(loop.state().AllocatedMilli(), 0);
  EXPECT_TRUE(loop.jobs().holding().empty());
}

TEST_F(LoopTest, QueuesAddedAtRunTimeReachTheCycle) {
  LoopOptions o;
  o.track_usage = true;
  ControlLoop loop = MakeLoop(8, o, 1);
  QueueConfig q;
  q.name = "late";
  q.guaranteed_milli = 4000;
  EXPECT_EQ(loop.AddQueue(q), 1);
  const JobSlot a = loop.Add(Job(2, 100, 500, 1));
  loop.Submit(a, 0);
  CycleInput in = loop.BuildInput(0);
  ASSERT_EQ(in.queues.size(), 2u);
  EXPECT_EQ(in.queues[1].guaranteed_milli, 4000);
  EXPECT_EQ(in.historical_usage.size(), 2u);
  q.guaranteed_milli = 8000;
  loop.UpdateQueue(1, q);
  EXPECT_EQ(loop.BuildInput(0).queues[1].guaranteed_milli, 8000);
  loop.Apply(loop.Decide(0, policy()), 0);
  EXPECT_EQ(loop.jobs()[a].phase, JobPhase::kBound);
}

// A drain asks the cycle's preemption rule outside a cycle (MayPreemptFor): a lower priority of the
// preemptor's queue once it ran min_runtime_s; not one younger, nor one whose class says `preemption:
// never`, nor one of another queue that holds no more than its guarantee; one of a queue above its
// guarantee, for a job whose queue stays within its own. The preemptor must be pending, the victim holding.
TEST_F(LoopTest, MayPreemptForAsksTheCyclesRuleWithTheQueuesAsTheyHoldNow) {
  LoopOptions o;
  o.cycle.min_runtime_s = 300;
  o.cycle.reclaim_min_runtime_s = 30;
  ControlLoop loop = MakeLoop(8, o, 2);
  for (int q = 0; q < 2; ++q) {
    QueueConfig c = loop.queues()[q];
    c.guaranteed_milli = 4000;
    loop.UpdateQueue(q, c);
  }
  const JobSlot v = loop.Add(Job(4, 100, 5000, 1));
  const JobSlot keep = loop.Add(Job(1, 100, 5000, 1));
  loop.jobs()[keep].preemptible = false;
  loop.Submit(v, 0);
  loop.Submit(keep, 0);
  loop.Apply(loop.Decide(0, policy()), 0);
  ASSERT_EQ(loop.jobs()[v].phase, JobPhase::kBound);
  const JobSlot other = loop.Add(Job(4, 200, 100, 0));  // another queue, within its guarantee
  const JobSlot same = loop.Add(Job(4, 200, 100, 1));   // the victims' queue
  const JobSlot low = loop.Add(Job(4, 50, 100, 1));     // below the victim
  for (JobSlot s : {other, same, low}) loop.Submit(s, 10);
  EXPECT_EQ(loop.MayPreemptFor(v, same, 100), PreemptKind::kNone) << "younger than min_runtime_s";
  EXPECT_EQ(loop.MayPreemptFor(v, same, 400), PreemptKind::kPriority);
  EXPECT_EQ(loop.MayPreemptFor(v, low, 400), PreemptKind::kNone);
  EXPECT_EQ(loop.MayPreemptFor(keep, same, 400), PreemptKind::kNone) << "preemption: never";
  // q1 holds 5 GPUs against a guarantee of 4: borrowing, so q0's job may take them back.
  EXPECT_EQ(loop.MayPreemptFor(v, other, 400), PreemptKind::kPriority);
  loop.Complete(keep, 400);
  EXPECT_EQ(loop.MayPreemptFor(v, other, 400), PreemptKind::kNone) << "q1 within its guarantee now";
  EXPECT_EQ(loop.MayPreemptFor(v, v, 900), PreemptKind::kNone) << "the preemptor is not pending";
  EXPECT_EQ(loop.MayPreemptFor(same, other, 900), PreemptKind::kNone) << "the victim holds nothing";
}

}  // namespace
}  // namespace tessera
