#include "sched/cluster_state.h"

#include <gtest/gtest.h>

#include <random>

#include "sched/mig_layouts.h"
#include "sched/policy.h"
#include "test_util.h"

namespace tessera {
namespace {

using testing::MakeCluster;

class ClusterStateTest : public ::testing::Test {
 protected:
  const Catalog& cat_ = Catalog::Default();
};

TEST_F(ClusterStateTest, EmptyStateCountsEveryGpuFree) {
  Cluster c = MakeCluster(8, 8, "h100-80gb");
  auto s = ClusterState::Build(c, cat_);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->num_gpus(), 64);
  EXPECT_EQ(s->leaf_free_whole(0), 32);
  EXPECT_EQ(s->leaf_free_whole(1), 32);
  EXPECT_EQ(s->AllocatedMilli(), 0);
  EXPECT_TRUE(s->CheckInvariants().ok());
}

TEST_F(ClusterStateTest, MigModeChangesOnlyOnIdleGpu) {
  Cluster c = MakeCluster(1, 8, "h100-80gb");
  auto s = ClusterState::Build(c, cat_);
  ASSERT_TRUE(s.ok());
  GpuGrant whole;
  whole.gpu = 0;
  whole.memory_mib = 1000;
  std::vector<TaskPlacement> t = {{0, {whole}}};
  ASSERT_TRUE(s->CanApply(t, 0, 0).ok());
  s->Apply(t, 0, 0, false);
  EXPECT_FALSE(s->SetMigMode(0, true).ok()) << "GPU 0 is busy";
  EXPECT_TRUE(s->SetMigMode(1, true).ok());
  s->Release(t, 0, 0, false);
  EXPECT_TRUE(s->SetMigMode(0, true).ok());
  EXPECT_TRUE(s->CheckInvariants().ok());
}

TEST_F(ClusterStateTest, InstancesAreCreatedAndDestroyedOnlyWhereNothingRuns) {
  Cluster c = MakeCluster(1, 1, "h100-80gb");
  auto s = ClusterState::Build(c, cat_);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->SetMigMode(0, true).ok());
  const GpuKind& k = cat_.kind(cat_.Find("h100-80gb"));
  const int p3g = k.FindProfile("3g.40gb");
  const int p1g = k.FindProfile("1g.10gb");
  ASSERT_GE(p3g, 0);
  ASSERT_TRUE(s->CreateInstance(0, p3g, 4).ok());
  EXPECT_FALSE(s->CreateInstance(0, p1g, 5).ok()) << "slice 5 is inside 3g@4";
  EXPECT_FALSE(s->CreateInstance(0, p3g, 2).ok()) << "3g may start only at 0 or 4";
  GpuGrant g;
  g.gpu = 0;
  g.mig_profile = static_cast<int16_t>(p3g);
  g.mig_start = 4;
  g.memory_mib = 30000;
  std::vector<TaskPlacement> t = {{0, {g}}};
  ASSERT_TRUE(s->CanApply(t, 0, 0).ok());
  s->Apply(t, 0, 0, true);
  EXPECT_FALSE(s->DestroyInstance(0, 4).ok()) << "busy instance";
  EXPECT_FALSE(s->SetMigMode(0, false).ok()) << "busy GPU";
  EXPECT_FALSE(s->Relayout(0, {}).ok()) << "relayout may not drop a busy instance";
  EXPECT_TRUE(s->Relayout(0, {{p3g, 4}, {p3g, 0}}).ok());
  s->Release(t, 0, 0, true);
  EXPECT_TRUE(s->DestroyInstance(0, 4).ok());
  EXPECT_TRUE(s->CheckInvariants().ok());
}

TEST_F(ClusterStateTest, GrantAboveUsableMemoryIsRejected) {
  Cluster c = MakeCluster(1, 1, "h100-80gb");
  auto s = ClusterState::Build(c, cat_);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->SetMigMode(0, true).ok());
  const GpuKind& k = cat_.kind(cat_.Find("h100-80gb"));
  GpuGrant g;
  g.gpu = 0;
  g.mig_profile = static_cast<int16_t>(k.FindProfile("1g.10gb"));
  g.mig_start = 0;
  g.create_instance = true;
  g.memory_mib = k.profiles[g.mig_profile].usable_mib + 1;
  EXPECT_FALSE(s->CanApply({{0, {g}}}, 0, 0).ok());
}

