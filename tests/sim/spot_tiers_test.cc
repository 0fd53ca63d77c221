// Capacity tiers in the simulator (issue 5): tier routing (no inference on spot, checkpointable training
// prefers spot), the autoscaler's acquisition plan, spot reclaims with and without checkpoint on notice
// (explicit reclaim trace), ledger reconciliation, bad `tiers:` input, the cost baselines, and the
// spot-training example's targets (cheaper than both simulated baselines, a saving decomposition that adds
// up, reclaims > 0, every training job completed).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "sched/cluster_state.h"
#include "sim/autoscale.h"
#include "sim/cost_baselines.h"
#include "sim/metrics.h"
#include "sim/scenario.h"
#include "sim/spot.h"
#include "sim/tier_routing.h"
#include "testing/paths.h"

namespace tessera {
namespace {

std::string SpotTempDir() {
  auto d = std::filesystem::temp_directory_path() / ("tessera-spot-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  // One reserved node, one on-demand node, one AWS spot node (8 x H100 each).
  std::ofstream(d / "c.yaml")
      << "name: tiers3\ndefaults: {gpu: h100-80gb, gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch}\n"
         "nodes:\n"
         "  - {name: cb, tier: reserved, pool: aws-p5-capacity-block, leaf: l0}\n"
         "  - {name: od, tier: on-demand, pool: aws-p5-on-demand, leaf: l1}\n"
         "  - {name: sp, tier: spot, pool: aws-p5-spot, leaf: l2}\n";
  return d.string();
}

// A trace: `inference` one-GPU replicas for 4 h from t=0, then one checkpointable 8-GPU training job of
// `train_h` ideal hours at t=0.
std::string WriteSpotTrace(const std::string& dir, int inference, double train_h) {
  std::ofstream f(std::filesystem::path(dir) / "t.jsonl");
  f << "{\"format\": \"tessera-trace\", \"version\": 1}\n";
  int id = 0;
  for (int i = 0; i < inference; ++i)
    f << "{\"id\": " << id++ << ", \"submit_s\": 0, \"class\": \"inference\", \"team\": \"serving\", \"priority\": 1000,"
      << " \"tasks\": 1, \"gpus_per_task\": 1, \"compute_milli\": 500, \"memory_mib\": 40000, \"duration_s\": 14400}\n";
  f << "{\"id\": " << id++ << ", \"submit_s\": 0, \"class\": \"training\", \"team\": \"research\", \"tasks\": 1,"
    << " \"gpus_per_task\": 8, \"compute_milli\": 900, \"memory_mib\": 60000, \"duration_s\": "
    << static_cast<int64_t>(train_h * 3600) << ", \"checkpointable\": true}\n";
  return "t.jsonl";
}

Result<Scenario> ParseTiers(const std::string& tiers, int inference = 4, double train_h = 3) {
  const std::string dir = SpotTempDir();
  const std::string trace = WriteSpotTrace(dir, inference, train_h);
  const std::string text = "name: t\ncluster: c.yaml\ntrace: " + trace +
                           "\nseeds: 1\nthreads: 1\npolicies: [tessera]\nhorizon_h: 0\ntiers:\n" + tiers;
  auto s = ParseScenario(text, "s.yaml", dir, Catalog::Default());
  if (s.ok()) s->gang_backfill = false;  // the greedy cycle, as spot-training.yaml (the figures below assume it)
  return s;
}

double Extra(const RunResult& r, const std::string& k) {
  auto it = r.extra.find(k);
  EXPECT_NE(it, r.extra.end()) << k;
  return it == r.extra.end() ? -1 : it->second;
}

RunResult RunOne(const Scenario& s) {
  auto out = RunScenario(s, s.policies, Catalog::Default());
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error());
  if (!out.ok()) return {};
  return out->variants[0].runs[0][0];
}

TEST(SpotTiersTest, RoutingKeepsInferenceOffSpotAndTrainingPrefersSpot) {
  const std::string dir = SpotTempDir();
  std::ifstream in(std::filesystem::path(dir) / "c.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  auto c = LoadClusterYaml(ss.str(), "c.yaml", Catalog::Default());
  ASSERT_TRUE(c.ok()) << c.error();
  auto state = ClusterState::Build(*c, Catalog::Default());
  ASSERT_TRUE(state.ok());
  auto inner = MakePolicy("tessera");
  ASSERT_TRUE(inner.ok());
  TierRoutingPolicy p(**inner, {RouteClass::kLatencySensitive, RouteClass::kCheckpointable, RouteClass::kOther}, false);
  EXPECT_EQ(p.name(), "tessera");
  Request r;
  r.gpus_per_task = 8;
  r.gpu_memory_mib = 1000;
  r.cls = WorkloadClass::kTraining;
  auto tier_of = [&](const PlaceResult& pr) { return c->nodes[pr.tasks.at(0).node].tier; };
  r.id = 1;  // checkpointable: spot first
  PlaceResult pr = p.Place(*state, r);
  ASSERT_TRUE(pr.ok) << pr.reason;
  EXPECT_EQ(tier_of(pr), Tier::kSpot);
  r.id = 2;  // not checkpointable: reserved first, never spot
  pr = p.Place(*state, r);
  ASSERT_TRUE(pr.ok);
  EXPECT_EQ(tier_of(pr), Tier::kReserved);
  r.id = 0;  // latency-sensitive
  r.cls = WorkloadClass::kInference;
  pr = p.Place(*state, r);
  ASSERT_TRUE(pr.ok);
  EXPECT_EQ(tier_of(pr), Tier::kReserved);
  // Fill the reserved node: inference no longer fits anywhere (spot and on-demand are free).
  state->Apply(pr.tasks, 0, 0, true);
  r.gpus_per_task = 1;
  EXPECT_FALSE(p.Place(*state, r).ok);
  r.id = 2;  // non-checkpointable training goes to on-demand, not spot
  r.cls = WorkloadClass::kTraining;
  pr = p.Place(*state, r);
  ASSERT_TRUE(pr.ok);
  EXPECT_EQ(tier_of(pr), Tier::kOnDemand);
  // Unknown ids are treated as latency-sensitive.
  r.id = 99;
  EXPECT_FALSE(p.Place(*state, r).ok);
}

TEST(SpotTiersTest, AutoscalerPlansWholeNodesAndCountsCapacityOnItsWay) {
  Cluster c;
  for (int i = 0; i < 3; ++i) {
    Node n;
    n.name = "s" + std::to_string(i);
    n.kind = Catalog::Default().Find("h100-80gb");
    n.gpu_count = 8;
    n.cpu_milli = 192000;
    n.memory_mib = 1 << 21;
    n.tier = Tier::kSpot;
    n.pool = "aws-p5-spot";
    c.nodes.push_back(n);
  }
  c.leaf_names = {"l"};
  c.spine_names = {"s"};
  auto state = ClusterState::Build(c, Catalog::Default());
  ASSERT_TRUE(state.ok());
  Autoscaler a({{"aws-p5-spot", Tier::kSpot, {0, 1, 2}, 300, 600}}, 3);
  ASSERT_TRUE(a.Begin(*state).ok());
  EXPECT_EQ(state->node(0).free_whole, 0);  // absent nodes are blocked
  std::vector<ElasticDemand> d = {{4, 1, 0, {0}}, {4, 1, 0, {0}}, {8, 1, 0, {0}}};
  auto plan = a.PlanAcquisitions(d, *state);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].second, 2);  // two 4-GPU jobs share one node, the 8-GPU job needs another
  EXPECT_EQ(a.Acquire(0, 100), 0);
  EXPECT_EQ(a.ready_at(0), 400);
  plan = a.PlanAcquisitions(d, *state);  // node 0 is on its way
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].second, 1);
  a.MakeReady(0, *state);
  EXPECT_EQ(state->node(0).free_whole, 8);
  a.MakeAbsent(0, *state);
  EXPECT_EQ(state->node(0).free_whole, 0);
  EXPECT_TRUE(state->CheckInvariants().ok());
  // More demand than the pool holds: only what exists is planned.
  std::vector<ElasticDemand> big(5, ElasticDemand{8, 1, 0, {0}});
  plan = a.PlanAcquisitions(big, *state);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].second, 3);
}

