// Simulator: metric definitions on hand-computed cases, OOM accounting, event ordering, determinism.
#include "sim/simulator.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sched/policy.h"
#include "sim/event_queue.h"
#include "sim/generator.h"

namespace tessera {
namespace {

Cluster OneGpuCluster(int gpus = 1) {
  const std::string yaml = "name: tiny\ndefaults: {gpus: " + std::to_string(gpus) +
                           ", cpu: 64, memory_gib: 512, interconnect: nvswitch}\n"
                           "nodes:\n  - {name: n, count: 1, gpu: h100-80gb, leaf: leaf-0}\n";
  auto c = LoadClusterYaml(yaml, "tiny", Catalog::Default());
  EXPECT_TRUE(c.ok()) << c.error();
  return *c;
}

TraceJob Replica(int compute_milli, int64_t duration_s, int64_t memory_mib = 5000) {
  TraceJob j;
  j.cls = WorkloadClass::kInference;
  j.tasks = 1;
  j.gpus_per_task = 0;
  j.compute_milli = compute_milli;
  j.memory_mib = memory_mib;
  j.duration_s = duration_s;
  return j;
}

// A training job of `gpus` whole GPUs (one task) arriving at `submit_s`.
TraceJob Training(int64_t id, int64_t submit_s, int gpus, int64_t duration_s, int64_t cancel_s = -1) {
  TraceJob j;
  j.id = id;
  j.cls = WorkloadClass::kTraining;
  j.submit_s = submit_s;
  j.gpus_per_task = gpus;
  j.duration_s = duration_s;
  j.cancel_s = cancel_s;
  j.memory_mib = 10000;
  return j;
}

RunResult RunSim(const Cluster& c, const std::vector<TraceJob>& jobs, const std::string& policy, SimOptions o) {
  auto p = MakePolicy(policy);
  EXPECT_TRUE(p.ok());
  auto r = Simulate(c, Catalog::Default(), jobs, **p, o);
  EXPECT_TRUE(r.ok()) << r.error();
  return *r;
}

TEST(SimulatorTest, LightReplicaOnWholeGpu) {
  // One replica using 10% of a GPU, on a whole GPU for 100 s: allocation 1.0, utilisation 0.1.
  SimOptions o;
  o.horizon_s = 100;
  RunResult r = RunSim(OneGpuCluster(), {Replica(100, 100)}, "k8s-default", o);
  EXPECT_NEAR(r.gpu_allocation, 1.0, 1e-9);
  EXPECT_NEAR(r.gpu_utilization, 0.1, 1e-9);
  EXPECT_NEAR(r.by_class["inference"].utilization, 0.1, 1e-9);
  EXPECT_EQ(r.jobs_completed, 1);
  EXPECT_DOUBLE_EQ(r.makespan_s, 100);
  EXPECT_EQ(r.oom_events, 0);
  EXPECT_EQ(r.mig_repartitions, 0);
}

TEST(SimulatorTest, LightReplicaInMigSliceCountsItsSms) {
  // tessera puts the same replica in a 1g.10gb instance (16 of 132 SMs): allocation 16/132, utilisation
  // still 0.1 (the replica's own use), after one repartition (MIG mode on + instance).
  SimOptions o;
  o.horizon_s = 200;
  o.mig_mode_delay_s = 0;
  o.mig_instance_delay_s = 0;
  RunResult r = RunSim(OneGpuCluster(), {Replica(100, 200)}, "tessera", o);
  EXPECT_NEAR(r.gpu_allocation, 121.0 / 1000, 1e-9);  // ProfileComputeMilli: 16*1000/132 = 121
  EXPECT_NEAR(r.gpu_utilization, 0.1, 1e-9);
  EXPECT_EQ(r.mig_repartitions, 1);
}

TEST(SimulatorTest, RepartitionDelayHoldsCapacityBeforeStart) {
  // 60 s mode switch: the instance is held (allocated) from t=0 but the replica runs only from t=60.
  SimOptions o;
  o.horizon_s = 160;
  o.mig_mode_delay_s = 60;
  RunResult r = RunSim(OneGpuCluster(), {Replica(100, 100)}, "tessera", o);
  EXPECT_NEAR(r.gpu_allocation, 0.121, 1e-9);
  EXPECT_NEAR(r.gpu_utilization, 0.1 * 100 / 160, 1e-9);
  EXPECT_DOUBLE_EQ(r.makespan_s, 160);
}

TEST(SimulatorTest, WarmupWindowAndQueueing) {
  // Two 100 s whole-GPU jobs on one GPU: the second waits 100 s. Window [50, 200].
  TraceJob a = Replica(500, 100);
  a.gpus_per_task = 1;
  TraceJob b = a;
  b.id = 1;
  SimOptions o;
  o.horizon_s = 200;
  o.warmup_s = 50;
  RunResult r = RunSim(OneGpuCluster(), {a, b}, "tessera", o);
  EXPECT_NEAR(r.gpu_allocation, 1.0, 1e-9);
  EXPECT_NEAR(r.gpu_utilization, 0.5, 1e-9);
  EXPECT_EQ(r.jobs_completed, 2);
  // Both arrived at t=0, before the window: no delays recorded in the window.
  EXPECT_TRUE(r.by_class["inference"].queue_delays_s.empty());
  o.warmup_s = 0;
  r = RunSim(OneGpuCluster(), {a, b}, "tessera", o);
  ASSERT_EQ(r.by_class["inference"].queue_delays_s.size(), 2u);
  EXPECT_DOUBLE_EQ(r.by_class["inference"].queue_delays_s[1], 100);
}

TEST(SimulatorTest, MemoryUnawarePolicyOoms) {
  // A task needing 100 GiB: k8s-default grants a whole 80 GB GPU and the task OOMs; tessera never binds it.
  TraceJob j = Replica(300, 100, 100 * 1024);
  j.gpus_per_task = 1;
  SimOptions o;
  o.horizon_s = 100;
  RunResult k = RunSim(OneGpuCluster(), {j}, "k8s-default", o);
  EXPECT_EQ(k.oom_events, 1);
  EXPECT_EQ(k.jobs_failed, 1);
  EXPECT_NEAR(k.gpu_utilization, 0, 1e-12);
  RunResult t = RunSim(OneGpuCluster(), {j}, "tessera", o);
  EXPECT_EQ(t.oom_events, 0);
  EXPECT_EQ(t.unplaced_jobs, 1);
  EXPECT_EQ(t.unplaced_gpu_requests, 1);
}

TEST(SimulatorTest, GangEfficiencyScalesUtilisationAndThroughput) {
  // An 8-GPU single-node gang: efficiency = compute / (compute + allreduce) with NVSwitch busbw 367.
  TraceJob g;
  g.cls = WorkloadClass::kTraining;
  g.tasks = 1;
  g.gpus_per_task = 8;
  g.compute_milli = 900;
  g.duration_s = 1000;
  g.grad_bytes = 14e9;
  g.step_compute_s = 1.0;
  SimOptions o;
  o.horizon_s = 500;
  RunResult r = RunSim(OneGpuCluster(8), {g}, "tessera", o);
  const double eff = 1.0 / (1.0 + 14e9 * 2 * 7 / 8 / 367e9);
  EXPECT_NEAR(r.effective_training_throughput, 8 * eff, 1e-9);
  EXPECT_NEAR(r.gpu_utilization, 0.9 * eff, 1e-9);
  EXPECT_NEAR(r.gpu_allocation, 1.0, 1e-9);
}

// Failure injection: with a short GPU MTBF, running jobs fail, lose their work and run again until they
// finish; the run is deterministic for a seed, differs across seeds, and without an MTBF nothing fails.
TEST(SimulatorTest, InjectedFailuresRequeueAndEveryJobFinishes) {
  std::vector<TraceJob> jobs;
  for (int i = 0; i < 6; ++i) {
    TraceJob j;
    j.id = i;
    j.cls = WorkloadClass::kTraining;
    j.tasks = 1;
    j.gpus_per_task = 2;
    j.compute_milli = 900;
    j.memory_mib = 20000;
    j.duration_s = 4 * 3600;
    jobs.push_back(j);
  }
  SimOptions o;  // horizon 0: run until every job has finished
  RunResult clean = RunSim(OneGpuCluster(8), jobs, "tessera", o);
  EXPECT_EQ(clean.job_failures, 0);
  EXPECT_EQ(clean.jobs_completed, 6);
  o.gpu_mtbf_h = 8;  // a 2-GPU job fails every 4 h on average: most first attempts fail
  o.failure_seed = 7;
  RunResult a = RunSim(OneGpuCluster(8), jobs, "tessera", o);
  RunResult b = RunSim(OneGpuCluster(8), jobs, "tessera", o);
  EXPECT_GT(a.job_failures, 0);
  EXPECT_GT(a.failure_lost_gpu_s, 0);
  EXPECT_EQ(a.jobs_completed, 6) << "failed jobs run again until they finish";
  EXPECT_TRUE(a.all_completed);
  EXPECT_GT(a.makespan_s, clean.makespan_s) << "lost work costs time";
  EXPECT_EQ(a.job_failures, b.job_failures);
  EXPECT_EQ(a.makespan_s, b.makespan_s);
  o.failure_seed = 8;
  RunResult c = RunSim(OneGpuCluster(8), jobs, "tessera", o);
  EXPECT_TRUE(c.job_failures != a.job_failures || c.makespan_s != a.makespan_s);
}

TEST(EventQueueTest, OrderAtEqualTimes) {
  EventQueue q;
  q.Push({10, EventType::kArrival, JobSlot(1), 0, 0});
  q.Push({10, EventType::kStart, JobSlot(2), 0, 0});
  q.Push({5, EventType::kArrival, JobSlot(3), 0, 0});
  q.Push({10, EventType::kCompletion, JobSlot(4), 0, 0});
  q.Push({10, EventType::kCompletion, JobSlot(5), 0, 0});
  std::vector<int> got;
  while (!q.empty()) got.push_back(q.Pop().job.value());
  EXPECT_EQ(got, (std::vector<int>{3, 4, 5, 2, 1}));
}

TEST(SimulatorTest, DeterministicForASeed) {
  GeneratorConfig g;
  ArrivalConfig a;
  a.depth = 16;
  Cluster c = OneGpuCluster(8);
  const auto jobs = GenerateJobs(g, a, 8, 24 * 3600, 7);
  SimOptions o;
  o.horizon_s = 24 * 3600;
  o.arrivals = "backlog";
  o.backlog_depth = 16;
  for (const char* p : {"tessera", "k8s-default"}) {
    RunResult x = RunSim(c, jobs, p, o), y = RunSim(c, GenerateJobs(g, a, 8, 24 * 3600, 7), p, o);
    EXPECT_EQ(x.gpu_utilization, y.gpu_utilization);
    EXPECT_EQ(x.gpu_allocation, y.gpu_allocation);
    EXPECT_EQ(x.jobs_completed, y.jobs_completed);
    EXPECT_EQ(x.mig_repartitions, y.mig_repartitions);
    EXPECT_GT(x.jobs_completed, 0);
  }
}

// A backlog that runs out says when (its utilisation then measures the stream). Light replicas drained a
// stream that counted each as a whole GPU; counted by least footprint, the same overload keeps tessera busy
// to the horizon. (A denser packer can still drain a short run's stream: hami here at 69 of 72 hours.)
TEST(SimulatorTest, ABacklogThatRunsOutSaysWhen) {
  GeneratorConfig g;
  g.inference_share = 0.7;
  g.light_fraction = 1.0;
  ArrivalConfig a;
  const std::string yaml =
      "name: c\ndefaults: {gpus: 8, cpu: 128, memory_gib: 1024, interconnect: nvswitch}\n"
      "nodes:\n  - {name: n, count: 8, gpu: h100-80gb, leaf: leaf-0}\n";
  auto c = LoadClusterYaml(yaml, "c", Catalog::Default());
  ASSERT_TRUE(c.ok()) << c.error();
  SimOptions o;
  o.horizon_s = 72 * 3600;
  o.arrivals = "backlog";
  o.backlog_depth = a.depth;
  // Footprint 1 per sub-GPU task (a 1 MiB "largest GPU"): the count before least footprints.
  const RunResult whole_count = RunSim(*c, GenerateJobs(g, a, 64, o.horizon_s, 3, 1.6, 1), "tessera", o);
  EXPECT_GE(whole_count.backlog_dry_s, 0);
  EXPECT_LT(whole_count.backlog_dry_s, o.horizon_s);
  const RunResult full = RunSim(*c, GenerateJobs(g, a, 64, o.horizon_s, 3), "tessera", o);
  EXPECT_EQ(full.backlog_dry_s, -1);
  EXPECT_GT(full.jobs_completed, whole_count.jobs_completed);
  EXPECT_GT(full.gpu_utilization, whole_count.gpu_utilization);
}

// cancel_s (seconds after arrival): a running job is stopped then and its GPU freed at once, a waiting one
// leaves the queue, and a cancellation of a job that has ended is dropped (the run does not go on for it).
TEST(SimulatorTest, TraceCancellationsStopRunningAndWaitingJobs) {
  auto whole = [](int64_t id, int64_t submit_s, int64_t duration_s, int64_t cancel_s) {
    return Training(id, submit_s, 1, duration_s, cancel_s);
  };
  // One GPU: job 0 runs from 0 and is cancelled at 300; job 1 waits from 100 and is cancelled at 200;
  // job 2 waits from 150, starts at 300 on the freed GPU and ends at 700 (its cancel at 10150 comes late).
  const std::vector<TraceJob> jobs = {whole(0, 0, 1000, 300), whole(1, 100, 200, 100), whole(2, 150, 400, 10000)};
  SimOptions o;
  o.horizon_s = 0;
  o.record_decisions = true;
  RunResult r = RunSim(OneGpuCluster(), jobs, "k8s-default", o);
  std::vector<std::string> got;
  for (const std::string& line : r.decisions) {
    const nlohmann::json d = nlohmann::json::parse(line);
    got.push_back(d["event"].get<std::string>() + " " + d["job"].get<std::string>() + " @" +
                  std::to_string(d["t"].get<int64_t>()));
  }
  EXPECT_EQ(got, (std::vector<std::string>{"start 0 @0", "cancel 1 @200", "cancel 0 @300", "start 2 @300",
                                           "end 2 @700"}));
  EXPECT_EQ(r.jobs_cancelled, 2);
  EXPECT_EQ(r.jobs_completed, 1);
  EXPECT_DOUBLE_EQ(r.makespan_s, 700);
  // Busy 0-300 (job 0) and 300-700 (job 2): 700 GPU-seconds. The run lasts until 1000, when job 0's end as
  // first planned passes in the simulated cluster (a stopped run's events go stale, and are ignored), not
  // until job 2's cancel at 10150.
  EXPECT_NEAR(r.gpu_allocation * 1000, 700, 1e-6);
  EXPECT_NEAR(r.gpu_utilization * 1000, 700, 1e-6);
  EXPECT_TRUE(r.all_completed);
}

// Backfill into a reservation, measured: on 8 GPUs a 4-GPU job A runs; a gang G of 8 waits and reserves
// the other 4 from A's expected end; C (4 GPUs) is let in, expected to end before that. With exact limits
// C leaves in time and G starts when its reservation said. With limits half the run time (users who
// under-estimate), the reservation expects G at t=500, C holds its GPUs past then (overrun 320 s x 4 GPUs)
// and G starts at 1000, 500 s late.
TEST(SimulatorTest, BackfillOverrunsAndLateGangsAreMeasured) {
  const std::vector<TraceJob> jobs = {Training(0, 0, 4, 1000), Training(1, 10, 8, 300),
                                      Training(2, 20, 4, 800)};
  for (double factor : {1.0, 0.5}) {
    SimOptions o;
    o.horizon_s = 5000;
    o.gang_backfill = true;
    o.time_limit_factor_min = o.time_limit_factor_max = factor;
    const RunResult r = RunSim(OneGpuCluster(8), jobs, "k8s-default", o);
    EXPECT_EQ(r.backfills, 1) << factor;
    EXPECT_EQ(r.reserved_gangs_started, 1) << factor;
    ASSERT_EQ(r.reserved_gang_lateness_s.size(), 1u) << factor;
    if (factor == 1.0) {
      EXPECT_EQ(r.backfill_overruns, 0);
      EXPECT_EQ(r.reserved_gangs_late, 0);
      EXPECT_DOUBLE_EQ(r.reserved_gang_lateness_s[0], 0);
    } else {
      EXPECT_EQ(r.backfill_overruns, 1);
      EXPECT_DOUBLE_EQ(r.backfill_overrun_gpu_s, 320.0 * 4);
      EXPECT_EQ(r.reserved_gangs_late, 1);
      EXPECT_DOUBLE_EQ(r.reserved_gang_lateness_s[0], 500);
    }
  }
}

}  // namespace
}  // namespace tessera
