// The Backend contract (control/backend.h), one suite over every backend the control loop drives: the
// simulator's cluster (sim/sim_backend.h), the service's simulated backend (service/simulated_backend.h) and
// Kubernetes (k8s/k8s_backend.h) on the fake API server, where the test plays the kubelet (a bound pod runs
// for its job's work, then succeeds) and the pods' controller (an evicted job's pods are made again while it
// waits). Each runs the same small scenarios under the same Driver rules on a virtual clock, and the
// decisions (which job started where, in which order, which was preempted, ended, cancelled) must be the
// same line for line. A difference is a broken contract, not a tolerance.
#include <gtest/gtest.h>

#include <atomic>
#include <climits>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "control/decisions.h"
#include "control/driver.h"
#include "control/options.h"
#include "k8s/api/api_client.h"
#include "k8s/api/kubeconfig.h"
#include "k8s/cluster_view.h"
#include "k8s/fake_apiserver.h"
#include "k8s/k8s_backend.h"
#include "k8s/pod_jobs.h"
#include "sched/policy.h"
#include "service/clock.h"
#include "service/simulated_backend.h"
#include "sim/sim_backend.h"
#include "sim/trace.h"
#include "sim/trace_cancels.h"

namespace tessera {
namespace {

using json = nlohmann::json;

// Two 8 x H100 nodes and an A100 node whose MIG layout the GPU Operator fixed (all-balanced: per GPU one
// 3g.40gb, one 2g.20gb, two 1g.10gb), as the Kubernetes scheduler sees a cluster.
constexpr const char* kContractCluster = R"(name: contract
defaults: {cpu: 128, memory_gib: 1024, spine: spine-0, tier: reserved, interconnect: nvswitch}
nodes:
  - {name: h100, count: 2, gpu: h100-80gb, gpus: 8, leaf: leaf-0}
  - {name: a100-mig, count: 1, gpu: a100-80gb, gpus: 4, leaf: leaf-0, mig: {enabled: true, config: all-balanced}}
)";

struct ContractScenario {
  std::string name;
  std::vector<TraceJob> jobs;  // id = index; submit_s, shape, duration, priority, cancel_s
};

TraceJob WholeGpus(int64_t id, int64_t submit_s, int tasks, int gpus, int64_t duration_s) {
  TraceJob j;
  j.id = id;
  j.submit_s = submit_s;
  j.cls = WorkloadClass::kTraining;
  j.team = "research";
  j.tasks = tasks;
  j.gpus_per_task = gpus;
  j.compute_milli = 900;
  j.memory_mib = 40000;
  j.cpu_milli = 4000;
  j.host_memory_mib = 16384;
  j.gpu_kinds = {"h100-80gb"};
  j.duration_s = duration_s;
  return j;
}

// An inference replica asking for a 3g.40gb instance, as the Kubernetes scheduler reads a pod that names the
// profile (nvidia.com/mig-3g.40gb): the profile's usable memory and compute on the A100 80GB.
TraceJob MigReplica(int64_t id, int64_t submit_s, int64_t duration_s) {
  const Catalog& cat = Catalog::Default();
  const GpuKind& a100 = cat.kind(cat.Find("a100-80gb"));
  const int profile = a100.FindProfile("3g.40gb");
  TraceJob j;
  j.id = id;
  j.submit_s = submit_s;
  j.cls = WorkloadClass::kInference;
  j.team = "serving";
  j.gpus_per_task = 0;
  j.compute_milli = a100.ProfileComputeMilli(profile);
  j.memory_mib = a100.profiles[profile].usable_mib;
  j.cpu_milli = 2000;
  j.host_memory_mib = 8192;
  j.gpu_kinds = {"a100-80gb"};
  j.duration_s = duration_s;
  return j;
}

std::vector<ContractScenario> ContractScenarios() {
  std::vector<ContractScenario> out;
  {  // a single GPU, a gang of 2 x 4 GPUs, a MIG replica; one waits for the gang's GPUs
    ContractScenario s{"place", {}};
    s.jobs.push_back(WholeGpus(0, 0, 1, 1, 600));
    s.jobs.push_back(WholeGpus(1, 0, 2, 4, 900));
    s.jobs.push_back(WholeGpus(2, 0, 1, 8, 1200));
    s.jobs.push_back(MigReplica(3, 10, 700));
    s.jobs.push_back(WholeGpus(4, 20, 1, 4, 300));  // waits until job 0 or 1 ends
    out.push_back(std::move(s));
  }
  {  // priority preemption: a production job takes 8 GPUs from training that ran past min_runtime_s
    ContractScenario s{"preempt", {}};
    s.jobs.push_back(WholeGpus(0, 0, 1, 8, 3000));
    s.jobs.push_back(WholeGpus(1, 0, 2, 4, 3000));
    TraceJob prod = WholeGpus(2, 600, 1, 8, 900);
    prod.cls = WorkloadClass::kInference;
    prod.team = "prod";
    prod.priority = 1000;
    prod.latency_sensitive = true;
    s.jobs.push_back(prod);
    s.jobs.push_back(MigReplica(3, 30, 2000));
    out.push_back(std::move(s));
  }
  {  // cancels: a running job, a waiting one and one on arrival; one cancel comes after its job ended
    ContractScenario s{"cancel", {}};
    s.jobs.push_back(WholeGpus(0, 0, 2, 8, 4000));
    s.jobs.back().cancel_s = 500;
    s.jobs.push_back(WholeGpus(1, 100, 1, 4, 600));
    s.jobs.back().cancel_s = 200;  // waits: job 0 holds every H100
    s.jobs.push_back(MigReplica(2, 50, 300));
    s.jobs.back().cancel_s = 1000;  // ended at 350
    s.jobs.push_back(MigReplica(3, 60, 900));
    s.jobs.back().cancel_s = 0;
    s.jobs.push_back(WholeGpus(4, 700, 1, 8, 400));
    out.push_back(std::move(s));
  }
  return out;
}

// Where a backend's jobs run, as the harness sees it besides the Backend calls.
class ContractWorld {
 public:
  virtual ~ContractWorld() = default;
  virtual Backend& backend() = 0;
  // The job at trace index `i` arrived (Kubernetes: its pods are made).
  virtual void Arrived(int32_t i, int64_t now) {}
  // Before the instant at `now`: the world moves there (a pod whose work is done succeeds; a requeued job
  // gets new pods).
  virtual void Before(int64_t now) {}
  // After the instant: what the driver asked is carried out (asynchronous backends).
  virtual void After(int64_t now) {}
  // The next time the world changes by itself; INT64_MAX = none.
  virtual int64_t NextS() const { return INT64_MAX; }
};

class SimWorld final : public ContractWorld {
 public:
  SimWorld(const Cluster& cluster, const std::vector<TraceJob>& jobs) {
    auto made = SimulatedCluster::Make(
        cluster, Catalog::Default(),
        [&jobs](JobSlot s) {
          return s.value() < static_cast<int32_t>(jobs.size()) ? &jobs[s.value()] : nullptr;
        },
        PhysicsOptions{});
    EXPECT_TRUE(made.ok()) << made.error();
    backend_ = std::move(made).value();
  }
  Backend& backend() override { return *backend_; }