TEST_F(ClusterStateTest, AllBalancedLayoutIsValid) {
  for (const char* id : {"a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb", "a30-24gb"}) {
    const GpuKind& k = cat_.kind(cat_.Find(id));
    auto l = NamedMigLayout(k, "all-balanced");
    ASSERT_TRUE(l.ok()) << id << ": " << l.error();
    EXPECT_TRUE(CheckMigLayout(k, *l).ok()) << id;
    EXPECT_EQ(l->size(), k.mig_memory_slices == 8 ? 4u : 3u) << id;
  }
}

// A node may carry each GPU's layout (a Kubernetes node whose MIG config is not one of Tessera's names): the
// state starts with exactly those instances, a GPU with MIG off whole; an impossible layout refuses the node.
TEST_F(ClusterStateTest, PerGpuMigLayoutsStartAsGiven) {
  Cluster c = MakeCluster(1, 2, "a100-80gb");
  const GpuKind& a100 = cat_.kind(cat_.Find("a100-80gb"));
  c.nodes[0].mig_enabled = true;
  c.nodes[0].mig_config = "site-mix";  // no name Tessera knows: the layouts decide
  c.nodes[0].mig_layouts = {{true, {{a100.FindProfile("2g.20gb"), 0}, {a100.FindProfile("3g.40gb"), 4}}},
                            {false, {}}};
  auto s = ClusterState::Build(c, cat_);
  ASSERT_TRUE(s.ok()) << s.error();
  const GpuState& mig = s->gpu(s->node(0).first_gpu);
  ASSERT_TRUE(mig.mig_enabled);
  ASSERT_EQ(mig.n_instances, 2);
  EXPECT_EQ(mig.instances[0].profile, a100.FindProfile("2g.20gb"));
  EXPECT_EQ(mig.instances[1].start, 4);
  EXPECT_FALSE(s->gpu(s->node(0).first_gpu + 1).mig_enabled);
  EXPECT_TRUE(s->CheckInvariants().ok());
  c.nodes[0].mig_layouts[0].instances.push_back({a100.FindProfile("2g.20gb"), 4});  // overlaps the 3g.40gb
  auto bad = ClusterState::Build(c, cat_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("overlap"), std::string::npos) << bad.error();
}

Request WholeGpus(JobId id, int gpus) {
  Request r;
  r.id = id;
  r.cls = WorkloadClass::kTraining;
  r.gpus_per_task = gpus;
  r.gpu_memory_mib = 30000;
  r.cpu_milli = 1000;
  r.host_memory_mib = 1024;
  return r;
}

TEST_F(ClusterStateTest, CordonedCapacityGetsNoNewPlacement) {
  Cluster c = MakeCluster(2, 8, "h100-80gb");
  auto s = ClusterState::Build(c, cat_);
  ASSERT_TRUE(s.ok());
  auto policy = MakePolicy("tessera");
  ASSERT_TRUE(policy.ok());
  ASSERT_TRUE(s->CordonNode(0).ok());
  EXPECT_TRUE(s->node_cordoned(0) && s->gpu_cordoned(3) && !s->gpu_cordoned(8));
  EXPECT_EQ(s->node(0).free_whole, 0);
  EXPECT_EQ(s->free_whole_index()[0], 0);
  EXPECT_EQ(s->leaf_free_whole(0), 8);
  EXPECT_EQ(s->AllocatedMilli(), 0) << "held capacity is not allocation";
  PlaceResult a = (*policy)->Place(*s, WholeGpus(1, 8));
  ASSERT_TRUE(a.ok);
  EXPECT_EQ(a.tasks[0].node, 1);
  s->Apply(a.tasks, 1000, 1024, false);
  EXPECT_FALSE((*policy)->Place(*s, WholeGpus(2, 1)).ok) << "only cordoned capacity is left";
  GpuGrant g0{0, kMilliPerGpu, 1000};
  EXPECT_NE(s->CanApply({{0, {g0}}}, 0, 0).message().find("cordoned"), std::string::npos);
  EXPECT_FALSE(s->SetMigMode(0, true).ok());
  ASSERT_TRUE(s->UncordonNode(0).ok());
  EXPECT_EQ(s->node(0).free_whole, 8);
  EXPECT_EQ(s->node(0).free_cpu_milli, c.nodes[0].cpu_milli);
  EXPECT_TRUE((*policy)->Place(*s, WholeGpus(2, 8)).ok);
  EXPECT_TRUE(s->CheckInvariants().ok()) << s->CheckInvariants().message();
}

