// Which MIG nodes are repartitioned to which config, for the pods no layout holds: free devices first,
// then the cheapest drain (pods that must be waited for, then evictions), failed pairs skipped.
#include "k8s/mig/mig_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/catalog.h"

namespace tessera {
namespace {

const char* kConfigs = R"(version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
  all-3g.40gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
  all-2g.20gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"2g.20gb": 3}
  per-gpu:
    - devices: [0, 1]
      mig-enabled: false
  filtered:
    - device-filter: "0x20B210DE"
      devices: all
      mig-enabled: false
)";

std::vector<MigPartedConfig> Configs() {
  std::vector<std::string> skipped;
  auto c = ParseMigParted(kConfigs, &skipped);
  EXPECT_TRUE(c.ok()) << c.error();
  EXPECT_TRUE(skipped.empty());
  return *c;
}

const GpuKind* KindOf(const char* product) {
  const KindId k = Catalog::Default().Find(product);
  EXPECT_NE(k, kNone) << product;
  return &Catalog::Default().kind(k);
}

MigNode MigNodeOf(const std::string& name, const std::string& config, Devices alloc,
                  std::vector<GpuPod> pods = {}) {
  MigNode n;
  n.name = name;
  n.gpus = 8;
  n.capable = true;
  n.config = config;
  n.state = "success";
  n.allocatable = std::move(alloc);
  n.pods = std::move(pods);
  return n;
}

GpuPod GpuPodOf(const std::string& name, int priority, Devices req) {
  return {"ns", name, "uid-" + name, priority, false, req};
}

std::vector<WaitingPod> Waiting(int n, const std::string& resource, int priority, int64_t each = 1) {
  std::vector<WaitingPod> out;
  for (int i = 0; i < n; ++i)
    out.push_back({"serving", resource + std::to_string(i), priority, {{resource, each}}});
  return out;
}

TEST(MigPlan, ParsesTheConfigsItCanUse) {
  const auto c = Configs();
  ASSERT_EQ(c.size(), 6u);
  EXPECT_EQ(c[0].name, "all-disabled");
  EXPECT_FALSE(c[0].specs.at(0).enabled);
  EXPECT_EQ(c[2].specs.at(0).counts.at("3g.40gb"), 2);
  EXPECT_EQ(c[4].specs.at(0).devices, (std::vector<int>{0, 1}));
  EXPECT_EQ(c[5].specs.at(0).device_filter, (std::vector<std::string>{"0x20B210DE"}));
  std::vector<std::string> skipped;
  ASSERT_TRUE(ParseMigParted("version: v1\nmig-configs:\n  \"not a label\":\n    - devices: all\n"
                             "      mig-enabled: false\n  bad:\n    - devices: seven\n",
                             &skipped)
                  .ok());
  ASSERT_EQ(skipped.size(), 2u);
  std::sort(skipped.begin(), skipped.end());
  EXPECT_NE(skipped[0].find("mig-configs.bad: spec 0"), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[1].find("not a label value"), std::string::npos) << skipped[1];
  skipped.clear();
  EXPECT_FALSE(ParseMigParted("version: v2\nmig-configs: {}\n", &skipped).ok());
  EXPECT_FALSE(ParseMigParted("[", &skipped).ok());
  EXPECT_FALSE(ParseMigParted("version: v1\n", &skipped).ok());
}

TEST(MigPlan, AdvertisesMatchesTheDevicePluginsCounts) {
  const auto c = Configs();
  MigNode n = MigNodeOf("a", "all-3g.40gb", {{"nvidia.com/mig-3g.40gb", 16}, {"nvidia.com/gpu", 0}});
  EXPECT_TRUE(Advertises(n, c[2]));
  EXPECT_FALSE(Advertises(n, c[1]));
  n.allocatable["nvidia.com/mig-1g.10gb"] = 7;  // a stale resource still advertised
  EXPECT_FALSE(Advertises(n, c[2]));
  EXPECT_EQ(*DevicesOf(c[0], n), (Devices{{"nvidia.com/gpu", 8}}));
  // A node of an unknown GPU kind: per-GPU and filtered configs cannot be told; Advertises cannot either.
  EXPECT_FALSE(DevicesOf(c[4], n).ok());
  EXPECT_FALSE(DevicesOf(c[5], n).ok());
  EXPECT_TRUE(Advertises(n, c[5]));
}