 private:
  std::unique_ptr<SimulatedCluster> backend_;
};

class ServiceWorld final : public ContractWorld {
 public:
  explicit ServiceWorld(VirtualClock* clock) : backend_(clock) {}
  Backend& backend() override { return backend_; }

 private:
  SimulatedBackend backend_;
};

// Kubernetes: the K8sBackend on the fake API server. Each job is a PodGroup-less set of pods labelled with
// its name (a gang's members "NAME-0", "NAME-1", ...) asking for its devices; the test is the kubelet and the
// controller that makes an evicted job's pods again while it waits.
class K8sWorld final : public ContractWorld, public Backend {
 public:
  K8sWorld(const Cluster& cluster, const std::vector<TraceJob>& jobs, const ControlLoop* loop)
      : cluster_(cluster), jobs_(jobs), loop_(loop) {
    for (const Node& n : cluster.nodes) api_server_.Create("nodes", NodeObject(n));
    KubeConfig kc;
    kc.server = api_server_.url();
    api_ = std::make_unique<ApiClient>(kc);
    K8sBackendHooks hooks;
    hooks.pods = [this](const JobKey& key) { return PodsOf(key.name); };
    hooks.event = [](const json&, const std::string&, const std::string&, const std::string&) {};
    k8s_ = std::make_unique<K8sBackend>(api_.get(), std::move(hooks));
  }
  ~K8sWorld() override { k8s_->Shutdown(); }

