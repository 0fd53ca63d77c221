// Simulator figures of sharing: replicas in one shared MIG instance, their p99 slowdown and SLO violations
// per class, and the generator fields that drive the seed-regime scenario.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sched/policy.h"
#include "sim/generator.h"
#include "sim/metrics.h"
#include "sim/simulator.h"

namespace tessera {
namespace {

Cluster OneGpu() {
  const std::string yaml =
      "name: tiny\ndefaults: {gpus: 1, cpu: 64, memory_gib: 512, interconnect: nvswitch}\n"
      "nodes:\n  - {name: n, count: 1, gpu: h100-80gb, leaf: leaf-0}\n";
  auto c = LoadClusterYaml(yaml, "tiny", Catalog::Default());
  EXPECT_TRUE(c.ok()) << c.error();
  return *c;
}

TraceJob Light(int64_t id, int milli, bool production) {
  TraceJob j;
  j.id = id;
  j.cls = WorkloadClass::kInference;
  j.gpus_per_task = 0;
  j.compute_milli = milli;
  j.memory_mib = 12 * 1024;
  j.duration_s = 1000;
  j.latency_sensitive = production;
  return j;
}

RunResult RunShared(const std::vector<TraceJob>& jobs, const std::string& policy, const SharingOptions& sh) {
  const Cluster c = OneGpu();
  PolicyOptions po;
  po.sharing = sh;
  auto p = MakePolicy(policy, po);
  EXPECT_TRUE(p.ok());
  SimOptions o;
  o.horizon_s = 2000;
  o.mig_mode_delay_s = o.mig_instance_delay_s = 0;
  o.sharing = sh;
  o.demand_sigma = 0;  // real demand = declared: the figures below are the model's exact values
  auto r = Simulate(c, Catalog::Default(), jobs, *p.value(), o);
  EXPECT_TRUE(r.ok()) << r.error();
  return *r;
}

TEST(SharingSimTest, SharedReplicasCountTheirOwnUseAndTheirSlowdown) {
  SharingOptions sh;
  sh.mode = SharingMode::kMps;
  sh.mps_contention = 0;
  // Three light replicas (5% each) fit one shared 3g.40gb (454 milli, 40448 MiB) on the only GPU.
  RunResult r = RunShared({Light(0, 50, true), Light(1, 50, false), Light(2, 50, false)}, "tessera", sh);
  EXPECT_EQ(r.jobs_completed, 3);
  EXPECT_EQ(r.oom_events, 0);
  // All three run at once: utilisation 0.15 for 1000 of 2000 s.
  EXPECT_NEAR(r.gpu_utilization, 0.075, 1e-9);
  // Summed 150 of 454: each sees (1 - 50/454) / (1 - 150/454) under MPS.
  const double s = (1 - 50.0 / 454) / (1 - 150.0 / 454);
  // The p99 is read from a histogram of 2 % buckets (the bucket's upper edge).
  ASSERT_TRUE(r.p99_slowdown.count("production-inference"));
  EXPECT_GE(r.p99_slowdown["production-inference"], s);
  EXPECT_LT(r.p99_slowdown["production-inference"], s * 1.02);
  EXPECT_DOUBLE_EQ(r.p99_slowdown["inference"], r.p99_slowdown["production-inference"]);
  // Replica-seconds per class (one production replica, two others, 1000 s each), none above the SLO.
  EXPECT_DOUBLE_EQ(r.slo_replica_s["production-inference"], 1000);
  EXPECT_DOUBLE_EQ(r.slo_replica_s["inference"], 2000);
  EXPECT_DOUBLE_EQ(r.slo_violation_s["inference"], 0);
  EXPECT_EQ(r.slo_violations["production-inference"], 0);
  EXPECT_EQ(r.slo_violations["inference"], 0);
  // The JSON summary carries both per class.
  const nlohmann::json j = PolicySummary({r});
  EXPECT_EQ(j["slo_violations"]["production-inference"]["mean"], 0.0);
  EXPECT_NEAR(j["p99_slowdown"]["inference"]["max"].get<double>(), s, 0.02 * s);
  EXPECT_EQ(j["slo"]["inference"]["violation_fraction"]["mean"], 0.0);
  EXPECT_EQ(j["uncertainty"]["demand"]["model"], "declared");
}

// A one-GPU run of tessera packing with `pack` (its policy) and measured with the same options, demand exact
// unless a test changes it.
struct OneGpuRun {
  explicit OneGpuRun(const SharingOptions& pack, int64_t horizon_s) {
    PolicyOptions po;
    po.sharing = pack;
    auto made = MakePolicy("tessera", po);
    EXPECT_TRUE(made.ok());
    policy = std::move(made).value();
    o.horizon_s = horizon_s;
    o.mig_mode_delay_s = o.mig_instance_delay_s = 0;
    o.sharing = pack;
    o.demand_sigma = 0;
  }
  Result<RunResult> Run(const std::vector<TraceJob>& jobs) const {
    return Simulate(cluster, Catalog::Default(), jobs, *policy, o);
  }
  const Cluster cluster = OneGpu();
  std::unique_ptr<Policy> policy;
  SimOptions o;
};

// Real demand varies around the declared one: the same packing, admitted on declared demand at the edge of
// its SLO, now spends part of its replica-time above the SLO, and the JSON says which model ran.
TEST(SharingSimTest, RealDemandAboveTheDeclaredCountsAsViolationTime) {
  SharingOptions loose;
  loose.mode = SharingMode::kMps;
  loose.mps_contention = 0;
  loose.sensitive_headroom = loose.standard_headroom = 1;
  OneGpuRun run(loose, 20000);
  run.o.sharing.standard_slo = 2.0;  // measured against a tighter SLO than the packing's 4
  std::vector<TraceJob> jobs = {Light(0, 100, false), Light(1, 100, false)};
  for (TraceJob& j : jobs) j.duration_s = 10000;
  // Declared: 200 of 454, worst slowdown 1 / (1 - 200/454) = 1.79 <= 2; bursts above 227 break the SLO.
  auto exact = run.Run(jobs);
  ASSERT_TRUE(exact.ok());
  EXPECT_DOUBLE_EQ(exact->slo_violation_s["inference"], 0);
  run.o.demand_sigma = 0.3;
  run.o.demand_seed = 7;
  auto real = run.Run(jobs);
  ASSERT_TRUE(real.ok());
  const double frac = real->slo_violation_s["inference"] / real->slo_replica_s["inference"];
  EXPECT_GT(frac, 0.05);
  EXPECT_LT(frac, 0.6);
  EXPECT_EQ(real->slo_violations["inference"], 2) << "both replicas spent some time above it";
  EXPECT_DOUBLE_EQ(real->gpu_utilization, exact->gpu_utilization) << "utilisation counts the declared mean";
  const nlohmann::json j = PolicySummary({*real});
  EXPECT_NEAR(j["slo"]["inference"]["violation_fraction"]["mean"].get<double>(), frac, 1e-6);
  EXPECT_TRUE(j["slo"]["production-inference"]["violation_fraction"].is_null()) << "no production replicas";
  EXPECT_EQ(j["uncertainty"]["demand"]["model"], "lognormal");
}

TEST(SharingSimTest, AnSloTighterThanThePackingCountsViolations) {
  // Pack with a loose production SLO, measure against a tight one: the same placement now violates it.
  SharingOptions loose;
  loose.mode = SharingMode::kMps;
  loose.sensitive_slo = 10;
  OneGpuRun run(loose, 2000);
  run.o.sharing.sensitive_slo = 1.2;
  auto r = run.Run({Light(0, 100, true), Light(1, 100, true), Light(2, 100, true)});
  ASSERT_TRUE(r.ok()) << r.error();
  // 300 of 454 milli: slowdown (1 - 100/454) / (1 - 300/454) = 2.3 > 1.2 for every replica.
  EXPECT_EQ(r->slo_violations["production-inference"], 3);
}

TEST(SharingSimTest, WholeGpuReplicasDoNotSlowDown) {
  RunResult r = RunShared({Light(0, 50, true), Light(1, 50, false)}, "k8s-default", SharingOptions{});
  EXPECT_DOUBLE_EQ(r.p99_slowdown["production-inference"], 1.0);
  EXPECT_EQ(r.slo_violations["production-inference"], 0);
}

TEST(GeneratorFieldsTest, ProductionShareAndOverload) {
  GeneratorConfig g;
  g.inference_share = 1.0;
  g.production_share = 0.3;
  ArrivalConfig a;
  const std::vector<TraceJob> jobs = GenerateJobs(g, a, 256, 7 * 24 * 3600, 7, 1.6);
  int production = 0;
  for (const TraceJob& j : jobs) production += j.latency_sensitive;
  EXPECT_NEAR(static_cast<double>(production) / jobs.size(), 0.3, 0.05);
  // A larger overload factor makes a longer stream (the same seed draws the same first jobs).
  const std::vector<TraceJob> more = GenerateJobs(g, a, 256, 7 * 24 * 3600, 7, 4.0);
  EXPECT_GT(more.size(), jobs.size() * 2);
  EXPECT_EQ(more[0].memory_mib, jobs[0].memory_mib);
  g.production_share = 0;
  for (const TraceJob& j : GenerateJobs(g, a, 16, 3600, 7, 1.6)) EXPECT_FALSE(j.latency_sensitive);
}

}  // namespace
}  // namespace tessera