TEST(SpotTiersTest, ReclaimWithNoticeCheckpointsAndLosesOnlyTheRestart) {
  // One reclaim of the spot node at 1 h. Notice 120 s >= checkpoint 60 s: checkpoint on notice.
  auto s = ParseTiers(
      "  checkpoint: {cost_s: 60, restart_s: 300}\n"
      "  pools:\n"
      "    aws-p5-spot: {provisioning_delay_s: 0, reclaim_notice_s: 120, reclaim_rate_per_hour: 0}\n"
      "    aws-p5-on-demand: {provisioning_delay_s: 300}\n"
      "  reclaims: [{at_h: 1, pool: aws-p5-spot}]\n");
  ASSERT_TRUE(s.ok()) << s.error();
  RunResult r = RunOne(*s);
  EXPECT_EQ(Extra(r, "spot_reclaims"), 1);
  EXPECT_EQ(Extra(r, "checkpoints_on_notice"), 1);
  EXPECT_EQ(Extra(r, "all_training_completed"), 1);
  EXPECT_EQ(Extra(r, "inference_replicas_on_spot"), 0);
  EXPECT_EQ(Extra(r, "ledger_reconciled"), 1);
  // Lost: the 120 s of notice after the checkpoint (8 GPUs) plus a 300 s restart (8 GPUs).
  EXPECT_NEAR(Extra(r, "reclaim_discarded_gpu_hours"), 8 * 120 / 3600.0, 1e-9);
  EXPECT_NEAR(Extra(r, "lost_gpu_hours"), 8 * (120 + 300) / 3600.0, 0.01);
  EXPECT_EQ(r.jobs_completed, 5);
  // Ledger allocation equals the simulator's integral of held GPUs (no warm-up, no horizon).
  const double sim_gpu_h = r.gpu_allocation * r.gpus * r.makespan_s / 3600.0;
  EXPECT_NEAR(Extra(r, "gpu_hours_reserved") + Extra(r, "gpu_hours_spot") +
                  (r.extra.count("gpu_hours_on_demand") ? r.extra.at("gpu_hours_on_demand") : 0.0),
              sim_gpu_h, 1e-6 * sim_gpu_h);
}

