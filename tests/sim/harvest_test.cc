// The opportunistic tier (sim/harvest.h): the throttle's cap keeps the owner within its SLO, harvested work
// counts once it is kept, evictions lose the work since the last checkpoint (lost_compute, never
// utilisation), and scenarios turn it on for tessera only.
#include "sim/harvest.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "sched/policy.h"
#include "sim/metrics.h"
#include "sim/scenario.h"
#include "sim/simulator.h"

namespace tessera {
namespace {

TEST(HarvestCapTest, TheCapIsTheLargestThatKeepsTheOwnerWithinTheLimit) {
  SharingOptions o;  // calibrated contention; harvesting runs the unit under MPS whatever the mode
  std::mt19937 rng(7);
  for (int i = 0; i < 500; ++i) {
    const int capacity = std::uniform_int_distribution<int>(100, 1000)(rng);
    const int owner = std::uniform_int_distribution<int>(0, capacity + 50)(rng);
    const double limit = std::uniform_real_distribution<double>(1.05, 8)(rng);
    const int cap = HarvestCapMilli(o, owner, capacity, limit);
    ASSERT_GE(cap, 0);
    if (owner >= capacity) {
      EXPECT_EQ(cap, 0);
      continue;
    }
    ASSERT_LE(owner + cap, capacity);
    if (cap > 0) {
      EXPECT_LE(HarvestedOwnerSlowdown(o, owner, cap, capacity), limit);
    }
    if (owner + cap < capacity) {
      EXPECT_GT(HarvestedOwnerSlowdown(o, owner, cap + 1, capacity), limit);
    }
  }
  // More owner demand leaves less to harvest.
  EXPECT_GT(HarvestCapMilli(o, 100, 1000, 3.6), HarvestCapMilli(o, 400, 1000, 3.6));
  EXPECT_EQ(HarvestedOwnerSlowdown(o, 300, 0, 1000), 1.0);
}

TEST(HarvestCapTest, UsefulComputeIsTheCapLessContention) {
  SharingOptions o;
  EXPECT_DOUBLE_EQ(HarvestUsefulMilli(o, 200, 500, 1000), 500 / (1 + o.mps_contention * 0.7));
  EXPECT_DOUBLE_EQ(HarvestUsefulMilli(o, 900, 500, 1000), 500 / (1 + o.mps_contention));
  EXPECT_EQ(HarvestUsefulMilli(o, 200, 0, 1000), 0);
}

Cluster HarvestGpu() {
  const std::string yaml =
      "name: tiny\ndefaults: {gpus: 1, cpu: 64, memory_gib: 512, interconnect: nvswitch}\n"
      "nodes:\n  - {name: n, count: 1, gpu: h100-80gb, leaf: leaf-0}\n";
  auto c = LoadClusterYaml(yaml, "tiny", Catalog::Default());
  EXPECT_TRUE(c.ok()) << c.error();
  return *c;
}

// A replica on the whole GPU using 0.2 of it for `owner_s`, and a checkpointable 1-GPU training job of 3000 s
// (compute 0.9) that waits for the GPU.
std::vector<TraceJob> OwnerAndWaiter(int64_t owner_s) {
  TraceJob owner;
  owner.id = 0;
  owner.cls = WorkloadClass::kInference;
  owner.gpus_per_task = 1;
  owner.compute_milli = 200;
  owner.memory_mib = 40 * 1024;
  owner.duration_s = owner_s;
  TraceJob train;
  train.id = 1;
  train.cls = WorkloadClass::kTraining;
  train.gpus_per_task = 1;
  train.compute_milli = 900;
  train.memory_mib = 16 * 1024;
  train.duration_s = 3000;
  train.checkpointable = true;
  return {owner, train};
}

RunResult RunHarvest(const std::vector<TraceJob>& jobs, bool harvest, int64_t horizon_s) {
  auto p = MakePolicy("tessera");
  EXPECT_TRUE(p.ok());
  SimOptions o;
  o.horizon_s = horizon_s;
  o.mig_mode_delay_s = o.mig_instance_delay_s = 0;
  o.demand_sigma = 0;  // real demand = declared: the figures below are exact
  o.harvest.enabled = harvest;
  auto r = Simulate(HarvestGpu(), Catalog::Default(), jobs, *p.value(), o);
  EXPECT_TRUE(r.ok()) << r.error();
  return *r;
}

TEST(HarvestSimTest, WaitingTrainingRunsOnTheOwnersIdleComputeWithinItsSlo) {
  const RunResult off = RunHarvest(OwnerAndWaiter(10000), false, 8000);
  const RunResult on = RunHarvest(OwnerAndWaiter(10000), true, 8000);
  // Without harvesting the job waits past the horizon: only the owner's 0.2 is used.
  EXPECT_EQ(off.jobs_completed, 0);
  EXPECT_NEAR(off.gpu_utilization, 0.2, 1e-9);
  EXPECT_EQ(off.lost_compute, 0);
  // With it the job's whole work (3000 s at 0.9) is done on the idle 0.8 before the owner ends, and counted
  // once: utilisation = the owner's 0.2 + 3000 x 0.9 / 8000.
  EXPECT_EQ(on.harvest_completions, 1);
  EXPECT_EQ(on.jobs_completed, 1);
  EXPECT_NEAR(on.harvested_utilization, 3000 * 0.9 / 8000, 1e-6);
  EXPECT_NEAR(on.gpu_utilization, 0.2 + on.harvested_utilization, 1e-9);
  EXPECT_LT(on.makespan_s, 10000);
  // Each periodic checkpoint stopped progress for its write at the cap: that compute is lost, not used.
  SharingOptions sh;
  const int cap = HarvestCapMilli(sh, 200, 1000, sh.standard_slo * HarvestOptions{}.slo_margin);
  EXPECT_GT(on.harvest_checkpoints, 0);
  EXPECT_NEAR(on.lost_compute, on.harvest_checkpoints * cap * 60.0 / (8000 * 1000.0), 1e-9);
  // The owner shared its GPU (slowdown above 1) and never left its SLO.
  EXPECT_GT(on.p99_slowdown.at("inference"), 1.0);
  EXPECT_LE(on.p99_slowdown.at("inference"), sh.standard_slo);
  EXPECT_EQ(on.slo_violation_s.at("inference"), 0);
}

TEST(HarvestSimTest, AnEvictionLosesTheWorkSinceTheLastCheckpoint) {
  // The owner ends at 1500 s, before the first checkpoint (1800 s): the harvester is evicted with nothing
  // kept, and the job runs its whole 3000 s on the GPU afterwards.
  const RunResult r = RunHarvest(OwnerAndWaiter(1500), true, 5000);
  EXPECT_EQ(r.harvest_starts, 1);
  EXPECT_EQ(r.harvest_evictions, 1);
  EXPECT_EQ(r.harvest_checkpoints, 0);
  EXPECT_EQ(r.harvested_utilization, 0);
  EXPECT_EQ(r.jobs_completed, 2);
  EXPECT_DOUBLE_EQ(r.makespan_s, 4500);
  SharingOptions sh;
  const int cap = HarvestCapMilli(sh, 200, 1000, sh.standard_slo * HarvestOptions{}.slo_margin);
  EXPECT_NEAR(r.lost_compute, HarvestUsefulMilli(sh, 200, cap, 1000) * 1500 / (5000 * 1000.0), 1e-9);
  // Lost compute is not utilisation: the owner's 0.2 for 1500 s and the job's 0.9 for 3000 s.
  EXPECT_NEAR(r.gpu_utilization, (200.0 * 1500 + 900.0 * 3000) / (5000 * 1000.0), 1e-9);
  EXPECT_NEAR(PolicySummary({r})["lost_compute"]["mean"].get<double>(), r.lost_compute, 1e-4);
}

// A run to completion (horizon 0) with harvesting ends: harvest ticks come only while harvesters run or a
// job waits with something else still to come. The eviction run above ends at the same instant.
TEST(HarvestSimTest, ARunToCompletionEnds) {
  const RunResult r = RunHarvest(OwnerAndWaiter(1500), true, 0);
  EXPECT_EQ(r.jobs_completed, 2);
  EXPECT_EQ(r.harvest_evictions, 1);
  EXPECT_DOUBLE_EQ(r.makespan_s, 4500);
  // A job that can never start (2 GPUs on a 1-GPU cluster) waits; harvesting does not keep the run going.
  std::vector<TraceJob> jobs = OwnerAndWaiter(1500);
  jobs[1].gpus_per_task = 2;
  const RunResult stuck = RunHarvest(jobs, true, 0);
  EXPECT_EQ(stuck.jobs_completed, 1);
  EXPECT_EQ(stuck.harvest_starts, 0);
}

TEST(HarvestSimTest, TheJsonReportsWhetherARunHarvested) {
  const RunResult r = RunHarvest(OwnerAndWaiter(10000), true, 8000);
  const nlohmann::json j = PolicySummary({r});
  EXPECT_EQ(j["harvest"]["enabled"], true);
  EXPECT_EQ(j["harvest"]["completions"]["mean"], 1.0);
  EXPECT_GT(j["harvested_utilization"]["mean"].get<double>(), 0);
}

}  // namespace
}  // namespace tessera
