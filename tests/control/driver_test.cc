// The driver rules (control/driver.h) with a recording backend: start delays, groups launched all or none,
// refused and failed launches, whole-group preemption, cancels, the decision record and its JSON lines.
#include "control/driver.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>

#include "control/decisions.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "sched/policy.h"

namespace tessera {
namespace {

// Records every call; ends runs at work_s after their launch; refuses launches of the slots in `refuse`.
class RecordingBackend : public Backend {
 public:
  LaunchAck Launch(const LaunchSpec& spec, int64_t now) override {
    calls.push_back("launch " + std::to_string(spec.slot.value()) + "@" + std::to_string(now));
    launches.push_back(spec);
    if (refuse.count(spec.slot)) return {true, "refused", 0};
    if (spec.work_s >= 0) pending[now + static_cast<int64_t>(spec.work_s)].push_back({spec.slot, spec.run});
    return {false, "", 1.0};
  }
  void Stop(JobSlot slot, uint32_t run, int64_t grace_s, std::string_view reason, int64_t now) override {
    calls.push_back("stop " + std::to_string(slot.value()) + " run " + std::to_string(run) + " grace " +
                    std::to_string(grace_s));
  }
  void Checkpoint(JobSlot slot, uint32_t run, int64_t now) override {
    calls.push_back("checkpoint " + std::to_string(slot.value()));
  }
  void Reconfigure(GpuId gpu, const std::string& layout, int64_t now) override {
    calls.push_back("reconfigure " + std::to_string(gpu) + " " + layout);
  }
  std::vector<BackendEvent> Poll(int64_t now) override {
    std::vector<BackendEvent> out = std::move(injected);
    injected.clear();
    while (!pending.empty() && pending.begin()->first <= now) {
      for (auto [slot, run] : pending.begin()->second)
        out.push_back({BackendEventKind::kEnded, slot, run, pending.begin()->first, kNone, ""});
      pending.erase(pending.begin());
    }
    return out;
  }
  int64_t NextEventS() const override { return pending.empty() ? -1 : pending.begin()->first; }

