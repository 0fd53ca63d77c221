#include "sched/engine_policy.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "model/workload.h"
#include "sched/policy.h"
#include "test_util.h"

namespace tessera {
namespace {

using testing::MakeCluster;

Request WholeGang(int tasks, int gpus, int64_t mem = 40000) {
  Request r;
  r.cls = WorkloadClass::kTraining;
  r.tasks = tasks;
  r.gpus_per_task = gpus;
  r.gpu_memory_mib = mem;
  r.cpu_milli = 1000;
  r.host_memory_mib = 1024;
  return r;
}

Request Slice(int64_t mem, int milli) {
  Request r;
  r.cls = WorkloadClass::kInference;
  r.gpus_per_task = 0;
  r.gpu_milli = milli;
  r.gpu_memory_mib = mem;
  return r;
}

void Occupy(ClusterState& s, NodeId n, int gpus) {
  std::vector<GpuGrant> g;
  for (int i = 0; i < gpus; ++i) {
    GpuGrant gr;
    gr.gpu = s.node(n).first_gpu + i;
    g.push_back(gr);
  }
  s.Apply({{n, g}}, 0, 0, false);
}

// Conformance: the contract every registered policy keeps, whatever it can place (PolicyInfo).
const PolicyInfo& InfoOf(const std::string& name) {
  for (const PolicyInfo& p : Policies())
    if (p.name == name) return p;
  ADD_FAILURE() << "no policy info for " << name;
  return Policies().front();
}

// `r` as this policy can be asked: policies that model GPU compute only are asked without GPU memory.
Request AsAskable(const PolicyInfo& info, Request r) {
  if (!info.gpu_memory && !info.memory_blind) r.gpu_memory_mib = 0;
  return r;
}

bool SamePlacement(const PlaceResult& a, const PlaceResult& b) {
  if (a.ok != b.ok || a.tasks.size() != b.tasks.size() || a.code != b.code) return false;
  for (size_t t = 0; t < a.tasks.size(); ++t) {
    if (a.tasks[t].node != b.tasks[t].node || a.tasks[t].gpus.size() != b.tasks[t].gpus.size()) return false;
    for (size_t g = 0; g < a.tasks[t].gpus.size(); ++g) {
      const GpuGrant& x = a.tasks[t].gpus[g];
      const GpuGrant& y = b.tasks[t].gpus[g];
      if (x.gpu != y.gpu || x.milli != y.milli || x.memory_mib != y.memory_mib || x.mig_profile != y.mig_profile ||
          x.mig_start != y.mig_start)
        return false;
    }
  }
  return true;
}

class ConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    cluster_ = MakeCluster(8, 8, "h100-80gb");
    auto s = ClusterState::Build(cluster_, Catalog::Default());
    ASSERT_TRUE(s.ok());
    state_ = std::make_unique<ClusterState>(std::move(s).value());
    policy_ = Make();
    ASSERT_NE(policy_, nullptr);
  }
  std::unique_ptr<Policy> Make() const {
    PolicyOptions o;
    o.typical = TaskShapeDistribution::FromRequests({WholeGang(1, 1, 0), Slice(0, 250), Slice(0, 500)});
    auto p = MakePolicy(GetParam(), o);
    EXPECT_TRUE(p.ok()) << p.error();
    return p.ok() ? std::move(p).value() : nullptr;
  }
  const PolicyInfo& info() const { return InfoOf(GetParam()); }
  Cluster cluster_;
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<Policy> policy_;
};

TEST_P(ConformanceTest, NameIsTheRegisteredName) { EXPECT_EQ(policy_->name(), GetParam()); }

TEST_P(ConformanceTest, InvalidRequestsAreResultsNotCrashes) {
  Request r = WholeGang(0, 1);
  PlaceResult res = policy_->Place(*state_, r);
  EXPECT_FALSE(res.ok);
  EXPECT_EQ(res.code, NoFitCode::kInvalid);
  EXPECT_FALSE(res.reason.empty());
  Request gang_of_slices = Slice(5000, 100);
  gang_of_slices.tasks = 2;
  EXPECT_EQ(policy_->Place(*state_, gang_of_slices).code, NoFitCode::kInvalid);
}

