// The utilisation upper bound (sim/bound.h): hand-computed values for each binding constraint, tightness
// where a scheduler can reach it, and, on small generated scenarios over seeds, no registered policy above
// it on either cycle.
#include "sim/bound.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "sched/policy.h"
#include "sim/scenario.h"

namespace tessera {
namespace {

Cluster OneNode(int gpus) {
  Cluster c;
  Node n;
  n.name = "n0";
  n.kind = Catalog::Default().Find("h100-80gb");
  n.gpu_count = gpus;
  n.cpu_milli = 192000;
  n.memory_mib = 2 << 20;
  n.interconnect = Interconnect::kNvSwitch;
  c.nodes.push_back(n);
  c.leaf_names = {"leaf-0"};
  c.spine_names = {"spine-0"};
  return c;
}

TraceJob Job(int64_t id, int gpus_per_task, int compute_milli, int64_t memory_mib, int64_t duration_s) {
  TraceJob j;
  j.id = id;
  j.cls = gpus_per_task == 0 ? WorkloadClass::kInference : WorkloadClass::kTraining;
  j.gpus_per_task = gpus_per_task;
  j.compute_milli = compute_milli;
  j.memory_mib = memory_mib;
  j.duration_s = duration_s;
  return j;
}

SimOptions Window(int64_t warmup_s, int64_t horizon_s) {
  SimOptions o;
  o.warmup_s = warmup_s;
  o.horizon_s = horizon_s;
  return o;
}

int64_t H100Mib() { return Catalog::Default().kind(Catalog::Default().Find("h100-80gb")).memory_mib; }

// Where the bound is tight: tessera, bestfit and k8s-default each reach it on this stream.
void ExpectEveryPolicyReaches(const Cluster& c, const std::vector<TraceJob>& jobs, const SimOptions& o,
                              double bound) {
  for (const char* p : {"tessera", "bestfit", "k8s-default"}) {
    auto pol = MakePolicy(p);
    ASSERT_TRUE(pol.ok());
    auto r = Simulate(c, Catalog::Default(), jobs, **pol, o);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_NEAR(r->gpu_utilization, bound, 1e-9) << p;
  }
}

// Two single-GPU jobs using 0.9 of a GPU each, forever, on two GPUs: 0.9, and every policy reaches it.
TEST(BoundTest, TightWhereEveryPolicyCanReachIt) {
  const Cluster c = OneNode(2);
  const std::vector<TraceJob> jobs = {Job(0, 1, 900, 20480, -1), Job(1, 1, 900, 20480, -1)};
  const SimOptions o = Window(3600, 7200);
  const UtilizationBound b = BoundUtilization(c, Catalog::Default(), jobs, o, false);
  EXPECT_NEAR(b.gpu_utilization, 0.9, 1e-12);
  EXPECT_EQ(b.limit, "work");
  ExpectEveryPolicyReaches(c, jobs, o, b.gpu_utilization);
}

// Light replicas (0.1 compute, a quarter of the memory each) on one GPU: memory binds at 4 replicas = 0.4
// (scaled by the exact usable memory); one busy job with more compute per MiB goes first and then compute
// binds.
TEST(BoundTest, MemoryThenCompute) {
  const Cluster c = OneNode(1);
  const int64_t m = H100Mib();
  std::vector<TraceJob> jobs;
  for (int i = 0; i < 10; ++i) jobs.push_back(Job(i, 0, 100, 20480, -1));
  UtilizationBound b = BoundUtilization(c, Catalog::Default(), jobs, Window(0, 3600), false);
  EXPECT_NEAR(b.gpu_utilization, 0.1 * static_cast<double>(m) / 20480, 1e-9);
  EXPECT_EQ(b.limit, "memory");
  EXPECT_NEAR(b.offered_compute, 1.0, 1e-9);
  jobs.push_back(Job(10, 0, 900, m / 2, -1));
  b = BoundUtilization(c, Catalog::Default(), jobs, Window(0, 3600), false);
  EXPECT_NEAR(b.gpu_utilization, 1.0, 1e-12);
  EXPECT_EQ(b.limit, "compute");
}

// Work: a job lasting half the window gives 0.5, unless lost work may be redone (then the window caps it);
// a job arriving after the horizon or needing more memory than any GPU has counts nothing; a run to
// completion is bounded by compute only.
TEST(BoundTest, WorkArrivalsAndRunsToCompletion) {
  const Cluster c = OneNode(1);
  std::vector<TraceJob> jobs = {Job(0, 1, 1000, 1024, 1800)};
  EXPECT_NEAR(BoundUtilization(c, Catalog::Default(), jobs, Window(0, 3600), false).gpu_utilization, 0.5,
              1e-12);
  EXPECT_NEAR(BoundUtilization(c, Catalog::Default(), jobs, Window(0, 3600), true).gpu_utilization, 1.0,
              1e-12);
  jobs[0].submit_s = 2700;  // arrives with a quarter of the window left
  EXPECT_NEAR(BoundUtilization(c, Catalog::Default(), jobs, Window(0, 3600), false).gpu_utilization, 0.25,
              1e-12);
  jobs[0].submit_s = 3600;
  EXPECT_EQ(BoundUtilization(c, Catalog::Default(), jobs, Window(0, 3600), false).gpu_utilization, 0.0);
  jobs = {Job(0, 1, 1000, H100Mib() + 1, -1)};
  EXPECT_EQ(BoundUtilization(c, Catalog::Default(), jobs, Window(0, 3600), false).gpu_utilization, 0.0);
  jobs[0].gpu_kinds = {"a100-80gb"};  // a kind the cluster does not have
  jobs[0].memory_mib = 1024;
  EXPECT_EQ(BoundUtilization(c, Catalog::Default(), jobs, Window(0, 3600), false).gpu_utilization, 0.0);
  const UtilizationBound full = BoundUtilization(c, Catalog::Default(), jobs, Window(0, 0), false);
  EXPECT_EQ(full.gpu_utilization, 1.0);
  EXPECT_EQ(full.limit, "compute");
}

// Whole-GPU jobs hold their GPUs: two single-GPU jobs using half a GPU each cannot share one GPU, so one runs
// at a time (0.5, which every policy reaches); two replicas of the same demand asking for a sub-GPU share
// can (1.0).
TEST(BoundTest, WholeGpuJobsHoldTheirGpus) {
  const Cluster c = OneNode(1);
  std::vector<TraceJob> jobs = {Job(0, 1, 500, 20480, -1), Job(1, 1, 500, 20480, -1)};
  const SimOptions o = Window(3600, 7200);
  UtilizationBound b = BoundUtilization(c, Catalog::Default(), jobs, o, false);
  EXPECT_NEAR(b.gpu_utilization, 0.5, 1e-9);
  EXPECT_EQ(b.limit, "compute");
  ExpectEveryPolicyReaches(c, jobs, o, b.gpu_utilization);
  jobs = {Job(0, 0, 500, 20480, -1), Job(1, 0, 500, 20480, -1)};
  EXPECT_NEAR(BoundUtilization(c, Catalog::Default(), jobs, o, false).gpu_utilization, 1.0, 1e-9);
  // Whole GPUs hold their memory too: a whole-GPU job beside memory-bound replicas leaves them less.
  jobs = {Job(0, 1, 900, 1024, -1)};
  for (int i = 1; i <= 8; ++i) jobs.push_back(Job(i, 0, 100, 20480, -1));
  const Cluster two = OneNode(2);
  b = BoundUtilization(two, Catalog::Default(), jobs, o, false);
  // The whole-GPU job (0.9 per GPU held) is worth more than a GPU of replicas (0.1 per 20 GiB, 0.39 per GPU
  // of memory): it runs, and the replicas fill the other GPU's memory (the memory row alone says so).
  EXPECT_NEAR(b.gpu_utilization, (0.9 + 0.1 * static_cast<double>(H100Mib()) / 20480) / 2, 1e-9);
  EXPECT_EQ(b.limit, "memory");
}

// The dual search against a brute-force grid over both prices and against feasible schedules, on small random
// streams of whole-GPU and sub-GPU jobs: never below a feasible packing, never above the grid's minimum.
TEST(BoundTest, DualSearchIsTightAndValid) {
  std::mt19937_64 rng(7);
  const Cluster c = OneNode(2);
  const double m = static_cast<double>(H100Mib());
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<TraceJob> jobs;
    const int n = 2 + static_cast<int>(rng() % 6);
    for (int i = 0; i < n; ++i) {
      const bool whole = rng() % 3 == 0;
      jobs.push_back(Job(i, whole ? 1 : 0, 20 + static_cast<int>(rng() % 980),
                         1024 + static_cast<int64_t>(rng() % 60000),
                         600 + static_cast<int64_t>(rng() % 7200)));
    }
    const SimOptions o = Window(0, 3600);
    const double bound = BoundUtilization(c, Catalog::Default(), jobs, o, false).gpu_utilization;
    // Each job's (value, compute held, memory held, cap) as the programme sees it.
    struct It {
      double a, c, b, cap;
    };
    std::vector<It> items;
    for (const TraceJob& j : jobs) {
      const double a = j.compute_milli / 1000.0;
      items.push_back({a, j.gpus_per_task > 0 ? 1.0 : a, j.gpus_per_task > 0 ? m : double(j.memory_mib),
                       double(std::min<int64_t>(3600, j.duration_s))});
    }
    const double C = 2 * 3600.0, B = 2 * m * 3600;
    double grid = 1e300;
    for (int p = 0; p <= 200; ++p)
      for (int q = 0; q <= 200; ++q) {
        const double lambda = 1.0 * p / 200, mu = 1.0 / m * q / 20;
        double d = lambda * C + mu * B;
        for (const It& it : items) d += it.cap * std::max(0.0, it.a - lambda * it.c - mu * it.b);
        grid = std::min(grid, d);
      }
    EXPECT_LE(bound, grid / C + 1e-9) << trial;
    // Feasible packings: jobs greedily by a random order, each as far as both rows allow.
    for (int k = 0; k < 50; ++k) {
      std::shuffle(items.begin(), items.end(), rng);
      double cl = C, bl = B, v = 0;
      for (const It& it : items) {
        const double x = std::min({it.cap, cl / it.c, bl / it.b});
        v += it.a * x, cl -= it.c * x, bl -= it.b * x;
      }
      EXPECT_GE(bound, v / C - 1e-9) << trial;
    }
  }
}

std::string BoundTempDir() {
  auto d = std::filesystem::temp_directory_path() / ("tessera-bound-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  std::ofstream(d / "c.yaml")
      << "name: c32\ndefaults: {gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch}\n"
         "nodes:\n  - {name: h, count: 2, gpu: h100-80gb, leaf: leaf-0}\n"
         "  - {name: a, count: 2, gpu: a100-80gb, leaf: leaf-1}\n";
  return d.string();
}

// Every registered policy, on both cycles, over seeds and workload mixes: never above its stream's bound.
TEST(BoundTest, NoPolicyExceedsTheBound) {
  const std::string dir = BoundTempDir();
  const std::vector<std::string> policies = PolicyNames();
  const char* workloads[] = {"{inference_share: 0.9, traffic: light}",
                             "{inference_share: 0.5, traffic: mixed}",
                             "{inference_share: 0.2, traffic: busy, training_gpus: {1: 0.5, 8: 0.5}}"};
  int checked = 0, below_one = 0;
  for (const char* w : workloads)
    for (const char* cycle : {"backfill", "greedy"}) {
      const std::string text = fmt::format(
          "name: b\ncluster: c.yaml\nseeds: [1, 2]\nthreads: 2\nhorizon_h: 24\nwarmup_h: 4\n"
          "arrivals: {{process: backlog, depth: 16}}\ncycle: {}\nworkload: {}\n",
          cycle, w);
      auto s = ParseScenario(text, "b.yaml", dir, Catalog::Default());
      ASSERT_TRUE(s.ok()) << s.error();
      auto out = RunScenario(*s, policies, Catalog::Default());
      ASSERT_TRUE(out.ok()) << out.error();
      const VariantOutcome& v = out->variants[0];
      for (size_t k = 0; k < v.bounds.size(); ++k) {
        EXPECT_GT(v.bounds[k].gpu_utilization, 0.0);
        below_one += v.bounds[k].gpu_utilization < 0.999 ? 1 : 0;
        for (const auto& runs : v.runs) {
          EXPECT_LE(runs[k].gpu_utilization, v.bounds[k].gpu_utilization + 1e-9)
              << runs[k].policy << " " << w << " " << cycle << " seed " << runs[k].seed;
          ++checked;
        }
      }
    }
  EXPECT_EQ(checked, 3 * 2 * 2 * static_cast<int>(policies.size()));
  EXPECT_GT(below_one, 0) << "light inference is bound by memory, below 1";
}

}  // namespace
}  // namespace tessera