TEST_F(ClusterStateTest, CapacityReleasedOnACordonedGpuStaysHeld) {
  Cluster c = MakeCluster(1, 2, "h100-80gb");
  auto s = ClusterState::Build(c, cat_);
  ASSERT_TRUE(s.ok());
  GpuGrant share{0, 300, 20000};
  std::vector<TaskPlacement> t = {{0, {share}}};
  s->Apply(t, 0, 0, true);
  ASSERT_TRUE(s->CordonGpu(0).ok());
  EXPECT_EQ(s->gpu(0).free_milli, 0);
  EXPECT_EQ(s->node(0).free_milli_total, 1000) << "only GPU 1 shows free capacity";
  EXPECT_EQ(s->AllocatedMilli(), 300);
  ASSERT_TRUE(s->CheckInvariants().ok()) << s->CheckInvariants().message();
  s->Release(t, 0, 0, true);
  EXPECT_FALSE(s->gpu(0).WholeFree());
  EXPECT_EQ(s->node(0).free_whole, 1);
  EXPECT_EQ(s->AllocatedMilli(), 0);
  ASSERT_TRUE(s->CheckInvariants().ok()) << s->CheckInvariants().message();
  ASSERT_TRUE(s->UncordonGpu(0).ok());
  EXPECT_TRUE(s->gpu(0).WholeFree());
  EXPECT_EQ(s->node(0).free_whole, 2);
  EXPECT_TRUE(s->CheckInvariants().ok());
}

TEST_F(ClusterStateTest, CordonedMigGpuOffersNoInstance) {
  Cluster c = MakeCluster(1, 2, "h100-80gb");
  c.nodes[0].mig_enabled = true;
  c.nodes[0].mig_config = "all-balanced";
  auto s = ClusterState::Build(c, cat_);
  ASSERT_TRUE(s.ok());
  const uint32_t idle = s->node(0).idle_profile_mask;
  ASSERT_NE(idle, 0u);
  const int p = __builtin_ctz(idle);
  ASSERT_TRUE(s->CordonNode(0).ok());
  EXPECT_EQ(s->node(0).idle_profile_mask, 0u);
  EXPECT_EQ(s->node(0).creatable_profile_mask, 0u);
  EXPECT_EQ(s->node(0).idle_mig_gpus, 0);
  EXPECT_TRUE(s->idle_profile_nodes(s->node(0).kind, p)[0] == 0);
  EXPECT_FALSE(s->DestroyInstance(0, s->gpu(0).instances[0].start).ok());
  ASSERT_TRUE(s->CheckInvariants().ok()) << s->CheckInvariants().message();
  ASSERT_TRUE(s->UncordonNode(0).ok());
  EXPECT_EQ(s->node(0).idle_profile_mask, idle);
  EXPECT_EQ(s->node(0).idle_mig_gpus, 2);
  EXPECT_TRUE(s->CheckInvariants().ok());
}