TEST_P(ConformanceTest, PlacementsApplyAndGangsAreAllOrNothing) {
  if (!info().gangs) {
    PlaceResult gang = policy_->Place(*state_, AsAskable(info(), WholeGang(4, 8)));
    EXPECT_FALSE(gang.ok);
    EXPECT_EQ(gang.code, NoFitCode::kInvalid) << gang.reason;
    EXPECT_TRUE(gang.tasks.empty());
    // Single tasks place and apply; eight 8-GPU tasks fill the cluster and a ninth does not fit.
    for (int i = 0; i < 8; ++i) {
      PlaceResult one = policy_->Place(*state_, AsAskable(info(), WholeGang(1, 8)));
      ASSERT_TRUE(one.ok) << one.reason;
      ASSERT_EQ(one.tasks.size(), 1u);
      ASSERT_EQ(one.tasks[0].gpus.size(), 8u);
      ASSERT_TRUE(state_->CanApply(one.tasks, 1000, 1024).ok());
      state_->Apply(one.tasks, 1000, 1024, false);
    }
    PlaceResult full = policy_->Place(*state_, AsAskable(info(), WholeGang(1, 1)));
    EXPECT_FALSE(full.ok);
    EXPECT_FALSE(full.reason.empty());
    return;
  }
  PlaceResult res = policy_->Place(*state_, WholeGang(4, 8));
  ASSERT_TRUE(res.ok) << res.reason;
  ASSERT_EQ(res.tasks.size(), 4u);
  std::set<GpuId> gpus;
  for (const auto& t : res.tasks)
    for (const auto& g : t.gpus) gpus.insert(g.gpu);
  EXPECT_EQ(gpus.size(), 32u) << "no GPU granted twice";
  ASSERT_TRUE(state_->CanApply(res.tasks, 1000, 1024).ok());
  state_->Apply(res.tasks, 1000, 1024, false);
  // 32 GPUs left: a 5 x 8 gang cannot fit and nothing is placed.
  PlaceResult big = policy_->Place(*state_, WholeGang(5, 8));
  EXPECT_FALSE(big.ok);
  EXPECT_TRUE(big.tasks.empty());
  EXPECT_FALSE(big.reason.empty());
}

// The same snapshot and request give the same placement, from the same policy object (memo caches warm)
// and from a fresh one. Every request here is one the policy places, so the comparison is never between
// two failures.
TEST_P(ConformanceTest, PlacementIsDeterministic) {
  std::unique_ptr<Policy> fresh = Make();
  const std::vector<Request> asks = {AsAskable(info(), Slice(12000, 150)), AsAskable(info(), WholeGang(1, 2)),
                                     AsAskable(info(), Slice(0, 600)), AsAskable(info(), WholeGang(1, 1))};
  for (int round = 0; round < 12; ++round) {
    const Request& r = asks[static_cast<size_t>(round) % asks.size()];
    PlaceResult a = policy_->Place(*state_, r);
    PlaceResult b = policy_->Place(*state_, r);
    PlaceResult c = fresh->Place(*state_, r);
    ASSERT_TRUE(a.ok) << "round " << round << ": " << a.reason;
    EXPECT_TRUE(SamePlacement(a, b)) << "round " << round << ": " << a.reason << " vs " << b.reason;
    EXPECT_TRUE(SamePlacement(a, c)) << "round " << round << ": " << a.reason << " vs " << c.reason;
    ASSERT_TRUE(state_->CanApply(a.tasks, r.cpu_milli, r.host_memory_mib).ok());
    state_->Apply(a.tasks, r.cpu_milli, r.host_memory_mib, r.cls != WorkloadClass::kTraining);
  }
}