  Backend& backend() override { return *this; }
  void Arrived(int32_t i, int64_t now) override { MakePods(i); }

  void Before(int64_t now) override {
    bool changed = false;
    for (auto it = runs_.begin(); it != runs_.end();) {
      if (it->second.end_s < 0 || it->second.end_s > now) {
        ++it;
        continue;
      }
      for (const json& p : PodsOf(Name(it->first)))
        if (!PodNode(p).empty() && !PodTerminal(p))
          api_server_.Patch("pods", "ml", p["metadata"]["name"], {{"status", {{"phase", "Succeeded"}}}});
      it = runs_.erase(it);
      changed = true;
    }
    for (int32_t i = 0; i < static_cast<int32_t>(jobs_.size()); ++i) {  // the controller
      const JobPhase phase = loop_->jobs()[JobSlot(i)].phase;
      if (phase == JobPhase::kPending && PodsOf(Name(i)).empty()) MakePods(i), changed = true;
    }
    if (changed) k8s_->PodsChanged();
  }
  void After(int64_t now) override { k8s_->Drain(); }
  int64_t NextS() const override {
    int64_t t = INT64_MAX;
    for (const auto& [i, r] : runs_)
      if (r.end_s >= 0) t = std::min(t, r.end_s);
    return t;
  }

  // Backend: the K8sBackend's, noting what each launch asks the pods to do (the job's own knowledge of its
  // work left, as a real job's checkpoint would tell it).
  // The key goes with the launch, as the scheduler's jobs' do (ServiceConfig::external_keys): the backend
  // has no other way to find a job's pods.
  LaunchAck Launch(const LaunchSpec& spec, int64_t now) override {
    runs_[spec.slot.value()] = {spec.run, spec.work_s < 0 ? -1 : now + static_cast<int64_t>(spec.work_s)};
    LaunchSpec keyed = spec;
    keyed.key = JobKey{"pod", "ml", Name(spec.slot.value())}.str();
    return k8s_->Launch(keyed, now);
  }
  void Stop(JobSlot slot, uint32_t run, int64_t grace_s, std::string_view reason, int64_t now) override {
    auto it = runs_.find(slot.value());
    if (it != runs_.end() && it->second.run == run) runs_.erase(it);
    k8s_->Stop(slot, run, grace_s, reason, now);
  }
  void Reconfigure(GpuId gpu, const std::string& layout, int64_t now) override {
    k8s_->Reconfigure(gpu, layout, now);
  }
  std::vector<BackendEvent> Poll(int64_t now) override { return k8s_->Poll(now); }
  int64_t NextEventS() const override { return k8s_->NextEventS(); }
  bool asynchronous() const override { return true; }

  std::vector<std::string> Overcommits() const { return api_server_.Overcommits(); }

 private:
  struct PodRun {
    uint32_t run = 0;
    int64_t end_s = -1;
  };
  std::string Name(int32_t i) const { return "job-" + std::to_string(jobs_[i].id); }

  static json NodeObject(const Node& n) {
    const bool mig = n.mig_enabled;
    json alloc = {{"cpu", "128"}, {"memory", "1024Gi"}, {"pods", "110"}};
    if (mig)
      alloc["nvidia.com/mig-3g.40gb"] = std::to_string(n.gpu_count);
    else
      alloc["nvidia.com/gpu"] = std::to_string(n.gpu_count);
    return {{"metadata", {{"name", n.name}}},
            {"spec", {{"unschedulable", false}}},
            {"status", {{"allocatable", alloc}, {"capacity", alloc}}}};
  }