TEST(SpotTiersTest, ShortNoticeLosesWorkSinceTheLastCheckpoint) {
  // Notice 30 s < checkpoint 60 s: no checkpoint on notice. Periodic checkpoints every 1800 s of work plus
  // the 60 s write: the only one before the reclaim (1 h) completes at 1860 s.
  auto s = ParseTiers(
      "  checkpoint: {cost_s: 60, restart_s: 300, interval_s: 1800}\n"
      "  pools:\n"
      "    aws-p5-spot: {provisioning_delay_s: 0, reclaim_notice_s: 30, reclaim_rate_per_hour: 0}\n"
      "  reclaims: [{at_h: 1, pool: aws-p5-spot}]\n");
  ASSERT_TRUE(s.ok()) << s.error();
  RunResult r = RunOne(*s);
  EXPECT_EQ(Extra(r, "spot_reclaims"), 1);
  EXPECT_EQ(Extra(r, "checkpoints_on_notice"), 0);
  EXPECT_EQ(Extra(r, "all_training_completed"), 1);
  EXPECT_EQ(Extra(r, "ledger_reconciled"), 1);
  // The training job got a spot node at t=0 (no provisioning delay) and reclaimed at 3600 s; the last periodic
  // checkpoint was at 1860 s, so 3600 - 1860 = 1740 s on 8 GPUs are discarded.
  EXPECT_NEAR(Extra(r, "reclaim_discarded_gpu_hours"), 8 * 1740 / 3600.0, 1e-9);
}

