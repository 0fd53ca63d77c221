// The cluster summary the API, /metrics and the portal's history read: what tasks hold, never what a cordon
// holds, and only live nodes.
#include "service/cluster_summary.h"

#include <gtest/gtest.h>

#include "model/catalog.h"
#include "model/cluster.h"

namespace tessera {
namespace {

constexpr const char* kSummaryCluster = R"(name: s
defaults: {gpus: 2, cpu: 64, memory_gib: 256, interconnect: nvswitch, spine: s, leaf: leaf-0, tier: reserved}
nodes:
  - {name: plain, gpu: h100-80gb}
  - {name: mig, gpu: a100-80gb, mig: {enabled: true, config: all-3g.40gb}}
)";

class ClusterSummaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cl = LoadClusterYaml(kSummaryCluster, "test", Catalog::Default());
    ASSERT_TRUE(cl.ok()) << cl.error();
    cluster_ = *cl;
    auto st = ClusterState::Build(cluster_, Catalog::Default());
    ASSERT_TRUE(st.ok()) << st.error();
    state_ = std::make_unique<ClusterState>(std::move(st).value());
  }
  // One task on GPU `g`: the whole GPU, or (MIG) the instance at `start` of `profile`.
  void Hold(GpuId g, int profile = -1, int start = 0) {
    GpuGrant gr;
    gr.gpu = g;
    gr.milli = 1000;
    if (profile >= 0) {
      gr.mig_profile = static_cast<int16_t>(profile);
      gr.mig_start = static_cast<int8_t>(start);
    }
    const std::vector<TaskPlacement> tasks = {{state_->gpu(g).node, {gr}}};
    ASSERT_TRUE(state_->CanApply(tasks, 0, 0).ok());
    state_->Apply(tasks, 0, 0, false);
  }
  Cluster cluster_;
  std::unique_ptr<ClusterState> state_;
};

TEST_F(ClusterSummaryTest, CountsWhatTasksHoldNotWhatACordonHolds) {
  const int p3g = Catalog::Default().kind(cluster_.nodes[1].kind).FindProfile("3g.40gb");
  Hold(0);          // plain GPU 0
  Hold(2, p3g, 0);  // the first 3g.40gb of the MIG node's GPU 0
  auto before = SummariseCluster(*state_, {});
  EXPECT_EQ(before->gpus, 4);
  EXPECT_EQ(before->busy_gpus, 2);
  const int64_t three_g = Catalog::Default().kind(cluster_.nodes[1].kind).ProfileComputeMilli(p3g);
  EXPECT_EQ(before->allocated_milli, 1000 + three_g);
  ASSERT_TRUE(state_->CordonNode(0).ok());
  ASSERT_TRUE(state_->CordonNode(1).ok());
  auto after = SummariseCluster(*state_, {"cordoned", "draining"});
  EXPECT_EQ(after->allocated_milli, before->allocated_milli) << "a cordon's hold is not allocation";
  EXPECT_EQ(after->busy_gpus, 2);
  EXPECT_EQ(after->allocated_milli, state_->AllocatedMilli());
  ASSERT_EQ(after->nodes.size(), 2u);
  EXPECT_EQ(after->nodes[0].state, "cordoned");
  EXPECT_EQ(after->nodes[1].state, "draining");
  EXPECT_EQ(after->nodes[0].gpus[1].tasks, 0);
  EXPECT_EQ(after->nodes[0].gpus[1].allocated_milli, 0);
  const GpuSummary& mig = after->nodes[1].gpus[0];
  ASSERT_EQ(mig.instances.size(), 2u);
  int busy = 0;
  for (const InstanceSummary& m : mig.instances) busy += m.busy;
  EXPECT_EQ(busy, 1) << "the idle 3g.40gb the cordon took is not busy";
  EXPECT_EQ(after->nodes[1].gpus[1].tasks, 0);
  // A removed node is left out.
  ASSERT_TRUE(state_->UncordonNode(0).ok());
  std::vector<TaskPlacement> release = {{0, {GpuGrant{}}}};
  release[0].gpus[0].gpu = 0;
  release[0].gpus[0].milli = 1000;
  state_->Release(release, 0, 0, false);
  ASSERT_TRUE(state_->CordonNode(0).ok());
  ASSERT_TRUE(state_->RemoveNode(0).ok()) << state_->RemoveNode(0).message();
  auto removed = SummariseCluster(*state_, {});
  ASSERT_EQ(removed->nodes.size(), 1u);
  EXPECT_EQ(removed->nodes[0].name, "mig");
  EXPECT_EQ(removed->gpus, 2);
}

}  // namespace
}  // namespace tessera
