// FGD's fragmentation measure, integer score, typical-task distribution, tie-break rule, and the other
// harness policies (BestFit, Random, tessera) on small hand-made clusters.
#include "sched/fgd_policy.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "base/random.h"
#include "sched/cluster_state.h"
#include "sched/harness_policies.h"
#include "sched/node_scorer.h"
#include "sched/policy.h"
#include "test_util.h"

namespace tessera {
namespace {

KindId T4() { return Catalog::Default().Find("T4"); }

TaskShape Share(int milli, int64_t cpu = 1000) { return TaskShape{cpu, 1, milli, 0}; }
TaskShape WholeShape(int k, int64_t cpu = 1000) { return TaskShape{cpu, k, 1000, 0}; }

Request ShareReq(int milli, int64_t cpu = 1000, int64_t mem = 1024) {
  Request r;
  r.gpus_per_task = 0;
  r.gpu_milli = milli;
  r.cpu_milli = cpu;
  r.host_memory_mib = mem;
  return r;
}
Request WholeReq(int k, int64_t cpu = 1000, int64_t mem = 1024) {
  Request r;
  r.gpus_per_task = k;
  r.gpu_milli = 1000;
  r.cpu_milli = cpu;
  r.host_memory_mib = mem;
  return r;
}

// `n` nodes of `gpus` T4 GPUs, 16 cores and 64 GiB each, names n0..n{n-1}.
Cluster SmallCluster(int n, int gpus, int64_t cpu = 16000, int64_t mem = 65536) {
  Cluster c;
  c.name = "small";
  c.leaf_names = {"leaf-0"};
  c.spine_names = {"spine-0"};
  for (int i = 0; i < n; ++i) {
    Node node;
    node.name = "n" + std::to_string(i);
    node.kind = T4();
    node.gpu_count = gpus;
    node.cpu_milli = cpu;
    node.memory_mib = mem;
    node.interconnect = Interconnect::kPcie;
    c.nodes.push_back(node);
  }
  return c;
}

// A policy from the one factory, with typical tasks `d` and ties broken by `seed`'s node order.
std::unique_ptr<Policy> Made(const std::string& name, const TaskShapeDistribution& d, uint64_t seed) {
  PolicyOptions o;
  o.typical = d;
  o.tie_seed = seed;
  Result<std::unique_ptr<Policy>> p = MakePolicy(name, o);
  EXPECT_TRUE(p.ok()) << p.error();
  return std::move(p).value();
}

void Take(ClusterState& s, GpuId g, int milli, int64_t cpu = 0, int64_t mem = 0) {
  TaskPlacement tp;
  tp.node = s.gpu(g).node;
  GpuGrant grant;
  grant.gpu = g;
  grant.milli = milli;
  tp.gpus.push_back(grant);
  ASSERT_TRUE(s.CanApply({tp}, cpu, mem).ok());
  s.Apply({tp}, cpu, mem, true);
}

TEST(FragmentationTest, HandMadeNode) {
  NodeResources node{T4(), 10000, {1000, 500, 200, 0}};
  // A CPU-only task can use no GPU: everything free is fragmented.
  EXPECT_EQ(FragmentedMilli(node, TaskShape{1000, 0, 0, 0}), 1700);
  // A 0.3-GPU task fits on GPUs 0 and 1; only GPU 2's 200 milli is too small.
  EXPECT_EQ(FragmentedMilli(node, Share(300)), 200);
  // A whole GPU fits on GPU 0; the partly used GPUs are fragmented.
  EXPECT_EQ(FragmentedMilli(node, WholeShape(1)), 700);
  // Two whole GPUs do not fit: all free capacity is fragmented.
  EXPECT_EQ(FragmentedMilli(node, WholeShape(2)), 1700);
  // CPU short: all fragmented.
  EXPECT_EQ(FragmentedMilli(node, Share(300, 20000)), 1700);
  // Model not allowed: all fragmented.
  TaskShape other = Share(300);
  other.kind_mask = uint64_t{1} << (T4() == 0 ? 1 : 0);
  EXPECT_EQ(FragmentedMilli(node, other), 1700);

  TaskShapeDistribution d;
  d.shapes = {Share(300), WholeShape(1)};
  d.prob = {0.5, 0.5};
  EXPECT_DOUBLE_EQ(NodeFragmentation(node, d), 450.0);
}

TEST(FragmentationTest, ScoreIsTruncatedSigmoid) {
  EXPECT_EQ(FgdScore(500, 500), 50);
  EXPECT_EQ(FgdScore(1000, 0), 73);  // 100 * sigmoid(1) = 73.1
  EXPECT_EQ(FgdScore(0, 1000), 26);  // 26.9
  // Small differences truncate to the same integer: these tie.
  EXPECT_EQ(FgdScore(10, 0), 50);
  EXPECT_EQ(FgdScore(19, 0), 50);
  EXPECT_EQ(FgdScore(0, 10), 49);
}

TEST(TypicalDistributionTest, KeepsMostCommonPrefix) {
  std::vector<TaskShape> tasks;
  for (int i = 0; i < 3; ++i) tasks.push_back(Share(500));
  for (int i = 0; i < 6; ++i) tasks.push_back(WholeShape(1));
  tasks.push_back(WholeShape(8));
  TaskShapeDistribution d = TaskShapeDistribution::Typical(tasks, 0.9);
  ASSERT_EQ(d.shapes.size(), 2u);
  EXPECT_EQ(d.shapes[0], WholeShape(1));
  EXPECT_EQ(d.shapes[1], Share(500));
  EXPECT_DOUBLE_EQ(d.prob[0], 6.0 / 9.0);
  EXPECT_DOUBLE_EQ(d.prob[1], 3.0 / 9.0);
  EXPECT_EQ(TaskShapeDistribution::Typical(tasks, 0.95).shapes.size(), 3u);
  // Equal counts: the shape seen first comes first.
  TaskShapeDistribution e = TaskShapeDistribution::Typical({Share(200), Share(100), Share(100), Share(200)}, 1.0);
  EXPECT_EQ(e.shapes[0], Share(200));
}

TEST(FgdPolicyTest, TiesGoToEarliestNodeInSeedOrder) {
  const Cluster c = SmallCluster(6, 2);
  Result<ClusterState> s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok()) << s.error();
  TaskShapeDistribution d = TaskShapeDistribution::Typical({WholeShape(1)}, 1.0);
  for (uint64_t seed : {1u, 2u, 3u, 42u}) {
    FgdPolicy p(d, seed);
    PlaceResult r = p.Place(*s, WholeReq(1));
    ASSERT_TRUE(r.ok) << r.reason;
    // Every empty node scores the same, so the first node of the seed's permutation wins.
    EXPECT_EQ(r.tasks[0].node, SeededPermutation(6, seed)[0]) << "seed " << seed;
    EXPECT_EQ(r.tasks[0].gpus[0].gpu, s->node(r.tasks[0].node).first_gpu);  // lowest index
  }
  EXPECT_NE(SeededPermutation(6, 1), SeededPermutation(6, 2));
}

TEST(FgdPolicyTest, PicksGpuThatFragmentsLeast) {
  // One node, GPUs free [1000, 500]; every typical task asks 0.4 GPU. Taking 0.4 from GPU 1 leaves a
  // 100-milli sliver (score int(100 sigmoid(-0.1)) = 47); taking it from GPU 0 leaves 600 + 500, both
  // usable (score 50). FGD takes GPU 0, unlike a best-fit GPU choice.
  const Cluster c = SmallCluster(1, 2);
  Result<ClusterState> s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok()) << s.error();
  Take(*s, 1, 500);
  FgdPolicy p(TaskShapeDistribution::Typical({Share(400)}, 1.0), 7);
  PlaceResult r = p.Place(*s, ShareReq(400));
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.tasks[0].gpus[0].gpu, 0);
  EXPECT_EQ(r.tasks[0].gpus[0].milli, 400);
}

