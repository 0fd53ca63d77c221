// The service's nodes over a real SQLite file with a manual clock: a node added takes pending work, a
// cordoned one takes nothing new, a drained one ends empty with its jobs requeued, a busy one cannot be
// removed; the cluster lives in the store across restarts (a differing cluster file is ignored).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>

#include "manual_clock.h"
#include "service/service.h"
#include "service/simulated_backend.h"

namespace tessera {
namespace {

using testing::ManualClock;

// The simulated backend behind a front that counts the checkpoints the driver asks for.
class CheckpointCountingBackend final : public Backend {
 public:
  explicit CheckpointCountingBackend(std::unique_ptr<SimulatedBackend>* inner) : inner_(inner) {}
  LaunchAck Launch(const LaunchSpec& spec, int64_t now) override { return (*inner_)->Launch(spec, now); }
  void Stop(JobSlot slot, uint32_t run, int64_t grace_s, std::string_view reason, int64_t now) override {
    (*inner_)->Stop(slot, run, grace_s, reason, now);
  }
  void Checkpoint(JobSlot slot, uint32_t run, int64_t now) override {
    ++checkpoints;
    (*inner_)->Checkpoint(slot, run, now);
  }
  void Reconfigure(GpuId gpu, const std::string& layout, int64_t now) override {
    (*inner_)->Reconfigure(gpu, layout, now);
  }
  std::vector<BackendEvent> Poll(int64_t now) override { return (*inner_)->Poll(now); }
  int64_t NextEventS() const override { return (*inner_)->NextEventS(); }
  bool Adopt(const LaunchSpec& spec, int64_t started_at, int64_t now) override {
    return (*inner_)->Adopt(spec, started_at, now);
  }
  std::vector<BackendRun> Running() const override { return (*inner_)->Running(); }
  bool asynchronous() const override { return (*inner_)->asynchronous(); }
  void OnEvents(std::function<void()> wake) override { (*inner_)->OnEvents(std::move(wake)); }
  int checkpoints = 0;

 private:
  std::unique_ptr<SimulatedBackend>* inner_;
};

constexpr const char* kNodesCluster = R"(name: t
defaults: {gpu: h100-80gb, gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch, spine: s, tier: reserved}
nodes:
  - {name: node, count: 2, leaf: leaf-0}
)";

constexpr const char* kAdded =
    R"({"name": "added", "gpu": "h100-80gb", "gpus": 8, "cpu": 192, "memory_gib": 2048, "interconnect": "nvswitch",
        "leaf": "leaf-0", "spine": "s", "tier": "reserved"})";

class NodesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tessera-nodes-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    Open(kNodesCluster);
    ASSERT_TRUE(svc_->CreateTeam(admin_, TeamRow{"vision", 8000, -1, 1, 0}).ok());
  }
  void TearDown() override {
    svc_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Open(const char* cluster) {
    ServiceConfig cfg;
    cfg.catalog = &Catalog::Default();
    auto cl = LoadClusterYaml(cluster, "test", Catalog::Default());
    ASSERT_TRUE(cl.ok()) << cl.error();
    cfg.cluster = *cl;
    cfg.background_cycles = false;
    cfg.log = [this](const std::string& line) { log_.push_back(line); };
    auto store = OpenSqliteStore((dir_ / "t.db").string());
    ASSERT_TRUE(store.ok());
    auto s = Service::Start(std::move(cfg), std::move(store).value(), &clock_, &front_);
    ASSERT_TRUE(s.ok()) << s.error();
    svc_ = std::move(s).value();
  }
  void Restart(const char* cluster) {
    svc_->Stop();
    svc_.reset();
    backend_ = std::make_unique<SimulatedBackend>(&clock_);
    Open(cluster);
  }
  int64_t Submit(const std::string& name, int gpus) {
    auto spec = ParseJobSpec({{"name", name},
                              {"class", "training"},
                              {"workers", 1},
                              {"gpus_per_worker", gpus},
                              {"memory_gib", 40},
                              {"project", "p"},
                              {"duration_s", 36000},
                              {"checkpointable", true},
                              {"checkpoint_interval_s", 600}});
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    auto r = svc_->Submit(member_, spec.value(), "");
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? r->job->id : -1;
  }
  JobPtr Job(int64_t id) { return svc_->Get(admin_, id).value().job; }
  // The names of the nodes a job's tasks are on, through the live cluster.
  std::set<std::string> NodesOf(int64_t id) {
    std::set<std::string> out;
    const Cluster& cl = svc_->snapshot()->cluster->cluster();
    for (const TaskPlacement& t : Job(id)->placements) out.insert(cl.nodes[t.node].name);
    return out;
  }
  std::map<std::string, std::string> States() {
    auto r = svc_->ListNodes(admin_);
    EXPECT_TRUE(r.ok());
    std::map<std::string, std::string> out;
    for (const NodeView& v : r.value()) out[v.name] = v.state;
    return out;
  }

  std::filesystem::path dir_;
  ManualClock clock_;
  std::unique_ptr<SimulatedBackend> backend_ = std::make_unique<SimulatedBackend>(&clock_);
  CheckpointCountingBackend front_{&backend_};
  std::unique_ptr<Service> svc_;
  std::vector<std::string> log_;
  Caller admin_{"admin", "", Role::kAdmin};
  Caller member_{"ana", "vision", Role::kMember};
};