TEST(SpotTiersTest, NoPeriodicCheckpointWhereTheNoticeCoversTheWriteUnlessAsked) {
  // Reclaimed often (0.5/h), notice 120 s >= write 60 s: the job checkpoints on notice, so no periodic ones.
  const std::string pools =
      "  pools:\n"
      "    aws-p5-spot: {provisioning_delay_s: 0, reclaim_notice_s: 120, reclaim_rate_per_hour: 0.5}\n";
  auto s = ParseTiers("  checkpoint: {cost_s: 60, restart_s: 300}\n" + pools);
  ASSERT_TRUE(s.ok()) << s.error();
  RunResult r = RunOne(*s);
  EXPECT_EQ(Extra(r, "checkpoints_periodic"), 0);
  EXPECT_EQ(Extra(r, "all_training_completed"), 1);
  // The option brings them back (Young/Daly from the node's rate: every ~929 s of work).
  s = ParseTiers("  checkpoint: {cost_s: 60, restart_s: 300, periodic_when_notice_covers: true}\n" + pools);
  ASSERT_TRUE(s.ok()) << s.error();
  r = RunOne(*s);
  EXPECT_GT(Extra(r, "checkpoints_periodic"), 0);
  EXPECT_EQ(Extra(r, "all_training_completed"), 1);
}

TEST(SpotTiersTest, BaselinesRunTheSameJobsOnOnDemandAndWithoutSpot) {
  auto s = ParseTiers(
      "  checkpoint: {cost_s: 60, restart_s: 300}\n"
      "  pools:\n"
      "    aws-p5-spot: {provisioning_delay_s: 0, reclaim_notice_s: 120, reclaim_rate_per_hour: 0}\n"
      "    aws-p5-on-demand: {provisioning_delay_s: 300}\n");
  ASSERT_TRUE(s.ok()) << s.error();
  // The on-demand-only cluster with no node always on: every node in the elastic on-demand pool,
  // inference allowed there.
  auto od = BaselineScenario(*s, Catalog::Default(), CostBaseline::kOnDemandOnly);
  ASSERT_TRUE(od.ok()) << od.error();
  for (const Node& n : od->cluster.nodes) {
    EXPECT_EQ(n.tier, Tier::kOnDemand);
    EXPECT_EQ(n.pool, "aws-p5-on-demand");
  }
  ASSERT_EQ(od->tiers->pools.size(), 1u);
  EXPECT_EQ(od->tiers->pools[0].nodes.size(), 3u);
  EXPECT_EQ(od->tiers->pools[0].provisioning_delay_s, 300);  // the scenario's setting for the pool
  EXPECT_TRUE(od->tiers->latency_sensitive_on_demand);
  EXPECT_FALSE(od->tiers->baselines);
  auto rod = BaselineScenario(*s, Catalog::Default(), CostBaseline::kReservedOnDemand);
  ASSERT_TRUE(rod.ok()) << rod.error();
  EXPECT_EQ(rod->cluster.nodes[0].tier, Tier::kReserved);
  EXPECT_EQ(rod->cluster.nodes[2].tier, Tier::kOnDemand);
  EXPECT_FALSE(rod->tiers->latency_sensitive_on_demand);

  RunResult r = RunOne(*s);
  const double total = Extra(r, "total_cost");
  const double od_total = Extra(r, "baselines.on_demand_only.total_cost");
  // Inference (4 x 4 h at 1/2 GPU) and training (8 GPUs x 3 h) at $12.29, plus the time
  // on-demand nodes sit up idle before release: at least the work itself at list price.
  EXPECT_GE(od_total, (4 * 4 * 0.5 + 8 * 3) * 12.29 - 1e-6);
  EXPECT_EQ(Extra(r, "baselines.on_demand_only.all_training_completed"), 1);
  // On elastic on-demand only, inference would wait for a node to be provisioned (300 s, over the 60 s
  // SLO): the baseline keeps nodes always on until it meets the SLO, as the run does on the reservation.
  EXPECT_GT(Extra(r, "baselines.on_demand_only.always_on_gpus"), 0);
  EXPECT_LE(Extra(r, "baselines.on_demand_only.inference_p99_wait_s"), 60);
  EXPECT_EQ(Extra(r, "baselines.on_demand_only.slo_met"), 1);
  EXPECT_EQ(Extra(r, "inference_queue_delay_p99_s"), 0);
  // The commitments baseline reports the level it chose and meets the same SLO; the headline is against
  // the cheapest baseline.
  EXPECT_EQ(Extra(r, "baselines.commitments_on_demand.slo_met"), 1);
  EXPECT_EQ(static_cast<int64_t>(Extra(r, "baselines.commitments_on_demand.commitment_gpus")) % 8, 0);
  double cheapest = od_total;
  for (const char* b : {"commitments_on_demand", "reserved_on_demand"})
    cheapest = std::min(cheapest, Extra(r, std::string("baselines.") + b + ".total_cost"));
  EXPECT_NEAR(Extra(r, "cost_saving_vs_best"), 1 - total / cheapest, 1e-12);
  double parts = 0;
  for (const char* k : {"commitment", "spot", "on_demand_discount", "checkpoints", "lost_work", "restarts",
                        "paid_idle", "rounding", "work_volume"})
    parts += Extra(r, std::string("saving_decomposition.") + k);
  EXPECT_NEAR(parts, od_total - total, 1e-6 * od_total);
  EXPECT_NEAR(Extra(r, "saving_decomposition.work_volume"), 0, 1e-6 * od_total);
}