TEST_P(ConformanceTest, CpuOnlyTasksTakeNoGpu) {
  Request r = WholeGang(1, 0, 0);
  r.gpus_per_task = 0;
  r.gpu_milli = 0;
  r.cpu_milli = 4000;
  PlaceResult res = policy_->Place(*state_, r);
  ASSERT_TRUE(res.ok) << res.reason;
  ASSERT_EQ(res.tasks.size(), 1u);
  EXPECT_TRUE(res.tasks[0].gpus.empty());
  EXPECT_TRUE(state_->CanApply(res.tasks, r.cpu_milli, r.host_memory_mib).ok());
  r.cpu_milli = cluster_.nodes[0].cpu_milli + 1;
  PlaceResult too_big = policy_->Place(*state_, r);
  EXPECT_FALSE(too_big.ok);
  EXPECT_FALSE(too_big.reason.empty());
}

TEST_P(ConformanceTest, MemoryAwarenessMatchesThePolicy) {
  PlaceResult res = policy_->Place(*state_, WholeGang(1, 1, 90000));
  PlaceResult slice = policy_->Place(*state_, Slice(90000, 100));
  if (info().memory_blind) {
    // kube-scheduler sees GPUs as opaque integers: it places blindly, and the simulator counts the OOM.
    EXPECT_TRUE(res.ok);
    EXPECT_TRUE(slice.ok);
  } else if (info().gpu_memory) {
    EXPECT_FALSE(res.ok);
    EXPECT_EQ(res.code, NoFitCode::kRequestExceedsCluster);
    EXPECT_FALSE(slice.ok);
    EXPECT_EQ(slice.code, NoFitCode::kMemory);
  } else {
    // Compute-share models (the FGD harness baselines) refuse requests with GPU memory: a result, with a reason.
    EXPECT_EQ(res.code, NoFitCode::kInvalid);
    EXPECT_EQ(slice.code, NoFitCode::kInvalid);
    EXPECT_FALSE(slice.reason.empty());
  }
}

std::string TestName(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& ch : n)
    if (ch == '-') ch = '_';
  return n;
}

// Every registered policy, enumerated from the factory: a new policy is covered without editing this.
INSTANTIATE_TEST_SUITE_P(AllPolicies, ConformanceTest, ::testing::ValuesIn(PolicyNames()), TestName);

TEST(PolicyRegistryTest, EveryNameHasInfoAndBuilds) {
  EXPECT_EQ(Policies().size(), PolicyNames().size());
  EXPECT_GE(PolicyNames().size(), 9u);
  for (const std::string& n : PolicyNames()) {
    EXPECT_EQ(InfoOf(n).name, n);
    EXPECT_TRUE(MakePolicy(n).ok()) << n;
  }
}

class TesseraTest : public ::testing::Test {
 protected:
  std::unique_ptr<Policy> policy_ = std::make_unique<EnginePolicy>(TesseraTraits());
};

TEST_F(TesseraTest, GangPrefersOneNodeThenOneLeaf) {
  // 16 nodes, 4 per leaf. Leaf 0 nearly full, leaf 1 has two whole free nodes.
  Cluster c = MakeCluster(16, 8, "h100-80gb");
  auto s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok());
  for (NodeId n = 0; n < 4; ++n) Occupy(*s, n, 6);
  Occupy(*s, 4, 8);
  Occupy(*s, 5, 8);
  PlaceResult one = policy_->Place(*s, WholeGang(1, 8));
  ASSERT_TRUE(one.ok);
  EXPECT_EQ(one.span, Span::kOneNode);
  PlaceResult res = policy_->Place(*s, WholeGang(2, 8));
  ASSERT_TRUE(res.ok) << res.reason;
  EXPECT_EQ(res.span, Span::kOneLeaf);
  EXPECT_EQ(s->node(res.tasks[0].node).leaf, s->node(res.tasks[1].node).leaf);
  EXPECT_EQ(s->node(res.tasks[0].node).leaf, 1) << "leaf 1 is the best fit (exactly 16 free GPUs)";
}

