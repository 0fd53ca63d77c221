// The FGD harness: inflation, determinism on a small cluster, and the real openb trace
// (fgd < bestfit < random at 100% arrived load on two seeds).
#include "sim/fgd_harness.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sched/harness_policies.h"
#include "sim/openb.h"

namespace tessera {
namespace {

const char kNodes[] =
    "sn,cpu_milli,memory_mib,gpu,model\n"
    "a,32000,131072,4,T4\n"
    "b,32000,131072,4,T4\n"
    "c,64000,262144,8,G2\n"
    "d,16000,65536,2,P100\n";

const char kPods[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
    "p0,4000,16384,1,1000\n"
    "p1,2000,8192,1,500\n"
    "p2,2000,8192,1,300\n"
    "p3,8000,16384,0,0\n"
    "p4,6000,12288,1,810\n"
    "p5,16000,65536,2,1000\n"
    "p6,2000,8192,1,230\n"
    "p7,4000,16384,1,1000\n";

struct Small {
  Cluster cluster;
  OpenbPods pods;
  TaskShapeDistribution dist;
};

Small LoadSmall() {
  Small s;
  s.cluster = ParseOpenbNodes(kNodes, "nodes", Catalog::Default()).value();
  s.pods = ParseOpenbPods(kPods, "pods", Catalog::Default()).value();
  s.dist = TaskShapeDistribution::FromRequests(s.pods.requests);
  return s;
}

TEST(FgdHarnessTest, InflatesToTargetAfterShuffledOriginals) {
  Small s = LoadSmall();
  const int64_t cap = GpuCapacityMilli(s.cluster);
  EXPECT_EQ(cap, 18000);
  std::vector<Request> order = ShuffleAndInflate(s.pods.requests, cap, 1.3, 42);
  int64_t total = 0, before_last = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(order[i].id, static_cast<JobId>(i));
    before_last = total;
    total += RequestedGpuMilli(order[i]);
  }
  EXPECT_GE(total, 13 * cap / 10);
  EXPECT_LT(before_last, 13 * cap / 10);
  // The first 8 are a permutation of the originals.
  std::multiset<int> originals, head;
  for (const Request& r : s.pods.requests) originals.insert(static_cast<int>(r.cpu_milli * 10000 + RequestedGpuMilli(r)));
  for (size_t i = 0; i < s.pods.requests.size(); ++i)
    head.insert(static_cast<int>(order[i].cpu_milli * 10000 + RequestedGpuMilli(order[i])));
  EXPECT_EQ(head, originals);
}

TEST(FgdHarnessTest, SameSeedSameCurve) {
  Small s = LoadSmall();
  FgdHarnessOptions opt;
  opt.record_curve = true;
  for (const std::string& policy : HarnessPolicyNames()) {
    Result<FgdRunResult> a = RunFgdHarness(s.cluster, Catalog::Default(), s.pods.requests, s.dist, policy, 7, opt);
    Result<FgdRunResult> b = RunFgdHarness(s.cluster, Catalog::Default(), s.pods.requests, s.dist, policy, 7, opt);
    ASSERT_TRUE(a.ok()) << a.error();
    ASSERT_TRUE(b.ok()) << b.error();
    ASSERT_EQ(a->curve.size(), b->curve.size());
    ASSERT_EQ(a->curve.size(), static_cast<size_t>(a->pods));
    for (size_t i = 0; i < a->curve.size(); ++i) {
      EXPECT_EQ(a->curve[i].allocated_pct, b->curve[i].allocated_pct) << policy << " pod " << i;
      EXPECT_EQ(a->curve[i].frag_pct_of_capacity, b->curve[i].frag_pct_of_capacity) << policy << " pod " << i;
    }
    EXPECT_TRUE(a->reached_100);
    EXPECT_EQ(a->placed + a->failed, a->pods);
    EXPECT_LE(a->curve.back().allocated_pct, 100.0);
    EXPECT_DOUBLE_EQ(a->unallocated_gpu_pct_at_100, b->unallocated_gpu_pct_at_100);
  }
  Result<FgdRunResult> bad = RunFgdHarness(s.cluster, Catalog::Default(), s.pods.requests, s.dist, "firstfit", 7);
  EXPECT_FALSE(bad.ok());
}

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::filesystem::path TraceDir() {
  return std::filesystem::path(TESSERA_SOURCE_DIR) / ".." / "shared" / "traces" / "alibaba-gpu-2023";
}

// Missing trace files: a failure under CI=true, else a skip.
#define REQUIRE_TRACE(nodes, pods)                                                                         \
  if (!std::filesystem::exists(nodes) || !std::filesystem::exists(pods)) {                                \
    const char* ci = std::getenv("CI");                                                                   \
    if (ci && std::string(ci) == "true") FAIL() << "missing openb trace under " << TraceDir();            \
    GTEST_SKIP() << "openb trace not found under ../shared/traces/alibaba-gpu-2023 (needs "               \
                 << (nodes).filename() << " and " << (pods).filename() << ")";                           \
  }

TEST(FgdHarnessTest, RealTraceOrdersPolicies) {
  const std::filesystem::path dir = TraceDir();
  const std::filesystem::path nodes = dir / "openb_node_list_gpu_node.csv", pods = dir / "openb_pod_list_default.csv";
  REQUIRE_TRACE(nodes, pods);
  Result<Cluster> c = ParseOpenbNodes(Slurp(nodes), nodes.string(), Catalog::Default());
  ASSERT_TRUE(c.ok()) << c.error();
  Result<OpenbPods> p = ParseOpenbPods(Slurp(pods), pods.string(), Catalog::Default());
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(c->nodes.size(), 1213u);
  EXPECT_EQ(c->TotalGpus(), 6212);
  EXPECT_EQ(p->requests.size(), 8152u);
  const TaskShapeDistribution dist = TaskShapeDistribution::FromRequests(p->requests);
  for (uint64_t seed : {42u, 43u}) {
    double u[3];
    const char* names[3] = {"fgd", "bestfit", "random"};
    for (int i = 0; i < 3; ++i) {
      Result<FgdRunResult> r = RunFgdHarness(*c, Catalog::Default(), p->requests, dist, names[i], seed);
      ASSERT_TRUE(r.ok()) << r.error();
      ASSERT_TRUE(r->reached_100);
      u[i] = r->unallocated_gpu_pct_at_100;
    }
    EXPECT_LT(u[0], u[1]) << "seed " << seed << ": fgd " << u[0] << " bestfit " << u[1];
    EXPECT_LT(u[1], u[2]) << "seed " << seed << ": bestfit " << u[1] << " random " << u[2];
    EXPECT_GT(u[0], 3.5) << "fgd below the GPU-only optimum estimate: suspicious";
  }
}

TEST(FgdHarnessTest, TesseraKeepsScarceModelsOnGpuSpec33) {
  // gpuspec33: a third of the tasks are pinned to GPU models (T4-only tasks alone ask for more than the
  // T4s). FGD lets unconstrained pods take the pinned models' GPUs and leaves about 12% unallocated;
  // tessera's reservation keeps them for the pinned tasks.
  const std::filesystem::path dir = TraceDir();
  const std::filesystem::path nodes = dir / "openb_node_list_gpu_node.csv", pods = dir / "openb_pod_list_gpuspec33.csv";
  REQUIRE_TRACE(nodes, pods);
  Result<Cluster> c = ParseOpenbNodes(Slurp(nodes), nodes.string(), Catalog::Default());
  ASSERT_TRUE(c.ok()) << c.error();
  Result<OpenbPods> p = ParseOpenbPods(Slurp(pods), pods.string(), Catalog::Default());
  ASSERT_TRUE(p.ok()) << p.error();
  const TaskShapeDistribution dist = TaskShapeDistribution::FromRequests(p->requests);
  Result<FgdRunResult> f = RunFgdHarness(*c, Catalog::Default(), p->requests, dist, "fgd", 42);
  Result<FgdRunResult> t = RunFgdHarness(*c, Catalog::Default(), p->requests, dist, "tessera", 42);
  ASSERT_TRUE(f.ok()) << f.error();
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_LT(t->unallocated_gpu_pct_at_100, f->unallocated_gpu_pct_at_100 - 2.0)
      << "tessera " << t->unallocated_gpu_pct_at_100 << " fgd " << f->unallocated_gpu_pct_at_100;
  EXPECT_GT(t->unallocated_gpu_pct_at_100, 3.0) << "below the T4-only overflow floor: suspicious";
}

}  // namespace
}  // namespace tessera
