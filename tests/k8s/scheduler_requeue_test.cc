// `tessera k8s scheduler` end to end on the in-process fake API server (fake_apiserver.h), for what happens
// around the loop's own placements: a MIG repartition's drain preempts through the loop (an API job gets a
// new pod and runs again, a bare pod's job is never shown finished), a node with another scheduler's pod is
// never drained, a drain that cannot end is abandoned and reported, a repartition cut by a restart is
// resumed, a repartition is made for the loop's waiting jobs and not for a job its
// queue's limit holds, another scheduler's GPUs are taken off at once and given back when its pod ends, and
// pods that ask no GPU are bound (or told why not). The test plays the GPU Operator's MIG manager
// (RqMigManager).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "k8s/api/kubeconfig.h"
#include "k8s/fake_apiserver.h"
#include "k8s/scheduler.h"
#include "service/workload_json.h"

namespace tessera {
namespace {

using json = nlohmann::json;
using testing::FakeApiServer;

constexpr const char* kRqConfigs = R"(version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
  all-7g.80gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"7g.80gb": 1}
)";

// What a node of 8 A100-80GB advertises under each config of kRqConfigs (every device resource named).
json RqDevices(const std::string& config) {
  json d = {{"nvidia.com/gpu", "0"}, {"nvidia.com/mig-1g.10gb", "0"}, {"nvidia.com/mig-7g.80gb", "0"}};
  if (config == "all-disabled") d["nvidia.com/gpu"] = "8";
  if (config == "all-1g.10gb") d["nvidia.com/mig-1g.10gb"] = "56";
  if (config == "all-7g.80gb") d["nvidia.com/mig-7g.80gb"] = "8";
  return d;
}