TEST_F(TesseraTest, ExplainsTopologyFailure) {
  Cluster c = MakeCluster(8, 8, "h100-80gb");
  auto s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok());
  // Leaf 0: 12 free GPUs (two nodes with 6 free); leaf 1: 12 free.
  for (NodeId n = 0; n < 8; ++n) Occupy(*s, n, n % 4 < 2 ? 2 : 8);
  Request r = WholeGang(2, 8);
  r.gpus_per_task = 8;
  r.tasks = 2;
  r.require_same_leaf = true;
  PlaceResult res = policy_->Place(*s, r);
  EXPECT_FALSE(res.ok);
  // 8-GPU tasks need whole nodes; none is free anywhere.
  EXPECT_EQ(res.code, NoFitCode::kResources);
  Request small = WholeGang(8, 2);
  small.require_same_leaf = true;
  Occupy(*s, 0, 0);
  PlaceResult res2 = policy_->Place(*s, small);
  ASSERT_FALSE(res2.ok);
  EXPECT_EQ(res2.code, NoFitCode::kTopologyUnsatisfiable);
  EXPECT_EQ(res2.reason, "needs 16 GPUs under one leaf; the largest free block is 12");
}

TEST_F(TesseraTest, InferenceGoesIntoTheSmallestCoveringMigSlice) {
  Cluster c = MakeCluster(1, 8, "h100-80gb");
  auto s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok());
  const GpuKind& k = Catalog::Default().kind(Catalog::Default().Find("h100-80gb"));
  PlaceResult a = policy_->Place(*s, Slice(8000, 100));
  ASSERT_TRUE(a.ok) << a.reason;
  EXPECT_EQ(k.profiles[a.tasks[0].gpus[0].mig_profile].name, "1g.10gb");
  EXPECT_TRUE(a.tasks[0].gpus[0].enable_mig);
  s->Apply(a.tasks, 0, 0, true);
  // A replica that may not share (sharing: sharing_test.cc) gets the smallest slice that covers it.
  Request dedicated = Slice(15000, 100);
  dedicated.allow_share = false;
  PlaceResult b = policy_->Place(*s, dedicated);
  ASSERT_TRUE(b.ok);
  EXPECT_EQ(k.profiles[b.tasks[0].gpus[0].mig_profile].name, "1g.20gb");
  EXPECT_EQ(b.tasks[0].gpus[0].gpu, a.tasks[0].gpus[0].gpu) << "packs onto the GPU already in MIG mode";
  // Compute need drives the profile too: 300/1000 of an H100 needs at least 3g (60 SMs of 132).
  PlaceResult c3 = policy_->Place(*s, Slice(8000, 300));
  ASSERT_TRUE(c3.ok);
  EXPECT_EQ(k.profiles[c3.tasks[0].gpus[0].mig_profile].compute_slices, 3);
}

TEST_F(TesseraTest, RepartitionsIdleInstancesWhenNeeded) {
  Cluster c = MakeCluster(1, 1, "h100-80gb");
  c.nodes[0].mig_enabled = true;
  c.nodes[0].mig_config = "all-1g.10gb";
  auto s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok());
  PlaceResult res = policy_->Place(*s, Slice(30000, 200));  // needs a 3g.40gb
  ASSERT_TRUE(res.ok) << res.reason;
  EXPECT_NE(res.tasks[0].gpus[0].destroy_mask, 0);
  ASSERT_TRUE(s->CanApply(res.tasks, 0, 0).ok());
  s->Apply(res.tasks, 0, 0, true);
  EXPECT_TRUE(s->CheckInvariants().ok());
}

// One A100-80GB node of one GPU in MIG mode with `config` (e.g. "all-3g.40gb"). The caller keeps it: a
// ClusterState refers to its cluster.
Cluster OneA100(const std::string& config) {
  Cluster c = MakeCluster(1, 1, "a100-80gb");
  c.nodes[0].mig_enabled = true;
  c.nodes[0].mig_config = config;
  return c;
}