  void MakePods(int32_t i) {
    const TraceJob& j = jobs_[i];
    const std::string resource = j.gpus_per_task == 0 ? "nvidia.com/mig-3g.40gb" : "nvidia.com/gpu";
    const std::string count = std::to_string(j.gpus_per_task == 0 ? 1 : j.gpus_per_task);
    for (int t = 0; t < j.tasks; ++t) {
      const std::string name = j.tasks == 1 ? Name(i) : Name(i) + "-" + std::to_string(t);
      json requests = {{"cpu", "4"}, {"memory", "16Gi"}, {resource, count}};
      api_server_.Create(
          "pods",
          {{"metadata", {{"name", name}, {"namespace", "ml"}, {"labels", {{"contract-job", Name(i)}}}}},
           {"spec",
            {{"schedulerName", "tessera"},
             {"terminationGracePeriodSeconds", 0},
             {"containers",
              {{{"name", "main"},
                {"image", "app"},
                {"resources", {{"requests", requests}, {"limits", {{resource, count}}}}}}}}}},
           {"status", {{"phase", "Pending"}}}});
    }
  }

  // The job's pods now, in name order (the fake lists them so).
  std::vector<json> PodsOf(const std::string& job) const {
    std::vector<json> out;
    for (const json& p : api_server_.List("pods"))
      if (p["metadata"].value("labels", json::object()).value("contract-job", "") == job) out.push_back(p);
    return out;
  }

  const Cluster& cluster_;
  const std::vector<TraceJob>& jobs_;
  const ControlLoop* loop_;
  testing::FakeApiServer api_server_;
  std::unique_ptr<ApiClient> api_;
  std::unique_ptr<K8sBackend> k8s_;
  std::map<int32_t, PodRun> runs_;  // by slot: the run the kubelet plays
};

// The owner of the loop: arrivals and cancels from the scenario, a cycle whenever something changed.
class ContractOwner final : public InstantSource {
 public:
  ContractOwner(const std::vector<TraceJob>& jobs, Driver* driver, const Policy* policy, ContractWorld* world)
      : jobs_(jobs), driver_(driver), policy_(policy), world_(world) {}
  size_t Waiting() const override { return driver_->loop().jobs().pending().size(); }
  bool Arrive(int64_t now) override {
    bool any = false;
    while (next_ < jobs_.size() && jobs_[next_].submit_s == now) {
      const int32_t i = static_cast<int32_t>(next_++);
      world_->Arrived(i, now);
      driver_->loop().Submit(JobSlot(i), now);
      cancels_.Arrived(i, jobs_[i], now);
      any = true;
    }
    for (int32_t i : cancels_.TakeDue(now))
      if (!Over(i)) driver_->Cancel(JobSlot(i), now, "cancelled"), any = true;
    return any;
  }
  int Cycle(int64_t now) override { return driver_->CycleOnce(now, *policy_); }
  int64_t NextS() {
    const int64_t arrival = next_ < jobs_.size() ? jobs_[next_].submit_s : INT64_MAX;
    return std::min({arrival, cancels_.NextS([&](int32_t i) { return Over(i); }), world_->NextS()});
  }