// Per-GPU configs are targets: GPU by GPU on the node's kind. Half the GPUs whole and half in 3g.40gb
// serves what neither all-disabled nor all-3g.40gb serves alone.
TEST(MigPlan, PerGpuConfigsAreTargets) {
  const char* text = R"(version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-3g.40gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
  half-3g:
    - devices: [0, 1, 2, 3]
      mig-enabled: false
    - devices: [4, 5, 6, 7]
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
)";
  std::vector<std::string> skipped;
  const auto configs = ParseMigParted(text, &skipped);
  ASSERT_TRUE(configs.ok()) << configs.error();
  MigNode n = MigNodeOf("a", "all-disabled", {{"nvidia.com/gpu", 8}},
                        {GpuPodOf("busy", 1000, {{"nvidia.com/gpu", 8}})});
  n.kind = KindOf("NVIDIA-A100-SXM4-80GB");
  const auto half = DevicesOf((*configs)[2], n);
  ASSERT_TRUE(half.ok()) << half.error();
  EXPECT_EQ(*half, (Devices{{"nvidia.com/gpu", 4}, {"nvidia.com/mig-3g.40gb", 8}}));
  auto waiting = Waiting(4, "nvidia.com/gpu", 500);
  const auto three_g = Waiting(8, "nvidia.com/mig-3g.40gb", 500);
  waiting.insert(waiting.end(), three_g.begin(), three_g.end());
  n.config = "all-3g.40gb";
  n.allocatable = {{"nvidia.com/mig-3g.40gb", 16}};
  n.pods = {GpuPodOf("busy", 100, {{"nvidia.com/mig-3g.40gb", 16}})};
  const auto plan = PlanRepartitions(waiting, {n}, *configs, {}, {});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].config, "half-3g");
  EXPECT_EQ(plan[0].for_pods.size(), 12u);
  // Being applied, it counts as coming supply by the same per-GPU sum.
  EXPECT_TRUE(PlanRepartitions(waiting, {n}, *configs, {{"a", "half-3g"}}, {}).empty());
  // Without a kind, the per-GPU config is no target: the best uniform one serves part.
  n.kind = nullptr;
  const auto uniform = PlanRepartitions(waiting, {n}, *configs, {}, {});
  ASSERT_EQ(uniform.size(), 1u);
  EXPECT_EQ(uniform[0].config, "all-disabled");
}

// A device-filter makes a config a target only on the GPU model it names; a config whose layout NVIDIA's
// placement rules refuse on the node's kind is no target there (its counts alone would say otherwise).
TEST(MigPlan, FilteredAndImpossibleConfigsFollowTheNodesKind) {
  const char* text = R"(version: v1
mig-configs:
  a100-80-off:
    - device-filter: ["0x20B210DE", "0x20B510DE"]
      devices: all
      mig-enabled: false
  three-3g:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 3}
)";
  std::vector<std::string> skipped;
  const auto configs = ParseMigParted(text, &skipped);
  ASSERT_TRUE(configs.ok()) << configs.error();
  MigNode a100 = MigNodeOf("a100", "all-3g.40gb", {{"nvidia.com/mig-3g.40gb", 16}});
  a100.kind = KindOf("NVIDIA-A100-SXM4-80GB");
  MigNode h100 = MigNodeOf("h100", "all-3g.40gb", {{"nvidia.com/mig-3g.40gb", 16}});
  h100.kind = KindOf("NVIDIA-H100-80GB-HBM3");
  EXPECT_TRUE(DevicesOf((*configs)[0], a100).ok());
  EXPECT_FALSE(DevicesOf((*configs)[0], h100).ok());
  const auto impossible = DevicesOf((*configs)[1], a100);
  ASSERT_FALSE(impossible.ok());
  EXPECT_NE(impossible.error().find("placement rules"), std::string::npos) << impossible.error();
  const auto plan = PlanRepartitions(Waiting(1, "nvidia.com/gpu", 500, 8), {h100, a100}, *configs, {}, {});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].node, "a100");
  EXPECT_EQ(plan[0].config, "a100-80-off");
  EXPECT_TRUE(
      PlanRepartitions(Waiting(5, "nvidia.com/mig-3g.40gb", 500, 8), {h100, a100}, *configs, {}, {}).empty());
}