// An inference slice that needs exactly A100-80GB profile `name` (its memory and compute).
Request A100Slice(const std::string& name) {
  const GpuKind& k = Catalog::Default().kind(Catalog::Default().Find("a100-80gb"));
  const int p = k.FindProfile(name);
  return Slice(k.profiles[p].usable_mib, k.ProfileComputeMilli(p));
}

// Kubernetes' traits: no repartitioning, and a slice takes only its own profile: an idle larger instance
// (what the default Tessera policy would take) does not count.
TEST_F(TesseraTest, ExactMigProfilesTakeNoLargerInstance) {
  const Cluster c = OneA100("all-3g.40gb");
  auto s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok());
  const GpuKind& k = Catalog::Default().kind(Catalog::Default().Find("a100-80gb"));
  const Request two_g = A100Slice("2g.20gb");
  PolicyTraits traits = TesseraTraits();
  traits.repartition = false;
  EXPECT_TRUE(EnginePolicy(traits).Place(*s, two_g).ok) << "a 3g.40gb instance covers a 2g.20gb need";
  traits.exact_mig_profiles = true;
  const PlaceResult exact = EnginePolicy(traits).Place(*s, two_g);
  EXPECT_FALSE(exact.ok);
  EXPECT_FALSE(exact.reason.empty());
  const Request three_g = A100Slice("3g.40gb");
  const PlaceResult own = EnginePolicy(traits).Place(*s, three_g);
  ASSERT_TRUE(own.ok) << own.reason;
  EXPECT_EQ(k.profiles[own.tasks[0].gpus[0].mig_profile].name, "3g.40gb");
}

// A training slice takes the smallest profile that holds its need, never a larger idle instance (an
// inference replica may); with repartitioning the larger idle instance is remade into that profile.
TEST_F(TesseraTest, TrainingSliceTakesNoLargerInstance) {
  const Cluster c = OneA100("all-7g.80gb");
  auto s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok());
  const GpuKind& k = Catalog::Default().kind(Catalog::Default().Find("a100-80gb"));
  Request train = A100Slice("3g.40gb");
  train.cls = WorkloadClass::kTraining;
  train.allow_share = false;
  Request serve = train;
  serve.cls = WorkloadClass::kInference;
  PolicyTraits traits = TesseraTraits();
  traits.repartition = false;
  const PlaceResult in_7g = EnginePolicy(traits).Place(*s, serve);
  ASSERT_TRUE(in_7g.ok) << in_7g.reason;
  EXPECT_EQ(k.profiles[in_7g.tasks[0].gpus[0].mig_profile].name, "7g.80gb");
  const PlaceResult refused = EnginePolicy(traits).Place(*s, train);
  EXPECT_FALSE(refused.ok);
  EXPECT_FALSE(refused.reason.empty());
  const PlaceResult remade = EnginePolicy(TesseraTraits()).Place(*s, train);
  ASSERT_TRUE(remade.ok) << remade.reason;
  EXPECT_EQ(k.profiles[remade.tasks[0].gpus[0].mig_profile].name, "3g.40gb");
  EXPECT_NE(remade.tasks[0].gpus[0].destroy_mask, 0);
}