TEST(FgdPolicyTest, PrefersNodeWhereFragmentationDrops) {
  // Node 0 has a GPU with 600 free, node 1 is empty. A 0.6 task on node 0 removes 600 milli that no
  // typical 0.8 task could use (F drops), on node 1 it creates a 400 sliver (F rises): node 0 wins
  // whatever the seed.
  const Cluster c = SmallCluster(2, 1);
  Result<ClusterState> s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok()) << s.error();
  Take(*s, 0, 400);
  TaskShapeDistribution d = TaskShapeDistribution::Typical({Share(800), Share(600)}, 1.0);
  for (uint64_t seed = 0; seed < 8; ++seed) {
    PlaceResult r = FgdPolicy(d, seed).Place(*s, ShareReq(600));
    ASSERT_TRUE(r.ok) << r.reason;
    EXPECT_EQ(r.tasks[0].node, 0) << "seed " << seed;
  }
}

TEST(FgdPolicyTest, NoFitIsAResultWithReason) {
  const Cluster c = SmallCluster(2, 1);
  Result<ClusterState> s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok()) << s.error();
  FgdPolicy p(TaskShapeDistribution::Typical({WholeShape(1)}, 1.0), 1);
  PlaceResult r = p.Place(*s, WholeReq(2));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.code, NoFitCode::kResources);
  EXPECT_NE(r.reason.find("2 whole GPUs"), std::string::npos) << r.reason;
  Request gang = WholeReq(1);
  gang.tasks = 2;
  EXPECT_EQ(p.Place(*s, gang).code, NoFitCode::kInvalid);
  // CPU and memory are filters.
  EXPECT_FALSE(p.Place(*s, WholeReq(1, 17000)).ok);
  EXPECT_FALSE(p.Place(*s, WholeReq(1, 1000, 70000)).ok);
}

