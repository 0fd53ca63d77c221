// The typical tasks learned from submissions: nothing before min_requests, then the distribution of the last
// `window` requests (as TaskShapeDistribution::FromSamples computes it), republished only every
// refresh_every submissions, the training share, nothing when off; the loop hands it to the cycle's snapshot.
#include "control/workload_learner.h"

#include <gtest/gtest.h>

#include <vector>

#include "control/loop.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "sched/test_util.h"

namespace tessera {
namespace {

Request Share(int milli, int64_t cpu) {
  Request r;
  r.cls = WorkloadClass::kInference;
  r.gpus_per_task = 0;
  r.gpu_milli = milli;
  r.cpu_milli = cpu;
  r.host_memory_mib = 2048;
  return r;
}

Request Whole(int gpus) {
  Request r;
  r.cls = WorkloadClass::kTraining;
  r.gpus_per_task = gpus;
  r.gpu_milli = kMilliPerGpu;
  r.cpu_milli = 8000;
  r.host_memory_mib = 65536;
  return r;
}

TEST(WorkloadLearner, NothingBeforeMinRequestsThenTheWindowsDistribution) {
  WorkloadLearning o;
  o.min_requests = 10;
  o.refresh_every = 5;
  o.window = 100;
  WorkloadLearner l(o);
  std::vector<Request> seen;
  for (int i = 0; i < 9; ++i) {
    seen.push_back(i % 3 == 0 ? Whole(2) : Share(300, 1000));
    l.Observe(seen.back());
  }
  EXPECT_EQ(l.Current(), nullptr) << "nothing learned before min_requests";
  seen.push_back(Whole(2));
  l.Observe(seen.back());
  ASSERT_NE(l.Current(), nullptr);
  // A request weighs one sample per whole GPU: each 2-GPU request counts twice.
  std::vector<Request> weighted;
  for (const Request& r : seen)
    for (int k = 0; k < (r.gpus_per_task > 0 ? r.tasks * r.gpus_per_task : 1); ++k) weighted.push_back(r);
  const TaskShapeDistribution want = TaskShapeDistribution::FromRequests(weighted, o.coverage);
  EXPECT_EQ(l.Current()->shapes, want.shapes);
  EXPECT_EQ(l.Current()->prob, want.prob);
  EXPECT_EQ(l.Current()->memory_mib, want.memory_mib);
  EXPECT_DOUBLE_EQ(l.Current()->training_share, 8.0 / 14.0) << "4 two-GPU requests against 6 shares";
  EXPECT_TRUE(l.Current()->MixesClasses());
}

TEST(WorkloadLearner, RepublishesOnlyEveryRefreshAndForgetsBeyondTheWindow) {
  WorkloadLearning o;
  o.min_requests = 4;
  o.refresh_every = 4;
  o.window = 8;
  WorkloadLearner l(o);
  for (int i = 0; i < 4; ++i) l.Observe(Share(250, 1000));
  const auto first = l.Current();
  ASSERT_NE(first, nullptr);
  for (int i = 0; i < 3; ++i) {
    l.Observe(Whole(8));
    EXPECT_EQ(l.Current(), first) << "the same distribution until refresh_every more submissions";
  }
  l.Observe(Whole(8));  // 4 x 8 samples of whole-node tasks: the shares left the window
  ASSERT_NE(l.Current(), first);
  ASSERT_EQ(l.Current()->shapes.size(), 1u);
  EXPECT_EQ(l.Current()->shapes[0].num_gpu, 8);
  EXPECT_DOUBLE_EQ(l.Current()->training_share, 1.0);
  EXPECT_FALSE(l.Current()->MixesClasses()) << "one kind of work";
  EXPECT_EQ(l.observed(), 8);
}

TEST(WorkloadLearner, OffLearnsNothing) {
  WorkloadLearning o;
  o.enabled = false;
  o.min_requests = 1;
  WorkloadLearner l(o);
  for (int i = 0; i < 10; ++i) l.Observe(Share(500, 1000));
  EXPECT_EQ(l.Current(), nullptr);
}

TEST(WorkloadLearner, TheLoopHandsWhatItLearnedFromSubmissionsToTheSnapshot) {
  const Cluster c = testing::MakeCluster(1, 8, "h100-80gb");
  auto st = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(st.ok()) << st.error();
  LoopOptions o;
  o.workload_learning.min_requests = 3;
  ControlLoop loop(std::move(st).value(), {QueueConfig{}}, o);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(loop.BuildInput(i).snapshot->learned_workload(), nullptr);
    ControlJob j;
    j.request = Share(400, 2000);
    loop.Submit(loop.Add(j), i);
  }
  const CycleInput in = loop.BuildInput(10);
  ASSERT_NE(in.snapshot->learned_workload(), nullptr);
  ASSERT_EQ(in.snapshot->learned_workload()->shapes.size(), 1u);
  EXPECT_EQ(in.snapshot->learned_workload()->shapes[0].gpu_milli, 400);
  EXPECT_EQ(in.snapshot->learned_workload(), loop.workload().Current());
}

}  // namespace
}  // namespace tessera