json RqNode(const std::string& name, const std::string& config, bool cordoned = false) {
  json alloc = {{"cpu", "255500m"}, {"memory", "2112998564Ki"}, {"pods", "110"}};
  alloc.update(RqDevices(config));
  return {{"metadata",
           {{"name", name},
            {"labels",
             {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}, {"nvidia.com/gpu.count", "8"},
              {"nvidia.com/mig.capable", "true"}, {"nvidia.com/mig.strategy", "mixed"},
              {"nvidia.com/mig.config", config}, {"nvidia.com/mig.config.state", "success"},
              {"tessera.io/leaf", "leaf-a"}}}}},
          {"spec", {{"unschedulable", cordoned}}},
          {"status",
           {{"allocatable", alloc}, {"capacity", alloc}, {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

// A pod of `ns` asking `count` of `resource` (none when empty) with its CPU and memory.
json RqPod(const std::string& ns, const std::string& name, const std::string& resource, int count,
           const std::string& priority_class = "", const std::string& scheduler = "tessera",
           const std::string& cpu = "2") {
  json requests = {{"cpu", cpu}, {"memory", "8Gi"}}, limits = json::object();
  if (!resource.empty()) requests[resource] = limits[resource] = std::to_string(count);
  json pod = {{"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"app", name}}}}},
              {"spec",
               {{"schedulerName", scheduler},
                {"containers", {{{"name", "main"}, {"image", "app"},
                                 {"resources", {{"requests", requests}, {"limits", limits}}}}}}}}};
  if (!priority_class.empty()) pod["spec"]["priorityClassName"] = priority_class;
  return pod;
}

// A pod bound before (another scheduler's, or ours from an earlier run) and running on `node`.
json RqBoundPod(json pod, const std::string& node) {
  pod["spec"]["nodeName"] = node;
  pod["status"] = {{"phase", "Running"}};
  return pod;
}

// The GPU Operator's MIG manager as far as the scheduler sees it: a node whose nvidia.com/mig.config names
// a config it does not advertise goes to state pending, then (next round, 300 ms later) success with the
// config's devices.
class RqMigManager {
 public:
  explicit RqMigManager(FakeApiServer* api) : api_(api), thread_([this] { Run(); }) {}
  ~RqMigManager() {
    stop_ = true;
    thread_.join();
  }

 private:
  void Run() {
    while (!stop_) {
      for (const json& n : api_->List("nodes")) {
        const json& labels = n["metadata"]["labels"];
        const std::string config = labels.value("nvidia.com/mig.config", ""), state =
                                       labels.value("nvidia.com/mig.config.state", "");
        if (config.empty()) continue;
        bool advertised = true;
        const json alloc = n["status"].value("allocatable", json::object());
        const json devices = RqDevices(config);
        for (const auto& [r, v] : devices.items()) advertised &= alloc.value(r, std::string("0")) == v;
        const std::string name = n["metadata"]["name"];
        if (advertised && state == "success") continue;
        if (state != "pending") {
          api_->Patch("nodes", "", name, {{"metadata", {{"labels", {{"nvidia.com/mig.config.state", "pending"}}}}}});
          continue;
        }
        api_->Patch("nodes", "", name,
                    {{"metadata", {{"labels", {{"nvidia.com/mig.config.state", "success"}}}}},
                     {"status", {{"allocatable", RqDevices(config)}, {"capacity", RqDevices(config)}}}});
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  }

  FakeApiServer* api_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class RequeueE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tessera-k8s-requeue-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    api_.Create("priorityclasses", {{"metadata", {{"name", "batch"}}}, {"value", 100}});
    api_.Create("priorityclasses", {{"metadata", {{"name", "critical"}}}, {"value", 1000}});
    api_.Create("priorityclasses", {{"metadata", {{"name", "production"}}}, {"value", 100000}});
    api_.Create("configmaps", {{"metadata", {{"name", "mig-parted"}, {"namespace", "gpu-operator"}}},
                               {"data", {{"config.yaml", kRqConfigs}}}});
  }
  void TearDown() override {
    for (const std::string& o : api_.Overcommits()) ADD_FAILURE() << "overcommitted: " << o;
    if (scheduler_) scheduler_->Stop();
    scheduler_.reset();
    mig_manager_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Start(bool repartition = true) {
    const std::string kubeconfig = (dir_ / "kubeconfig").string();
    api_.WriteKubeconfig(kubeconfig);
    auto kube = LoadKubeconfig(kubeconfig, "");
    ASSERT_TRUE(kube.ok()) << kube.error();
    SchedulerOptions o;
    o.db = (dir_ / "tessera.db").string();
    o.identity = "requeue";
    o.min_runtime_s = min_runtime_s_;
    if (repartition) o.mig_config_map = "gpu-operator/mig-parted";
    o.mig_drain_timeout_s = drain_timeout_s_;
    if (std::getenv("TESSERA_TEST_LOG") != nullptr)
      o.log = [](const std::string& line) { std::fprintf(stderr, "scheduler: %s\n", line.c_str()); };
    if (repartition) mig_manager_ = std::make_unique<RqMigManager>(&api_);
    auto s = K8sScheduler::Start(*kube, o);
    ASSERT_TRUE(s.ok()) << s.error();
    scheduler_ = std::move(s).value();
  }
  // Waits up to `s` seconds for `done`, calling `each` (when given) every 100 ms meanwhile.
  bool Eventually(const std::function<bool()>& done, int s = 60, const std::function<void()>& each = nullptr) {
    for (int i = 0; i < s * 10; ++i) {
      if (each) each();
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return done();
  }
  std::string NodeOf(const std::string& ns, const std::string& name) {
    auto p = api_.Get("pods", ns, name);
    return p && (*p)["spec"].contains("nodeName") ? (*p)["spec"]["nodeName"].get<std::string>() : "";
  }
  // The PodScheduled=False message of a pod ("" while it has none).
  std::string Reason(const std::string& ns, const std::string& name) {
    auto p = api_.Get("pods", ns, name);
    for (const json& c : p ? (*p)["status"].value("conditions", json::array()) : json::array())
      if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False") return c.value("message", "");
    return "";
  }
  JobPtr JobNamed(const std::string& name) {
    bool more = false;
    for (const JobView& v : scheduler_->service().List(admin_, "", "", "", 0, 1000, &more))
      if (v.job->name == name) return v.job;
    return nullptr;
  }
  int Evictions(const std::string& pod) {
    int n = 0;
    for (const auto& r : api_.Requests())
      n += r.method == "POST" && r.path.find("/pods/" + pod + "/eviction") != std::string::npos;
    return n;
  }
  bool EventAbout(const std::string& reason, const std::string& name) {
    for (const json& e : api_.List("events"))
      if (e.value("reason", "") == reason && e["involvedObject"].value("name", "") == name) return true;
    return false;
  }

  FakeApiServer api_;
  int64_t drain_timeout_s_ = 300;
  int64_t min_runtime_s_ = 5;
  std::filesystem::path dir_;
  std::unique_ptr<RqMigManager> mig_manager_;
  std::unique_ptr<K8sScheduler> scheduler_;
  const Caller admin_{"admin", "", Role::kAdmin};
};

// The contract of issue 40: a MIG repartition drains a node through the loop's preemption. An API job whose
// pod was there is requeued (never Succeeded, Failed or Cancelled from then on), gets a new pod (another UID)
// that is bound and runs, and is Running again; a bare pod's job is never shown Succeeded or Failed. The other
// MIG node, where another scheduler's pod runs, is never drained, and that pod never evicted.
TEST_F(RequeueE2e, ARepartitionsDrainRequeuesThroughTheLoop) {
  api_.Create("nodes", RqNode("m0", "all-1g.10gb"));
  api_.Create("nodes", RqNode("m1", "all-1g.10gb", /*cordoned=*/true));
  api_.Create("pods", RqBoundPod(RqPod("research", "notebook", "nvidia.com/mig-1g.10gb", 1, "production",
                                       "default-scheduler"), "m1"));
  api_.Create("namespaces", {{"metadata", {{"name", "batch"}}}});
  Start();
  Service& svc = scheduler_->service();
  TeamRow team;
  team.name = "batch";
  ASSERT_TRUE(svc.CreateTeam(admin_, team).ok());
  auto spec = ParseJobSpec({{"name", "etl-api"}, {"class", "inference"}, {"team", "batch"}, {"replicas", 1},
                            {"mig_profile", "1g.10gb"}, {"priority_class", "batch"},
                            {"container", {{"image", "etl:1"}, {"command", {"python", "-m", "etl"}}}}});
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  auto job = svc.Submit(admin_, spec.value(), "");
  ASSERT_TRUE(job.ok()) << job.error().message;
  const int64_t id = job->job->id;
  const std::string api_pod = fmt::format("tessera-{}-0", id);
  json bare = RqPod("batch", "etl-pod", "nvidia.com/mig-1g.10gb", 1, "batch");
  bare["spec"]["terminationGracePeriodSeconds"] = 1;
  api_.Create("pods", bare);
  ASSERT_TRUE(Eventually([&] { return NodeOf("batch", api_pod) == "m0" && NodeOf("batch", "etl-pod") == "m0"; }))
      << NodeOf("batch", api_pod) << " / " << NodeOf("batch", "etl-pod");
  ASSERT_TRUE(Eventually([&] { return svc.Get(admin_, id)->job->state == JobState::kRunning; }));
  const std::string old_uid = (*api_.Get("pods", "batch", api_pod))["metadata"]["uid"];
  ASSERT_TRUE(api_.Patch("nodes", "", "m1", {{"spec", {{"unschedulable", false}}}}));
  std::this_thread::sleep_for(std::chrono::seconds(2));

  api_.Create("pods", RqPod("serving", "prod-7g", "nvidia.com/mig-7g.80gb", 1, "production"));
  std::set<std::string> api_states, bare_states;  // from the eviction on
  auto watch = [&] {
    auto p = api_.Get("pods", "batch", api_pod);
    const bool evicted = !p || (*p)["metadata"]["uid"] != old_uid || (*p)["metadata"].contains("deletionTimestamp");
    if (!evicted) return;
    api_states.insert(JobStateName(svc.Get(admin_, id)->job->state));
    if (JobPtr b = JobNamed("etl-pod")) bare_states.insert(JobStateName(b->state));
  };
  auto rerun = [&] {
    auto p = api_.Get("pods", "batch", api_pod);
    return p && (*p)["metadata"]["uid"] != old_uid && !NodeOf("batch", api_pod).empty();
  };
  ASSERT_TRUE(Eventually([&] {
    return NodeOf("serving", "prod-7g") == "m0" && rerun() && svc.Get(admin_, id)->job->state == JobState::kRunning;
  }, 90, watch)) << "prod-7g on '" << NodeOf("serving", "prod-7g") << "', etl-api "
                 << JobStateName(svc.Get(admin_, id)->job->state) << " on '" << NodeOf("batch", api_pod) << "'";
  watch();
  EXPECT_EQ(NodeOf("batch", api_pod), "m1");
  for (const char* bad : {"Succeeded", "Failed", "Cancelled"}) EXPECT_EQ(api_states.count(bad), 0u) << bad;
  for (const char* bad : {"Succeeded", "Failed"}) EXPECT_EQ(bare_states.count(bad), 0u) << bad;
  EXPECT_FALSE(bare_states.empty()) << "the bare pod's job was not seen after its pod was evicted";
  // The loop stopped both: each pod marked DisruptionTarget, then evicted once.
  for (const std::string& pod : {api_pod, std::string("etl-pod")}) {
    bool marked = false;
    for (const auto& r : api_.Requests())
      marked |= r.method == "PATCH" && r.path == "/api/v1/namespaces/batch/pods/" + pod + "/status" &&
                r.body.find("DisruptionTarget") != std::string::npos;
    EXPECT_TRUE(marked) << pod;
    EXPECT_GE(Evictions(pod), 1) << pod;
  }
  // m1 (another scheduler's notebook there) was never drained.
  EXPECT_EQ(Evictions("notebook"), 0);
  EXPECT_EQ((*api_.Get("nodes", "", "m1"))["metadata"]["labels"]["nvidia.com/mig.config"], "all-1g.10gb");
  EXPECT_FALSE((*api_.Get("nodes", "", "m0"))["spec"].value("unschedulable", false));
}

// A drain's victims are the loop's preemptions: a pod of a job the loop runs goes only when the loop's rule
// lets it (here: once it ran --min-runtime), however far below the waiting pod's priority it is; until then
// the drain waits for it. (The rule before read priorities only and evicted it at once.)
TEST_F(RequeueE2e, ADrainTakesALoopJobOnlyAsTheLoopsRuleAllows) {
  min_runtime_s_ = 8;
  api_.Create("nodes", RqNode("m0", "all-1g.10gb"));
  Start();
  json young = RqPod("batch", "young", "nvidia.com/mig-1g.10gb", 1, "batch");
  young["spec"]["terminationGracePeriodSeconds"] = 1;
  api_.Create("pods", young);
  ASSERT_TRUE(Eventually([&] { return NodeOf("batch", "young") == "m0"; }, 30));
  const auto bound = std::chrono::steady_clock::now();
  api_.Create("pods", RqPod("serving", "big-7g", "nvidia.com/mig-7g.80gb", 1, "critical"));
  ASSERT_TRUE(Eventually([&] { return Evictions("young") > 0; }, 60)) << "never preempted";
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - bound).count();
  EXPECT_GE(waited, 7.0) << "preempted before it ran --min-runtime (8 s)";
  ASSERT_TRUE(Eventually([&] { return NodeOf("serving", "big-7g") == "m0"; }, 60));
  EXPECT_EQ((*api_.Get("nodes", "", "m0"))["metadata"]["labels"]["nvidia.com/mig.config"], "all-7g.80gb");
  JobPtr j = JobNamed("young");
  ASSERT_NE(j, nullptr);
  EXPECT_NE(j->state, JobState::kSucceeded);
  EXPECT_NE(j->state, JobState::kFailed);
}

// A drain that cannot end (a pod there of the waiting pod's own priority is waited for, and never ends) is
// abandoned after its deadline: an Event about the node and the pod, the node uncordoned with its config
// unchanged and the annotation gone, the pod never evicted.
TEST_F(RequeueE2e, AStuckDrainIsAbandonedAndReported) {
  drain_timeout_s_ = 2;
  api_.Create("nodes", RqNode("m0", "all-1g.10gb"));
  api_.Create("pods", RqBoundPod(RqPod("serving", "keep", "nvidia.com/mig-1g.10gb", 1, "critical"), "m0"));
  Start();
  api_.Create("pods", RqPod("serving", "big-7g", "nvidia.com/mig-7g.80gb", 1, "critical"));
  ASSERT_TRUE(Eventually([&] { return EventAbout("MigRepartitionAbandoned", "m0"); }, 30));
  // Events leave in batches off the binding path: the pod's may follow the node's.
  EXPECT_TRUE(Eventually([&] { return EventAbout("MigRepartitionAbandoned", "big-7g"); }, 10));
  ASSERT_TRUE(Eventually([&] {
    const json n = *api_.Get("nodes", "", "m0");
    return !n["spec"].value("unschedulable", false) &&
           !n["metadata"].value("annotations", json::object()).contains("tessera.io/mig-repartition");
  }, 10));
  EXPECT_EQ((*api_.Get("nodes", "", "m0"))["metadata"]["labels"]["nvidia.com/mig.config"], "all-1g.10gb");
  EXPECT_EQ(Evictions("keep"), 0);
  EXPECT_TRUE(NodeOf("serving", "big-7g").empty());
}

// The repartition is planned from the loop's queue (cluster_room.h MigWaitingOf): an API job's replicas ask
// for a profile no node has; while its team's limit holds it, nothing is drained or
// relabelled; once the limit goes, the node is repartitioned and both replicas' pods are made and bound
// there.
TEST_F(RequeueE2e, TheLoopsWaitingJobsAreWhatARepartitionIsFor) {
  api_.Create("nodes", RqNode("m0", "all-7g.80gb"));
  api_.Create("namespaces", {{"metadata", {{"name", "batch"}}}});
  Start();
  Service& svc = scheduler_->service();
  TeamRow team;
  team.name = "batch";
  team.limit_milli = 100;  // below one 1g.10gb slice
  ASSERT_TRUE(svc.CreateTeam(admin_, team).ok());
  auto spec = ParseJobSpec({{"name", "small-api"},
                            {"class", "inference"},
                            {"team", "batch"},
                            {"replicas", 2},
                            {"mig_profile", "1g.10gb"},
                            {"priority_class", "batch"},
                            {"container", {{"image", "serve:1"}, {"command", {"serve"}}}}});
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  auto job = svc.Submit(admin_, spec.value(), "");
  ASSERT_TRUE(job.ok()) << job.error().message;
  const int64_t id = job->job->id;
  ASSERT_TRUE(Eventually(
      [&] {
        auto v = svc.Get(admin_, id);
        return v.ok() && v->pending && v->pending->code == "ExceedsQueueLimit";
      },
      30))
      << (svc.Get(admin_, id)->pending ? std::string(svc.Get(admin_, id)->pending->code) : "no verdict");
  std::this_thread::sleep_for(std::chrono::seconds(3));  // several passes of the repartitioner
  json n = *api_.Get("nodes", "", "m0");
  EXPECT_EQ(n["metadata"]["labels"]["nvidia.com/mig.config"], "all-7g.80gb");
  EXPECT_FALSE(n["spec"].value("unschedulable", false));

  TeamChange lift;
  lift.limit_milli = -1;
  ASSERT_TRUE(svc.UpdateTeam(admin_, "batch", lift).ok());
  const std::string pod0 = fmt::format("tessera-{}-0", id), pod1 = fmt::format("tessera-{}-1", id);
  ASSERT_TRUE(Eventually([&] { return NodeOf("batch", pod0) == "m0" && NodeOf("batch", pod1) == "m0"; }, 60))
      << JobStateName(svc.Get(admin_, id)->job->state) << ", m0 at "
      << (*api_.Get("nodes", "", "m0"))["metadata"]["labels"]["nvidia.com/mig.config"];
  n = *api_.Get("nodes", "", "m0");
  EXPECT_EQ(n["metadata"]["labels"]["nvidia.com/mig.config"], "all-1g.10gb");
  EXPECT_TRUE(Eventually([&] { return svc.Get(admin_, id)->job->state == JobState::kRunning; }, 30));
}

// A repartition cut short by a restart: the node carries the annotation, is cordoned and its label already
// names the target. The new scheduler waits for the MIG manager's success, then uncordons it and places there.
TEST_F(RequeueE2e, ARepartitionCutByARestartIsResumed) {
  json m0 = RqNode("m0", "all-1g.10gb", /*cordoned=*/true);
  m0["metadata"]["labels"]["nvidia.com/mig.config"] = "all-7g.80gb";
  m0["metadata"]["labels"]["nvidia.com/mig.config.state"] = "pending";
  m0["metadata"]["annotations"] = {
      {"tessera.io/mig-repartition",
       json{{"config", "all-7g.80gb"}, {"previous", "all-1g.10gb"}, {"priority", 100000}, {"revert", false}}.dump()}};
  api_.Create("nodes", m0);
  api_.Create("pods", RqPod("serving", "prod-7g", "nvidia.com/mig-7g.80gb", 1, "production"));
  Start();
  ASSERT_TRUE(Eventually([&] { return NodeOf("serving", "prod-7g") == "m0"; }, 30)) << Reason("serving", "prod-7g");
  const json n = *api_.Get("nodes", "", "m0");
  EXPECT_FALSE(n["spec"].value("unschedulable", false));
  EXPECT_FALSE(n["metadata"].value("annotations", json::object()).contains("tessera.io/mig-repartition"));
  EXPECT_EQ(n["metadata"]["labels"]["nvidia.com/mig.config"], "all-7g.80gb");
}

// Another scheduler's pod bound after Tessera started takes its GPUs off what Tessera places there at once,
// and gives them back when it finishes, while Tessera's own pods run on the node.
TEST_F(RequeueE2e, ForeignGpusAreTakenAndGivenBack) {
  api_.Create("nodes", RqNode("n0", "all-disabled"));
  Start(/*repartition=*/false);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  api_.Create("pods", RqBoundPod(RqPod("research", "foreign-train", "nvidia.com/gpu", 6, "", "default-scheduler"),
                                 "n0"));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const std::vector<std::string> late = {"late-0", "late-1", "late-2", "late-3"};
  for (const std::string& name : late) api_.Create("pods", RqPod("ml", name, "nvidia.com/gpu", 1));
  auto bound = [&] {
    int n = 0;
    for (const std::string& name : late) n += !NodeOf("ml", name).empty();
    return n;
  };
  ASSERT_TRUE(Eventually([&] {
    int told = 0;
    for (const std::string& name : late) told += NodeOf("ml", name).empty() && !Reason("ml", name).empty();
    return bound() == 2 && told == 2;
  }, 30)) << bound() << " bound";
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(bound(), 2) << "6 of the node's 8 GPUs are another scheduler's";
  ASSERT_TRUE(api_.Patch("pods", "research", "foreign-train", {{"status", {{"phase", "Succeeded"}}}}));
  EXPECT_TRUE(Eventually([&] { return bound() == 4; }, 30)) << bound() << " bound after the foreign pod ended";
}

// A pod of ours that asks no GPU is bound like kube-scheduler would, to a node without GPUs first; one that
// no node can hold gets kube-scheduler's reason.
TEST_F(RequeueE2e, CpuOnlyPodsAreBoundOrTold) {
  api_.Create("nodes", RqNode("n0", "all-disabled"));
  api_.Create("nodes", {{"metadata", {{"name", "cpu-0"}, {"labels", {{"kubernetes.io/hostname", "cpu-0"}}}}},
                        {"spec", json::object()},
                        {"status", {{"allocatable", {{"cpu", "16"}, {"memory", "64Gi"}, {"pods", "110"}}},
                                    {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}});
  Start(/*repartition=*/false);
  api_.Create("pods", RqPod("tools", "launcher", "", 0));
  api_.Create("pods", RqPod("tools", "too-big", "", 0, "", "tessera", "100000"));
  ASSERT_TRUE(Eventually([&] { return !NodeOf("tools", "launcher").empty() && !Reason("tools", "too-big").empty(); },
                         30))
      << NodeOf("tools", "launcher") << " / " << Reason("tools", "too-big");
  EXPECT_EQ(NodeOf("tools", "launcher"), "cpu-0");
  EXPECT_NE(Reason("tools", "too-big").find("Insufficient cpu"), std::string::npos) << Reason("tools", "too-big");
  EXPECT_TRUE(NodeOf("tools", "too-big").empty());
  EXPECT_EQ(JobNamed("launcher"), nullptr) << "no job of the loop for a pod without GPUs";
}

}  // namespace
}  // namespace tessera