TEST(HarnessPoliciesTest, BestFitTakesTheFullestNodeAndTightestGpu) {
  const Cluster c = SmallCluster(3, 2);
  Result<ClusterState> s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok()) << s.error();
  Take(*s, 2, 300);  // node 1, GPU 0: 700 free
  Take(*s, 3, 500);  // node 1, GPU 1: 500 free
  for (uint64_t seed = 0; seed < 6; ++seed) {
    PlaceResult r = Made("bestfit", {}, seed)->Place(*s, ShareReq(400));
    ASSERT_TRUE(r.ok) << r.reason;
    EXPECT_EQ(r.tasks[0].node, 1);
    EXPECT_EQ(r.tasks[0].gpus[0].gpu, 3);  // 500 free is the tightest fit
  }
}

TEST(HarnessPoliciesTest, RandomIsFeasibleAndRepeatable) {
  const Cluster c = SmallCluster(8, 2);
  Result<ClusterState> s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok()) << s.error();
  RandomPolicy p(5);
  std::set<NodeId> seen;
  for (JobId id = 0; id < 40; ++id) {
    Request r = ShareReq(300);
    r.id = id;
    PlaceResult a = p.Place(*s, r), b = p.Place(*s, r);
    ASSERT_TRUE(a.ok);
    EXPECT_EQ(a.tasks[0].node, b.tasks[0].node);
    EXPECT_EQ(a.tasks[0].gpus[0].gpu, b.tasks[0].gpus[0].gpu);
    seen.insert(a.tasks[0].node);
  }
  EXPECT_GT(seen.size(), 4u);
}

TEST(HarnessPoliciesTest, DotProdPrefersTheLeastAlignedNode) {
  // Node 1 has 3 of 4 GPUs and 12 cores taken: its free vector is smallest, so the dot product with any
  // demand is smallest there and it wins whatever the node order.
  const Cluster c = SmallCluster(3, 4);
  Result<ClusterState> s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok()) << s.error();
  for (GpuId g = 4; g < 7; ++g) Take(*s, g, 1000, 4000);
  for (uint64_t seed = 0; seed < 8; ++seed) {
    PlaceResult r = DotProdPolicy(seed).Place(*s, WholeReq(1));
    ASSERT_TRUE(r.ok) << r.reason;
    EXPECT_EQ(r.tasks[0].node, 1) << "seed " << seed;
  }
}