TEST_F(ClusterStateTest, RemovingANodeNeedsADrainAndLeavesATombstone) {
  Cluster c = MakeCluster(2, 8, "h100-80gb");
  auto s = ClusterState::Build(c, cat_);
  ASSERT_TRUE(s.ok());
  GpuGrant g{2, kMilliPerGpu, 1000};
  std::vector<TaskPlacement> t = {{0, {g}}};
  s->Apply(t, 500, 256, false);
  Status st = s->RemoveNode(0);
  EXPECT_NE(st.message().find("cordon it first"), std::string::npos) << st.message();
  ASSERT_TRUE(s->CordonNode(0).ok());
  st = s->RemoveNode(0);
  EXPECT_NE(st.message().find("still runs 1 task"), std::string::npos) << st.message();
  s->Release(t, 500, 256, false);
  ASSERT_TRUE(s->RemoveNode(0).ok());
  EXPECT_TRUE(s->node_removed(0));
  EXPECT_FALSE(s->UncordonNode(0).ok());
  EXPECT_FALSE(s->UncordonGpu(3).ok());
  EXPECT_FALSE(s->RemoveNode(0).ok());
  EXPECT_EQ(s->num_nodes(), 2) << "ids stay dense";
  EXPECT_EQ(s->node(0).free_whole, 0);
  EXPECT_EQ(s->AllocatedMilli(), 0);
  EXPECT_TRUE(s->CheckInvariants().ok()) << s->CheckInvariants().message();
}

TEST_F(ClusterStateTest, OutsideHostHoldTakesWhatIsFreeAndGivesBackInPlace) {
  Cluster c = MakeCluster(1, 8, "h100-80gb");
  const int64_t cpu = c.nodes[0].cpu_milli, mem = c.nodes[0].memory_mib;
  auto s = ClusterState::Build(c, cat_);
  ASSERT_TRUE(s.ok());
  std::vector<TaskPlacement> t = {{0, {GpuGrant{0, kMilliPerGpu, 1000}}}};
  s->Apply(t, cpu - 4000, 1024, false);
  auto held = s->HoldOutsideHost(0, 6000, 2048);
  ASSERT_TRUE(held.ok()) << held.error();
  EXPECT_EQ(*held, (std::pair<int64_t, int64_t>{4000, 2048})) << "only the free CPU can be held";
  EXPECT_EQ(s->node(0).free_cpu_milli, 0);
  EXPECT_EQ(s->node(0).free_memory_mib, mem - 1024 - 2048);
  ASSERT_TRUE(s->CheckInvariants().ok()) << s->CheckInvariants().message();
  s->Release(t, cpu - 4000, 1024, false);
  held = s->HoldOutsideHost(0, 6000, 2048);  // asked again once the task ended
  EXPECT_EQ(*held, (std::pair<int64_t, int64_t>{6000, 2048}));
  EXPECT_EQ(s->node(0).free_cpu_milli, cpu - 6000);
  ASSERT_TRUE(s->CordonNode(0).ok());
  held = s->HoldOutsideHost(0, 1000, 0);  // a smaller hold on a cordoned node goes back to the cordon
  EXPECT_EQ(s->node(0).free_cpu_milli, 0);
  EXPECT_TRUE(s->CheckInvariants().ok()) << s->CheckInvariants().message();
  ASSERT_TRUE(s->UncordonNode(0).ok());
  EXPECT_EQ(s->node(0).free_cpu_milli, cpu - 1000);
  EXPECT_EQ(s->node(0).free_memory_mib, mem);
  EXPECT_FALSE(s->HoldOutsideHost(0, -1, 0).ok());
  ASSERT_TRUE(s->CordonNode(0).ok());
  ASSERT_TRUE(s->RemoveNode(0).ok()) << "a node whose host capacity is partly held outside is still drained";
  EXPECT_FALSE(s->HoldOutsideHost(0, 0, 0).ok());
  EXPECT_EQ(s->num_nodes(), 1);
}