TEST_F(NodesTest, AnAddedNodeTakesPendingWork) {
  const int64_t a = Submit("a", 8), b = Submit("b", 8), c = Submit("c", 8);
  svc_->RunCycleNow();
  ASSERT_EQ(Job(c)->state, JobState::kPending);
  auto added = svc_->AddNode(admin_, kAdded);
  ASSERT_TRUE(added.ok()) << added.error().message;
  EXPECT_EQ(added->state, "ready");
  EXPECT_EQ(added->spec["gpus"], 8);
  EXPECT_EQ(added->spec["cpu_milli"], 192000);
  svc_->RunCycleNow();
  EXPECT_EQ(Job(c)->state, JobState::kRunning);
  EXPECT_EQ(NodesOf(c), std::set<std::string>{"added"});
  EXPECT_EQ(Job(a)->state, JobState::kRunning);
  EXPECT_EQ(Job(b)->state, JobState::kRunning);
  EXPECT_EQ(States(), (std::map<std::string, std::string>{
                          {"node-000", "ready"}, {"node-001", "ready"}, {"added", "ready"}}));
  // Jobs too big for the old cluster are accepted once the cluster holds their GPUs.
  EXPECT_EQ(svc_->snapshot()->cluster->num_nodes(), 3);
}

TEST_F(NodesTest, BadNodesAreRefusedNamingTheField) {
  struct Case {
    std::string body, field;
    ErrorCode code = ErrorCode::kInvalidArgument;
  };
  const std::vector<Case> cases = {
      {R"({"gpu": "h100-80gb", "gpus": 8, "leaf": "leaf-0", "spine": "s"})", "name"},
      {R"({"name": "x", "gpu": "h100-80gb", "gpus": "eight", "leaf": "leaf-0", "spine": "s"})", "gpus"},
      {R"({"name": "x", "gpu": "h999", "gpus": 8, "leaf": "leaf-0", "spine": "s"})", "gpu"},
      {R"({"name": "x", "gpu": "h100-80gb", "gpus": 8, "leaf": "leaf-9", "spine": "s"})", "leaf"},
      {R"({"name": "x", "gpu": "h100-80gb", "gpus": 8, "leaf": "leaf-0", "spine": "t"})", "spine"},
      {R"({"name": "x", "gpu": "h100-80gb", "gpus": 8, "tier": "gold", "leaf": "leaf-0", "spine": "s"})",
       "tier"},
      {R"({"name": "x", "gpu": "h100-80gb", "gpus": 8, "colour": "red"})", "colour"},
      {R"({"name": "a/b", "gpu": "h100-80gb", "gpus": 8, "leaf": "leaf-0", "spine": "s"})", "name"},
      {R"({"name": "node-000", "gpu": "h100-80gb", "gpus": 8, "leaf": "leaf-0", "spine": "s"})", "name",
       ErrorCode::kAlreadyExists},
  };
  for (const Case& c : cases) {
    auto r = svc_->AddNode(admin_, c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.error().code, c.code) << c.body << ": " << r.error().message;
    EXPECT_EQ(r.error().field, c.field) << c.body << ": " << r.error().message;
  }
  EXPECT_EQ(svc_->AddNode(member_, kAdded).error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(svc_->ListNodes(member_).error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(svc_->CordonNode(member_, "node-000").error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(svc_->CordonNode(admin_, "nope").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(States().size(), 2u);
}

TEST_F(NodesTest, NothingNewLandsOnACordonedNode) {
  auto r = svc_->CordonNode(admin_, "node-000");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->state, "cordoned");
  const int64_t a = Submit("a", 4), b = Submit("b", 4), c = Submit("c", 4);
  svc_->RunCycleNow();
  EXPECT_EQ(NodesOf(a), std::set<std::string>{"node-001"});
  EXPECT_EQ(NodesOf(b), std::set<std::string>{"node-001"});
  EXPECT_EQ(Job(c)->state, JobState::kPending);
  ASSERT_TRUE(svc_->UncordonNode(admin_, "node-000").ok());
  svc_->RunCycleNow();
  EXPECT_EQ(NodesOf(c), std::set<std::string>{"node-000"});
  EXPECT_EQ(States()["node-000"], "ready");
}

TEST_F(NodesTest, ADrainedNodeEndsEmptyWithItsJobsRequeued) {
  const int64_t a = Submit("a", 4), b = Submit("b", 4), c = Submit("c", 4), d = Submit("d", 4);
  svc_->RunCycleNow();
  std::vector<int64_t> there;
  for (int64_t id : {a, b, c, d})
    if (NodesOf(id) == std::set<std::string>{"node-000"}) there.push_back(id);
  ASSERT_EQ(there.size(), 2u);
  auto r = svc_->DrainNode(admin_, "node-000");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->state, "drained");
  EXPECT_EQ(r->tasks, 0);
  for (int64_t id : there) {
    EXPECT_EQ(Job(id)->state, JobState::kPending);
    EXPECT_NE(Job(id)->message.find("node-000 is draining"), std::string::npos) << Job(id)->message;
  }
  svc_->RunCycleNow();  // nothing fits elsewhere and nothing lands on the drained node
  for (int64_t id : there) EXPECT_EQ(Job(id)->state, JobState::kPending);
  EXPECT_EQ(States()["node-000"], "drained");
  ASSERT_TRUE(svc_->AddNode(admin_, kAdded).ok());
  svc_->RunCycleNow();
  for (int64_t id : there) EXPECT_EQ(NodesOf(id), std::set<std::string>{"added"});
  ASSERT_TRUE(svc_->UncordonNode(admin_, "node-000").ok());
  EXPECT_EQ(States()["node-000"], "ready");
}

// Every taker of a running job's capacity follows the one rule (sched/take.h): a checkpointable job whose
// last checkpoint is old enough is checkpointed before a drain or a repartition's preemption takes it, and
// not again right after.
TEST_F(NodesTest, DrainsAndPreemptionsCheckpointFirstWhereDue) {
  const int64_t a = Submit("a", 8), b = Submit("b", 8);
  svc_->RunCycleNow();
  ASSERT_EQ(Job(a)->state, JobState::kRunning);
  ASSERT_EQ(Job(b)->state, JobState::kRunning);
  EXPECT_EQ(front_.checkpoints, 0);
  clock_.now_ += 30;  // younger than checkpoint_min_age_s (60 s): not worth a checkpoint
  ASSERT_TRUE(svc_->Preempt(admin_, a, "node drained for MIG config all-1g.10gb").ok());
  EXPECT_EQ(front_.checkpoints, 0);
  EXPECT_EQ(Job(a)->state, JobState::kPending);
  clock_.now_ += 600;
  ASSERT_TRUE(svc_->Preempt(admin_, b, "node drained for MIG config all-1g.10gb").ok());
  EXPECT_EQ(front_.checkpoints, 1);  // b ran 630 s since its start
  EXPECT_EQ(Job(b)->state, JobState::kPending);
  svc_->RunCycleNow();
  ASSERT_EQ(Job(a)->state, JobState::kRunning);
  clock_.now_ += 120;
  const std::string node = *NodesOf(a).begin();
  ASSERT_TRUE(svc_->DrainNode(admin_, node).ok());
  EXPECT_EQ(front_.checkpoints, 2);  // a's second run, 120 s old
  EXPECT_EQ(Job(a)->state, JobState::kPending);
}

TEST_F(NodesTest, ABusyNodeCannotBeRemovedADrainedOneCan) {
  const int64_t a = Submit("a", 8);
  svc_->RunCycleNow();
  const std::string busy = *NodesOf(a).begin(), idle = busy == "node-000" ? "node-001" : "node-000";
  auto r = svc_->RemoveNode(admin_, busy);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(HttpStatusOf(r.error().code), 409);
  EXPECT_EQ(States().count(busy), 1u);
  EXPECT_EQ(States()[busy], "ready");  // a refused removal leaves it as it was
  EXPECT_EQ(svc_->RemoveNode(admin_, "nope").error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(svc_->RemoveNode(admin_, idle).ok());
  EXPECT_EQ(States().count(idle), 0u);
  EXPECT_EQ(svc_->CordonNode(admin_, idle).error().code, ErrorCode::kNotFound);
  svc_->RunCycleNow();
  const ClusterState& cs = *svc_->snapshot()->cluster;
  EXPECT_EQ(cs.num_nodes(), 2);  // the tombstone keeps its id
  EXPECT_EQ(NodesOf(a), std::set<std::string>{busy});
  // A job needing both nodes' GPUs is refused now.
  auto spec = ParseJobSpec({{"name", "big"}, {"class", "training"}, {"workers", 2}, {"gpus_per_worker", 8}});
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(svc_->Submit(member_, spec.value(), "").error().field, "workers");
}

TEST_F(NodesTest, TheClusterLivesInTheStoreAcrossRestarts) {
  const int64_t a = Submit("a", 8), b = Submit("b", 8);
  svc_->RunCycleNow();
  ASSERT_TRUE(svc_->AddNode(admin_, kAdded).ok());
  const int64_t c = Submit("c", 8);
  svc_->RunCycleNow();
  ASSERT_EQ(NodesOf(c), std::set<std::string>{"added"});
  // Free node-000 (whichever job runs there is drained off it), then remove it.
  ASSERT_TRUE(svc_->DrainNode(admin_, "node-000").ok());
  ASSERT_TRUE(svc_->RemoveNode(admin_, "node-000").ok());
  ASSERT_TRUE(svc_->CordonNode(admin_, "added").ok());
  const auto before = States();
  std::map<int64_t, std::set<std::string>> placed;
  for (int64_t id : {a, b, c})
    if (Job(id)->state == JobState::kRunning) placed[id] = NodesOf(id);
  ASSERT_EQ(placed.size(), 2u);  // c on added, one of a and b on node-001
  log_.clear();
  Restart(kNodesCluster);  // the file still names node-000 and lacks added: ignored, with a log line
  EXPECT_EQ(States(), before);
  EXPECT_EQ(before, (std::map<std::string, std::string>{{"node-001", "ready"}, {"added", "cordoned"}}));
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_NE(log_[0].find("ignored"), std::string::npos) << log_[0];
  for (const auto& [id, nodes] : placed) {
    EXPECT_EQ(Job(id)->state, JobState::kRunning);
    EXPECT_EQ(NodesOf(id), nodes);  // ids did not shift past the removed node's tombstone
  }
  auto view = svc_->ListNodes(admin_);
  ASSERT_TRUE(view.ok());
  for (const NodeView& v : view.value())
    if (v.name == "added") EXPECT_EQ(v.spec["leaf"], "leaf-0");
  // The file still differs from the store: said again at the next start, and still ignored.
  log_.clear();
  Restart(kNodesCluster);
  EXPECT_EQ(log_.size(), 1u);
  EXPECT_EQ(States(), before);
}

TEST_F(NodesTest, AnUnchangedClusterFileIsNotReported) {
  Restart(kNodesCluster);
  EXPECT_TRUE(log_.empty()) << log_[0];
  EXPECT_EQ(States().size(), 2u);
}

// GPUs held for work outside Tessera (another scheduler's pods) take nothing new at once and are given back
// at once, while Tessera's own jobs run on the node: no drain, no re-read of the node.
TEST_F(NodesTest, HeldGpusTakeNothingNewAndComeBack) {
  ASSERT_TRUE(svc_->CordonNode(admin_, "node-001").ok());
  const int64_t a = Submit("a", 1);
  svc_->RunCycleNow();
  ASSERT_EQ(NodesOf(a), std::set<std::string>{"node-000"});
  auto held = svc_->HoldGpus(admin_, "node-000", 6);
  ASSERT_TRUE(held.ok()) << held.error().message;
  EXPECT_EQ(held.value(), 6);
  std::vector<int64_t> late;
  for (int i = 0; i < 3; ++i) late.push_back(Submit("late-" + std::to_string(i), 1));
  svc_->RunCycleNow();
  int running = 0;
  for (int64_t id : late) running += Job(id)->state == JobState::kRunning;
  EXPECT_EQ(running, 1) << "8 GPUs, 6 held, 1 taken by a";
  EXPECT_EQ(Job(a)->state, JobState::kRunning);
  // Given back while a (and one late job) run there: the rest are placed on it.
  held = svc_->HoldGpus(admin_, "node-000", 0);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held.value(), 0);
  svc_->RunCycleNow();
  for (int64_t id : late) EXPECT_EQ(NodesOf(id), std::set<std::string>{"node-000"}) << id;
  // Never more than the node has; only an admin; only a known node.
  EXPECT_EQ(svc_->HoldGpus(admin_, "node-000", 20).value(), 8);
  EXPECT_EQ(svc_->HoldGpus(member_, "node-000", 1).error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(svc_->HoldGpus(admin_, "nope", 1).error().code, ErrorCode::kNotFound);
  // Held busy GPUs keep their work: nothing running was stopped.
  for (int64_t id : late) EXPECT_EQ(Job(id)->state, JobState::kRunning) << id;
}

// Host CPU and memory held for pods outside Tessera keep the node where it is (no remove and re-add): what
// no longer fits goes elsewhere, and comes back once the hold shrinks.
TEST_F(NodesTest, HeldHostCapacityKeepsTheNodeInPlace) {
  auto held = svc_->HoldHost(admin_, "node-000", 190000, 2000 * 1024);
  ASSERT_TRUE(held.ok()) << held.error().message;
  EXPECT_EQ(held.value(), (std::pair<int64_t, int64_t>{190000, 2000 * 1024}));
  auto big = [&](const std::string& name) {
    auto spec = ParseJobSpec({{"name", name},
                              {"class", "training"},
                              {"workers", 1},
                              {"gpus_per_worker", 1},
                              {"memory_gib", 40},
                              {"host_memory_gib", 100},
                              {"project", "p"},
                              {"duration_s", 36000}});
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    auto r = svc_->Submit(member_, spec.value(), "");
    return r.ok() ? r->job->id : int64_t{-1};
  };
  const int64_t a = big("a");
  svc_->RunCycleNow();
  EXPECT_EQ(NodesOf(a), std::set<std::string>{"node-001"}) << "48 GiB of node-000 are left";
  ASSERT_TRUE(svc_->HoldHost(admin_, "node-000", 0, 0).ok());
  ASSERT_TRUE(svc_->CordonNode(admin_, "node-001").ok());
  const int64_t b = big("b");
  svc_->RunCycleNow();
  EXPECT_EQ(NodesOf(b), std::set<std::string>{"node-000"});
  EXPECT_EQ(States(), (std::map<std::string, std::string>{{"node-000", "ready"}, {"node-001", "cordoned"}}))
      << "no tombstone, no new node";
  EXPECT_EQ(svc_->HoldHost(member_, "node-000", 1, 1).error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(svc_->HoldHost(admin_, "nope", 1, 1).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(svc_->HoldHost(admin_, "node-000", -1, 1).error().code, ErrorCode::kInvalidArgument);
}

// A preemption asked for by the backend's owner (a MIG repartition's drain) stops the job through the
// preemption path and puts it back in the queue with the reason; a job holding nothing is left as it is.
TEST_F(NodesTest, APreemptedJobGoesBackToTheQueue) {
  const int64_t a = Submit("a", 8);
  svc_->RunCycleNow();
  ASSERT_EQ(Job(a)->state, JobState::kRunning);
  EXPECT_EQ(svc_->Preempt(member_, a, "x").error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(svc_->Preempt(admin_, 999, "x").error().code, ErrorCode::kNotFound);
  auto r = svc_->Preempt(admin_, a, "node node-000 is drained for MIG config all-7g.80gb");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->job->state, JobState::kPending);
  EXPECT_NE(r->job->message.find("drained for MIG config all-7g.80gb"), std::string::npos) << r->job->message;
  const int64_t b = Submit("b", 8);  // pending behind a's place in the queue once both nodes are cordoned
  ASSERT_TRUE(svc_->CordonNode(admin_, "node-000").ok());
  ASSERT_TRUE(svc_->CordonNode(admin_, "node-001").ok());
  auto again = svc_->Preempt(admin_, a, "y");  // pending: nothing to preempt
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->job->state, JobState::kPending);
  ASSERT_TRUE(svc_->UncordonNode(admin_, "node-001").ok());
  svc_->RunCycleNow();
  EXPECT_EQ(Job(a)->state, JobState::kRunning) << "a keeps its submit-time place";
  EXPECT_EQ(Job(b)->state, JobState::kPending);
}

}  // namespace
// A driver's intake: many jobs in one call, each accepted or refused on its own, all durable on return.
TEST_F(NodesTest, SubmitAllAcceptsEachJobOnItsOwnAndStoresThem) {
  std::vector<JobSpec> specs;
  for (const char* team : {"vision", "nope", "vision"}) {
    auto spec = ParseJobSpec({{"name", std::string("j-") + team},
                              {"team", team},
                              {"class", "training"},
                              {"workers", 1},
                              {"gpus_per_worker", 1},
                              {"memory_gib", 40},
                              {"project", "p"},
                              {"duration_s", 3600}});
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    specs.push_back(spec.value());
  }
  const std::vector<Outcome<JobView>> out = svc_->SubmitAll(admin_, specs);
  ASSERT_EQ(out.size(), 3u);
  ASSERT_TRUE(out[0].ok()) << out[0].error().message;
  ASSERT_FALSE(out[1].ok());
  EXPECT_NE(out[1].error().message.find("nope"), std::string::npos) << out[1].error().message;
  EXPECT_EQ(out[1].error().field, "team");  // as Submit refuses it (ServiceTest.BadInput...)
  ASSERT_TRUE(out[2].ok()) << out[2].error().message;
  EXPECT_LT(out[0]->job->id, out[2]->job->id);  // in the order given
  const int64_t first = out[0]->job->id, second = out[2]->job->id;
  Restart(kNodesCluster);
  EXPECT_EQ(Job(first)->name, "j-vision");
  EXPECT_EQ(Job(second)->state, JobState::kPending);
}

// Strict job nodes: a job the driver has not judged yet is left out of cycles (not placed, no verdict),
// and placed only where the driver then allows it.
TEST_F(NodesTest, StrictJobNodesLeaveUnjudgedJobsOutOfCycles) {
  svc_->SetJobNodes({}, /*absent_nowhere=*/true);
  const int64_t a = Submit("a", 1);
  svc_->RunCycleNow();
  EXPECT_EQ(Job(a)->state, JobState::kPending);
  auto snap = svc_->snapshot();
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->pending.count(a), 0u) << "no verdict for a job not judged yet";
  auto only = std::make_shared<const std::set<std::string>>(std::set<std::string>{"node-001"});
  svc_->SetJobNodes({{a, only}}, /*absent_nowhere=*/true);
  svc_->RunCycleNow();
  EXPECT_EQ(Job(a)->state, JobState::kRunning);
  EXPECT_EQ(NodesOf(a), std::set<std::string>{"node-001"});
  // Judged and allowed nowhere: pending with a verdict.
  const int64_t b = Submit("b", 1);
  svc_->SetJobNodes({{a, only}, {b, std::make_shared<const std::set<std::string>>()}}, true);
  svc_->RunCycleNow();
  EXPECT_EQ(Job(b)->state, JobState::kPending);
  snap = svc_->snapshot();
  ASSERT_TRUE(snap->pending.count(b));
  EXPECT_FALSE(snap->pending.at(b).code.empty());
}

}  // namespace tessera