TEST(SpotTiersTest, BaselineNeedsAnOnDemandPoolForEveryKind) {
  const std::string dir = SpotTempDir();
  std::ofstream(std::filesystem::path(dir) / "c40.yaml")
      << "name: a100\ndefaults: {gpu: a100-40gb, gpus: 8, cpu: 96, memory_gib: 1024, interconnect: nvswitch}\n"
         "nodes:\n  - {name: cb, tier: reserved, pool: aws-p4d-capacity-block, leaf: l0}\n";
  const std::string trace = WriteSpotTrace(dir, 1, 1);
  auto s = ParseScenario("name: t\ncluster: c40.yaml\ntrace: " + trace +
                             "\nseeds: 1\nthreads: 1\npolicies: [tessera]\nhorizon_h: 0\ntiers: {}\n",
                         "s.yaml", dir, Catalog::Default());
  ASSERT_TRUE(s.ok()) << s.error();
  auto od = BaselineScenario(*s, Catalog::Default(), CostBaseline::kOnDemandOnly);
  ASSERT_FALSE(od.ok());
  EXPECT_NE(od.error().find("no on-demand pool for GPU kind 'a100-40gb'"), std::string::npos) << od.error();
}

// Errors name the file, the line and the field path (`tiers:` is line 8, its fields start at line 9).
TEST(SpotTiersTest, BadTiersInputNamesFileLineAndField) {
  struct Case {
    std::string tiers, expect;
  } cases[] = {
      {"  colour: red\n", "s.yaml:9: tiers.colour: unknown field"},
      {"  checkpoint: {cost_s: -1}\n", "s.yaml:9: tiers.checkpoint.cost_s: expected a number in [0, 1000000000]"},
      {"  checkpoint: {cost_s: .nan}\n", "s.yaml:9: tiers.checkpoint.cost_s: expected a number"},
      {"  checkpoint: [1]\n", "s.yaml:9: tiers.checkpoint: expected a map, got a list"},
      {"  pools: {nope: {}}\n", "s.yaml:9: tiers.pools.nope: no node of the cluster is in this pool"},
      {"  pools: {aws-p5-capacity-block: {reclaim_rate_per_hour: 1}}\n",
       "tiers.pools.aws-p5-capacity-block.reclaim_rate_per_hour: only spot pools are reclaimed"},
      {"  pools: {aws-p5-capacity-block: {provisioning_delay_s: 9223372036854775808}}\n",
       "s.yaml:9: tiers.pools.aws-p5-capacity-block.provisioning_delay_s: expected an integer"},
      {"  pools: [a]\n", "s.yaml:9: tiers.pools: expected a map, got a list"},
      {"  autoscale: {policy: magic}\n", "s.yaml:9: tiers.autoscale.policy: expected one of queue, none"},
      {"  autoscale: {idle_release_s: three}\n", "s.yaml:9: tiers.autoscale.idle_release_s: expected an integer"},
      {"  reclaims: [{at_h: 1, pool: aws-p5-on-demand}]\n", "s.yaml:9: tiers.reclaims[0].pool: 'aws-p5-on-demand' is not a spot pool"},
      {"  reclaims: [{pool: aws-p5-on-demand}]\n", "s.yaml:9: tiers.reclaims[0].at_h: required"},
      {"  reclaims: {a: 1}\n", "s.yaml:9: tiers.reclaims: expected a list, got a map"},
      {"  routing: {non_checkpointable_on_spot: 7}\n", "tiers.routing.non_checkpointable_on_spot: expected true or false"},
      {"  prices: missing.yaml\n", "s.yaml:9: tiers.prices: cannot open"},
      {"  prices: [missing.yaml]\n", "s.yaml:9: tiers.prices: expected text, got a list"},
  };
  for (const Case& c : cases) {
    auto s = ParseTiers(c.tiers);
    ASSERT_FALSE(s.ok()) << c.tiers;
    EXPECT_NE(s.error().find(c.expect), std::string::npos) << s.error() << " / expected " << c.expect;
  }
}

