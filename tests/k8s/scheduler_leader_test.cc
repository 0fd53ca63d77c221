// The scheduler against the in-process fake API server on what a cluster admin relies on: preemption by
// the book (DisruptionTarget, Eviction without a grace period of its own, nominatedNodeName), a running pod
// its user deleted is a cancelled job, a leader whose Lease writes stall stops binding at the renew
// deadline, Stop releases the Lease, a standby's wait ends when cancelled and names what to fix; and the
// `tessera k8s scheduler` process: /healthz on leader and standby, SIGTERM ends both within seconds.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "k8s/api/kubeconfig.h"
#include "k8s/api/lease.h"
#include "k8s/fake_apiserver.h"
#include "k8s/scheduler.h"
#include "testing/paths.h"
#include "testing/serve_process.h"

namespace tessera {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

json LeaderGpuNode(const std::string& name) {
  const json alloc = {{"cpu", "255500m"}, {"memory", "2112998564Ki"}, {"pods", "110"}, {"nvidia.com/gpu", "8"}};
  return {{"metadata",
           {{"name", name},
            {"labels",
             {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}, {"nvidia.com/gpu.count", "8"},
              {"nvidia.com/mig.config", "all-disabled"}, {"tessera.io/leaf", "leaf-a"}}}}},
          {"spec", json::object()},
          {"status", {{"allocatable", alloc}, {"capacity", alloc}, {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

json LeaderPod(const std::string& name, int gpus, const std::string& priority_class, int grace = 2) {
  return {{"metadata", {{"name", name}, {"namespace", "ml"}, {"labels", {{"app", name}}}}},
          {"spec",
           {{"schedulerName", "tessera"},
            {"priorityClassName", priority_class},
            {"terminationGracePeriodSeconds", grace},
            {"containers",
             {{{"name", "main"},
               {"image", "trainer"},
               {"resources",
                {{"requests", {{"nvidia.com/gpu", std::to_string(gpus)}, {"cpu", "4"}, {"memory", "16Gi"}}},
                 {"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}}}}}};
}

class LeaderE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("tessera-k8s-leader-{}-{}", ::getpid(), ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    api_.Create("priorityclasses", {{"metadata", {{"name", "low"}}}, {"value", 10}});
    api_.Create("priorityclasses", {{"metadata", {{"name", "high"}}}, {"value", 1000}});
    for (int i = 0; i < 2; ++i) api_.Create("nodes", LeaderGpuNode("p-" + std::to_string(i)));
    kubeconfig_ = (dir_ / "kubeconfig").string();
    api_.WriteKubeconfig(kubeconfig_);
  }
  void TearDown() override {
    if (scheduler_) scheduler_->Stop();
    scheduler_.reset();
    std::filesystem::remove_all(dir_);
  }
  SchedulerOptions Options() {
    SchedulerOptions o;
    o.db = (dir_ / "tessera.db").string();
    o.identity = "e2e";
    o.min_runtime_s = 0;
    o.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> l(log_mu_);
      log_ += line + "\n";
      if (std::getenv("TESSERA_TEST_LOG") != nullptr) std::fprintf(stderr, "scheduler: %s\n", line.c_str());
    };
    return o;
  }
  void Start(SchedulerOptions o) {
    auto kube = LoadKubeconfig(kubeconfig_, "");
    ASSERT_TRUE(kube.ok()) << kube.error();
    auto s = K8sScheduler::Start(*kube, std::move(o));
    ASSERT_TRUE(s.ok()) << s.error();
    scheduler_ = std::move(s).value();
  }
  bool Eventually(const std::function<bool()>& done, int seconds = 60) {
    for (int i = 0; i < seconds * 10; ++i) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return done();
  }
  std::string NodeOf(const std::string& pod) {
    auto p = api_.Get("pods", "ml", pod);
    return p && (*p)["spec"].contains("nodeName") ? (*p)["spec"]["nodeName"].get<std::string>() : "";
  }
  // Index in the request log of the first request matching, or -1.
  int FirstRequest(const std::string& method, const std::string& path, const std::string& body_part = "") {
    const auto rs = api_.Requests();
    for (size_t i = 0; i < rs.size(); ++i)
      if (rs[i].method == method && rs[i].path == path && rs[i].body.find(body_part) != std::string::npos) return i;
    return -1;
  }
  std::string Log() {
    std::lock_guard<std::mutex> l(log_mu_);
    return log_;
  }

  testing::FakeApiServer api_;
  std::filesystem::path dir_;
  std::string kubeconfig_;
  std::mutex log_mu_;
  std::string log_;
  std::unique_ptr<K8sScheduler> scheduler_;
};

// kube-scheduler's order: the preemptor nominated, each victim marked DisruptionTarget, then evicted (never
// deleted) with no grace period of ours; the preemptor bound once the victims are gone.
TEST_F(LeaderE2e, PreemptsByTheBook) {
  Start(Options());
  for (int i = 0; i < 4; ++i) api_.Create("pods", LeaderPod("low-" + std::to_string(i), 4, "low", 3));
  ASSERT_TRUE(Eventually([&] {
    for (int i = 0; i < 4; ++i)
      if (NodeOf("low-" + std::to_string(i)).empty()) return false;
    return true;
  }));
  api_.Create("pods", LeaderPod("high-0", 8, "high"));
  ASSERT_TRUE(Eventually([&] { return !NodeOf("high-0").empty(); }, 90));
  const std::string node = NodeOf("high-0");
  const int nominated = FirstRequest("PATCH", "/api/v1/namespaces/ml/pods/high-0/status", "\"nominatedNodeName\":\"" + node);
  const int bound = FirstRequest("POST", "/api/v1/namespaces/ml/pods/high-0/binding");
  ASSERT_GE(nominated, 0) << "no nominatedNodeName written on the preemptor";
  EXPECT_LT(nominated, bound);
  int evicted = 0;
  for (const auto& r : api_.Requests()) {
    EXPECT_FALSE(r.method == "DELETE" && r.path.find("/pods/low-") != std::string::npos) << r.path;
    if (r.method != "POST" || r.path.find("/eviction") == std::string::npos) continue;
    ++evicted;
    const json e = json::parse(r.body);
    EXPECT_EQ(e["apiVersion"], "policy/v1");
    EXPECT_FALSE(e["deleteOptions"].contains("gracePeriodSeconds")) << r.body;
    const std::string status = r.path.substr(0, r.path.size() - std::string("eviction").size()) + "status";
    const int marked = FirstRequest("PATCH", status, "PreemptionByScheduler");
    EXPECT_GE(marked, 0) << r.path << ": no DisruptionTarget";
    const auto rs = api_.Requests();
    EXPECT_NE(rs[marked].body.find("ml/high-0"), std::string::npos) << rs[marked].body;
  }
  EXPECT_EQ(evicted, 2);
}

// A running pod its user deletes (not one that completed) ends its job as Cancelled.
TEST_F(LeaderE2e, AUserDeletedRunningPodIsACancelledJob) {
  Start(Options());
  api_.Create("pods", LeaderPod("acct-0", 1, "low"));
  ASSERT_TRUE(Eventually([&] { return !NodeOf("acct-0").empty(); }));
  const Caller admin{"e2e", "", Role::kAdmin, ""};
  auto state = [&] {
    bool more = false;
    for (const JobView& v : scheduler_->service().List(admin, "", "", "", 0, 100, &more))
      if (v.job->name == "acct-0") return v.job->state;
    return JobState::kPending;
  };
  ASSERT_TRUE(Eventually([&] { return state() == JobState::kRunning; }));
  ASSERT_TRUE(api_.Delete("pods", "ml", "acct-0"));
  ASSERT_TRUE(Eventually([&] { return Terminal(state()); }, 15));
  EXPECT_EQ(JobStateName(state()), std::string(JobStateName(JobState::kCancelled)));
}

// With its Lease writes held, the leader binds nothing once its renew deadline has passed, then says it lost
// the Lease; Stop of a leader releases the Lease at once.
TEST_F(LeaderE2e, StopsBindingAtTheRenewDeadline) {
  SchedulerOptions o = Options();
  o.lease.duration_s = 6;
  o.lease.renew_deadline_s = 3;
  o.lease.renew_s = 1;
  Start(o);
  api_.Create("pods", LeaderPod("early", 1, "low"));
  ASSERT_TRUE(Eventually([&] { return !NodeOf("early").empty(); }));
  api_.HoldWrites("/leases", 30);
  std::this_thread::sleep_for(std::chrono::milliseconds(3200));  // past the deadline of any renew before the hold
  api_.Create("pods", LeaderPod("late", 1, "low"));
  ASSERT_TRUE(Eventually([&] { return scheduler_->lost_leadership(); }, 10)) << Log();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(FirstRequest("POST", "/api/v1/namespaces/ml/pods/late/binding"), -1);
  EXPECT_EQ(NodeOf("late"), "");
  EXPECT_NE(Log().find("lost the Lease"), std::string::npos) << Log();
  api_.HoldWrites("/leases", 0);
  const auto t0 = Clock::now();
  scheduler_->Stop();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
}

TEST_F(LeaderE2e, StopReleasesTheLease) {
  Start(Options());
  ASSERT_EQ(api_.Get("leases", "tessera-system", "tessera-scheduler").value()["spec"]["holderIdentity"], "e2e");
  const auto t0 = Clock::now();
  scheduler_->Stop();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
  const json spec = api_.Get("leases", "tessera-system", "tessera-scheduler").value()["spec"];
  EXPECT_EQ(spec["holderIdentity"], "");
  EXPECT_EQ(spec["leaseDurationSeconds"], 1);
}

// A standby's wait ends when cancelled; a missing Lease namespace is said at once, with what to fix.
TEST_F(LeaderE2e, AStandbyIsCancellableAndSaysWhatToFix) {
  api_.AnswerWith("POST", "/leases", 404, "namespaces \"tessera-system\" not found");
  std::atomic<bool> cancel{false};
  SchedulerOptions o = Options();
  o.cancelled = [&] { return cancel.load(); };
  auto kube = LoadKubeconfig(kubeconfig_, "");
  ASSERT_TRUE(kube.ok());
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    cancel = true;
  });
  const auto t0 = Clock::now();
  auto s = K8sScheduler::Start(*kube, o);
  canceller.join();
  EXPECT_FALSE(s.ok());
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(4));
  EXPECT_NE(Log().find("the Lease namespace 'tessera-system' does not exist"), std::string::npos) << Log();
}

// The process: /healthz 200 and /readyz 503 on a standby, /healthz 200 on the leader; SIGTERM ends a
// standby and a leader within seconds, the leader releasing its Lease.
class SchedulerProcess {
 public:
  SchedulerProcess(const std::string& kubeconfig, const std::filesystem::path& db, int port) {
    const std::vector<std::string> args = {testing::TesseraBinary(), "k8s", "scheduler", "--kubeconfig", kubeconfig,
                                           "--db", db.string(), "--listen", fmt::format("127.0.0.1:{}", port)};
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    const std::string log = db.string() + ".log";
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
  }
  ~SchedulerProcess() {
    if (pid_ > 0) kill(pid_, SIGKILL), waitpid(pid_, nullptr, 0);
  }
  // Seconds from SIGTERM to its exit (-1: still running after 10 s).
  double Term() {
    const auto t0 = Clock::now();
    kill(pid_, SIGTERM);
    while (Clock::now() - t0 < std::chrono::seconds(10)) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return std::chrono::duration<double>(Clock::now() - t0).count();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
};

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

int Get(int port, const std::string& path) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(1);
  auto r = c.Get(path.c_str());
  return r ? r->status : 0;
}

TEST_F(LeaderE2e, HealthOnLeaderAndStandbyAndSigtermEndsBoth) {
  const int leader_port = testing::FreePort(), standby_port = testing::FreePort();
  SchedulerProcess leader(kubeconfig_, dir_ / "a.db", leader_port);
  ASSERT_TRUE(Eventually([&] { return Get(leader_port, "/readyz") == 200; }, 30)) << ReadFile(dir_ / "a.db.log");
  EXPECT_EQ(Get(leader_port, "/healthz"), 200);
  SchedulerProcess standby(kubeconfig_, dir_ / "b.db", standby_port);
  ASSERT_TRUE(Eventually([&] { return Get(standby_port, "/healthz") == 200; }, 10));
  EXPECT_EQ(Get(standby_port, "/readyz"), 503);
  const double standby_s = standby.Term();
  EXPECT_GE(standby_s, 0);
  EXPECT_LT(standby_s, 5);
  const double leader_s = leader.Term();
  EXPECT_GE(leader_s, 0);
  EXPECT_LT(leader_s, 8);
  EXPECT_EQ(api_.Get("leases", "tessera-system", "tessera-scheduler").value()["spec"]["holderIdentity"], "");
}

}  // namespace
}  // namespace tessera