TEST(HarnessPoliciesTest, GpuClusteringKeepsFormsTogether) {
  // Node 0 holds a 0.3-GPU task, node 1 a whole-GPU task, node 2 nothing. Shares go to node 0, whole
  // GPUs to node 1, whatever the node order; CPU-only tasks score 0 everywhere (seed order decides).
  const Cluster c = SmallCluster(3, 4);
  Result<ClusterState> s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok()) << s.error();
  Take(*s, 0, 300);
  Take(*s, 4, 1000);
  std::set<NodeId> cpu_nodes;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    PlaceResult share = GpuClusteringPolicy(seed).Place(*s, ShareReq(500));
    ASSERT_TRUE(share.ok) << share.reason;
    EXPECT_EQ(share.tasks[0].node, 0) << "seed " << seed;
    PlaceResult whole = GpuClusteringPolicy(seed).Place(*s, WholeReq(2));
    ASSERT_TRUE(whole.ok) << whole.reason;
    EXPECT_EQ(whole.tasks[0].node, 1) << "seed " << seed;
    Request cpu_only = WholeReq(0);
    cpu_only.gpu_milli = 0;
    PlaceResult co = GpuClusteringPolicy(seed).Place(*s, cpu_only);
    ASSERT_TRUE(co.ok) << co.reason;
    cpu_nodes.insert(co.tasks[0].node);
  }
  EXPECT_GT(cpu_nodes.size(), 1u);
}

TEST(HarnessPoliciesTest, GpuPackingFillsPartlyUsedGpusThenNodes) {
  // Node 0 empty; node 1: GPU 4 has 600 free; node 2: GPU 8 taken whole. A 0.5 share goes to GPU 4
  // (partly used GPU); a whole GPU goes to a partly used node (1 or 2), never to the empty node.
  const Cluster c = SmallCluster(3, 4);
  Result<ClusterState> s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok()) << s.error();
  Take(*s, 4, 400);
  Take(*s, 8, 1000);
  for (uint64_t seed = 0; seed < 8; ++seed) {
    PlaceResult share = GpuPackingPolicy(seed).Place(*s, ShareReq(500));
    ASSERT_TRUE(share.ok) << share.reason;
    EXPECT_EQ(share.tasks[0].gpus[0].gpu, 4) << "seed " << seed;
    PlaceResult whole = GpuPackingPolicy(seed).Place(*s, WholeReq(1));
    ASSERT_TRUE(whole.ok) << whole.reason;
    EXPECT_NE(whole.tasks[0].node, 0) << "seed " << seed;
  }
}

TEST(HarnessPoliciesTest, TesseraAvoidsStrandingGpusWhereFgdIsIndifferent) {
  // Node 0: 4 GPUs, 32 cores; node 1: 4 GPUs, 128 cores. Typical task: 1 GPU, 8 cores. A 1-GPU task
  // asking 20 cores leaves node 0 with 3 GPUs and 12 cores: one typical task still fits, so FGD's measure
  // does not change and the tie goes to the seed's first node; but only 1.5 of the 3 GPUs can still be
  // fed. tessera counts those stranded GPUs and always picks node 1.
  Cluster c = SmallCluster(2, 4, 32000, 1 << 20);
  c.nodes[1].cpu_milli = 128000;
  Result<ClusterState> s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok()) << s.error();
  const TaskShapeDistribution d = TaskShapeDistribution::Typical({WholeShape(1, 8000)}, 1.0);
  int fgd_on_0 = 0;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    PlaceResult t = Made("tessera", d, seed)->Place(*s, WholeReq(1, 20000));
    ASSERT_TRUE(t.ok) << t.reason;
    EXPECT_EQ(t.tasks[0].node, 1) << "seed " << seed;
    PlaceResult f = FgdPolicy(d, seed).Place(*s, WholeReq(1, 20000));
    ASSERT_TRUE(f.ok);
    fgd_on_0 += f.tasks[0].node == 0;
  }
  EXPECT_GT(fgd_on_0, 0);
}

TEST(HarnessPoliciesTest, TesseraWithoutGivenTasksScoresWithTheSnapshotsLearnedWorkload) {
  // The stranding case above. Typical tasks asking 8 cores per GPU make node 0 a bad choice; typical tasks
  // asking 1 core strand nothing (a tie, node order decides). Given tasks win over learned ones; without
  // either the score is the engine's packing (a tie here too).
  Cluster c = SmallCluster(2, 4, 32000, 1 << 20);
  c.nodes[1].cpu_milli = 128000;
  Result<ClusterState> s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok()) << s.error();
  const TaskShapeDistribution heavy = TaskShapeDistribution::Typical({WholeShape(1, 8000)}, 1.0);
  const TaskShapeDistribution light = TaskShapeDistribution::Typical({WholeShape(1, 1000)}, 1.0);
  auto tessera = std::move(MakePolicy("tessera")).value();
  auto given = std::move(MakePolicy("tessera", PolicyOptions{heavy, std::nullopt, {}})).value();
  auto node_of = [&](const Policy& p) {
    PlaceResult r = p.Place(*s, WholeReq(1, 20000));
    EXPECT_TRUE(r.ok) << r.reason;
    return r.ok ? r.tasks[0].node : -1;
  };
  EXPECT_EQ(node_of(*tessera), 0) << "nothing known: packing, node order";
  s->set_learned_workload(std::make_shared<const TaskShapeDistribution>(heavy));
  EXPECT_EQ(node_of(*tessera), 1) << "learned heavy tasks: node 0 would strand GPUs";
  s->set_learned_workload(std::make_shared<const TaskShapeDistribution>(light));
  EXPECT_EQ(node_of(*tessera), 0) << "learned light tasks: nothing stranded";
  EXPECT_EQ(node_of(*given), 1) << "given tasks win over learned ones";
}