TEST_F(ClusterStateTest, AddedNodeIsPlacedOnLikeAnyOther) {
  Cluster c = MakeCluster(1, 8, "h100-80gb");
  auto s = ClusterState::Build(c, cat_);
  ASSERT_TRUE(s.ok());
  auto policy = MakePolicy("tessera");
  ASSERT_TRUE(policy.ok());
  PlaceResult a = (*policy)->Place(*s, WholeGpus(1, 8));
  ASSERT_TRUE(a.ok);
  s->Apply(a.tasks, 1000, 1024, false);
  Node extra = c.nodes[0];
  extra.name = "added";
  auto n = s->AddNode(extra);
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(s->num_gpus(), 16);
  EXPECT_EQ(s->cluster().nodes[1].name, "added");
  EXPECT_EQ(s->node(1).first_gpu, 8);
  EXPECT_EQ(s->free_whole_index().size(), 2u);
  PlaceResult b = (*policy)->Place(*s, WholeGpus(2, 8));
  ASSERT_TRUE(b.ok);
  EXPECT_EQ(b.tasks[0].node, 1);
  Node bad = extra;
  bad.leaf = 7;
  EXPECT_FALSE(s->AddNode(bad).ok());
  EXPECT_EQ(s->num_nodes(), 2);
  EXPECT_TRUE(s->CheckInvariants().ok());
}

