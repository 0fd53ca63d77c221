// Preemption by the book (pure JSON), how a run's pod ended, Lease problems said with what to fix, and the
// API client's write guard and prompt watch stop.
#include "k8s/preemption.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "k8s/api/api_client.h"
#include "k8s/api/informer.h"
#include "k8s/api/kubeconfig.h"
#include "k8s/api/lease.h"
#include "k8s/fake_apiserver.h"
#include "k8s/k8s_backend.h"

namespace tessera {
namespace {

using json = nlohmann::json;

TEST(Preemption, EvictionLeavesTheGracePeriodToThePod) {
  const json e = EvictionFor("ml", "victim-0", "u1");
  EXPECT_EQ(e["apiVersion"], "policy/v1");
  EXPECT_EQ(e["kind"], "Eviction");
  EXPECT_EQ(e["metadata"]["name"], "victim-0");
  EXPECT_EQ(e["deleteOptions"]["preconditions"]["uid"], "u1");
  EXPECT_FALSE(e["deleteOptions"].contains("gracePeriodSeconds")) << e.dump();
}

TEST(Preemption, VictimAndPreemptorMarks) {
  const json dt = DisruptionTargetPatch("tessera: preempting to accommodate ml/high-0", "2026-01-01T00:00:00Z");
  const json& c = dt["status"]["conditions"][0];
  EXPECT_EQ(c["type"], "DisruptionTarget");
  EXPECT_EQ(c["status"], "True");
  EXPECT_EQ(c["reason"], "PreemptionByScheduler");
  EXPECT_NE(c["message"].get<std::string>().find("ml/high-0"), std::string::npos);
  EXPECT_EQ(NominatedNodePatch("p-0")["status"]["nominatedNodeName"], "p-0");
  EXPECT_TRUE(NominatedNodePatch("")["status"]["nominatedNodeName"].is_null());
  EXPECT_EQ(NominatedNode({{"status", {{"nominatedNodeName", "p-1"}}}}), "p-1");
  EXPECT_EQ(NominatedNode(json::object()), "");
}

TEST(Preemption, HowAPodEnded) {
  json p = {{"metadata", {{"name", "a"}}}, {"status", {{"phase", "Running"}}}};
  EXPECT_EQ(PodEndOf(p), PodEnd::kRunning);
  p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  EXPECT_EQ(PodEndOf(p), PodEnd::kDeleted);  // its user deleted it
  p["status"]["conditions"] = {{{"type", "DisruptionTarget"}, {"status", "True"}, {"reason", "EvictionByEvictionAPI"}}};
  EXPECT_EQ(PodEndOf(p), PodEnd::kDisrupted);
  p["status"]["phase"] = "Succeeded";
  EXPECT_EQ(PodEndOf(p), PodEnd::kDone);
  p["status"]["phase"] = "Failed";  // killed by its eviction: a disruption (the job is requeued), not a failure
  EXPECT_EQ(PodEndOf(p), PodEnd::kDisrupted);
  p["status"].erase("conditions");
  EXPECT_EQ(PodEndOf(p), PodEnd::kFailed);
  EXPECT_EQ(K8sBackend::RetryDelayMs(0), 1000);
  EXPECT_EQ(K8sBackend::RetryDelayMs(20), 30000);
}

TEST(LeaseProblems, SayWhatToFix) {
  LeaseOptions o;
  o.ns = "tessera-system";
  EXPECT_EQ(LeaseProblem({200, nullptr, ""}, "get", o), "");
  EXPECT_EQ(LeaseProblem({409, nullptr, "conflict"}, "update", o), "");
  const std::string rbac = LeaseProblem({403, nullptr, "forbidden"}, "update", o);
  EXPECT_NE(rbac.find("RBAC: update on leases.coordination.k8s.io in namespace tessera-system"), std::string::npos) << rbac;
  const std::string ns = LeaseProblem({404, nullptr, "namespaces \"tessera-system\" not found"}, "create", o);
  EXPECT_NE(ns.find("namespace 'tessera-system' does not exist"), std::string::npos) << ns;
  EXPECT_NE(LeaseProblem({401, nullptr, "Unauthorized"}, "get", o).find("credentials"), std::string::npos);
  const std::string tls = LeaseProblem({0, nullptr, "SSL server verification failed"}, "get", o);
  EXPECT_NE(tls.find("TLS"), std::string::npos) << tls;
  EXPECT_EQ(LeaseProblem({0, nullptr, ApiClient::kNotLeader}, "get", o), "");
}

TEST(Kubeconfig, ExecPluginsAreRefusedWithWhatToDo) {
  const std::string text =
      "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: https://k:6443\n"
      "contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nusers:\n- name: u\n  user:\n    exec:\n"
      "      apiVersion: client.authentication.k8s.io/v1\n      command: aws\n";
  auto k = ParseKubeconfig(text, "kc", ".");
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.error().find("exec: credential plugins are not supported"), std::string::npos) << k.error();
}

class LeaseElection : public ::testing::Test {
 protected:
  KubeConfig Kube() {
    KubeConfig k;
    k.server = api_.url();
    k.token = "fake-token";
    return k;
  }
  LeaseOptions Options(const std::string& who) {
    LeaseOptions o;
    o.ns = "tessera-system";
    o.identity = who;
    return o;
  }
  static int64_t Now() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch()).count();
  }
  json Spec() { return api_.Get("leases", "tessera-system", "tessera-scheduler").value()["spec"]; }

  testing::FakeApiServer api_;
};