 private:
  bool Over(int32_t i) const {
    const JobPhase p = driver_->loop().jobs()[JobSlot(i)].phase;
    return p == JobPhase::kDone || p == JobPhase::kFailed;
  }
  const std::vector<TraceJob>& jobs_;
  Driver* driver_;
  const Policy* policy_;
  ContractWorld* world_;
  size_t next_ = 0;
  TraceCancels cancels_;
};

enum class ContractBackend { kSim, kService, kK8s };
const char* BackendName(ContractBackend k) {
  return k == ContractBackend::kSim ? "simulator" : k == ContractBackend::kService ? "service" : "kubernetes";
}

// Runs the scenario to its end against one backend; returns the decision lines.
std::vector<std::string> RunAgainst(ContractBackend kind, const ContractScenario& sc) {
  auto cluster = LoadClusterYaml(kContractCluster, "contract", Catalog::Default());
  EXPECT_TRUE(cluster.ok()) << cluster.error();
  auto state = ClusterState::Build(*cluster, Catalog::Default());
  EXPECT_TRUE(state.ok()) << state.error();
  std::vector<QueueConfig> queues;
  std::map<std::string, int> queue_of;
  for (const TraceJob& j : sc.jobs)
    if (queue_of.emplace(j.team, static_cast<int>(queues.size())).second) {
      QueueConfig q;
      q.name = q.team = j.team;
      queues.push_back(q);
    }
  const LoopSetup setup;
  ControlLoop loop(std::move(state).value(), queues, MakeLoopOptions(setup));
  for (const TraceJob& j : sc.jobs) {
    auto r = ToRequest(j, Catalog::Default());
    EXPECT_TRUE(r.ok()) << r.error();
    ControlJob cj;
    cj.request = *r;
    cj.queue = queue_of[j.team];
    cj.submit_s = j.submit_s;
    cj.remaining_work_s = static_cast<double>(j.duration_s);
    loop.Add(std::move(cj));
  }
  VirtualClock clock;
  std::unique_ptr<ContractWorld> world;
  K8sWorld* k8s = nullptr;
  if (kind == ContractBackend::kSim) world = std::make_unique<SimWorld>(*cluster, sc.jobs);
  if (kind == ContractBackend::kService) world = std::make_unique<ServiceWorld>(&clock);
  if (kind == ContractBackend::kK8s)
    world = std::unique_ptr<ContractWorld>(k8s = new K8sWorld(*cluster, sc.jobs, &loop));
  PolicyOptions po;
  po.fixed_mig = true;  // the GPU Operator owns MIG layouts (what the Kubernetes scheduler runs)
  auto policy = MakePolicy("tessera", po);
  EXPECT_TRUE(policy.ok()) << policy.error();
  Driver driver(&loop, &world->backend(), MakeDriverOptions(setup), nullptr);
  driver.set_recording(true);
  ContractOwner owner(sc.jobs, &driver, policy->get(), world.get());
  int64_t now = 0;
  for (int steps = 0; steps < 1000; ++steps) {
    bool tick = false;
    const int64_t t = driver.NextInstant(now, steps == 0 ? 0 : owner.NextS(), 0, &tick);
    if (t == INT64_MAX) break;
    now = t;
    clock.Set(static_cast<double>(now));
    world->Before(now);
    driver.RunInstant(now, tick, owner);
    world->After(now);
  }
  if (k8s != nullptr) EXPECT_TRUE(k8s->Overcommits().empty()) << k8s->Overcommits().front();
  std::vector<std::string> lines;
  for (const Decision& d : driver.decisions())
    lines.push_back(DecisionLine(
        d, loop.state(), [&](JobSlot s) { return std::to_string(sc.jobs[s.value()].id); },
        [&](int64_t n) { return cluster->nodes[n].name; }));
  return lines;
}

int ContractCount(const std::vector<std::string>& lines, const std::string& needle) {
  int n = 0;
  for (const std::string& l : lines) n += l.find(needle) != std::string::npos;
  return n;
}

class BackendContract : public ::testing::TestWithParam<ContractScenario> {};

TEST_P(BackendContract, EveryBackendMakesTheSameDecisions) {
  const ContractScenario& sc = GetParam();
  const std::vector<std::string> reference = RunAgainst(ContractBackend::kSim, sc);
  // Every job of the scenario has a decision, and what the scenario is about happened.
  for (const TraceJob& j : sc.jobs)
    EXPECT_GT(ContractCount(reference, "\"job\":\"" + std::to_string(j.id) + "\""), 0) << "job " << j.id;
  if (sc.name == "place") EXPECT_GT(ContractCount(reference, "\"mig\":\"3g.40gb@"), 0);
  if (sc.name == "preempt") EXPECT_GT(ContractCount(reference, "\"event\":\"preempt\""), 0);
  if (sc.name == "cancel") EXPECT_EQ(ContractCount(reference, "\"event\":\"cancel\""), 3);
  for (ContractBackend kind : {ContractBackend::kService, ContractBackend::kK8s}) {
    const std::vector<std::string> got = RunAgainst(kind, sc);
    EXPECT_EQ(got.size(), reference.size()) << BackendName(kind);
    for (size_t i = 0; i < std::min(got.size(), reference.size()); ++i)
      EXPECT_EQ(got[i], reference[i]) << BackendName(kind) << ", line " << i + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, BackendContract, ::testing::ValuesIn(ContractScenarios()),
                         [](const ::testing::TestParamInfo<ContractScenario>& p) { return p.param.name; });

}  // namespace
}  // namespace tessera