// Random place/release sequences never overlap, never exceed memory, keep every invariant and return to
// an empty cluster.
class RandomSequenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RandomSequenceTest, InvariantsHoldAndReleaseReturnsToEmpty) {
  const Catalog& cat = Catalog::Default();
  Cluster c = MakeCluster(16, 8, "h100-80gb");
  // A few PCIe L40S nodes too.
  for (int i = 0; i < 4; ++i) {
    Node n = c.nodes[0];
    n.name = "l40s-" + std::to_string(i);
    n.kind = cat.Find("l40s-48gb");
    n.gpu_count = 4;
    n.interconnect = Interconnect::kPcie;
    c.nodes.push_back(n);
  }
  auto s = ClusterState::Build(c, cat);
  ASSERT_TRUE(s.ok());
  auto policy = MakePolicy(GetParam());
  ASSERT_TRUE(policy.ok());
  const PolicyInfo* info = nullptr;
  for (const PolicyInfo& p : Policies())
    if (p.name == GetParam()) info = &p;
  ASSERT_NE(info, nullptr);
  // Compute-share models (the FGD harness baselines) are asked without GPU memory; single-task policies
  // get single tasks. Everything else is the same sequence for every policy.
  const bool compute_only = !info->gpu_memory && !info->memory_blind;
  int placed = 0;
  std::mt19937_64 rng(42);
  struct Held {
    Request r;
    std::vector<TaskPlacement> t;
  };
  std::vector<Held> held;
  auto holds_node = [&](NodeId n) {
    for (const Held& h : held)
      for (const TaskPlacement& t : h.t)
        if (t.node == n) return true;
    return false;
  };
  for (int step = 0; step < 3000; ++step) {
    if (rng() % 16 == 0) {  // nodes come and go: cordon, uncordon, remove, add
      const NodeId n = static_cast<NodeId>(rng() % s->num_nodes());
      const GpuId g = static_cast<GpuId>(rng() % s->num_gpus());
      switch (rng() % 6) {
        case 0:
          ASSERT_TRUE(s->CordonNode(n).ok());
          break;
        case 1:
          EXPECT_EQ(s->UncordonNode(n).ok(), !s->node_removed(n));
          break;
        case 2:
          ASSERT_TRUE(s->CordonGpu(g).ok());
          break;
        case 3:
          EXPECT_EQ(s->UncordonGpu(g).ok(), !s->node_removed(s->gpu(g).node));
          break;
        case 4: {
          const bool can = s->node_cordoned(n) && !s->node_removed(n) && !holds_node(n);
          Status st = s->RemoveNode(n);
          EXPECT_EQ(st.ok(), can) << st.message();
          if (!st.ok()) {
            EXPECT_FALSE(st.message().empty());
          }
          break;
        }
        default: {
          Node extra = s->cluster().nodes[n];
          extra.name = "added-" + std::to_string(step);
          extra.mig_enabled = false;
          ASSERT_TRUE(s->AddNode(extra).ok());
        }
      }
    } else if (!held.empty() && (rng() % 3 == 0)) {
      size_t i = rng() % held.size();
      s->Release(held[i].t, held[i].r.cpu_milli, held[i].r.host_memory_mib,
                 held[i].r.cls != WorkloadClass::kTraining);
      held.erase(held.begin() + static_cast<long>(i));
    } else {
      Request r;
      r.id = step;
      const int kind = static_cast<int>(rng() % 5);
      if (kind == 4) {  // no GPU
        r.cls = WorkloadClass::kBatchInference;
        r.gpus_per_task = 0;
        r.gpu_milli = 0;
      } else if (kind == 0) {
        r.cls = WorkloadClass::kInference;
        r.gpus_per_task = 0;
        r.gpu_milli = 50 + static_cast<int>(rng() % 500);
        r.gpu_memory_mib = 2000 + static_cast<int64_t>(rng() % 40000);
      } else {
        r.cls = WorkloadClass::kTraining;
        r.tasks = kind == 3 ? 1 + static_cast<int>(rng() % 3) : 1;
        r.gpus_per_task = 1 << (rng() % 4);
        r.gpu_memory_mib = 30000;
      }
      r.cpu_milli = 2000;
      r.host_memory_mib = 8192;
      if (compute_only) r.gpu_memory_mib = 0;
      if (!info->gangs) r.tasks = 1;
      PlaceResult res = (*policy)->Place(*s, r);
      if (!res.ok) {
        EXPECT_FALSE(res.reason.empty());
        continue;
      }
      ASSERT_EQ(static_cast<int>(res.tasks.size()), r.tasks) << "gang must be all or nothing";
      const Status can = s->CanApply(res.tasks, r.cpu_milli, r.host_memory_mib);
      ASSERT_TRUE(can.ok()) << "step " << step << ": " << can.message() << " (" << res.reason << ")";
      ++placed;
      for (const TaskPlacement& t : res.tasks) {
        ASSERT_EQ(static_cast<int>(t.gpus.size()), r.gpu_milli == 0 ? 0 : r.GpusPerTask());
        ASSERT_FALSE(s->node_cordoned(t.node)) << "placed on a cordoned node";
        for (const GpuGrant& g : t.gpus) ASSERT_FALSE(s->gpu_cordoned(g.gpu)) << "placed on a cordoned GPU";
        for (const GpuGrant& g : t.gpus) {
          const GpuKind& k = s->kind_of_gpu(g.gpu);
          const int64_t usable = g.mig_profile >= 0 ? k.profiles[g.mig_profile].usable_mib : k.memory_mib;
          if (!info->memory_blind) {
            EXPECT_GE(usable, r.gpu_memory_mib) << "would run out of memory";
            EXPECT_GE(g.milli, r.gpu_milli) << "granted less compute than asked";
          }
        }
      }
      s->Apply(res.tasks, r.cpu_milli, r.host_memory_mib, r.cls != WorkloadClass::kTraining);
      held.push_back({r, res.tasks});
    }
    Status inv = s->CheckInvariants();
    ASSERT_TRUE(inv.ok()) << "step " << step << ": " << inv.message();
  }
  EXPECT_GT(placed, 500) << "the sequence must exercise placement, not only refusals";
  for (auto& h : held)
    s->Release(h.t, h.r.cpu_milli, h.r.host_memory_mib, h.r.cls != WorkloadClass::kTraining);
  EXPECT_EQ(s->AllocatedMilli(), 0);
  EXPECT_GT(s->num_nodes(), static_cast<int>(c.nodes.size())) << "the sequence added nodes";
  for (GpuId g = 0; g < s->num_gpus(); ++g) {
    if (!s->node_removed(s->gpu(g).node)) {
      ASSERT_TRUE(s->UncordonGpu(g).ok());
    }
  }
  for (NodeId n = 0; n < s->num_nodes(); ++n) {
    if (s->node_removed(n)) continue;
    ASSERT_TRUE(s->UncordonNode(n).ok());
    EXPECT_EQ(s->node(n).idle_gpus, s->node(n).gpu_count);
    EXPECT_EQ(s->node(n).free_cpu_milli, s->cluster().nodes[n].cpu_milli);
  }
  EXPECT_TRUE(s->CheckInvariants().ok());
}

// Every registered policy, enumerated from the factory.
INSTANTIATE_TEST_SUITE_P(AllPolicies, RandomSequenceTest, ::testing::ValuesIn(PolicyNames()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace tessera
