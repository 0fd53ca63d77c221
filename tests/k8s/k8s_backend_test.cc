// The Kubernetes backend's rules without a server (which pods a launch binds, when a run is over), and a
// pod's run found by its uid on the fake API server.
#include "k8s/k8s_backend.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "k8s/api/api_client.h"
#include "k8s/fake_apiserver.h"

namespace tessera {
namespace {

using json = nlohmann::json;

json BackendPod(const std::string& name, const std::string& uid, const std::string& node = "",
                const std::string& phase = "Pending") {
  json p = {{"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", uid}}},
            {"spec", {{"schedulerName", "tessera"}}},
            {"status", {{"phase", phase}}}};
  if (!node.empty()) p["spec"]["nodeName"] = node;
  return p;
}

TEST(K8sBackend, BindsOnlyWaitingMembersAndNeedsAll) {
  const std::vector<json> pods = {BackendPod("g-0", "a"), BackendPod("g-1", "b", "n1"),
                                  BackendPod("g-2", "c")};
  auto two = MembersToBind(pods, 2);
  ASSERT_TRUE(two.ok()) << two.error();
  EXPECT_EQ((*two)[0].name, "g-0");
  EXPECT_EQ((*two)[1].name, "g-2");
  EXPECT_EQ((*two)[1].uid, "c");
  auto three = MembersToBind(pods, 3);
  ASSERT_FALSE(three.ok());
  EXPECT_NE(three.error().find("2 of 3"), std::string::npos) << three.error();
}

// A gang's members that ask for GPUs take its tasks; a CPU-only companion (an MPI launcher) comes last.
TEST(K8sBackend, MembersAskingForGpusAreBoundFirst) {
  json launcher = BackendPod("launcher", "l");
  launcher["spec"]["containers"] = {{{"name", "c"}, {"resources", {{"requests", {{"cpu", "2"}}}}}}};
  json worker = BackendPod("worker", "w");
  worker["spec"]["containers"] = {{{"name", "c"}, {"resources", {{"requests", {{"nvidia.com/gpu", "8"}}}}}}};
  EXPECT_FALSE(PodAsksGpu(launcher));
  EXPECT_TRUE(PodAsksGpu(worker));
  auto one = MembersToBind({launcher, worker}, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((*one)[0].name, "worker");
  auto both = MembersToBind({launcher, worker}, 2);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ((*both)[1].name, "launcher");
}

// A pod whose GPUs come through ResourceClaims is a GPU member too (its containers ask for no nvidia.com/gpu).
TEST(K8sBackend, APodWithClaimsIsAGpuMember) {
  json launcher = BackendPod("launcher", "l");
  launcher["spec"]["containers"] = {{{"name", "c"}, {"resources", {{"requests", {{"cpu", "2"}}}}}}};
  json worker = BackendPod("worker", "w");
  worker["spec"]["resourceClaims"] = {{{"name", "gpu"}, {"resourceClaimTemplateName", "one-gpu"}}};
  worker["spec"]["containers"] = {{{"name", "c"}, {"resources", {{"claims", {{{"name", "gpu"}}}}}}}};
  EXPECT_TRUE(PodAsksGpu(worker));
  auto one = MembersToBind({launcher, worker}, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((*one)[0].name, "worker");
}

TEST(K8sBackend, ARunIsOverWhenEveryPodIsDoneOrGone) {
  const std::vector<PodRef> run = {{"ml", "g-0", "a"}, {"ml", "g-1", "b"}};
  bool failed = false;
  EXPECT_FALSE(RunOver(
      run, {BackendPod("g-0", "a", "n1", "Running"), BackendPod("g-1", "b", "n1", "Succeeded")}, &failed));
  EXPECT_TRUE(RunOver(
      run, {BackendPod("g-0", "a", "n1", "Succeeded"), BackendPod("g-1", "b", "n1", "Succeeded")}, &failed));
  EXPECT_FALSE(failed);
  // g-1 was deleted and recreated (another UID): the run's pod is gone.
  EXPECT_TRUE(RunOver(run, {BackendPod("g-0", "a", "n1", "Failed"), BackendPod("g-1", "x")}, &failed));
  EXPECT_TRUE(failed);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// A pod's run is found by its uid from launch to end, through adoption after a restart too (the index a
// pod's watch event and the scheduler's foreign-pod pass read instead of scanning every run).
TEST(K8sBackend, APodsRunIsFoundFromLaunchToEnd) {
  testing::FakeApiServer server;
  server.Create(
      "nodes",
      {{"metadata", {{"name", "n1"}}},
       {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}, {"cpu", "64"}, {"memory", "512Gi"}}}}}});
  for (const char* name : {"a", "b"})
    server.Create(
        "pods",
        {{"metadata", {{"name", name}, {"namespace", "ml"}}},
         {"spec",
          {{"schedulerName", "tessera"},
           {"containers", {{{"name", "c"}, {"resources", {{"requests", {{"nvidia.com/gpu", "1"}}}}}}}}}},
         {"status", {{"phase", "Pending"}}}});
  const std::string uid_a = (*server.Get("pods", "ml", "a"))["metadata"]["uid"];
  const std::string uid_b = (*server.Get("pods", "ml", "b"))["metadata"]["uid"];
  KubeConfig kc;
  kc.server = server.url();
  ApiClient api(kc);
  K8sBackendHooks hooks;
  hooks.pods = [&](const JobKey& k) {
    auto p = server.Get("pods", k.ns, k.name);
    return p ? std::vector<json>{*p} : std::vector<json>{};
  };
  hooks.event = [](const json&, const std::string&, const std::string&, const std::string&) {};
  K8sBackend backend(&api, hooks);
  LaunchSpec a;
  a.slot = JobSlot(0);
  a.run = 1;
  a.tasks = {TaskPlacement{}};
  a.key = "pod/ml/a";
  a.node_names = {"n1"};
  ASSERT_TRUE(backend.Launch(a, 0).in_flight);
  backend.Drain();
  ASSERT_TRUE(backend.RunOfPod(uid_a).has_value());
  EXPECT_EQ(backend.RunOfPod(uid_a)->slot, JobSlot(0));
  EXPECT_FALSE(backend.RunOfPod(uid_b).has_value());
  // An adopted run (after a restart) knows its pods once they are looked at.
  ASSERT_TRUE(
      server.Patch("pods", "ml", "b", {{"spec", {{"nodeName", "n1"}}}, {"status", {{"phase", "Running"}}}}));
  LaunchSpec b = a;
  b.slot = JobSlot(1);
  b.key = "pod/ml/b";
  ASSERT_TRUE(backend.Adopt(b, 0, 0));
  EXPECT_FALSE(backend.RunOfPod(uid_b).has_value()) << "not resolved yet";
  backend.PodsChanged(uid_a);  // any pod's event looks at the runs not resolved yet
  ASSERT_TRUE(backend.RunOfPod(uid_b).has_value());
  EXPECT_EQ(backend.RunOfPod(uid_b)->slot, JobSlot(1));
  // A run that ended leaves the index.
  ASSERT_TRUE(server.Patch("pods", "ml", "a", {{"status", {{"phase", "Succeeded"}}}}));
  backend.PodsChanged(uid_a);
  EXPECT_FALSE(backend.RunOfPod(uid_a).has_value());
  EXPECT_TRUE(backend.RunOfPod(uid_b).has_value());
  backend.Shutdown();
}

}  // namespace
}  // namespace tessera