// Drain times: a job that would push back a node's drain goes where it does not, so nodes empty early for
// gangs; with no times (or a job that ends first everywhere) placement is the plain best fit.
TEST_F(TesseraTest, DrainTimesKeepNodeLifetimesAligned) {
  Cluster c = MakeCluster(2, 8, "h100-80gb");
  auto s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok());
  Occupy(*s, 0, 4);  // node 0: 4 free, its work ends at t=1000
  Occupy(*s, 1, 1);  // node 1: 7 free, its work ends at t=5000
  Request r = WholeGang(1, 1);
  r.expected_end_s = 4000;
  PlaceResult plain = policy_->Place(*s, r);
  ASSERT_TRUE(plain.ok);
  EXPECT_EQ(plain.tasks[0].node, 0) << "no drain times: best fit";
  s->EnableDrainTimes();
  s->ExtendDrain(0, 1000);
  s->ExtendDrain(1, 5000);
  EXPECT_EQ(s->drain_s(0), 1000);
  PlaceResult aligned = policy_->Place(*s, r);
  ASSERT_TRUE(aligned.ok);
  EXPECT_EQ(aligned.tasks[0].node, 1) << "node 0 would drain at 4000 instead of 1000";
  r.expected_end_s = 900;
  PlaceResult shorter = policy_->Place(*s, r);
  ASSERT_TRUE(shorter.ok);
  EXPECT_EQ(shorter.tasks[0].node, 0) << "ends before either node drains: best fit";
  r.expected_end_s = -1;
  EXPECT_EQ(policy_->Place(*s, r).tasks[0].node, 0) << "unknown end: best fit";
  // Sub-GPU work follows the same rule within its category.
  Request slice = Slice(8000, 100);
  slice.expected_end_s = 4000;
  PlaceResult sl = policy_->Place(*s, slice);
  ASSERT_TRUE(sl.ok);
  EXPECT_EQ(sl.tasks[0].node, 1);
  s->ExtendDrain(0, ClusterState::kNever);
  EXPECT_EQ(policy_->Place(*s, slice).tasks[0].node, 0) << "a node that never drains takes anything";
}

TEST_F(TesseraTest, K8sDefaultSpreadsAndWastesWholeGpus) {
  Cluster c = MakeCluster(4, 8, "h100-80gb");
  auto s = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(s.ok());
  auto k8s = MakePolicy("k8s-default");
  ASSERT_TRUE(k8s.ok());
  Request r = Slice(8000, 100);
  r.cpu_milli = 4000;
  std::set<NodeId> nodes;
  for (int i = 0; i < 4; ++i) {
    PlaceResult res = (*k8s)->Place(*s, r);
    ASSERT_TRUE(res.ok);
    EXPECT_EQ(res.tasks[0].gpus[0].milli, 1000) << "MIG-unaware: a whole GPU";
    nodes.insert(res.tasks[0].node);
    s->Apply(res.tasks, r.cpu_milli, 0, true);
  }
  EXPECT_EQ(nodes.size(), 4u) << "LeastAllocated spreads over nodes";
}

// Slices found from the node bitsets are the slices a scan of every node finds: random clusters (two MIG
// kinds, sometimes a non-MIG one), random sub-GPU and whole-GPU requests and releases, both ways compared
// on the same state before each placement is applied.
std::string Describe(const PlaceResult& r) {
  std::string d = fmt::format("{} {} {} |", r.ok, static_cast<int>(r.code), r.reason);
  for (const TaskPlacement& t : r.tasks)
    for (const GpuGrant& g : t.gpus)
      d += fmt::format(" n{} g{} m{} mem{} p{}@{} c{} e{} d{} s{}", t.node, g.gpu, g.milli, g.memory_mib,
                       g.mig_profile, static_cast<int>(g.mig_start), g.create_instance, g.enable_mig,
                       g.destroy_mask, g.shared);
  return d;
}