TEST(HarnessPoliciesTest, TesseraSeparatesClassesWhereTheLearnedWorkloadMixesThem) {
  // Node 0 runs an inference share on GPU 0; node 1 is empty. For a 1-GPU training task FGD's measure over
  // whole-GPU typical tasks ties (the share's GPU is fragmented either way): node order gives node 0. Where
  // the workload also has inference, class separation ranks first and keeps the training task off node 0.
  const Cluster c = SmallCluster(2, 4, 64000, 1 << 20);  // the state refers to it
  Result<ClusterState> s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok()) << s.error();
  Take(*s, 0, 300);
  auto tessera = std::move(MakePolicy("tessera")).value();
  Request train = WholeReq(1);
  train.cls = WorkloadClass::kTraining;
  TaskShapeDistribution d = TaskShapeDistribution::Typical({WholeShape(1)}, 1.0);
  d.training_share = 1.0;
  s->set_learned_workload(std::make_shared<const TaskShapeDistribution>(d));
  PlaceResult one_kind = tessera->Place(*s, train);
  ASSERT_TRUE(one_kind.ok) << one_kind.reason;
  EXPECT_EQ(one_kind.tasks[0].node, 0) << "one kind of work: the score decides";
  d.training_share = 0.5;
  s->set_learned_workload(std::make_shared<const TaskShapeDistribution>(d));
  PlaceResult mixed = tessera->Place(*s, train);
  ASSERT_TRUE(mixed.ok) << mixed.reason;
  EXPECT_EQ(mixed.tasks[0].node, 1) << "training and inference: separation first";
}

TEST(HarnessPoliciesTest, LearnedAndGivenTypicalTasksPlaceAlike) {
  // Property: over random request streams, tessera given a distribution and tessera reading the same
  // distribution from the snapshot decide the same placement for every request.
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const Cluster c = SmallCluster(6, 4, 48000, 1 << 18);  // the state refers to it
    Result<ClusterState> s = ClusterState::Build(c, Catalog::Default());
    ASSERT_TRUE(s.ok()) << s.error();
    SeededRng rng(seed);
    std::vector<Request> reqs;
    for (int i = 0; i < 60; ++i) {
      const uint64_t x = rng.Next() % 6;
      Request r = x < 3 ? ShareReq(static_cast<int>(100 * (1 + x * 2)), 2000) : WholeReq(static_cast<int>(x - 2), 6000);
      r.cls = x < 3 ? WorkloadClass::kInference : WorkloadClass::kTraining;
      reqs.push_back(r);
    }
    const TaskShapeDistribution d = TaskShapeDistribution::FromRequests(reqs);
    s->set_learned_workload(std::make_shared<const TaskShapeDistribution>(d));
    auto learned = std::move(MakePolicy("tessera")).value();
    auto given = std::move(MakePolicy("tessera", PolicyOptions{d, std::nullopt, {}})).value();
    int placed = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      PlaceResult a = given->Place(*s, reqs[i]);
      PlaceResult b = learned->Place(*s, reqs[i]);
      ASSERT_EQ(a.ok, b.ok) << "seed " << seed << " request " << i;
      if (!a.ok) continue;
      ASSERT_EQ(a.tasks.size(), b.tasks.size());
      EXPECT_EQ(a.tasks[0].node, b.tasks[0].node) << "seed " << seed << " request " << i;
      ASSERT_EQ(a.tasks[0].gpus.size(), b.tasks[0].gpus.size());
      for (size_t g = 0; g < a.tasks[0].gpus.size(); ++g) EXPECT_EQ(a.tasks[0].gpus[g].gpu, b.tasks[0].gpus[g].gpu);
      s->Apply(a.tasks, reqs[i].cpu_milli, reqs[i].host_memory_mib, reqs[i].cls != WorkloadClass::kTraining);
      ++placed;
    }
    EXPECT_GE(placed, 15) << "the stream fills most of the cluster";
  }
}

