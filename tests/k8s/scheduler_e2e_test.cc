// `tessera k8s scheduler` end to end against the in-process fake API server (fake_apiserver.h): the real
// scheduler (Lease, informers, Service, loop, Kubernetes backend) places a gang on one leaf, a MIG pod on
// the MIG node, refuses a 9-GPU pod with a PodScheduled=False reason, and unwinds a gang whose second
// binding fails (the bound member is deleted; once a controller recreates it the gang is placed whole).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "base/utc_time.h"
#include "k8s/api/kubeconfig.h"
#include "k8s/dra/dra_nvidia.h"
#include "k8s/fake_apiserver.h"
#include "k8s/scheduler.h"
#include "service/workload_json.h"

namespace tessera {
namespace {

using json = nlohmann::json;
using testing::FakeApiServer;

json MigGpuNode(const std::string& name, const std::string& leaf, const std::string& mig_config,
                json devices) {
  json alloc = {{"cpu", "255500m"}, {"memory", "2112998564Ki"}, {"pods", "110"}};
  alloc.update(devices);
  return {{"metadata",
           {{"name", name},
            {"labels",
             {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}, {"nvidia.com/gpu.count", "8"},
              {"nvidia.com/mig.capable", "true"}, {"nvidia.com/mig.strategy", "mixed"},
              {"nvidia.com/mig.config", mig_config}, {"nvidia.com/mig.config.state", "success"},
              {"tessera.io/leaf", leaf}}}}},
          {"spec", json::object()},
          {"status",
           {{"allocatable", alloc}, {"capacity", alloc}, {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

json GpuRequestPod(const std::string& name, const std::string& resource, int count,
                   const std::string& group = "", const std::string& priority_class = "tessera-serving") {
  json pod = {{"metadata", {{"name", name}, {"namespace", "ml"}, {"labels", json::object()}}},
              {"spec",
               {{"schedulerName", "tessera"},
                {"priorityClassName", priority_class},
                {"containers",
                 {{{"name", "main"},
                   {"image", "trainer"},
                   {"resources",
                    {{"requests", {{resource, std::to_string(count)}, {"cpu", "4"}, {"memory", "16Gi"}}},
                     {"limits", {{resource, std::to_string(count)}}}}}}}}}}};
  if (!group.empty()) pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = group;
  return pod;
}

json PodGroup(const std::string& name, int min_member) {
  return {{"metadata", {{"name", name}, {"namespace", "ml"}}}, {"spec", {{"minMember", min_member}}}};
}

std::string NodeOf(const std::optional<json>& pod) {
  return pod && (*pod)["spec"].contains("nodeName") ? (*pod)["spec"]["nodeName"].get<std::string>() : "";
}

class SchedulerE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tessera-k8s-e2e-" + std::to_string(::getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    api_.Create("priorityclasses", {{"metadata", {{"name", "tessera-serving"}}}, {"value", 500}});
    api_.Create("priorityclasses", {{"metadata", {{"name", "low"}}}, {"value", 0}});
    api_.Create("priorityclasses", {{"metadata", {{"name", "critical"}}}, {"value", 1000}});
    for (int i = 0; i < 6; ++i)
      api_.Create("nodes", MigGpuNode("n" + std::to_string(i), i < 3 ? "leaf-a" : "leaf-b", "all-disabled",
                                      {{"nvidia.com/gpu", "8"}}));
    api_.Create("nodes", MigGpuNode("m0", "leaf-c", "all-1g.10gb", {{"nvidia.com/mig-1g.10gb", "56"}}));
  }
  void TearDown() override {
    for (const std::string& o : api_.Overcommits()) ADD_FAILURE() << "overcommitted: " << o;
    if (scheduler_) scheduler_->Stop();
    scheduler_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Start() {
    const std::string kubeconfig = (dir_ / "kubeconfig").string();
    api_.WriteKubeconfig(kubeconfig);
    auto kube = LoadKubeconfig(kubeconfig, "");
    ASSERT_TRUE(kube.ok()) << kube.error();
    SchedulerOptions o;
    o.db = (dir_ / "tessera.db").string();
    o.identity = "e2e";
    o.min_runtime_s = min_runtime_s_;
    o.extender = extender_;
    o.kube_api_qps = kube_api_qps_;
    o.kube_api_burst = kube_api_burst_;
    // No --team-namespaces: each team's own namespace, never a system one (ApiJobsBecomePodsAndFollowThem).
    if (std::getenv("TESSERA_TEST_LOG") != nullptr)  // the scheduler's log on stderr, to follow a failure
      o.log = [](const std::string& line) { std::fprintf(stderr, "scheduler: %s\n", line.c_str()); };
    auto s = K8sScheduler::Start(*kube, o);
    ASSERT_TRUE(s.ok()) << s.error();
    scheduler_ = std::move(s).value();
  }
  // Waits up to 60 s for `done`.
  bool Eventually(const std::function<bool()>& done) {
    for (int i = 0; i < 600; ++i) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return done();
  }
  std::optional<json> Pod(const std::string& name) { return api_.Get("pods", "ml", name); }
  // A pod of namespace ml whose claim NAME-gpu asks for `gpus` whole GPUs of DeviceClass gpu.nvidia.com, in
  // Volcano queue `queue` and PodGroup `group` when given.
  void DraPod(const std::string& name, int gpus, const std::string& priority_class, const std::string& queue,
              const std::string& group = "") {
    api_.Create("resourceclaims", {{"metadata", {{"name", name + "-gpu"}, {"namespace", "ml"}}},
                                   {"spec",
                                    {{"devices",
                                      {{"requests",
                                        {{{"name", "gpu"},
                                          {"exactly",
                                           {{"deviceClassName", "gpu.nvidia.com"},
                                            {"allocationMode", "ExactCount"},
                                            {"count", gpus}}}}}}}}}}});
    json p = {{"metadata", {{"name", name}, {"namespace", "ml"}}},
              {"spec",
               {{"schedulerName", "tessera"},
                {"priorityClassName", priority_class},
                {"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", name + "-gpu"}}}},
                {"containers",
                 {{{"name", "main"},
                   {"image", "trainer"},
                   {"resources",
                    {{"requests", {{"cpu", "2"}, {"memory", "8Gi"}}}, {"claims", {{{"name", "gpu"}}}}}}}}}}}};
    if (!queue.empty()) p["metadata"]["annotations"] = {{"scheduling.volcano.sh/queue-name", queue}};
    if (!group.empty()) p["metadata"]["labels"] = {{"scheduling.x-k8s.io/pod-group", group}};
    api_.Create("pods", p);
  }
  // Nodes d0, d1, ... (leaf-d) whose `gpus` A100-80GB only DRA publishes (NVIDIA's slices with DynamicMIG),
  // and NVIDIA's DeviceClasses.
  void DraNodes(int nodes, int gpus) {
    const GpuKind& a100 = Catalog::Default().kind(Catalog::Default().Find("a100-80gb"));
    NvidiaSliceOptions o;
    o.gpus = gpus;
    for (int i = 0; i < nodes; ++i) {
      const std::string n = "d" + std::to_string(i);
      json node = MigGpuNode(n, "leaf-d", "all-disabled", json::object());
      node["metadata"]["labels"].erase("nvidia.com/mig.config");
      node["metadata"]["labels"].erase("nvidia.com/mig.config.state");
      api_.Create("nodes", node);
      for (const json& slice : NvidiaDynamicMigSlices(a100, n, o)) api_.Create("resourceslices", slice);
    }
    for (const json& dc : NvidiaDeviceClasses()) api_.Create("deviceclasses", dc);
  }
  // Tessera's reason for the pod's PodScheduled=False condition ("" while it has none): the condition's
  // reason is always Unschedulable (what autoscalers act on) and Tessera's own code leads its message
  // ("tessera: CODE: ..."); a message without one gives "Unschedulable".
  std::string Unscheduled(const std::string& name) {
    auto p = Pod(name);
    for (const json& c : p ? (*p)["status"].value("conditions", json::array()) : json::array()) {
      if (c.value("type", "") != "PodScheduled" || c.value("status", "") != "False") continue;
      if (c.value("reason", "") != "Unschedulable") return "reason " + c.value("reason", "") + ", not Unschedulable";
      static const std::regex kCode("tessera: ([A-Za-z]+):");
      const std::string m = c.value("message", "");
      std::smatch code;
      return std::regex_search(m, code, kCode) ? code[1].str() : "Unschedulable";
    }
    return "";
  }

  FakeApiServer api_;
  std::optional<ExtenderServerOptions> extender_;  // serve the extender verbs too
  int64_t min_runtime_s_ = 300;
  double kube_api_qps_ = 0;  // no limit
  int kube_api_burst_ = 0;
  std::filesystem::path dir_;
  std::unique_ptr<K8sScheduler> scheduler_;
};

TEST_F(SchedulerE2e, PlacesGangsMigPodsAndRefusesWithReasons) {
  Start();
  api_.Create("podgroups", PodGroup("train", 4));
  for (int i = 0; i < 4; ++i)
    api_.Create("pods", GpuRequestPod("train-" + std::to_string(i), "nvidia.com/gpu", 4, "train"));
  api_.Create("pods", GpuRequestPod("embed", "nvidia.com/mig-1g.10gb", 1));
  api_.Create("pods", GpuRequestPod("huge", "nvidia.com/gpu", 9));
  auto reason = [&] { return Unscheduled("huge"); };
  ASSERT_TRUE(Eventually([&] {
    bool all = !NodeOf(Pod("embed")).empty() && !reason().empty();
    for (int i = 0; i < 4; ++i) all = all && !NodeOf(Pod("train-" + std::to_string(i))).empty();
    return all;
  })) << "embed on '" << NodeOf(Pod("embed")) << "', huge's reason '" << reason() << "'";
  EXPECT_EQ(NodeOf(Pod("embed")), "m0");
  std::set<char> leaves;  // n0-n2 are leaf-a, n3-n5 leaf-b
  for (int i = 0; i < 4; ++i) {
    const std::string node = NodeOf(Pod("train-" + std::to_string(i)));
    ASSERT_EQ(node.size(), 2u);
    EXPECT_EQ(node[0], 'n') << node;
    leaves.insert(node[1] < '3' ? 'a' : 'b');
  }
  EXPECT_EQ(leaves.size(), 1u) << "the gang spans leaves";
  EXPECT_TRUE(NodeOf(Pod("huge")).empty());
  // No node passes its filters: kube-scheduler's sentence, then Tessera's.
  auto huge = Pod("huge");
  bool said = false;
  for (const json& c : (*huge)["status"]["conditions"])
    if (c.value("type", "") == "PodScheduled") {
      const std::string m = c.value("message", "");
      said = m.rfind("0/", 0) == 0 && m.find("Insufficient nvidia.com/gpu") != std::string::npos &&
             m.find("tessera: ") != std::string::npos;
    }
  EXPECT_TRUE(said) << huge->dump();
}

// Pods of a gang seen before their PodGroup wait for it (PodGroupNotFound) rather than forming a gang of the
// members that happen to be there; once the PodGroup exists the gang is placed whole.
TEST_F(SchedulerE2e, GangPodsWaitForTheirPodGroup) {
  Start();
  for (int i = 0; i < 2; ++i)
    api_.Create("pods", GpuRequestPod("late-" + std::to_string(i), "nvidia.com/gpu", 8, "late"));
  auto reason = [&](const std::string& name) { return Unscheduled(name); };
  ASSERT_TRUE(Eventually([&] { return reason("late-0") == "PodGroupNotFound" && reason("late-1") == "PodGroupNotFound"; }))
      << Pod("late-0")->dump();
  api_.Create("pods", GpuRequestPod("late-2", "nvidia.com/gpu", 8, "late"));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(NodeOf(Pod("late-" + std::to_string(i))).empty()) << i;
  api_.Create("podgroups", PodGroup("late", 3));
  ASSERT_TRUE(Eventually([&] {
    for (int i = 0; i < 3; ++i)
      if (NodeOf(Pod("late-" + std::to_string(i))).empty()) return false;
    return true;
  }));
}

TEST_F(SchedulerE2e, AFailedBindingUnwindsTheGang) {
  api_.FailBindingOf("pair-1");
  Start();
  api_.Create("podgroups", PodGroup("pair", 2));
  json first = GpuRequestPod("pair-0", "nvidia.com/gpu", 8, "pair");
  api_.Create("pods", first);
  api_.Create("pods", GpuRequestPod("pair-1", "nvidia.com/gpu", 8, "pair"));
  // pair-0 is bound first, pair-1's binding fails: pair-0 is deleted (its controller would recreate it).
  ASSERT_TRUE(Eventually([&] { return !Pod("pair-0").has_value(); }));
  EXPECT_TRUE(NodeOf(Pod("pair-1")).empty());
  bool deleted = false;
  for (const auto& r : api_.Requests())
    deleted |= r.method == "DELETE" && r.path == "/api/v1/namespaces/ml/pods/pair-0" && r.status == 200;
  EXPECT_TRUE(deleted);
  // Recreated, the gang is placed whole (the injected failure was once).
  api_.Create("pods", first);
  ASSERT_TRUE(Eventually([&] { return !NodeOf(Pod("pair-0")).empty() && !NodeOf(Pod("pair-1")).empty(); }));
}

// A stopped run's pods are evicted (Eviction API); a pod placed on the capacity they free is bound only once
// they are gone, after their terminationGracePeriodSeconds (no overcommit: TearDown checks every binding).
TEST_F(SchedulerE2e, StopsThroughEvictionAndWaitsForTheGracePeriod) {
  Start();
  for (int i = 0; i < 6; ++i) {
    json low = GpuRequestPod("low-" + std::to_string(i), "nvidia.com/gpu", 8, "", "low");
    low["spec"]["terminationGracePeriodSeconds"] = 2;
    api_.Create("pods", low);
  }
  ASSERT_TRUE(Eventually([&] {
    for (int i = 0; i < 6; ++i)
      if (NodeOf(Pod("low-" + std::to_string(i))).empty()) return false;
    return true;
  }));
  const std::string node = NodeOf(Pod("low-0"));
  const Caller admin{"e2e", "", Role::kAdmin, ""};
  bool more = false;
  int64_t id = -1;
  for (const JobView& v : scheduler_->service().List(admin, "", "", "", 0, 1000, &more))
    if (v.job->name == "low-0") id = v.job->id;
  ASSERT_GE(id, 0);
  ASSERT_TRUE(scheduler_->service().Cancel(admin, id).ok());
  api_.Create("pods", GpuRequestPod("next", "nvidia.com/gpu", 8, "", "critical"));
  ASSERT_TRUE(Eventually([&] { return !NodeOf(Pod("next")).empty(); })) << Pod("next")->dump();
  EXPECT_EQ(NodeOf(Pod("next")), node);
  EXPECT_FALSE(Pod("low-0").has_value());
  int evicted = 0;
  for (const auto& r : api_.Requests()) evicted += r.method == "POST" && r.path == "/api/v1/namespaces/ml/pods/low-0/eviction";
  EXPECT_EQ(evicted, 1);
}

// Cut watches and a compaction (410 Gone: the informers relist) lose nothing: pods made meanwhile are placed.
TEST_F(SchedulerE2e, CutWatchesAndGoneRelist) {
  api_.set_bookmark_ms(200);
  Start();
  api_.CutWatches();
  api_.Create("pods", GpuRequestPod("after-cut", "nvidia.com/gpu", 1));
  ASSERT_TRUE(Eventually([&] { return !NodeOf(Pod("after-cut")).empty(); }));
  api_.Compact();
  api_.Create("pods", GpuRequestPod("after-gone", "nvidia.com/gpu", 1));
  ASSERT_TRUE(Eventually([&] { return !NodeOf(Pod("after-gone")).empty(); }));
  int lists = 0;
  for (const auto& r : api_.Requests()) lists += r.method == "GET" && r.path == "/api/v1/pods";
  EXPECT_GE(lists, 2) << "the pods were not listed again after 410 Gone";
}

// DRA end to end: a node whose 8 A100s the NVIDIA DRA driver announces as DynamicMIG ResourceSlices; a pod
// whose ResourceClaim asks for a 3g.40gb slice is bound there after its claim is allocated (a device of that
// node, reserved for the pod, Tessera's finalizer); a claim for 9 GPUs gets a reason and no node.
TEST_F(SchedulerE2e, DraClaimIsAllocatedReservedAndThePodBound) {
  json d0 = MigGpuNode("d0", "leaf-d", "all-disabled", json::object());
  d0["metadata"]["labels"].erase("nvidia.com/mig.config");
  d0["metadata"]["labels"].erase("nvidia.com/mig.config.state");
  api_.Create("nodes", d0);
  for (const json& dc : NvidiaDeviceClasses()) api_.Create("deviceclasses", dc);
  const GpuKind& a100 = Catalog::Default().kind(Catalog::Default().Find("a100-80gb"));
  for (const json& slice : NvidiaDynamicMigSlices(a100, "d0", NvidiaSliceOptions{})) api_.Create("resourceslices", slice);
  auto claim = [&](const std::string& name, const json& exactly) {
    api_.Create("resourceclaims", {{"metadata", {{"name", name}, {"namespace", "ml"}}},
                                   {"spec", {{"devices", {{"requests", {{{"name", "r"}, {"exactly", exactly}}}}}}}}});
  };
  auto pod = [&](const std::string& name, const std::string& claim_name) {
    json p = {{"metadata", {{"name", name}, {"namespace", "ml"}}},
              {"spec",
               {{"schedulerName", "tessera"},
                {"resourceClaims", {{{"name", "dev"}, {"resourceClaimName", claim_name}}}},
                {"containers",
                 {{{"name", "main"},
                   {"image", "server"},
                   {"resources", {{"requests", {{"cpu", "2"}, {"memory", "8Gi"}}}, {"claims", {{{"name", "dev"}}}}}}}}}}}};
    api_.Create("pods", p);
  };
  claim("slice", {{"deviceClassName", "mig.nvidia.com"},
                  {"selectors", {{{"cel", {{"expression", "device.attributes[\"gpu.nvidia.com\"].profile == \"3g.40gb\""}}}}}}});
  claim("nine", {{"deviceClassName", "gpu.nvidia.com"}, {"allocationMode", "ExactCount"}, {"count", 9}});
  pod("serve", "slice");
  pod("wide", "nine");
  Start();
  ASSERT_TRUE(Eventually([&] { return NodeOf(Pod("serve")) == "d0"; })) << Pod("serve")->dump();
  const json c = *api_.Get("resourceclaims", "ml", "slice");
  ASSERT_TRUE(c.contains("status") && c["status"].contains("allocation")) << c.dump();
  const json& results = c["status"]["allocation"]["devices"]["results"];
  ASSERT_EQ(results.size(), 1u) << c.dump();
  EXPECT_EQ(results[0]["driver"], "gpu.nvidia.com");
  EXPECT_EQ(results[0]["request"], "r");
  EXPECT_NE(results[0]["device"].get<std::string>().find("3g40gb"), std::string::npos) << results.dump();
  const std::string uid = (*Pod("serve"))["metadata"]["uid"];
  bool reserved = false;
  for (const json& r : c["status"].value("reservedFor", json::array())) reserved |= r.value("uid", "") == uid;
  EXPECT_TRUE(reserved) << c.dump();
  EXPECT_FALSE(c["metadata"].value("finalizers", json::array()).empty()) << c.dump();
  // The 9-GPU claim: a reason on its pod, no node, no allocation.
  ASSERT_TRUE(Eventually([&] { return !Unscheduled("wide").empty(); })) << Pod("wide")->dump();
  EXPECT_TRUE(NodeOf(Pod("wide")).empty());
  EXPECT_FALSE((*api_.Get("resourceclaims", "ml", "nine")).value("status", json::object()).contains("allocation"));
}

// Volcano and KAI Queues are Tessera teams with their quota: a job in a queue capped at 8 GPUs waits once the
// queue's 8 GPUs are used (while the cluster has room), a pod naming a queue that does not exist is told so,
// and a pod with a scheduling gate (Kueue's admission gate) is never bound until the gate is removed.
TEST_F(SchedulerE2e, QueuesAreTeamsAndGatedPodsWaitForTheirGates) {
  api_.Create("queues", {{"metadata", {{"name", "research"}}},
                         {"spec", {{"weight", 2}, {"capability", {{"nvidia.com/gpu", "8"}}}}}});
  api_.Create("kai-queues", {{"metadata", {{"name", "kai-team"}}},
                             {"spec", {{"resources", {{"gpu", {{"quota", 4}, {"limit", 16}, {"overQuotaWeight", 3}}}}}}}});
  Start();
  auto in_queue = [](json pod, const std::string& queue) {
    pod["metadata"]["annotations"] = {{"scheduling.volcano.sh/queue-name", queue}};
    return pod;
  };
  api_.Create("pods", in_queue(GpuRequestPod("r-0", "nvidia.com/gpu", 8), "research"));
  ASSERT_TRUE(Eventually([&] { return !NodeOf(Pod("r-0")).empty(); })) << [&] {
    bool more = false;
    std::string out;
    for (const JobView& v : scheduler_->service().List(Caller{"admin", "", Role::kAdmin}, "", "", "", 0, 100, &more))
      out += v.job->name + " " + v.job->team + " " + std::string(JobStateName(v.job->state)) + " " +
             (v.pending ? v.pending->message.str() : "-") + "\n";
    return out;
  }();
  api_.Create("pods", in_queue(GpuRequestPod("r-1", "nvidia.com/gpu", 1), "research"));
  api_.Create("pods", in_queue(GpuRequestPod("lost", "nvidia.com/gpu", 1), "nope"));
  json kai = GpuRequestPod("k-0", "nvidia.com/gpu", 8);
  kai["metadata"]["labels"]["kai.scheduler/queue"] = "kai-team";
  api_.Create("pods", kai);
  json gated = GpuRequestPod("gated", "nvidia.com/gpu", 8);
  gated["spec"]["schedulingGates"] = {{{"name", "kueue.x-k8s.io/admission"}}};
  api_.Create("pods", gated);
  ASSERT_TRUE(Eventually([&] {
    return Unscheduled("lost") == "QueueNotFound" && !Unscheduled("r-1").empty() && !NodeOf(Pod("k-0")).empty();
  })) << Unscheduled("lost") << " / " << Unscheduled("r-1");
  EXPECT_TRUE(NodeOf(Pod("r-1")).empty()) << "the queue's capability is 8 GPUs";
  Caller admin{"admin", "", Role::kAdmin};
  std::map<std::string, TeamView> teams;
  for (const TeamView& t : scheduler_->service().Teams(admin)) teams[t.name] = t;
  ASSERT_TRUE(teams.count("research") && teams.count("kai-team"));
  EXPECT_EQ(teams["research"].limit_milli, 8000);
  EXPECT_EQ(teams["research"].over_quota_weight, 2);
  EXPECT_EQ(teams["kai-team"].guaranteed_milli, 4000);
  EXPECT_EQ(teams["kai-team"].limit_milli, 16000);
  EXPECT_EQ(teams["kai-team"].over_quota_weight, 3);
  bool more = false;
  for (const JobView& v : scheduler_->service().List(admin, "", "", "", 0, 1000, &more))
    if (v.job->name == "r-0" || v.job->name == "k-0") EXPECT_EQ(v.job->team, v.job->name == "r-0" ? "research" : "kai-team");
  // The gate holds the pod back however long it waits; removed, the pod is placed.
  EXPECT_TRUE(NodeOf(Pod("gated")).empty());
  EXPECT_TRUE(Unscheduled("gated").empty()) << "a gated pod is not Tessera's to explain";
  ASSERT_TRUE(api_.Patch("pods", "ml", "gated", {{"spec", {{"schedulingGates", nullptr}}}}));
  ASSERT_TRUE(Eventually([&] { return !NodeOf(Pod("gated")).empty(); }));
  // A queue's new capability is followed: raised to 16, the waiting pod is placed.
  ASSERT_TRUE(api_.Patch("queues", "", "research", {{"spec", {{"capability", {{"nvidia.com/gpu", "16"}}}}}}));
  ASSERT_TRUE(Eventually([&] { return !NodeOf(Pod("r-1")).empty(); }));
}

// A job submitted through Tessera's API with a container becomes pods (and a PodGroup for a gang) in its
// team's namespace; the loop binds them, the job ends when they do, and a cancelled job's pods are deleted.
TEST_F(SchedulerE2e, ApiJobsBecomePodsAndFollowThem) {
  Start();
  Service& svc = scheduler_->service();
  const Caller admin{"admin", "", Role::kAdmin};
  TeamRow team;
  team.name = "vision";
  ASSERT_TRUE(svc.CreateTeam(admin, team).ok());
  const Caller lead{"ana", "vision", Role::kTeamLead};
  auto submit = [&](json body) {
    auto spec = ParseJobSpec(body);
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    auto job = svc.Submit(lead, spec.value(), "");
    EXPECT_TRUE(job.ok()) << job.error().message;
    return job.ok() ? job->job->id : int64_t{-1};
  };
  auto state = [&](int64_t id) { return svc.Get(admin, id)->job->state; };
  auto pod = [&](const std::string& name) { return api_.Get("pods", "vision", name); };
  const json container = {{"image", "trainer:1"}, {"command", {"python", "train.py"}}};
  const int64_t a = submit({{"name", "a"}, {"class", "training"}, {"workers", 2}, {"gpus_per_worker", 8},
                            {"container", container}});
  const std::string a0 = fmt::format("tessera-{}-0", a), a1 = fmt::format("tessera-{}-1", a);
  // Tessera never creates namespaces: the job's pods wait for the team's namespace.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_FALSE(pod(a0).has_value());
  EXPECT_FALSE(api_.Get("namespaces", "", "vision").has_value());
  api_.Create("namespaces", {{"metadata", {{"name", "vision"}}}});
  ASSERT_TRUE(Eventually([&] { return !NodeOf(pod(a0)).empty() && !NodeOf(pod(a1)).empty(); }));
  EXPECT_TRUE(api_.Get("podgroups", "vision", fmt::format("tessera-{}", a)).has_value());
  EXPECT_EQ((*pod(a0))["spec"]["containers"][0]["image"], "trainer:1");
  EXPECT_EQ(state(a), JobState::kRunning);
  // A job that waits for the whole cluster: its pods exist, unbound; cancelled, they go.
  const int64_t b = submit({{"name", "b"}, {"class", "training"}, {"workers", 6}, {"gpus_per_worker", 8},
                            {"container", container}});
  const std::string b0 = fmt::format("tessera-{}-0", b);
  ASSERT_TRUE(Eventually([&] { return pod(b0).has_value(); }));
  EXPECT_TRUE(NodeOf(pod(b0)).empty());
  ASSERT_TRUE(svc.Cancel(lead, b).ok());
  ASSERT_TRUE(Eventually([&] { return !pod(b0).has_value(); }));
  // What Kubernetes cannot run (a fraction of a GPU without a MIG profile) is cancelled, never half-made.
  const int64_t f = submit({{"name", "f"}, {"gpu_fraction", 0.25}, {"container", container}});
  ASSERT_TRUE(Eventually([&] { return state(f) == JobState::kCancelled; }));
  EXPECT_FALSE(pod(fmt::format("tessera-{}-0", f)).has_value());
  // A team the mapping does not name gets no pods, even one named after a system namespace.
  TeamRow system;
  system.name = "kube-system";
  ASSERT_TRUE(svc.CreateTeam(admin, system).ok());
  auto k = svc.Submit(Caller{"eve", "kube-system", Role::kTeamLead},
                      ParseJobSpec({{"name", "k"}, {"gpus_per_worker", 1}, {"container", container}}).value(), "");
  ASSERT_TRUE(k.ok()) << k.error().message;
  ASSERT_TRUE(Eventually([&] { return state(k->job->id) == JobState::kCancelled; }));
  EXPECT_FALSE(api_.Get("pods", "kube-system", fmt::format("tessera-{}-0", k->job->id)).has_value());
  // The job ends when its pods do.
  for (const std::string& name : {a0, a1}) ASSERT_TRUE(api_.Patch("pods", "vision", name, {{"status", {{"phase", "Succeeded"}}}}));
  ASSERT_TRUE(Eventually([&] { return state(a) == JobState::kSucceeded; })) << JobStateName(state(a));
  // No pod of the API's jobs became a job of its own.
  bool more = false;
  for (const JobView& v : svc.List(admin, "", "", "", 0, 1000, &more)) EXPECT_NE(v.job->project, "pod/vision");
}

// A PodDisruptionBudget that allows no disruption now protects its pods' jobs: a critical pod that needs a
// whole node preempts the one low-priority job no budget protects, never the protected ones.
TEST_F(SchedulerE2e, PodsABudgetProtectsAreNoVictims) {
  api_.Create("poddisruptionbudgets",
              {{"metadata", {{"name", "keep"}, {"namespace", "ml"}}},
               {"spec", {{"minAvailable", 5}, {"selector", {{"matchLabels", {{"app", "keep"}}}}}}},
               {"status", {{"disruptionsAllowed", 0}, {"currentHealthy", 5}, {"desiredHealthy", 5}}}});
  min_runtime_s_ = 0;  // young jobs may be preempted
  Start();
  for (int i = 0; i < 6; ++i) {
    json low = GpuRequestPod("low-" + std::to_string(i), "nvidia.com/gpu", 8, "", "low");
    low["spec"]["terminationGracePeriodSeconds"] = 0;
    if (i != 3) low["metadata"]["labels"]["app"] = "keep";
    api_.Create("pods", low);
  }
  ASSERT_TRUE(Eventually([&] {
    for (int i = 0; i < 6; ++i)
      if (NodeOf(Pod("low-" + std::to_string(i))).empty()) return false;
    return true;
  }));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the budget read after the bindings
  api_.Create("pods", GpuRequestPod("urgent", "nvidia.com/gpu", 8, "", "critical"));
  ASSERT_TRUE(Eventually([&] { return !NodeOf(Pod("urgent")).empty(); })) << Unscheduled("urgent");
  EXPECT_FALSE(Pod("low-3").has_value()) << "the unprotected job is the victim";
  for (int i : {0, 1, 2, 4, 5}) EXPECT_FALSE(NodeOf(Pod("low-" + std::to_string(i))).empty()) << i;
  for (const auto& r : api_.Requests())
    if (r.method == "POST" && r.path.find("/eviction") != std::string::npos)
      EXPECT_NE(r.path.find("/pods/low-3/"), std::string::npos) << r.path;
}

// A PriorityClass with preemptionPolicy: Never: its pod waits for capacity and never preempts, however low
// what holds the GPUs (as kube-scheduler does); once a low pod ends, it is bound on the GPUs that freed.
TEST_F(SchedulerE2e, PodsOfANeverPreemptingClassWaitForCapacity) {
  api_.Create("priorityclasses",
              {{"metadata", {{"name", "patient"}}}, {"value", 1000}, {"preemptionPolicy", "Never"}});
  min_runtime_s_ = 0;  // young jobs may be preempted
  Start();
  for (int i = 0; i < 6; ++i) {
    json low = GpuRequestPod("low-" + std::to_string(i), "nvidia.com/gpu", 8, "", "low");
    low["spec"]["terminationGracePeriodSeconds"] = 0;
    api_.Create("pods", low);
  }
  ASSERT_TRUE(Eventually([&] {
    for (int i = 0; i < 6; ++i)
      if (NodeOf(Pod("low-" + std::to_string(i))).empty()) return false;
    return true;
  }));
  api_.Create("pods", GpuRequestPod("patient", "nvidia.com/gpu", 8, "", "patient"));
  ASSERT_TRUE(Eventually([&] { return !Unscheduled("patient").empty(); }));
  std::this_thread::sleep_for(std::chrono::seconds(2));  // several cycles
  EXPECT_TRUE(NodeOf(Pod("patient")).empty());
  for (const auto& r : api_.Requests())
    EXPECT_FALSE(r.method == "POST" && r.path.find("/eviction") != std::string::npos) << r.path;
  const std::string freed = NodeOf(Pod("low-2"));
  ASSERT_TRUE(api_.Patch("pods", "ml", "low-2", {{"status", {{"phase", "Succeeded"}}}}));
  ASSERT_TRUE(Eventually([&] { return !NodeOf(Pod("patient")).empty(); })) << Unscheduled("patient");
  EXPECT_EQ(NodeOf(Pod("patient")), freed);
}

// Pods whose claims ask for whole GPUs are jobs of the loop: on two nodes whose GPUs only DRA publishes, a
// Volcano Queue's capability caps its team's DRA pods (the one over it waits with a reason naming the limit),
// the jobs show in the Service with their team and its allocated GPUs, and a higher-priority DRA pod on the
// full DRA nodes is bound after the loop evicts a lower-priority one (whose claim the test deallocates, as
// the resourceclaim controller would).
TEST_F(SchedulerE2e, DraPodsAreJobsOfTheLoop) {
  DraNodes(2, 4);
  api_.Create("queues",
              {{"metadata", {{"name", "capped"}}}, {"spec", {{"capability", {{"nvidia.com/gpu", "2"}}}}}});
  // The resourceclaim controller's part: a claim reserved only for pods that are gone is deallocated.
  auto deallocate_orphans = [&] {
    std::set<std::string> uids;
    for (const json& p : api_.List("pods")) uids.insert(p["metadata"].value("uid", ""));
    for (const json& c : api_.List("resourceclaims")) {
      const json reserved = c.value("status", json::object()).value("reservedFor", json::array());
      bool live = false;
      for (const json& r : reserved) live |= uids.count(r.value("uid", "")) > 0;
      if (!reserved.empty() && !live) (void)api_.Patch("resourceclaims", "ml", c["metadata"]["name"].get<std::string>(), {{"status", nullptr}});
    }
  };
  min_runtime_s_ = 0;
  Start();
  for (int i = 0; i < 3; ++i) DraPod("capped-" + std::to_string(i), 1, "tessera-serving", "capped");
  ASSERT_TRUE(Eventually([&] {
    int bound = 0;
    for (int i = 0; i < 3; ++i) bound += !NodeOf(Pod("capped-" + std::to_string(i))).empty();
    return bound == 2;
  }));
  std::string waiting;
  for (int i = 0; i < 3; ++i)
    if (NodeOf(Pod("capped-" + std::to_string(i))).empty()) waiting = "capped-" + std::to_string(i);
  ASSERT_TRUE(Eventually([&] { return !Unscheduled(waiting).empty(); }));
  std::string message;
  const json waiting_pod = *Pod(waiting);
  for (const json& c : waiting_pod["status"]["conditions"])
    if (c.value("type", "") == "PodScheduled") message = c.value("message", "");
  EXPECT_TRUE(message.find("limit") != std::string::npos || message.find("quota") != std::string::npos) << message;
  for (int i = 0; i < 3; ++i) {
    const std::string node = NodeOf(Pod("capped-" + std::to_string(i)));
    EXPECT_TRUE(node.empty() || node == "d0" || node == "d1") << node;
  }
  // The Service's view: jobs with their team (the waiting one pending), the team's allocated GPUs.
  Caller admin{"admin", "", Role::kAdmin};
  bool more = false;
  int running = 0, pending = 0;
  for (const JobView& v : scheduler_->service().List(admin, "", "", "", 0, 1000, &more)) {
    if (v.job->name.rfind("capped-", 0) != 0) continue;
    EXPECT_EQ(v.job->team, "capped");
    running += v.job->state == JobState::kRunning;
    pending += v.job->state == JobState::kPending && v.job->name == waiting;
  }
  EXPECT_EQ(running, 2);
  EXPECT_EQ(pending, 1);
  ASSERT_TRUE(Eventually([&] {
    for (const TeamView& t : scheduler_->service().Teams(admin))
      if (t.name == "capped") return t.allocated_milli == 2000;
    return false;
  }));
  // The rest of the 8 DRA GPUs go to low-priority pods; then a critical 2-GPU pod preempts.
  for (int i = 0; i < 6; ++i) DraPod("batch-" + std::to_string(i), 1, "low", "");
  ASSERT_TRUE(Eventually([&] {
    for (int i = 0; i < 6; ++i)
      if (NodeOf(Pod("batch-" + std::to_string(i))).empty()) return false;
    return true;
  }));
  DraPod("prod", 2, "critical", "");
  ASSERT_TRUE(Eventually([&] {
    deallocate_orphans();
    return !NodeOf(Pod("prod")).empty();
  })) << Unscheduled("prod");
  int gone = 0;
  for (int i = 0; i < 6; ++i) gone += !Pod("batch-" + std::to_string(i)).has_value();
  EXPECT_GE(gone, 1);
  EXPECT_LE(gone, 2);
  EXPECT_TRUE(Pod("capped-0") && Pod("capped-1") && Pod("capped-2")) << "a victim of higher priority";
  const json claim = *api_.Get("resourceclaims", "ml", "prod-gpu");
  EXPECT_EQ(claim["status"]["allocation"]["devices"]["results"].size(), 2u) << claim.dump();
}

// --kube-api-qps and --kube-api-burst: at 5 requests per second with bursts of 1, binding 8 pods (a binding
// each, besides their Events) takes at least 7 / 5 s from the first; every pod is bound.
TEST_F(SchedulerE2e, ApiRequestsKeepToTheQpsLimit) {
  kube_api_qps_ = 5;
  kube_api_burst_ = 1;
  Start();
  const size_t before = api_.Requests().size();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 8; ++i)
    api_.Create("pods", GpuRequestPod("limited-" + std::to_string(i), "nvidia.com/gpu", 1));
  ASSERT_TRUE(Eventually([&] {
    for (int i = 0; i < 8; ++i)
      if (NodeOf(Pod("limited-" + std::to_string(i))).empty()) return false;
    return true;
  }));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(took, 1.4 - 0.05) << "8 bindings at 5/s after a burst of 1";
  int bindings = 0;
  const std::vector<testing::FakeRequest> requests = api_.Requests();
  for (size_t i = before; i < requests.size(); ++i)
    bindings += requests[i].method == "POST" && requests[i].path.find("/binding") != std::string::npos;
  EXPECT_EQ(bindings, 8);
}

// PodGroup members with claims are one gang of the loop: a pair whose claims ask for 4 whole GPUs each is
// bound whole on the two DRA nodes of 4 GPUs, each member's claim allocated 4 devices of its own node; a trio
// of 2 GPUs each that cannot fit beside it has no member bound (all or nothing) and says why.
TEST_F(SchedulerE2e, PodGroupMembersWithClaimsAreOneGangOfTheLoop) {
  DraNodes(2, 4);
  min_runtime_s_ = 0;
  Start();
  api_.Create("podgroups", PodGroup("pair", 2));
  api_.Create("podgroups", PodGroup("trio", 3));
  for (int i = 0; i < 2; ++i) DraPod("pair-" + std::to_string(i), 4, "tessera-serving", "", "pair");
  ASSERT_TRUE(Eventually([&] { return !NodeOf(Pod("pair-0")).empty() && !NodeOf(Pod("pair-1")).empty(); }))
      << Unscheduled("pair-0") << " / " << Unscheduled("pair-1");
  EXPECT_EQ((std::set<std::string>{NodeOf(Pod("pair-0")), NodeOf(Pod("pair-1"))}),
            (std::set<std::string>{"d0", "d1"}));
  for (int i = 0; i < 2; ++i) {
    const std::string pod = "pair-" + std::to_string(i);
    const json claim = *api_.Get("resourceclaims", "ml", pod + "-gpu");
    const json& results = claim["status"]["allocation"]["devices"]["results"];
    ASSERT_EQ(results.size(), 4u) << claim.dump();
    for (const json& r : results) EXPECT_EQ(r.value("pool", ""), NodeOf(Pod(pod))) << r.dump();
  }
  bool in_loop = false, more = false;
  for (const JobView& v : scheduler_->service().List({"admin", "", Role::kAdmin}, "", "", "", 0, 100, &more))
    in_loop |= v.job->name == "pair" && v.job->request.tasks == 2 && v.job->state == JobState::kRunning;
  EXPECT_TRUE(in_loop) << "the pair is not one running gang of 2 tasks in the Service";

  for (int i = 0; i < 3; ++i) DraPod("trio-" + std::to_string(i), 2, "tessera-serving", "", "trio");
  ASSERT_TRUE(Eventually([&] { return !Unscheduled("trio-0").empty(); }));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  for (int i = 0; i < 3; ++i) {
    const std::string pod = "trio-" + std::to_string(i);
    EXPECT_TRUE(NodeOf(Pod(pod)).empty()) << pod;
    EXPECT_FALSE((*api_.Get("resourceclaims", "ml", pod + "-gpu"))
                     .value("status", json::object())
                     .contains("allocation"))
        << pod;
  }
}

// One queue order across the loop and the DRA path: a pod whose claim asks for 4 whole GPUs (a job of the
// loop) and one behind it whose claim asks for all of the node's GPUs (allocationMode All: the DRA path) wait
// together for a node of 4 GPUs that only DRA publishes; the first is bound there and the DRA path does not
// take the node before it (the second waits with a reason, its claim unallocated).
TEST_F(SchedulerE2e, TheDraPathDoesNotOvertakeLoopPodsAheadOfIt) {
  DraNodes(1, 4);
  auto claimed_pod = [&](const std::string& name, const json& exactly) {
    api_.Create("resourceclaims", {{"metadata", {{"name", name}, {"namespace", "ml"}}},
                                   {"spec", {{"devices", {{"requests", {{{"name", "r"}, {"exactly", exactly}}}}}}}}});
    api_.Create("pods", {{"metadata", {{"name", name}, {"namespace", "ml"}}},
                         {"spec",
                          {{"schedulerName", "tessera"},
                           {"resourceClaims", {{{"name", "dev"}, {"resourceClaimName", name}}}},
                           {"containers",
                            {{{"name", "main"},
                              {"image", "trainer"},
                              {"resources",
                               {{"requests", {{"cpu", "2"}, {"memory", "8Gi"}}}, {"claims", {{{"name", "dev"}}}}}}}}}}}});
  };
  claimed_pod("a-count", {{"deviceClassName", "gpu.nvidia.com"}, {"allocationMode", "ExactCount"}, {"count", 4}});
  claimed_pod("b-all", {{"deviceClassName", "gpu.nvidia.com"}, {"allocationMode", "All"}});
  Start();
  ASSERT_TRUE(Eventually([&] { return NodeOf(Pod("a-count")) == "d0"; }))
      << Unscheduled("a-count") << " / b-all on '" << NodeOf(Pod("b-all")) << "'";
  ASSERT_TRUE(Eventually([&] { return !Unscheduled("b-all").empty(); })) << Pod("b-all")->dump();
  EXPECT_TRUE(NodeOf(Pod("b-all")).empty());
  EXPECT_FALSE((*api_.Get("resourceclaims", "ml", "b-all")).value("status", json::object()).contains("allocation"));
  const json a = *api_.Get("resourceclaims", "ml", "a-count");
  EXPECT_EQ(a["status"]["allocation"]["devices"]["results"].size(), 4u) << a.dump();
}

// Nodes whose nvidia.com/mig.config is none of Tessera's names never stop the scheduler: a config of the
// ConfigMap the GPU Operator's ClusterPolicy names is read from it, a name in no ConfigMap is modelled from
// what the node advertises (with an Event on the node), a node neither can lay out is refused with an Event;
// pods asking for the profiles of the first two are placed there.
TEST_F(SchedulerE2e, NodesWithConfigsTesseraDoesNotNameAreModelledAndPlacedOn) {
  api_.ServeKind("clusterpolicies");
  api_.Create("clusterpolicies", {{"metadata", {{"name", "cluster-policy"}}},
                                  {"spec", {{"migManager", {{"enabled", true}, {"config", {{"name", "site-mig"}}}}}}},
                                  {"status", {{"state", "ready"}, {"namespace", "gpu-operator"}}}});
  api_.Create("configmaps",
              {{"metadata", {{"name", "site-mig"}, {"namespace", "gpu-operator"}}},
               {"data", {{"config.yaml", "version: v1\nmig-configs:\n  inference-mix:\n    - devices: all\n"
                                         "      mig-enabled: true\n      mig-devices: {\"4g.40gb\": 1, \"3g.40gb\": 1}\n"
                                         "  broken:\n    - devices: seven\n"}}}});
  api_.Create("nodes", MigGpuNode("custom", "leaf-c", "inference-mix",
                                  {{"nvidia.com/mig-4g.40gb", "8"}, {"nvidia.com/mig-3g.40gb", "8"}}));
  json gfd = MigGpuNode("gfd", "leaf-c", "site-mix-2g3g", {{"nvidia.com/mig-2g.20gb", "16"}, {"nvidia.com/mig-3g.40gb", "8"}});
  gfd["metadata"]["labels"]["nvidia.com/mig-2g.20gb.count"] = "16";
  gfd["metadata"]["labels"]["nvidia.com/mig-3g.40gb.count"] = "8";
  api_.Create("nodes", gfd);
  // 8 x 7g.80gb and 8 x 4g.40gb on 8 GPUs: no layout holds them.
  api_.Create("nodes", MigGpuNode("impossible", "leaf-c", "big-mix",
                                  {{"nvidia.com/mig-7g.80gb", "8"}, {"nvidia.com/mig-4g.40gb", "8"}}));
  Start();
  for (int i = 0; i < 2; ++i) {
    api_.Create("pods", GpuRequestPod("infer-4g-" + std::to_string(i), "nvidia.com/mig-4g.40gb", 1));
    api_.Create("pods", GpuRequestPod("infer-2g-" + std::to_string(i), "nvidia.com/mig-2g.20gb", 1));
  }
  ASSERT_TRUE(Eventually([&] {
    for (int i = 0; i < 2; ++i)
      if (NodeOf(Pod("infer-4g-" + std::to_string(i))).empty() || NodeOf(Pod("infer-2g-" + std::to_string(i))).empty())
        return false;
    return true;
  })) << Unscheduled("infer-4g-0") << " / " << Unscheduled("infer-2g-0");
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(NodeOf(Pod("infer-4g-" + std::to_string(i))), "custom");  // "impossible" advertises 4g.40gb too
    EXPECT_EQ(NodeOf(Pod("infer-2g-" + std::to_string(i))), "gfd");
  }
  std::map<std::string, std::string> reasons;  // kind/name -> reason of Tessera's Warning about it
  for (const json& e : api_.List("events"))
    reasons[e["involvedObject"].value("kind", "") + "/" + e["involvedObject"].value("name", "")] = e.value("reason", "");
  EXPECT_EQ(reasons["ConfigMap/site-mig"], "MigConfigNotRead");  // its config `broken`; the others are used
  EXPECT_EQ(reasons["Node/gfd"], "MigLayoutFromGfd");
  EXPECT_EQ(reasons["Node/impossible"], "MigLayoutNotModelled");
  EXPECT_FALSE(reasons.count("Node/custom")) << reasons["Node/custom"];
  const Caller admin{"e2e", "", Role::kAdmin, ""};
  auto nodes = scheduler_->service().ListNodes(admin);
  ASSERT_TRUE(nodes.ok());
  std::set<std::string> names;
  for (const NodeView& v : nodes.value()) names.insert(v.name);
  EXPECT_TRUE(names.count("custom") && names.count("gfd"));
  EXPECT_FALSE(names.count("impossible"));
}