TEST(SpotTiersTest, SpotTrainingExampleMeetsTheTargets) {
  auto s = LoadScenario(std::string(::tessera::testing::SourceDir()) + "/examples/scenarios/spot-training.yaml", Catalog::Default());
  ASSERT_TRUE(s.ok()) << s.error();
  ASSERT_TRUE(s->tiers);
  s->seeds = {1, 2};
  auto out = RunScenario(*s, {"tessera"}, Catalog::Default());
  ASSERT_TRUE(out.ok()) << out.error();
  for (const RunResult& r : out->variants[0].runs[0]) {
    SCOPED_TRACE(r.seed);
    // Against the simulated baselines: cheaper than both, and the decomposition adds up to the saving.
    const double od = Extra(r, "baselines.on_demand_only.total_cost");
    const double rod = Extra(r, "baselines.reserved_on_demand.total_cost");
    const double total = Extra(r, "total_cost");
    EXPECT_GT(od, rod);
    EXPECT_GT(rod, total);
    EXPECT_NEAR(Extra(r, "cost_saving_vs_on_demand"), 1 - total / od, 1e-12);
    double parts = 0, parts_rod = 0;
    for (const auto& [k, v] : r.extra) {
      if (k.rfind("saving_decomposition.", 0) == 0) parts += v;
      if (k.rfind("saving_vs_reserved_on_demand.", 0) == 0) parts_rod += v;
    }
    EXPECT_NEAR(parts, od - total, 1e-6 * od);
    EXPECT_NEAR(parts_rod, rod - total, 1e-6 * od);
    EXPECT_GT(Extra(r, "saving_decomposition.commitment"), 0);
    EXPECT_GT(Extra(r, "saving_decomposition.spot"), 0);
    EXPECT_GT(Extra(r, "cost_breakdown.paid_idle"), Extra(r, "idle_cost_reserved") - 1e-6);  // its slack is paid
    EXPECT_GT(Extra(r, "idle_cost_reserved"), 0);
    EXPECT_NEAR(Extra(r, "saving_decomposition.work_volume"), 0, 1e-3 * od);  // the same work in every run
    EXPECT_EQ(Extra(r, "baselines.on_demand_only.all_training_completed"), 1);
    EXPECT_EQ(Extra(r, "baselines.reserved_on_demand.all_training_completed"), 1);
    EXPECT_GT(Extra(r, "spot_reclaims"), 0);
    EXPECT_EQ(Extra(r, "inference_replicas_on_spot"), 0);
    EXPECT_EQ(Extra(r, "inference_replicas_off_reserved"), 0);
    EXPECT_EQ(Extra(r, "all_training_completed"), 1);
    EXPECT_EQ(Extra(r, "ledger_reconciled"), 1);
    EXPECT_GT(Extra(r, "lost_gpu_hours"), 0);
    EXPECT_EQ(r.apply_conflicts, 0);
  }
  // Deterministic: the same seed gives the same figures.
  auto again = RunScenario(*s, {"tessera"}, Catalog::Default());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->variants[0].runs[0][0].extra, out->variants[0].runs[0][0].extra);
}

}  // namespace
}  // namespace tessera
