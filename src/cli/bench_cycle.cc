// `tessera bench cycle`: one full scheduling cycle (sched/cycle.h) on a synthetic multi-tenant snapshot:
// an HGX H100 cluster filled to about 80% by running jobs of every priority class, `--queues` leaf queues
// under teams (20 queues per team) with guarantees summing to 90% of the cluster, and `--pending` jobs of a
// realistic mix (sub-GPU inference, 1-8 GPU jobs, multi-node gangs). Prints the median cycle time.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <ctime>

#include "base/stats.h"
#include "cli/bench_cycle.h"
#include "cli/synthetic.h"
#include "control/workload_learner.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "sched/cluster_state.h"
#include "sched/cycle.h"
#include "sched/policy.h"

namespace tessera::cli {
namespace {

struct CycleBenchOptions {
  int pending = 50000;
  int queues = 1000;
  int gpus = 8192;
  int cycles = 5;
  double fill = 0.8;
  std::string policy = "tessera";
  uint64_t seed = 11;
  bool json = false;
};

constexpr int kPriorities[] = {1000, 800, 600, 400, 100};  // production-inference .. best-effort

Request DrawJob(std::mt19937_64& rng, JobId id) {
  std::uniform_real_distribution<double> u(0, 1);
  Request r;
  r.id = id;
  const double x = u(rng);
  if (x < 0.35) {
    r.cls = WorkloadClass::kInference;
    r.gpus_per_task = 0;
    const int64_t mems[] = {9000, 19000, 38000};
    r.gpu_memory_mib = mems[std::uniform_int_distribution<int>(0, 2)(rng)];
    const int millis[] = {142, 285, 428};
    r.gpu_milli = millis[std::uniform_int_distribution<int>(0, 2)(rng)];
    r.priority = u(rng) < 0.3 ? kPriorities[0] : kPriorities[1];
  } else {
    r.cls = WorkloadClass::kTraining;
    r.gpus_per_task = x < 0.75 ? 1 : x < 0.85 ? 2 : x < 0.9 ? 4 : 8;
    if (x >= 0.95) r.tasks = 2 << std::uniform_int_distribution<int>(0, 2)(rng);  // 2, 4, 8 nodes
    r.gpu_memory_mib = 60000;
    r.priority = kPriorities[std::uniform_int_distribution<int>(2, 4)(rng)];
  }
  r.cpu_milli = 4000 * std::max(1, r.gpus_per_task);
  r.host_memory_mib = 32768 * std::max(1, r.gpus_per_task);
  return r;
}

// Teams of 20 leaf queues; team guarantees sum to 90% of the cluster, split unevenly among queues.
// Returns the leaves' indexes; sets *teams.
std::vector<int> BenchQueues(const CycleBenchOptions& o, int64_t capacity, std::mt19937_64& rng, CycleInput* in,
                             int* teams) {
  const int per_team = 20;
  *teams = std::max(1, (o.queues + per_team - 1) / per_team);
  std::vector<int> leaves;
  for (int t = 0; t < *teams; ++t) {
    QueueConfig team;
    team.name = fmt::format("team-{:03d}", t);
    team.guaranteed_milli = capacity * 9 / 10 / *teams;
    team.over_quota_weight = 1 + t % 3;
    in->queues.push_back(team);
    const int team_idx = static_cast<int>(in->queues.size()) - 1;
    const int n = std::min(per_team, o.queues - t * per_team);
    for (int k = 0; k < n; ++k) {
      QueueConfig q;
      q.name = fmt::format("team-{:03d}/q{:02d}", t, k);
      q.parent = team.name;
      q.guaranteed_milli = in->queues[team_idx].guaranteed_milli / n / 1000 * 1000;
      q.limit_milli = k % 4 == 0 ? q.guaranteed_milli * 2 : -1;
      q.over_quota_weight = 1 + k % 4;
      in->queues.push_back(q);
      leaves.push_back(static_cast<int>(in->queues.size()) - 1);
    }
  }
  std::uniform_real_distribution<double> u(0, 1);
  in->historical_usage.assign(in->queues.size(), 0.0);
  for (int q : leaves) in->historical_usage[q] = u(rng) * 1e9;
  return leaves;
}

// Running jobs placed to the fill level, then the pending jobs.
void BenchJobs(const CycleBenchOptions& o, const std::vector<int>& leaves, int64_t capacity, const Policy& policy,
               std::mt19937_64& rng, ClusterState* state, CycleInput* in) {
  std::uniform_real_distribution<double> u(0, 1);
  auto leaf = [&] { return leaves[std::uniform_int_distribution<size_t>(0, leaves.size() - 1)(rng)]; };
  JobId id = 1;
  int misses = 0;
  while (state->AllocatedMilli() < capacity * o.fill && misses < 200) {
    Request r = DrawJob(rng, id++);
    if (r.tasks > 1 && u(rng) < 0.5) r.tasks = 1;
    PlaceResult res = PlaceAndApply(*state, policy, r);
    if (!res.ok) {
      ++misses;
      continue;
    }
    RunningJob rj;
    rj.id = r.id;
    rj.queue = leaf();
    rj.priority = r.priority;
    rj.preemptible = r.priority < 1000;
    rj.cls = r.cls;
    rj.cpu_milli = r.cpu_milli;
    rj.host_memory_mib = r.host_memory_mib;
    rj.tasks = std::move(res.tasks);
    rj.start_time_s = in->now_s - std::uniform_int_distribution<int64_t>(0, 48 * 3600)(rng);
    rj.checkpointable = r.cls == WorkloadClass::kTraining && u(rng) < 0.7;
    rj.last_checkpoint_s = rj.checkpointable ? in->now_s - std::uniform_int_distribution<int64_t>(0, 3600)(rng) : -1;
    rj.expected_end_s = in->now_s + std::uniform_int_distribution<int64_t>(60, 24 * 3600)(rng);
    in->running.push_back(std::move(rj));
  }
  for (int i = 0; i < o.pending; ++i) {
    PendingJob p;
    p.request = DrawJob(rng, id++);
    p.queue = leaf();
    p.submit_time_s = in->now_s - std::uniform_int_distribution<int64_t>(0, 6 * 3600)(rng);
    p.eligible_time_s = p.submit_time_s;
    p.held = u(rng) < 0.01;
    p.expected_duration_s = std::uniform_int_distribution<int64_t>(600, 12 * 3600)(rng);
    in->pending.push_back(std::move(p));
  }
}

// The plan's figures as JSON.
nlohmann::json PlanJson(const Plan& plan) {
  int binds = 0, preempts = 0, reserves = 0, checkpoints = 0;
  int64_t bound_milli = 0;
  for (const Action& a : plan.actions) {
    binds += a.kind == ActionKind::kBind;
    preempts += a.kind == ActionKind::kPreempt;
    reserves += a.kind == ActionKind::kReserve;
    checkpoints += a.kind == ActionKind::kCheckpoint;
    if (a.kind == ActionKind::kBind) bound_milli += a.units_milli;
  }
  std::map<std::string, int> codes;
  int estimated = 0;
  for (const PendingStatus& s : plan.pending) {
    ++codes[std::string(s.code)];
    estimated += s.estimated_start_s >= 0;
  }
  return {{"binds", binds},
          {"bound_gpus", bound_milli / 1000.0},
          {"preemptions", preempts},
          {"checkpoints", checkpoints},
          {"reservations", reserves},
          {"still_pending", static_cast<int>(plan.pending.size())},
          {"estimated_starts", estimated},
          {"pending_codes", codes}};
}

int RunBenchCycle(const CycleBenchOptions& o) {
  const Catalog& catalog = Catalog::Default();
  const int nodes = std::max(1, o.gpus / 8);
  Cluster cluster = SyntheticHgxCluster(catalog, nodes, 8, "h100-80gb", fmt::format("bench-cycle-{}x8", nodes));
  auto state = ClusterState::Build(cluster, catalog);
  if (!state.ok()) return fmt::print(stderr, "error: {}\n", state.error()), 2;
  auto policy = MakePolicy(o.policy);
  if (!policy.ok()) return fmt::print(stderr, "error: {}\n", policy.error()), 2;
  std::mt19937_64 rng(o.seed);
  const int64_t capacity = int64_t{kMilliPerGpu} * nodes * 8;
  CycleInput in;
  in.now_s = 30 * 24 * 3600;
  int teams = 0;
  const std::vector<int> leaves = BenchQueues(o, capacity, rng, &in, &teams);
  BenchJobs(o, leaves, capacity, **policy, rng, &*state, &in);
  const double fill = static_cast<double>(state->AllocatedMilli()) / capacity;
  // The typical tasks the control loop would have learned from these submissions (in submission order).
  WorkloadLearner learned;
  for (const PendingJob& p : in.pending) learned.Observe(p.request);
  state->set_learned_workload(learned.Current());
  in.snapshot = &*state;
  // Timed: wall clock and this thread's CPU time (the cycle is single-threaded; on a shared machine the
  // CPU time is the cost on one core, the wall time adds waiting for a core).
  using Clock = std::chrono::steady_clock;
  auto cpu_ms = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
  };
  std::vector<double> ms, cpu;
  Plan plan;
  for (int c = 0; c < std::max(1, o.cycles); ++c) {
    auto t0 = Clock::now();
    const double c0 = cpu_ms();
    plan = RunCycle(in, **policy);
    cpu.push_back(cpu_ms() - c0);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  const double wall_median = Median(ms), median = Median(cpu);
  nlohmann::json out = {{"policy", o.policy},       {"gpus", nodes * 8},
                        {"queues", static_cast<int>(leaves.size())}, {"teams", teams},
                        {"pending", o.pending},     {"running", static_cast<int>(in.running.size())},
                        {"fill", fill},             {"cycles", static_cast<int>(ms.size())},
                        {"cycle_ms", median},       {"cycle_cpu_ms_all", cpu},
                        {"cycle_wall_ms", wall_median}, {"cycle_wall_ms_all", ms}};
  out.update(PlanJson(plan));
  if (o.json) fmt::print("{}\n", out.dump(2));
  else
    fmt::print("cycle: {:.1f} ms CPU ({:.1f} ms wall) median over {} cycles ({} pending in {} queues, {} GPUs at {:.0f}% fill): {} binds, "
               "{} preemptions, {} reservations\n",
               median, wall_median, ms.size(), o.pending, leaves.size(), nodes * 8, fill * 100,
               out["binds"].get<int>(), out["preemptions"].get<int>(), out["reservations"].get<int>());
  return 0;
}

}  // namespace

void RegisterBenchCycle(CLI::App& bench, int* exit_code) {
  auto o = std::make_shared<CycleBenchOptions>();
  CLI::App* cmd = bench.add_subcommand("cycle", "One full scheduling cycle on a synthetic multi-tenant snapshot");
  cmd->add_option("--pending", o->pending, "pending jobs")->check(CLI::Range(0, 10000000));
  cmd->add_option("--queues", o->queues, "leaf queues")->check(CLI::Range(1, 1000000));
  cmd->add_option("--gpus", o->gpus, "GPUs (8 per node)")->check(CLI::Range(8, 10000000));
  cmd->add_option("--cycles", o->cycles, "cycles timed (the median is reported)")->check(CLI::Range(1, 1000));
  cmd->add_option("--fill", o->fill, "fraction of the cluster held by running jobs")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--policy", o->policy, "placement policy");
  cmd->add_option("--seed", o->seed, "random seed");
  cmd->add_flag("--json", o->json, "JSON output");
  cmd->callback([o, exit_code] { *exit_code = RunBenchCycle(*o); });
}

}  // namespace tessera::cli