TEST(EngineNodeIndex, SameChoicesAsAScanOfEveryNode) {
  const Catalog& cat = Catalog::Default();
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::mt19937_64 rng(seed);
    Cluster c = MakeCluster(24, 8, "h100-80gb");
    for (int n = 12; n < 24; ++n) c.nodes[n].kind = cat.Find("a100-80gb");
    if (seed % 2 == 0) c.nodes[23].kind = cat.Find("l40s-48gb");
    auto state = ClusterState::Build(c, cat);
    ASSERT_TRUE(state.ok()) << state.error();
    PolicyTraits with = TesseraTraits(), without = TesseraTraits();
    without.node_index = false;
    with.share_instances = without.share_instances = seed % 3 != 0;
    const EnginePolicy indexed(with, MakeTesseraScorer({}, 7)), scanning(without, MakeTesseraScorer({}, 7));
    struct Placed {
      std::vector<TaskPlacement> tasks;
      bool inference;
    };
    std::vector<Placed> placed;
    int slices = 0;
    for (int step = 0; step < 1500; ++step) {
      if (!placed.empty() && rng() % 3 == 0) {
        const size_t i = rng() % placed.size();
        state->Release(placed[i].tasks, 1000, 1024, placed[i].inference);
        placed.erase(placed.begin() + static_cast<long>(i));
        continue;
      }
      Request r = rng() % 4 == 0 ? WholeGang(1, 1 + static_cast<int>(rng() % 8))
                                 : Slice(2000 + rng() % 70000, 10 + rng() % 900);
      r.cpu_milli = 1000;
      r.host_memory_mib = 1024;
      r.latency_sensitive = rng() % 3 == 0;
      if (rng() % 5 == 0)
        r.kind_mask = uint64_t{1} << (rng() % 2 ? cat.Find("a100-80gb") : cat.Find("h100-80gb"));
      const PlaceResult a = indexed.Place(*state, r), b = scanning.Place(*state, r);
      ASSERT_EQ(Describe(a), Describe(b)) << "seed " << seed << " step " << step;
      if (!a.ok) continue;
      slices += r.SubGpu();
      ASSERT_TRUE(state->CanApply(a.tasks, 1000, 1024).ok());
      state->Apply(a.tasks, 1000, 1024, r.cls != WorkloadClass::kTraining);
      placed.push_back({a.tasks, r.cls != WorkloadClass::kTraining});
    }
    ASSERT_TRUE(state->CheckInvariants().ok()) << state->CheckInvariants().message();
    EXPECT_GT(slices, 100) << "seed " << seed;
  }
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Request::nodes limits placement to the nodes it allows, for whole GPUs, gangs and MIG slices alike, and
// PlaceWithin leaves the state as it found it.
TEST(PlaceWithinTest, PlacesOnlyOnAllowedNodesAndLiftsItsCordons) {
  const Cluster cluster = MakeCluster(4, 8, "a100-80gb");  // the state refers to it
  auto built = ClusterState::Build(cluster, Catalog::Default());
  ASSERT_TRUE(built.ok());
  ClusterState s = std::move(built).value();
  auto policy = MakePolicy("tessera");
  ASSERT_TRUE(policy.ok());
  ASSERT_TRUE(s.CordonNode(3).ok());  // a cordon of its own stays
  for (const Request& base : {WholeGang(1, 2), WholeGang(2, 8), Slice(10000, 143)}) {
    Request r = base;
    r.nodes = std::make_shared<std::vector<bool>>(std::vector<bool>{false, true, true, false});
    const PlaceResult res = PlaceWithin(**policy, s, r);
    ASSERT_TRUE(res.ok) << res.reason;
    for (const TaskPlacement& t : res.tasks) EXPECT_TRUE(t.node == 1 || t.node == 2) << "node " << t.node;
    for (NodeId n = 0; n < 3; ++n) EXPECT_FALSE(s.node_cordoned(n)) << "node " << n;
    EXPECT_TRUE(s.node_cordoned(3));
  }
  Request none = WholeGang(1, 1);
  none.nodes = std::make_shared<std::vector<bool>>(std::vector<bool>{false, false, false, true});  // only cordoned
  const PlaceResult res = PlaceWithin(**policy, s, none);
  EXPECT_FALSE(res.ok);
  EXPECT_EQ(res.code, NoFitCode::kResources);
  Request three = WholeGang(3, 8);  // allowed on two nodes of 8 GPUs: no room for a third task
  three.nodes = std::make_shared<std::vector<bool>>(std::vector<bool>{true, true, false, false});
  EXPECT_FALSE(PlaceWithin(**policy, s, three).ok);
  three.nodes = nullptr;
  EXPECT_TRUE(PlaceWithin(**policy, s, three).ok);
}

}  // namespace
}  // namespace tessera