// The k8s-mig phase 1 shape: 3g.40gb is offered nowhere; the node whose drain waits for least is chosen,
// lower-priority pods there are evicted; 1g.10gb pods fit the free instances and need nothing.
TEST(MigPlan, PicksTheCheapestDrainForPodsNoLayoutHolds) {
  std::vector<MigNode> nodes = {MigNodeOf("a100-0", "all-disabled", {{"nvidia.com/gpu", 8}},
                                          {GpuPodOf("batch-0", 0, {{"nvidia.com/gpu", 2}}),
                                           GpuPodOf("batch-1", 0, {{"nvidia.com/gpu", 2}}),
                                           GpuPodOf("finetune", 1000, {{"nvidia.com/gpu", 2}})}),
                                MigNodeOf("a100-1", "all-disabled", {{"nvidia.com/gpu", 8}},
                                          {GpuPodOf("train", 1000, {{"nvidia.com/gpu", 8}})}),
                                MigNodeOf("a100-2", "all-1g.10gb", {{"nvidia.com/mig-1g.10gb", 56}},
                                          {GpuPodOf("embed", 1000, {{"nvidia.com/mig-1g.10gb", 20}})})};
  auto waiting = Waiting(12, "nvidia.com/mig-3g.40gb", 500);
  const auto one_g = Waiting(8, "nvidia.com/mig-1g.10gb", 500);
  waiting.insert(waiting.end(), one_g.begin(), one_g.end());
  const auto plan = PlanRepartitions(waiting, nodes, Configs(), {}, {});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].node, "a100-0");
  EXPECT_EQ(plan[0].config, "all-3g.40gb");
  EXPECT_EQ(plan[0].priority, 500);
  EXPECT_EQ(plan[0].for_pods.size(), 12u);
  // Being repartitioned, it counts as coming supply: nothing more is planned.
  EXPECT_TRUE(PlanRepartitions(waiting, nodes, Configs(), {{"a100-0", "all-3g.40gb"}}, {}).empty());
  // That pair failed: another config of the same node (none holds 3g.40gb) or another node.
  const auto again = PlanRepartitions(waiting, nodes, Configs(), {}, {{"a100-0", "all-3g.40gb"}});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].config, "all-3g.40gb");
  EXPECT_NE(again[0].node, "a100-0");
}

// Whole-GPU pods: every MIG node goes back to MIG off, one per 8-GPU pod; a cordoned node is not used.
TEST(MigPlan, WholeGpuPodsTurnMigOff) {
  std::vector<MigNode> nodes = {MigNodeOf("a", "all-3g.40gb", {{"nvidia.com/mig-3g.40gb", 16}}),
                                MigNodeOf("b", "all-1g.10gb", {{"nvidia.com/mig-1g.10gb", 56}}),
                                MigNodeOf("c", "all-2g.20gb", {{"nvidia.com/mig-2g.20gb", 24}})};
  nodes[2].schedulable = false;
  const auto plan = PlanRepartitions(Waiting(3, "nvidia.com/gpu", 1000, 8), nodes, Configs(), {}, {});
  ASSERT_EQ(plan.size(), 2u);
  for (const Repartition& r : plan) EXPECT_EQ(r.config, "all-disabled");
  EXPECT_NE(plan[0].node, plan[1].node);
  EXPECT_NE(plan[0].node, "c");
  // Pods that fit what is free already need no repartitioning.
  nodes[0] = MigNodeOf("a", "all-disabled", {{"nvidia.com/gpu", 8}});
  nodes[1] = MigNodeOf("b", "all-disabled", {{"nvidia.com/gpu", 8}});
  EXPECT_TRUE(PlanRepartitions(Waiting(2, "nvidia.com/gpu", 1000, 8), nodes, Configs(), {}, {}).empty());
}