TEST_F(LeaseElection, LeadsUntilTheRenewDeadlineAndReleasesForAStandby) {
  ApiClient client(Kube());
  LeaderElector a(&client, Options("a")), b(&client, Options("b"));
  const int64_t t = Now();
  ASSERT_TRUE(a.TryAcquireOrRenew(t));
  EXPECT_TRUE(a.IsLeader(t + 9 * 1000000));
  EXPECT_FALSE(a.IsLeader(t + 10 * 1000000));  // renew deadline 10 s < lease duration 15 s
  EXPECT_FALSE(b.TryAcquireOrRenew(t + 1000000));
  ASSERT_TRUE(a.Release(t + 2000000));
  EXPECT_FALSE(a.IsLeader());
  EXPECT_EQ(Spec()["holderIdentity"], "");
  EXPECT_EQ(Spec()["leaseDurationSeconds"], 1);
  EXPECT_TRUE(b.TryAcquireOrRenew(t + 2100000));  // at once, not after the lease's duration
  EXPECT_EQ(Spec()["holderIdentity"], "b");
}

TEST_F(LeaseElection, AHeldRenewTimesOutAndLeadingEndsAtTheDeadline) {
  ApiClient client(Kube());
  client.set_timeouts(1, 1);
  LeaseOptions o = Options("a");
  o.renew_deadline_s = 2;
  LeaderElector a(&client, o);
  ASSERT_TRUE(a.TryAcquireOrRenew(Now()));
  const int64_t renewed = a.last_renew_us();
  api_.HoldWrites("/leases", 10);
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(a.TryAcquireOrRenew(Now()));  // the write timed out, but the deadline has not passed
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_EQ(a.last_renew_us(), renewed);
  std::this_thread::sleep_for(std::chrono::milliseconds(1600));
  EXPECT_FALSE(a.IsLeader());
  EXPECT_FALSE(a.TryAcquireOrRenew(Now()));
  api_.HoldWrites("/leases", 0);
}

TEST_F(LeaseElection, ProblemsAreNamed) {
  ApiClient client(Kube());
  LeaderElector a(&client, Options("a"));
  api_.AnswerWith("POST", "/leases", 404, "namespaces \"tessera-system\" not found", 1);
  EXPECT_FALSE(a.TryAcquireOrRenew(Now()));
  EXPECT_NE(a.problem().find("does not exist"), std::string::npos) << a.problem();
  api_.AnswerWith("GET", "/leases", 403, "leases is forbidden", 1);
  EXPECT_FALSE(a.TryAcquireOrRenew(Now()));
  EXPECT_NE(a.problem().find("RBAC: get on leases"), std::string::npos) << a.problem();
  EXPECT_TRUE(a.TryAcquireOrRenew(Now()));
  EXPECT_EQ(a.problem(), "");
}

TEST_F(LeaseElection, WritesWaitForTheGuardAndWatchesStopAtOnce) {
  ApiClient client(Kube());
  std::atomic<bool> leading{false};
  client.set_write_guard([&] { return leading.load(); });
  const ApiResponse r = client.Post("/api/v1/namespaces/ml/pods/x/binding", json::object());
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.error, ApiClient::kNotLeader);
  for (const auto& q : api_.Requests()) EXPECT_EQ(q.path.find("binding"), std::string::npos) << q.path;
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  client.Watch("/api/v1/pods?watch=1&resourceVersion=1", [](const json&) { return true; }, stop, 300);
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));  // no event came meanwhile
}

TEST_F(LeaseElection, AForbiddenListSaysWhichRbacToGrantAndIsRetried) {
  ApiClient client(Kube());
  api_.AnswerWith("GET", "/api/v1/pods", 403, "pods is forbidden: cannot list resource \"pods\"", 1);
  std::mutex mu;
  std::string log;
  Informer pods(&client, "/api/v1/pods", nullptr, [&](const std::string& s) {
    std::lock_guard<std::mutex> l(mu);
    log += s + "\n";
  });
  pods.Start();
  EXPECT_TRUE(pods.WaitSynced(10));
  pods.Stop();
  std::lock_guard<std::mutex> l(mu);
  EXPECT_NE(log.find("list /api/v1/pods: RBAC: list and watch are forbidden (403)"), std::string::npos) << log;
}

}  // namespace
}  // namespace tessera
