// Step-time model against hardware-facts.md 3.6 (7B model, bf16 gradients, S = 14 GB).
#include "sched/step_time.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

constexpr double kS = 14e9;

GangLayout OneNode(int gpus, Interconnect ic) {
  GangLayout l;
  l.span = Span::kOneNode;
  l.interconnect = ic;
  l.gpus = gpus;
  l.gpus_per_node = {gpus};
  return l;
}

GangLayout Nodes(int nodes, int per_node, Span span, double nic_gbps = 400) {
  GangLayout l;
  l.span = span;
  l.gpus = nodes * per_node;
  l.gpus_per_node.assign(nodes, per_node);
  l.nic_gbps_per_gpu = nic_gbps;
  return l;
}

TEST(StepTimeTest, AllReduceFormula) {
  EXPECT_DOUBLE_EQ(AllReduceSeconds(kS, 1, 100), 0);
  EXPECT_NEAR(AllReduceSeconds(kS, 8, 360), 14e9 * 2 * 7 / 8 / 360e9, 1e-12);
}

TEST(StepTimeTest, Table36SingleNode) {
  FabricParams p;
  p.nvswitch_busbw_gbs = 360;
  EXPECT_NEAR(ComputeStepTime(p, OneNode(8, Interconnect::kNvSwitch), kS, 0).allreduce_s, 0.068, 0.001);
  p.nvswitch_busbw_gbs = 480;
  EXPECT_NEAR(ComputeStepTime(p, OneNode(8, Interconnect::kNvSwitch), kS, 0).allreduce_s, 0.051, 0.001);
  // 8 GPUs, PCIe only, ~28 GB/s -> ~875 ms.
  EXPECT_NEAR(ComputeStepTime(p, OneNode(8, Interconnect::kPcie), kS, 0).allreduce_s, 0.875, 0.001);
}

TEST(StepTimeTest, Table36MultiNodeDefaults) {
  FabricParams p;  // defaults: Azure sweep, injection cap 1.25 x
  // 16 GPUs on 2 nodes, 8x NDR: ~480 GB/s -> ~55 ms.
  StepTime two = ComputeStepTime(p, Nodes(2, 8, Span::kOneLeaf), kS, 0);
  EXPECT_NEAR(two.busbw_gbs, 482, 0.5);
  EXPECT_NEAR(two.allreduce_s, 0.055, 0.002);
  // 512 GPUs on 64 nodes: ~235-250 GB/s -> ~112-119 ms.
  StepTime big = ComputeStepTime(p, Nodes(64, 8, Span::kOneLeaf), kS, 0);
  EXPECT_NEAR(big.busbw_gbs, 235, 0.5);
  EXPECT_GT(big.allreduce_s, 0.110);
  EXPECT_LT(big.allreduce_s, 0.120);
  p.network_busbw_by_nodes = {{2, 250}};
  EXPECT_NEAR(ComputeStepTime(p, Nodes(64, 8, Span::kOneLeaf), kS, 0).allreduce_s, 0.112, 0.001);
}

TEST(StepTimeTest, Table36InjectionBound) {
  // p4d-class: 4 x 100 Gb/s per node = 50 Gb/s per GPU; bounded by ~50 GB/s per node -> >= 500 ms.
  FabricParams p;
  p.injection_factor = 1.0;
  StepTime t = ComputeStepTime(p, Nodes(2, 8, Span::kOneLeaf, 50), kS, 0);
  EXPECT_NEAR(t.busbw_gbs, 50, 1e-9);
  EXPECT_NEAR(t.allreduce_s, 0.525, 0.001);
}

TEST(StepTimeTest, SpreadPodsAndOversubscription) {
  FabricParams p;
  p.leaf_oversubscription = 2;
  p.cross_spine_oversubscription = 1.5;
  // One GPU per node: injection 50 GB/s x 1.25 = 62.5 GB/s.
  EXPECT_NEAR(GangBusbw(p, Nodes(8, 1, Span::kOneLeaf)), 62.5, 1e-9);
  EXPECT_NEAR(GangBusbw(p, Nodes(8, 1, Span::kOneSpine)), 31.25, 1e-9);
  EXPECT_NEAR(GangBusbw(p, Nodes(8, 1, Span::kCrossSpine)), 62.5 / 3, 1e-9);
  // Interpolation stays between neighbours.
  const double b = NetworkBusbw(p, 24);
  EXPECT_LT(b, 274.8);
  EXPECT_GT(b, 243.4);
}

TEST(StepTimeTest, OverlapHidesCommunication) {
  FabricParams p;
  p.nvswitch_busbw_gbs = 360;
  GangLayout l = OneNode(8, Interconnect::kNvSwitch);
  StepTime none = ComputeStepTime(p, l, kS, 1.0);
  EXPECT_NEAR(none.step_s, 1.068, 0.001);
  EXPECT_NEAR(none.Efficiency(), 1.0 / 1.068, 1e-3);
  p.overlap = 0.5;
  EXPECT_NEAR(ComputeStepTime(p, l, kS, 1.0).step_s, 1.0, 1e-12);  // 68 ms hidden under 500 ms
  GangLayout one;
  EXPECT_DOUBLE_EQ(ComputeStepTime(p, one, kS, 1.0).Efficiency(), 1.0);
}

}  // namespace
}  // namespace tessera