  std::vector<std::string> calls;
  std::vector<LaunchSpec> launches;
  std::set<JobSlot> refuse;
  std::map<int64_t, std::vector<std::pair<JobSlot, uint32_t>>> pending;
  std::vector<BackendEvent> injected;
};

class Listener : public DriverListener {
 public:
  void OnReleased(const Released& r, int64_t now, ReleaseCause cause, int64_t lost) override {
    released.push_back({r.job, cause});
  }
  std::vector<std::pair<JobSlot, ReleaseCause>> released;
};

Cluster Nodes(int nodes, int gpus, bool mig) {
  Cluster c;
  c.name = "test";
  for (int i = 0; i < nodes; ++i) {
    Node n;
    n.name = "n" + std::to_string(i);
    n.kind = Catalog::Default().Find("a100-80gb");
    n.gpu_count = gpus;
    n.cpu_milli = 64000;
    n.memory_mib = 512 * 1024;
    n.interconnect = Interconnect::kNvSwitch;
    n.mig_enabled = mig;
    c.nodes.push_back(n);
  }
  c.leaf_names.push_back("leaf0");
  c.spine_names.push_back("spine0");
  return c;
}

ControlJob WholeJob(int gpus, int priority, double work_s) {
  ControlJob j;
  j.request.cls = WorkloadClass::kTraining;
  j.request.tasks = 1;
  j.request.gpus_per_task = gpus;
  j.request.gpu_memory_mib = 40000;
  j.request.cpu_milli = 1000;
  j.request.host_memory_mib = 1024;
  j.request.priority = priority;
  j.remaining_work_s = work_s;
  return j;
}

class DriverTest : public ::testing::Test {
 protected:
  void Make(int nodes, int gpus, bool mig = false, DriverOptions o = {}) {
    cluster_ = Nodes(nodes, gpus, mig);
    auto st = ClusterState::Build(cluster_, Catalog::Default());
    ASSERT_TRUE(st.ok()) << st.error();
    QueueConfig q;
    q.name = "q0";
    loop_.emplace(std::move(st).value(), std::vector<QueueConfig>{q}, LoopOptions{});
    driver_.emplace(&*loop_, &backend_, o, &listener_);
    driver_->set_recording(true);
    policy_ = std::move(MakePolicy("tessera")).value();
  }
  JobSlot Submit(ControlJob j, int64_t now) {
    const JobSlot s = loop_->Add(std::move(j));
    loop_->Submit(s, now);
    return s;
  }
  std::vector<DecisionKind> Kinds() {
    std::vector<DecisionKind> out;
    for (const Decision& d : driver_->decisions()) out.push_back(d.kind);
    return out;
  }
  Cluster cluster_;
  std::optional<ControlLoop> loop_;
  RecordingBackend backend_;
  Listener listener_;
  std::optional<Driver> driver_;
  std::unique_ptr<Policy> policy_;
};

TEST_F(DriverTest, WholeGpuJobLaunchesAtOnceAndEndsWhenTheBackendSaysSo) {
  Make(1, 8);
  const JobSlot a = Submit(WholeJob(4, 100, 500), 0);
  EXPECT_EQ(driver_->CycleOnce(0, *policy_), 1);
  EXPECT_EQ(loop_->jobs()[a].phase, JobPhase::kRunning);
  EXPECT_EQ(backend_.calls, std::vector<std::string>{"launch 0@0"});
  EXPECT_EQ(driver_->NextEventS(), 500);
  EXPECT_FALSE(driver_->HandleDue(499));
  EXPECT_TRUE(driver_->HandleDue(500));
  EXPECT_EQ(loop_->jobs()[a].phase, JobPhase::kDone);
  EXPECT_EQ(Kinds(), (std::vector<DecisionKind>{DecisionKind::kStart, DecisionKind::kEnd}));
  EXPECT_EQ(driver_->decisions()[0].tasks.size(), 1u);
  EXPECT_EQ(driver_->decisions()[1].t, 500);
}

// A launch carries what the backend needs to run the job without asking its driver: the job's key as the
// driver named it and the name of each task's node.
TEST_F(DriverTest, ALaunchCarriesTheJobsKeyAndItsNodesNames) {
  Make(2, 8);
  ControlJob j = WholeJob(8, 100, 500);
  j.request.tasks = 2;  // a gang over both nodes
  j.key = "pod/ml/train";
  const JobSlot a = Submit(std::move(j), 0);
  EXPECT_EQ(driver_->CycleOnce(0, *policy_), 1);
  ASSERT_EQ(backend_.launches.size(), 1u);
  const LaunchSpec& spec = backend_.launches[0];
  EXPECT_EQ(spec.slot, a);
  EXPECT_EQ(spec.key, "pod/ml/train");
  ASSERT_EQ(spec.node_names.size(), spec.tasks.size());
  for (size_t i = 0; i < spec.tasks.size(); ++i)
    EXPECT_EQ(spec.node_names[i], cluster_.nodes[spec.tasks[i].node].name);
  EXPECT_EQ((std::set<std::string>{spec.node_names.begin(), spec.node_names.end()}),
            (std::set<std::string>{"n0", "n1"}));
  const LaunchSpec again = LaunchSpecOf(*loop_, a);  // what a restore adopts
  EXPECT_EQ(again.key, spec.key);
  EXPECT_EQ(again.node_names, spec.node_names);
}

TEST_F(DriverTest, AMigInstanceCreatedAtBindLaunchesAfterTheInstanceDelay) {
  DriverOptions o;
  o.mig_instance_delay_s = 30;
  Make(1, 1, /*mig=*/true, o);
  ControlJob j = WholeJob(0, 100, 100);
  j.request.cls = WorkloadClass::kInference;
  j.request.gpu_milli = 100;
  j.request.gpu_memory_mib = 8000;
  const JobSlot a = Submit(j, 0);
  ASSERT_EQ(driver_->CycleOnce(0, *policy_), 1);
  EXPECT_EQ(loop_->jobs()[a].phase, JobPhase::kBound);  // the instance is being created
  ASSERT_EQ(backend_.calls.size(), 1u);                 // the backend creates it
  EXPECT_EQ(backend_.calls[0].rfind("reconfigure 0 ", 0), 0u) << backend_.calls[0];
  EXPECT_NE(backend_.calls[0].find("@"), std::string::npos) << backend_.calls[0];
  backend_.calls.clear();
  EXPECT_EQ(driver_->NextEventS(), 30);
  EXPECT_TRUE(driver_->HandleDue(30));
  EXPECT_EQ(loop_->jobs()[a].phase, JobPhase::kRunning);
  ASSERT_EQ(driver_->decisions().size(), 1u);
  const std::string line = DecisionLine(
      driver_->decisions()[0], loop_->state(), [](JobSlot j) { return "job-" + std::to_string(j.value()); },
      [&](int64_t n) { return cluster_.nodes[n].name; });
  const auto o2 = nlohmann::json::parse(line);
  EXPECT_EQ(o2["t"], 30);
  EXPECT_EQ(o2["job"], "job-0");
  EXPECT_EQ(o2["event"], "start");
  ASSERT_EQ(o2["placements"].size(), 1u);
  EXPECT_EQ(o2["placements"][0]["node"], "n0");
  EXPECT_EQ(o2["placements"][0]["gpu"], 0);
  EXPECT_TRUE(o2["placements"][0]["mig"].is_string());
  EXPECT_NE(o2["placements"][0]["mig"].get<std::string>().find('@'), std::string::npos);
}

TEST_F(DriverTest, AGroupHoldsItsGrantsUntilEveryMemberIsBoundThenLaunchesTogether) {
  Make(1, 4);
  const JobSlot blocker = Submit(WholeJob(3, 100, 100), 0);
  ASSERT_EQ(driver_->CycleOnce(0, *policy_), 1);
  const JobSlot r0 = Submit(WholeJob(1, 100, 50), 1), r1 = Submit(WholeJob(1, 100, 50), 1);
  driver_->SetGroup({r0, r1});
  driver_->CycleOnce(1, *policy_);  // one GPU free: one member binds and holds it
  const int bound = (loop_->jobs()[r0].phase == JobPhase::kBound) + (loop_->jobs()[r1].phase == JobPhase::kBound);
  EXPECT_EQ(bound, 1);
  EXPECT_EQ(backend_.calls.size(), 1u);  // only the blocker was launched
  driver_->HandleDue(100);               // the blocker ends
  driver_->CycleOnce(100, *policy_);
  EXPECT_EQ(loop_->jobs()[r0].phase, JobPhase::kRunning);
  EXPECT_EQ(loop_->jobs()[r1].phase, JobPhase::kRunning);
  EXPECT_EQ(backend_.calls.size(), 3u);
  ASSERT_EQ(driver_->decisions().back().kind, DecisionKind::kStart);
  EXPECT_EQ(driver_->decisions().back().group, r0);  // one decision for the group, all its placements
  EXPECT_EQ(driver_->decisions().back().tasks.size(), 2u);
  EXPECT_EQ(driver_->GroupOf(r1), (std::vector<JobSlot>{r0, r1}));
  (void)blocker;
}

TEST_F(DriverTest, ARefusedLaunchFailsTheJobForGood) {
  Make(1, 8);
  const JobSlot a = Submit(WholeJob(2, 100, 100), 0);
  backend_.refuse.insert(a);
  driver_->CycleOnce(0, *policy_);
  EXPECT_EQ(loop_->jobs()[a].phase, JobPhase::kFailed);
  EXPECT_EQ(loop_->state().AllocatedMilli(), 0);
  ASSERT_EQ(listener_.released.size(), 1u);
  EXPECT_EQ(listener_.released[0].second, ReleaseCause::kLaunchRefused);
  EXPECT_EQ(Kinds(), std::vector<DecisionKind>{DecisionKind::kFail});
}

TEST_F(DriverTest, ALaunchThatFailsLaterGoesBackToTheQueue) {
  Make(1, 8);
  const JobSlot a = Submit(WholeJob(2, 100, 100), 0);
  driver_->CycleOnce(0, *policy_);
  backend_.injected.push_back({BackendEventKind::kLaunchFailed, a, loop_->jobs()[a].epoch, 5, kNone, "no pod"});
  EXPECT_TRUE(driver_->HandleDue(5));
  EXPECT_EQ(loop_->jobs()[a].phase, JobPhase::kPending);
  EXPECT_EQ(listener_.released.back().second, ReleaseCause::kLaunchFailed);
  // A stale report (an older run) changes nothing.
  backend_.injected.push_back({BackendEventKind::kEnded, a, 0, 6, kNone, ""});
  EXPECT_FALSE(driver_->HandleDue(6));
  EXPECT_EQ(loop_->jobs()[a].phase, JobPhase::kPending);
}

TEST_F(DriverTest, PreemptingOneMemberTakesTheWholeGroup) {
  Make(1, 2);
  const JobSlot r0 = Submit(WholeJob(1, 100, 1000), 0), r1 = Submit(WholeJob(1, 100, 1000), 0);
  driver_->SetGroup({r0, r1});
  driver_->CycleOnce(0, *policy_);
  ASSERT_EQ(loop_->jobs()[r1].phase, JobPhase::kRunning);
  Plan p;
  Action a;
  a.kind = ActionKind::kPreempt;
  a.job = EngineId(r0);
  a.for_job = -1;
  p.actions.push_back(a);
  driver_->ApplyPlan(p, 10);
  EXPECT_EQ(loop_->jobs()[r0].phase, JobPhase::kPending);
  EXPECT_EQ(loop_->jobs()[r1].phase, JobPhase::kPending);
  EXPECT_EQ(loop_->state().AllocatedMilli(), 0);
  EXPECT_EQ(Kinds(), (std::vector<DecisionKind>{DecisionKind::kStart, DecisionKind::kPreempt}));
  int stops = 0;
  for (const std::string& c : backend_.calls) stops += c.rfind("stop", 0) == 0;
  EXPECT_EQ(stops, 2);
}

TEST_F(DriverTest, CancelStopsARunningGroupAndWithdrawsAPendingJob) {
  Make(1, 2);
  const JobSlot r0 = Submit(WholeJob(1, 100, 1000), 0), r1 = Submit(WholeJob(1, 100, 1000), 0);
  driver_->SetGroup({r0, r1});
  driver_->CycleOnce(0, *policy_);
  const JobSlot waiting = Submit(WholeJob(2, 100, 10), 1);
  driver_->Cancel(r1, 5, "cancelled");
  EXPECT_EQ(loop_->jobs()[r0].phase, JobPhase::kFailed);
  EXPECT_EQ(loop_->jobs()[r1].phase, JobPhase::kFailed);
  EXPECT_EQ(backend_.calls.back(), "stop 1 run 0 grace 0");
  driver_->Cancel(waiting, 6, "cancelled");
  EXPECT_TRUE(loop_->jobs().pending().empty());
  EXPECT_EQ(Kinds(), (std::vector<DecisionKind>{DecisionKind::kStart, DecisionKind::kCancel, DecisionKind::kCancel}));
  EXPECT_EQ(driver_->decisions()[1].group, r0);
}

TEST_F(DriverTest, AFailedReconfigurationKeepsNewWorkOffTheGpu) {
  Make(1, 2);
  backend_.injected.push_back(
      {BackendEventKind::kReconfigureFailed, kNoSlot, 0, 1, 1, "mig-manager: failed"});
  EXPECT_TRUE(driver_->HandleDue(1));
  EXPECT_TRUE(loop_->state().gpu_cordoned(1));
  const JobSlot a = Submit(WholeJob(2, 100, 100), 2);  // needs both GPUs: cannot start now
  EXPECT_EQ(driver_->CycleOnce(2, *policy_), 0);
  EXPECT_EQ(loop_->jobs()[a].phase, JobPhase::kPending);
  ASSERT_TRUE(loop_->state().UncordonGpu(1).ok());
  EXPECT_EQ(driver_->CycleOnce(3, *policy_), 1);
}

TEST_F(DriverTest, NextInstantTicksOnlyWhileJobsWait) {
  DriverOptions o;
  o.cycle_every_s = 10;
  Make(1, 1, false, o);
  bool tick = false;
  EXPECT_EQ(driver_->NextInstant(0, 100, 0, &tick), 100);
  EXPECT_FALSE(tick);
  Submit(WholeJob(2, 100, 10), 0);  // cannot fit: it waits
  EXPECT_EQ(driver_->NextInstant(0, 100, 0, &tick), 10);
  EXPECT_TRUE(tick);
  EXPECT_EQ(driver_->NextInstant(95, 100, 0, &tick), 100);
  EXPECT_FALSE(tick);
}

}  // namespace
}  // namespace tessera