TEST(HarnessPoliciesTest, ReserveWeightsFollowConstrainedDemand) {
  // 4 T4 GPUs and 4 V100 GPUs. Typical tasks: half unconstrained 1-GPU, half 1-GPU V100-only. V100-only
  // demand is half of all demand, the V100s half of capacity: weight 1. T4: nobody needs it only, 0.
  Cluster c = SmallCluster(2, 4);
  const KindId v100 = Catalog::Default().Find("V100M16");
  ASSERT_GE(v100, 0);
  c.nodes[1].kind = v100;
  TaskShape pinned = WholeShape(1);
  pinned.kind_mask = uint64_t{1} << v100;
  std::vector<double> w =
      tessera_internal::KindReserveWeights(TaskShapeDistribution::Typical({WholeShape(1), pinned}, 1.0), c);
  ASSERT_GT(w.size(), static_cast<size_t>(std::max(v100, T4())));
  EXPECT_DOUBLE_EQ(w[v100], 1.0);
  EXPECT_DOUBLE_EQ(w[T4()], 0.0);
  // A quarter V100-only: weight 0.5. A shape allowing both kinds spreads by capacity and reserves less.
  w = tessera_internal::KindReserveWeights(
      TaskShapeDistribution::Typical({WholeShape(1), WholeShape(1), WholeShape(1), pinned}, 1.0), c);
  EXPECT_DOUBLE_EQ(w[v100], 0.5);
  TaskShape both = WholeShape(1);
  both.kind_mask = (uint64_t{1} << v100) | (uint64_t{1} << T4());
  w = tessera_internal::KindReserveWeights(TaskShapeDistribution::Typical({WholeShape(1), both}, 1.0), c);
  EXPECT_DOUBLE_EQ(w[v100], 0.5);
  EXPECT_DOUBLE_EQ(w[T4()], 0.5);
  // No constrained shape: no reservation anywhere.
  w = tessera_internal::KindReserveWeights(TaskShapeDistribution::Typical({WholeShape(1)}, 1.0), c);
  for (double x : w) EXPECT_EQ(x, 0.0);
}

TEST(HarnessPoliciesTest, TesseraKeepsScarceModelsForTasksPinnedToThem) {
  // A T4 node (4 GPUs, 16 cores) and a V100 node (4 GPUs, 64 cores); half the typical tasks (1 GPU,
  // 4 cores) may only use V100. A 1-GPU, 8-core unconstrained task strands one T4 GPU's worth of CPU, so
  // FGD + stranding alone would pick the V100 node (score 50 vs 37); the V100s are all needed by pinned
  // tasks (reserve weight 1), so tessera puts it on the T4 node whatever the seed's node order. A
  // V100-only task still goes to the V100 node.
  Cluster c = SmallCluster(2, 4);
  const KindId v100 = Catalog::Default().Find("V100M16");
  c.nodes[1].kind = v100;
  c.nodes[1].cpu_milli = 64000;
  Result<ClusterState> s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok()) << s.error();
  TaskShape pinned = WholeShape(1, 4000);
  pinned.kind_mask = uint64_t{1} << v100;
  const TaskShapeDistribution d = TaskShapeDistribution::Typical({WholeShape(1, 4000), pinned}, 1.0);
  for (uint64_t seed = 0; seed < 16; ++seed) {
    PlaceResult t = Made("tessera", d, seed)->Place(*s, WholeReq(1, 8000));
    ASSERT_TRUE(t.ok) << t.reason;
    EXPECT_EQ(t.tasks[0].node, 0) << "seed " << seed;
    Request only_v100 = WholeReq(1);
    only_v100.kind_mask = uint64_t{1} << v100;
    PlaceResult p = Made("tessera", d, seed)->Place(*s, only_v100);
    ASSERT_TRUE(p.ok) << p.reason;
    EXPECT_EQ(p.tasks[0].node, 1);
  }
}