// Without the GPU Operator's ClusterPolicy kind (404), its default ConfigMap is where configs are looked up.
TEST_F(SchedulerE2e, WithoutAClusterPolicyTheOperatorsDefaultConfigMapIsRead) {
  api_.Create("configmaps",
              {{"metadata", {{"name", "default-mig-parted-config"}, {"namespace", "gpu-operator"}}},
               {"data", {{"config.yaml", "version: v1\nmig-configs:\n  two-threes:\n    - devices: all\n"
                                         "      mig-enabled: true\n      mig-devices: {\"3g.40gb\": 2}\n"}}}});
  api_.Create("nodes", MigGpuNode("threes", "leaf-c", "two-threes", {{"nvidia.com/mig-3g.40gb", "16"}}));
  Start();
  api_.Create("pods", GpuRequestPod("infer-3g", "nvidia.com/mig-3g.40gb", 1));
  ASSERT_TRUE(Eventually([&] { return !NodeOf(Pod("infer-3g")).empty(); })) << Unscheduled("infer-3g");
  EXPECT_EQ(NodeOf(Pod("infer-3g")), "threes");
  bool asked = false, read = false;
  for (const auto& r : api_.Requests()) {
    asked |= r.path == "/apis/nvidia.com/v1/clusterpolicies" && r.status == 404;
    read |= r.path == "/api/v1/namespaces/gpu-operator/configmaps/default-mig-parted-config" && r.status == 200;
  }
  EXPECT_TRUE(asked);
  EXPECT_TRUE(read);
  // Laid out from the ConfigMap's config, not from what it advertises: no Warning about the node.
  for (const json& e : api_.List("events"))
    EXPECT_NE(e["involvedObject"].value("name", ""), "threes") << e.dump();
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Served by the scheduler, the extender's /filter and /prioritize answer for kube-scheduler's pods from the
// loop's view: a node where the loop's job holds 6 of 8 GPUs does not take 4 more (by allocatable alone it
// would), the MIG node offers no whole GPU, and the loop's first choice scores 10.
TEST_F(SchedulerE2e, ExtenderVerbsAnswerFromTheLoopsView) {
  extender_ = ExtenderServerOptions{};
  extender_->port = 0;
  Start();
  ASSERT_FALSE(scheduler_->extender_url().empty());
  api_.Create("pods", GpuRequestPod("six", "nvidia.com/gpu", 6));
  ASSERT_TRUE(Eventually([&] { return !NodeOf(Pod("six")).empty(); }));
  const std::string busy = NodeOf(Pod("six"));
  json nodes = json::array();
  for (const char* n : {"n0", "n1", "n2", "n3", "n4", "n5", "m0"}) nodes.push_back(*api_.Get("nodes", "", n));
  json pod = GpuRequestPod("theirs", "nvidia.com/gpu", 4);
  pod["spec"]["schedulerName"] = "default-scheduler";
  const json args = {{"Pod", pod}, {"Nodes", {{"items", nodes}}}};
  httplib::Client c(scheduler_->extender_url());
  auto f = c.Post("/filter", args.dump(), "application/json");
  ASSERT_TRUE(f && f->status == 200) << (f ? f->body : "no answer");
  const json filtered = json::parse(f->body);
  EXPECT_EQ(filtered["Error"], "");
  std::set<std::string> passed;
  for (const json& n : filtered["Nodes"]["items"]) passed.insert(n["metadata"]["name"]);
  EXPECT_EQ(passed.size(), 5u) << filtered.dump();
  EXPECT_FALSE(passed.count(busy)) << busy << " holds the loop's 6-GPU job";
  EXPECT_FALSE(passed.count("m0"));
  EXPECT_TRUE(filtered["FailedNodes"].contains(busy)) << filtered["FailedNodes"].dump();
  auto p = c.Post("/prioritize", args.dump(), "application/json");
  ASSERT_TRUE(p && p->status == 200) << (p ? p->body : "no answer");
  std::map<std::string, int> score;
  for (const json& h : json::parse(p->body)) score[h["Host"]] = h["Score"];
  EXPECT_EQ(score[busy], 0);
  EXPECT_EQ(score["m0"], 0);
  int tens = 0;
  for (const auto& [node, s] : score) tens += s == 10;
  EXPECT_EQ(tens, 1) << p->body;
}

// Served by the scheduler, /preempt judges a victim that is a pod of a job the loop runs as the loop does:
// here the loop bound it seconds ago (under --min-runtime 300), whatever the pod's startTime says, so it is
// not taken; a victim the loop does not run, started as long ago, is judged from the pod and taken.
TEST_F(SchedulerE2e, ExtenderPreemptAsksTheLoopAboutItsOwnJobs) {
  extender_ = ExtenderServerOptions{};
  extender_->port = 0;
  Start();
  api_.Create("pods", GpuRequestPod("six", "nvidia.com/gpu", 6));
  ASSERT_TRUE(Eventually([&] { return !NodeOf(Pod("six")).empty(); }));
  const std::string node = NodeOf(Pod("six"));
  const std::string day_ago = FormatIsoUtc(static_cast<int64_t>(std::time(nullptr)) - 86400);
  json ours = *api_.Get("pods", "ml", "six");
  ours["status"]["startTime"] = day_ago;
  json other = GpuRequestPod("other", "nvidia.com/gpu", 6);
  other["metadata"]["uid"] = "uid-not-the-loops";
  other["spec"]["priority"] = 500;
  other["status"]["startTime"] = day_ago;
  json pod = GpuRequestPod("urgent", "nvidia.com/gpu", 4, "", "critical");
  pod["spec"]["schedulerName"] = "default-scheduler";
  pod["spec"]["priority"] = 1000;
  httplib::Client c(scheduler_->extender_url());
  auto victims = [&](const json& v) {
    const json args = {{"Pod", pod},
                       {"NodeNameToVictims", {{node, {{"Pods", {v}}, {"NumPDBViolations", 0}}}}}};
    auto r = c.Post("/preempt", args.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    const json m = r ? json::parse(r->body)["NodeNameToMetaVictims"] : json::object();
    return m.contains(node) ? m[node]["Pods"].size() : 0;
  };
  EXPECT_EQ(victims(ours), 0u) << "the loop's job ran under --min-runtime";
  EXPECT_EQ(victims(other), 1u) << "not the loop's: judged from the pod";
}

}  // namespace
}  // namespace tessera