TEST(MigPlan, ReadsNodesAndTheirGpuPods) {
  const nlohmann::json node = {{"metadata",
                                {{"name", "a100-0"},
                                 {"uid", "u"},
                                 {"labels",
                                  {{"nvidia.com/gpu.count", "8"},
                                   {"nvidia.com/mig.capable", "true"},
                                   {"nvidia.com/mig.strategy", "mixed"},
                                   {"nvidia.com/mig.config", "all-disabled"},
                                   {"nvidia.com/mig.config.state", "success"}}}}},
                               {"spec", {{"unschedulable", true}}},
                               {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}, {"cpu", "255500m"}}}}}};
  auto pod = [](const char* name, const char* node, const char* phase, const char* gpus) {
    return nlohmann::json{
        {"metadata", {{"name", name}, {"namespace", "ns"}}},
        {"spec",
         {{"nodeName", node},
          {"priority", 7},
          {"containers", {{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", gpus}}}}}}}}}},
        {"status", {{"phase", phase}}}};
  };
  const auto a = pod("a", "a100-0", "Running", "2"), b = pod("b", "a100-0", "Succeeded", "2"),
             c = pod("c", "other", "Running", "2"), d = pod("d", "a100-0", "Running", "0");
  const MigNode n = ReadMigNode(node, {&a, &b, &c, &d});
  EXPECT_EQ(n.kind, nullptr);  // no product label (and no catalog)
  auto labelled = node;
  labelled["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-80GB";
  EXPECT_EQ(ReadMigNode(labelled, {}, &Catalog::Default()).kind, KindOf("NVIDIA-A100-SXM4-80GB"));
  labelled["metadata"]["labels"]["nvidia.com/gpu.product"] = "Some-Future-GPU";
  EXPECT_EQ(ReadMigNode(labelled, {}, &Catalog::Default()).kind, nullptr);
  EXPECT_EQ(n.gpus, 8);
  EXPECT_TRUE(n.capable);
  EXPECT_FALSE(n.schedulable);
  EXPECT_EQ(n.config, "all-disabled");
  EXPECT_EQ(n.allocatable, (Devices{{"nvidia.com/gpu", 8}}));
  ASSERT_EQ(n.pods.size(), 1u);
  EXPECT_EQ(n.pods[0].name, "a");
  EXPECT_EQ(n.pods[0].priority, 7);
  EXPECT_EQ(n.Free().at("nvidia.com/gpu"), 6);
}

// A drain never takes another scheduler's pod nor a production one, nor waits on them: such nodes are
// refused, with the pod named; ours below the plan's priority are preempted, the others waited for.
// A pod of a job the loop runs goes as the loop's preemption rule says for the job the drain is for (its
// queues, minimum run time, `preemption: never`), whatever the priorities; a pod the loop does not hold, or
// a drain for no loop job, goes by priority. The plan names the job it drains for, and prefers the node
// whose pods the loop lets go to one whose pods it must wait for.
TEST(MigPlan, PodsOfLoopJobsGoAsTheLoopsRuleSays) {
  DrainRules rules{"tessera", 100000};
  std::vector<std::pair<std::string, int64_t>> asked;
  rules.loop_rule = [&](const GpuPod& p, int64_t for_job) -> std::optional<bool> {
    asked.push_back({p.name, for_job});
    if (p.name == "young") return false;  // e.g. younger than the loop's minimum run time
    if (p.name == "borrowing") return true;
    return std::nullopt;  // not a job the loop runs
  };
  GpuPod young = GpuPodOf("young", 100, {{"nvidia.com/gpu", 2}});
  GpuPod borrowing = GpuPodOf("borrowing", 500, {{"nvidia.com/gpu", 2}});
  GpuPod other = GpuPodOf("other", 100, {{"nvidia.com/gpu", 2}});
  young.scheduler = borrowing.scheduler = other.scheduler = "tessera";
  EXPECT_FALSE(Evictable(young, 1000, rules, 7));
  EXPECT_TRUE(Evictable(borrowing, 500, rules, 7))
      << "not below the plan's priority, yet the loop lets it go";
  EXPECT_TRUE(Evictable(other, 1000, rules, 7));
  EXPECT_FALSE(Evictable(other, 100, rules, 7));
  EXPECT_TRUE(Evictable(young, 1000, rules, 0)) << "no loop job to ask for: priority decides";
  EXPECT_EQ(asked, (std::vector<std::pair<std::string, int64_t>>{
                       {"young", 7}, {"borrowing", 7}, {"other", 7}, {"other", 7}}));
  const std::vector<MigNode> nodes = {MigNodeOf("m0", "all-disabled", {{"nvidia.com/gpu", 8}}, {young}),
                                      MigNodeOf("m1", "all-disabled", {{"nvidia.com/gpu", 8}}, {borrowing})};
  std::vector<WaitingPod> waiting = Waiting(8, "nvidia.com/mig-1g.10gb", 500);
  for (WaitingPod& w : waiting) w.job = 7;
  const auto plan = PlanRepartitions(waiting, nodes, Configs(), {}, {}, rules);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].node, "m1") << "m0's pod must be waited for";
  EXPECT_EQ(plan[0].job, 7);
}

TEST(MigPlan, DrainsNeverTakeForeignOrProductionPods) {
  const DrainRules rules{"tessera", 100000};
  GpuPod notebook = GpuPodOf("notebook", 100000, {{"nvidia.com/mig-1g.10gb", 1}});
  notebook.scheduler = "default-scheduler";
  GpuPod prod = GpuPodOf("prod", 100000, {{"nvidia.com/mig-1g.10gb", 1}});
  GpuPod batch = GpuPodOf("batch", 100, {{"nvidia.com/mig-1g.10gb", 1}});
  prod.scheduler = batch.scheduler = "tessera";
  EXPECT_FALSE(Evictable(notebook, 2000000000, rules));
  EXPECT_FALSE(Evictable(prod, 2000000000, rules));  // production, whatever the plan's priority
  EXPECT_TRUE(Evictable(batch, 100000, rules));
  EXPECT_FALSE(Evictable(batch, 100, rules));                  // not below the plan's priority: waited for
  EXPECT_TRUE(Evictable(notebook, 2000000000, DrainRules{}));  // without rules, priority alone decides

  std::vector<MigNode> nodes = {MigNodeOf("m0", "all-1g.10gb", {{"nvidia.com/mig-1g.10gb", 56}}, {notebook}),
                                MigNodeOf("m1", "all-1g.10gb", {{"nvidia.com/mig-1g.10gb", 56}}, {batch}),
                                MigNodeOf("m2", "all-1g.10gb", {{"nvidia.com/mig-1g.10gb", 56}}, {prod})};
  EXPECT_NE(DrainRefusal(nodes[0], rules).find("default-scheduler"), std::string::npos)
      << DrainRefusal(nodes[0], rules);
  EXPECT_EQ(DrainRefusal(nodes[1], rules), "");
  EXPECT_NE(DrainRefusal(nodes[2], rules).find("production"), std::string::npos)
      << DrainRefusal(nodes[2], rules);
  EXPECT_EQ(DrainRefusal(nodes[2], DrainRules{}), "");
  for (int priority : {0, 1000}) {  // batch waited for, then preempted: m1 either way
    std::map<std::string, std::string> refused;
    const auto plan = PlanRepartitions(Waiting(2, "nvidia.com/gpu", priority, 1), nodes, Configs(), {}, {},
                                       rules, &refused);
    ASSERT_EQ(plan.size(), 1u) << priority;
    EXPECT_EQ(plan[0].node, "m1");
    EXPECT_EQ(plan[0].config, "all-disabled");
    ASSERT_EQ(refused.size(), 2u);
    EXPECT_NE(refused["m0"].find("ns/notebook"), std::string::npos) << refused["m0"];
    EXPECT_NE(refused["m2"].find("ns/prod"), std::string::npos) << refused["m2"];
  }
  // Without the rules nothing is refused.
  std::map<std::string, std::string> none;
  EXPECT_EQ(
      PlanRepartitions(Waiting(2, "nvidia.com/gpu", 1000, 1), nodes, Configs(), {}, {}, DrainRules{}, &none)
          .size(),
      1u);
  EXPECT_TRUE(none.empty());
  // The foreign pod leaving (terminating) lifts the refusal.
  nodes[0].pods[0].terminating = true;
  EXPECT_EQ(DrainRefusal(nodes[0], rules), "");
}

// ReadMigNode keeps what a drain needs to know of each pod: its scheduler and whether it is marked already.
TEST(MigPlan, ReadsEachPodsSchedulerAndDisruptionMark) {
  const nlohmann::json node = {{"metadata", {{"name", "m0"}, {"labels", {{"nvidia.com/gpu.count", "8"}}}}},
                               {"status", {{"allocatable", {{"nvidia.com/mig-1g.10gb", "56"}}}}}};
  auto pod = [](const char* name, const char* scheduler, bool marked) {
    nlohmann::json p = {
        {"metadata", {{"name", name}, {"namespace", "ns"}}},
        {"spec",
         {{"nodeName", "m0"},
          {"schedulerName", scheduler},
          {"containers", {{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/mig-1g.10gb", "1"}}}}}}}}}},
        {"status", {{"phase", "Running"}}}};
    if (marked) p["status"]["conditions"] = {{{"type", "DisruptionTarget"}, {"status", "True"}}};
    return p;
  };
  const auto a = pod("a", "tessera", true), b = pod("b", "default-scheduler", false);
  const MigNode n = ReadMigNode(node, {&a, &b});
  ASSERT_EQ(n.pods.size(), 2u);
  EXPECT_EQ(n.pods[0].scheduler, "tessera");
  EXPECT_TRUE(n.pods[0].disruption_target);
  EXPECT_EQ(n.pods[1].scheduler, "default-scheduler");
  EXPECT_FALSE(n.pods[1].disruption_target);
}

}  // namespace
}  // namespace tessera