TEST(HarnessPoliciesTest, Factory) {
  const TaskShapeDistribution d = TaskShapeDistribution::Typical({WholeShape(1)}, 1.0);
  std::set<std::string> names;
  for (const std::string& n : PolicyNames()) {
    EXPECT_EQ(Made(n, d, 1)->name(), n);
    EXPECT_TRUE(names.insert(n).second) << n << " registered twice";
  }
  for (const char* n : {"tessera", "k8s-default", "bestfit", "static-mig", "fgd", "random", "dotprod",
                        "gpuclustering", "gpupacking", "k8s-timeslice", "k8s-mps", "hami", "bestfit-share",
                        "static-mig-best"})
    EXPECT_TRUE(names.count(n)) << n;
  Result<std::unique_ptr<Policy>> unknown = MakePolicy("firstfit");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().find("gpupacking"), std::string::npos) << unknown.error();
}

TEST(HarnessPoliciesTest, FactoryBuildsEngineVariants) {
  PolicyOptions o;
  o.off = {"topology", "scorer"};
  o.name = "tessera-ablated";
  auto v = MakePolicy("tessera", o);
  ASSERT_TRUE(v.ok()) << v.error();
  EXPECT_EQ((*v)->name(), "tessera-ablated");
  o.off = {"speed"};
  auto bad = MakePolicy("tessera", o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("unknown feature 'speed'"), std::string::npos) << bad.error();
  o.off = {"topology"};
  auto harness = MakePolicy("fgd", o);
  ASSERT_FALSE(harness.ok());
  EXPECT_NE(harness.error().find("'fgd' has no features"), std::string::npos) << harness.error();
  PolicyOptions fixed;
  fixed.fixed_mig = true;
  auto k8s = MakePolicy("tessera", fixed);
  ASSERT_TRUE(k8s.ok()) << k8s.error();
  EXPECT_EQ((*k8s)->name(), "tessera");
}

// Where the GPU Operator fixes MIG layouts (fixed_mig), a task takes exactly one profile: the one a pod
// names (by its slices), else the smallest that holds its memory, never a smaller one it would overflow.
TEST(HarnessPoliciesTest, FixedMigTakesTheNamedProfileOrOneThatHoldsTheMemory) {
  Cluster c = testing::MakeCluster(1, 1, "a100-80gb");
  c.nodes[0].mig_enabled = true;
  c.nodes[0].mig_config = "all-balanced";  // per GPU: 3g.40gb, 2g.20gb, 1g.10gb x 2
  auto state = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(state.ok()) << state.error();
  PolicyOptions fixed;
  fixed.fixed_mig = true;
  auto policy = MakePolicy("tessera", fixed);
  ASSERT_TRUE(policy.ok()) << policy.error();
  const GpuKind& a100 = Catalog::Default().kind(Catalog::Default().Find("a100-80gb"));
  auto profile_of = [&](const Request& r) {
    PlaceResult res = (*policy)->Place(*state, r);
    return res.ok && !res.tasks.empty() && !res.tasks[0].gpus.empty()
               ? a100.profiles[res.tasks[0].gpus[0].mig_profile].name
               : "none: " + res.reason;
  };
  EXPECT_EQ(profile_of(testing::Replica(1, 200, 30000)), "3g.40gb") << "30,000 MiB does not fit a 2g.20gb";
  EXPECT_EQ(profile_of(testing::Replica(2, 100, 5000)), "1g.10gb");
  Request named = testing::Replica(3, 100, 0);
  const MigProfile& two = a100.profiles[a100.FindProfile("2g.20gb")];
  named.mig_compute_slices = static_cast<int8_t>(two.compute_slices);
  named.mig_memory_slices = static_cast<int8_t>(two.memory_slices);
  named.gpu_memory_mib = two.usable_mib;
  named.gpu_milli = a100.ProfileComputeMilli(a100.FindProfile("2g.20gb"));
  EXPECT_EQ(profile_of(named), "2g.20gb");
  named.mig_compute_slices = 1;  // 1g.20gb: this layout has none, and no other profile stands in for it
  named.mig_memory_slices = 2;
  EXPECT_EQ(profile_of(named).rfind("none", 0), 0u);
}

}  // namespace
}  // namespace tessera
