// Scheduling cycle: fair share, quotas, borrowing and reclaim, priority preemption, gangs with reservations,
// explanations, and property tests over random workloads driven by a tiny in-test time loop.
#include "sched/cycle.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "model/catalog.h"
#include "model/cluster.h"
#include "sched/cluster_state.h"
#include "sched/fair_share.h"
#include "sched/policy.h"
#include "sched/preemption.h"
#include "sched/tenancy.h"
#include "test_util.h"

namespace tessera {
namespace {

constexpr int kProd = 1000, kInf = 800, kTrain = 400, kBest = 100;

Cluster MakeH100Cluster(int nodes, int per_leaf = 4) {
  const Catalog& cat = Catalog::Default();
  Cluster c;
  c.name = "test";
  for (int n = 0; n < nodes; ++n) {
    Node node;
    node.name = "n" + std::to_string(n);
    node.kind = cat.Find("h100-80gb");
    node.gpu_count = 8;
    node.cpu_milli = 256000;
    node.memory_mib = 2048 * 1024;
    node.interconnect = Interconnect::kNvSwitch;
    node.leaf = n / per_leaf;
    node.spine = 0;
    c.nodes.push_back(node);
  }
  for (int l = 0; l <= (nodes - 1) / per_leaf; ++l) c.leaf_names.push_back("leaf" + std::to_string(l));
  c.spine_names.push_back("spine0");
  return c;
}

Request WholeJob(JobId id, int gpus, int priority, int tasks = 1) {
  Request r;
  r.id = id;
  r.cls = priority >= kInf ? WorkloadClass::kInference : WorkloadClass::kTraining;
  r.tasks = tasks;
  r.gpus_per_task = gpus;
  r.gpu_memory_mib = 40000;
  r.cpu_milli = 1000;
  r.host_memory_mib = 1024;
  r.priority = priority;
  return r;
}

// A tiny world: a cluster, queues, running and pending jobs; applies plans and advances time.
class World {
 public:
  explicit World(int nodes, int per_leaf = 4)
      : cluster_(MakeH100Cluster(nodes, per_leaf)),
        state_(ClusterState::Build(cluster_, Catalog::Default()).value()),
        policy_(MakePolicy("tessera").value()) {}

  int AddQueue(const std::string& name, double guar_gpus, double limit_gpus = -1, int weight = 1,
               const std::string& parent = "") {
    QueueConfig q;
    q.name = name;
    q.parent = parent;
    q.guaranteed_milli = static_cast<int64_t>(guar_gpus * 1000);
    q.limit_milli = limit_gpus < 0 ? -1 : static_cast<int64_t>(limit_gpus * 1000);
    q.over_quota_weight = weight;
    queues_.push_back(q);
    return static_cast<int>(queues_.size()) - 1;
  }
  void Submit(const Request& r, int queue, int64_t duration = 3600, bool held = false) {
    PendingJob p;
    p.request = r;
    p.queue = queue;
    p.submit_time_s = now_;
    p.eligible_time_s = now_;
    p.held = held;
    p.expected_duration_s = duration;
    pending_.push_back(p);
    duration_[r.id] = duration;
    submitted_[r.id] = now_;
  }
  CycleInput Input() const {
    CycleInput in;
    in.snapshot = &state_;
    in.queues = queues_;
    in.pending = pending_;
    for (PendingJob& p : in.pending)  // a time limit, when the job has one, counts from now
      if (p.request.expected_end_s >= 0) p.request.expected_end_s = now_ + duration_.at(p.request.id);
    in.running = running_;
    in.now_s = now_;
    in.options = options_;
    return in;
  }
  Plan Cycle() {
    CycleInput in = Input();
    Plan plan = RunCycle(in, *policy_);
    Apply(plan);
    return plan;
  }
  void Apply(const Plan& plan) {
    for (const Action& a : plan.actions) {
      if (a.kind == ActionKind::kPreempt) {
        auto it = std::find_if(running_.begin(), running_.end(), [&](const RunningJob& r) { return r.id == a.job; });
        ASSERT_NE(it, running_.end());
        state_.Release(it->tasks, it->cpu_milli, it->host_memory_mib, it->cls != WorkloadClass::kTraining);
        PendingJob p;
        p.request = requests_.at(a.job);
        p.queue = it->queue;
        p.submit_time_s = submitted_[a.job];
        p.eligible_time_s = now_;
        p.expected_duration_s = duration_[a.job];
        pending_.push_back(p);
        preemptions_.push_back({a.job, a.for_job});
        running_.erase(it);
      } else if (a.kind == ActionKind::kBind) {
        auto it = std::find_if(pending_.begin(), pending_.end(), [&](const PendingJob& p) { return p.request.id == a.job; });
        ASSERT_NE(it, pending_.end());
        ASSERT_TRUE(state_.CanApply(a.tasks, it->request.cpu_milli, it->request.host_memory_mib).ok());
        ASSERT_EQ(static_cast<int>(a.tasks.size()), it->request.tasks) << "gang partially placed";
        state_.Apply(a.tasks, it->request.cpu_milli, it->request.host_memory_mib,
                     it->request.cls != WorkloadClass::kTraining);
        AddRunning(a.job, it->queue, it->request, preemptible_.count(a.job) == 0, a.tasks, duration_[a.job]);
        requests_[a.job] = it->request;
        started_[a.job] = now_;
        waits_[a.job] = now_ - it->eligible_time_s;
        pending_.erase(it);
      }
    }
    ASSERT_TRUE(state_.CheckInvariants().ok()) << state_.CheckInvariants().message();
  }
  void Advance(int64_t dt) {
    now_ += dt;
    for (auto it = running_.begin(); it != running_.end();) {
      if (it->expected_end_s <= now_) {
        state_.Release(it->tasks, it->cpu_milli, it->host_memory_mib, it->cls != WorkloadClass::kTraining);
        finished_.insert(it->id);
        it = running_.erase(it);
      } else {
        ++it;
      }
    }
  }
  int64_t Used(int q) const {
    int64_t u = 0;
    for (const RunningJob& r : running_)
      if (r.queue == q) u += UnitsOf(state_, r.tasks, SliceUnits::kCompute);
    return u;
  }
  bool Running(JobId id) const {
    return std::any_of(running_.begin(), running_.end(), [&](const RunningJob& r) { return r.id == id; });
  }
  void NeverPreempt(JobId id) { preemptible_.insert(id); }
  // A job already running on `tasks`, never preempted (applied to the state as after a bind).
  void Run(JobId id, int queue, int priority, WorkloadClass cls, std::vector<TaskPlacement> tasks) {
    Request r;
    r.cls = cls;
    r.priority = priority;
    r.cpu_milli = 1000;
    r.host_memory_mib = 1024;
    ASSERT_TRUE(state_.CanApply(tasks, r.cpu_milli, r.host_memory_mib).ok());
    state_.Apply(tasks, r.cpu_milli, r.host_memory_mib, cls != WorkloadClass::kTraining);
    AddRunning(id, queue, r, false, std::move(tasks), 3600);
  }
  // Records a job of request `r` running on `tasks` from now for `duration` (already in the state).
  void AddRunning(JobId id, int queue, const Request& r, bool preemptible, std::vector<TaskPlacement> tasks,
                  int64_t duration) {
    RunningJob rj;
    rj.id = id;
    rj.queue = queue;
    rj.priority = r.priority;
    rj.preemptible = preemptible;
    rj.cls = r.cls;
    rj.tasks = std::move(tasks);
    rj.cpu_milli = r.cpu_milli;
    rj.host_memory_mib = r.host_memory_mib;
    rj.start_time_s = now_;
    rj.expected_end_s = now_ + duration;
    running_.push_back(std::move(rj));
  }

  Cluster cluster_;
  ClusterState state_;
  std::unique_ptr<Policy> policy_;
  std::vector<QueueConfig> queues_;
  std::vector<PendingJob> pending_;
  std::vector<RunningJob> running_;
  CycleOptions options_;
  int64_t now_ = 1000000;
  std::map<JobId, int64_t> duration_, submitted_, started_, waits_;
  std::map<JobId, Request> requests_;
  std::set<JobId> finished_, preemptible_;
  std::vector<std::pair<JobId, JobId>> preemptions_;  // victim, for
};

const PendingStatus* StatusOf(const Plan& p, JobId id) {
  for (const PendingStatus& s : p.pending)
    if (s.job == id) return &s;
  return nullptr;
}
int Count(const Plan& p, ActionKind k) {
  return static_cast<int>(std::count_if(p.actions.begin(), p.actions.end(), [&](const Action& a) { return a.kind == k; }));
}

TEST(FairShare, WaterFillGivesGuaranteesThenWeights) {
  // 100 units; A guaranteed 20 (demand 80), B guaranteed 30 (demand 30), C none (demand 100, weight 3).
  std::vector<int64_t> got = WaterFill(100, {{20, -1, 1, 80}, {30, -1, 1, 30}, {0, -1, 3, 100}});
  EXPECT_EQ(got[1], 30);            // B: exactly its demand
  EXPECT_EQ(got[0] + got[2], 70);   // the rest: 20 + 50 left, split 1:3
  EXPECT_NEAR(got[0], 20 + 50 / 4, 1);
  EXPECT_NEAR(got[2], 50 * 3 / 4, 1);
  // A limit caps the share.
  got = WaterFill(100, {{0, 10, 1, 100}, {0, -1, 1, 100}});
  EXPECT_EQ(got[0], 10);
  EXPECT_EQ(got[1], 90);
}

TEST(FairShare, TreeSplitsTeamsThenQueues) {
  // Two teams (guaranteed 60 / 40); team 0 has two queues with weights 1 and 3 and no guarantees.
  std::vector<int> parent{-1, -1, 0, 0};
  std::vector<FairShareClaim> cl{{60, -1, 1, 200}, {40, -1, 1, 10}, {0, -1, 1, 100}, {0, -1, 3, 100}};
  std::vector<int64_t> f = TreeFairShares(parent, cl, 100);
  EXPECT_EQ(f[1], 10);  // team 1 wants only 10
  EXPECT_EQ(f[0], 90);
  EXPECT_NEAR(f[2], 22, 1);
  EXPECT_NEAR(f[3], 67, 1);
}

TEST(FairShare, DecayHalvesPerHalfLife) {
  EXPECT_DOUBLE_EQ(DecayUsage(100, 3600, 3600, 0), 50);
  EXPECT_DOUBLE_EQ(DecayUsage(100, 7200, 3600, 5), 30);
}

TEST(Cycle, PriorityThenSubmitTimeWithinAQueue) {
  World w(1);  // 8 GPUs
  int q = w.AddQueue("a", 8);
  w.Submit(WholeJob(1, 4, kTrain), q);
  w.now_ += 10;
  w.Submit(WholeJob(2, 4, kTrain), q);
  w.Submit(WholeJob(3, 4, kInf), q);  // later, but higher priority
  Plan p = w.Cycle();
  EXPECT_TRUE(w.Running(3));
  EXPECT_TRUE(w.Running(1));
  EXPECT_FALSE(w.Running(2));
  const PendingStatus* s = StatusOf(p, 2);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->team_position, 1);
  EXPECT_EQ(s->pool_position, 1);
  EXPECT_EQ(s->category, WaitCategory::kCapacity);
  EXPECT_EQ(s->code, "Resources");
  EXPECT_EQ(s->requested, 4000);
  EXPECT_EQ(s->available, 0);
  EXPECT_EQ(s->still_needed, 4000);
}

TEST(Cycle, QueuesOrderedByFairShare) {
  World w(1);  // 8 GPUs, two equal queues; A already uses 4
  int a = w.AddQueue("a", 4), b = w.AddQueue("b", 4);
  w.Submit(WholeJob(1, 4, kTrain), a);
  w.Cycle();
  ASSERT_TRUE(w.Running(1));
  w.now_ += 10;
  w.Submit(WholeJob(2, 4, kTrain), a);  // earlier
  w.now_ += 10;
  w.Submit(WholeJob(3, 4, kTrain), b);  // later, but b is below its share
  Plan p = w.Cycle();
  EXPECT_TRUE(w.Running(3));
  EXPECT_FALSE(w.Running(2));
  const PendingStatus* s = StatusOf(p, 2);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->category, WaitCategory::kCapacity);
}

TEST(Cycle, TeamQuotaAndBorrowLimitExplained) {
  World w(2);  // 16 GPUs
  int a = w.AddQueue("a", 4, 6);
  w.options_.allow_borrowing = false;
  w.Submit(WholeJob(1, 4, kTrain), a);
  w.Submit(WholeJob(2, 2, kTrain), a);
  Plan p = w.Cycle();
  EXPECT_TRUE(w.Running(1));
  const PendingStatus* s = StatusOf(p, 2);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->category, WaitCategory::kQuota);
  EXPECT_EQ(s->code, "TeamQuotaExhausted");
  EXPECT_EQ(s->message, "team quota 4 GPUs (a), 4 in use, 2 requested");
  EXPECT_EQ(s->limit, 4000);
  EXPECT_EQ(s->still_needed, 2000);
  // With borrowing the limit (6) applies instead.
  w.options_.allow_borrowing = true;
  w.Submit(WholeJob(3, 2, kTrain), a);
  p = w.Cycle();
  EXPECT_TRUE(w.Running(2));
  s = StatusOf(p, 3);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->code, "BorrowLimit");
  EXPECT_EQ(s->limit, 6000);
  // A job larger than the limit can never run here.
  w.Submit(WholeJob(4, 8, kTrain), a);
  p = w.Cycle();
  EXPECT_EQ(StatusOf(p, 4)->category, WaitCategory::kInvalid);
  EXPECT_EQ(StatusOf(p, 4)->code, "ExceedsQueueLimit");
}

TEST(Cycle, BorrowThenReclaimWithoutLoops) {
  World w(2);  // 16 GPUs, A and B each guaranteed 8
  int a = w.AddQueue("a", 8), b = w.AddQueue("b", 8);
  w.options_.reclaim_min_runtime_s = 30;
  for (int i = 0; i < 4; ++i) w.Submit(WholeJob(10 + i, 4, kTrain), a);  // A wants 16
  w.Cycle();
  EXPECT_EQ(w.Used(a), 16000);  // borrowed B's idle 8
  w.Advance(60);
  w.Submit(WholeJob(20, 4, kTrain), b);
  w.Submit(WholeJob(21, 4, kTrain), b);
  Plan p = w.Cycle();
  EXPECT_EQ(Count(p, ActionKind::kPreempt), 2);
  for (const Action& act : p.actions)
    if (act.kind == ActionKind::kPreempt) {
      EXPECT_TRUE(act.reclaim);
    }
  EXPECT_EQ(w.Used(b), 8000);
  EXPECT_EQ(w.Used(a), 8000);
  // The reclaimed jobs are pending again; A is at its guarantee and does not take the capacity back.
  const PendingStatus* s = StatusOf(p, 12);
  if (s == nullptr) s = StatusOf(p, 13);
  // (they were not in this cycle's input; the next cycle sees them)
  w.Advance(60);
  p = w.Cycle();
  EXPECT_EQ(Count(p, ActionKind::kPreempt), 0) << "no reclaim loop";
  EXPECT_EQ(w.Used(b), 8000);
}

TEST(Cycle, ReclaimRespectsMinimumRuntime) {
  World w(1);
  int a = w.AddQueue("a", 4), b = w.AddQueue("b", 4);
  w.options_.reclaim_min_runtime_s = 120;
  w.Submit(WholeJob(1, 8, kTrain), a);
  w.Cycle();
  w.Advance(60);
  w.Submit(WholeJob(2, 4, kTrain), b);
  Plan p = w.Cycle();
  EXPECT_EQ(Count(p, ActionKind::kPreempt), 0);
  w.Advance(61);
  p = w.Cycle();
  EXPECT_EQ(Count(p, ActionKind::kPreempt), 1);
  EXPECT_TRUE(w.Running(2));
}

TEST(Cycle, ProductionInferencePreemptsLowerPriorityWithCheckpoint) {
  World w(1);
  int a = w.AddQueue("a", 8), b = w.AddQueue("b", 0);
  w.options_.min_runtime_s = 0;
  w.Submit(WholeJob(1, 4, kTrain), a);
  w.Submit(WholeJob(2, 4, kBest), a);
  w.Cycle();
  // Make job 1 checkpointable, job 2 not; job 2 (best-effort) is the cheaper victim anyway.
  for (RunningJob& r : w.running_) {
    r.checkpointable = true;
    r.last_checkpoint_s = w.now_;
  }
  w.Advance(600);
  w.Submit(WholeJob(3, 4, kProd), b);  // another queue, no guarantee: production inference still gets in
  Plan p = w.Cycle();
  EXPECT_TRUE(w.Running(3));
  ASSERT_EQ(w.preemptions_.size(), 1u);
  EXPECT_EQ(w.preemptions_[0].first, 2) << "lowest priority victim first";
  EXPECT_EQ(Count(p, ActionKind::kCheckpoint), 1);
  // Order: checkpoint, preempt, bind.
  ASSERT_GE(p.actions.size(), 3u);
  EXPECT_EQ(p.actions[0].kind, ActionKind::kCheckpoint);
  EXPECT_EQ(p.actions[1].kind, ActionKind::kPreempt);
  EXPECT_EQ(p.actions[2].kind, ActionKind::kBind);
  // The victims get their termination grace period: the bind takes effect when it ends.
  EXPECT_EQ(p.actions[2].start_s, w.now_ + w.options_.termination_grace_s);
  EXPECT_EQ(w.options_.termination_grace_s, 30);
}

// A job on a cordoned node frees nothing a pending job could use: the cordon takes what it releases. Such a
// job is never a victim, and trying victims elsewhere leaves it running where it was (releasing it and
// applying it back would find its capacity taken by the cordon).
TEST(Cycle, JobsOnCordonedNodesAreNoVictims) {
  World w(2, 2);
  int a = w.AddQueue("a", 16);
  w.options_.min_runtime_s = 0;
  w.Submit(WholeJob(1, 8, kBest), a);
  w.Submit(WholeJob(2, 8, kBest), a);
  w.Cycle();
  ASSERT_TRUE(w.Running(1) && w.Running(2));
  const NodeId cordoned = w.running_[0].tasks[0].node;
  const JobId on_cordoned = w.running_[0].id;
  ASSERT_TRUE(w.state_.CordonNode(cordoned).ok());
  w.Advance(600);
  w.Submit(WholeJob(3, 8, kProd, 2), a);  // a gang of two whole nodes: one node is cordoned, so it cannot fit
  w.Cycle();
  EXPECT_TRUE(w.preemptions_.empty());
  EXPECT_TRUE(w.Running(on_cordoned));
  EXPECT_FALSE(w.Running(3));
  ASSERT_TRUE(w.state_.CheckInvariants().ok()) << w.state_.CheckInvariants().message();
  // Once another node frees capacity, the victims are chosen off the cordoned node only.
  w.state_.UncordonNode(cordoned);
  ASSERT_TRUE(w.state_.CordonNode(cordoned).ok());
  w.Submit(WholeJob(4, 8, kProd), a);
  w.Cycle();
  EXPECT_TRUE(w.Running(4));
  EXPECT_TRUE(w.Running(on_cordoned));
  ASSERT_TRUE(w.state_.CheckInvariants().ok()) << w.state_.CheckInvariants().message();
}

// A blocked job that found no victim does not hide the victims a later job of the same kind has once the
// cycle changed who borrows: X (an aged gang, first) finds none while v is within its guarantee; V's bind
// makes v borrow; Y (same queue and priority as X) may then preempt v's best-effort job.
TEST(Cycle, NoVictimsIsForgottenWhenBorrowingChanges) {
  World w(2, 2);  // two nodes of 8 GPUs
  int f = w.AddQueue("f", 8), v = w.AddQueue("v", 4), q = w.AddQueue("q", 0);
  w.options_.min_runtime_s = 0;
  w.options_.gang_aging_s = 100;
  w.Submit(WholeJob(1, 8, kProd), f);  // one node, not a victim for anyone here
  w.Submit(WholeJob(2, 4, kBest), v);  // R: half of the other node, v within its guarantee
  w.Cycle();
  ASSERT_TRUE(w.Running(1) && w.Running(2));
  w.Submit(WholeJob(3, 8, kTrain), q);  // X: needs a whole node
  w.Advance(200);                    // X is an aged gang: it goes first
  w.Submit(WholeJob(4, 4, kInf), v);    // V: fits the free half, then v borrows
  w.Submit(WholeJob(5, 4, kTrain), q);  // Y
  Plan p = w.Cycle();
  EXPECT_FALSE(w.Running(3));
  EXPECT_TRUE(w.Running(4));
  EXPECT_TRUE(w.Running(5)) << "Y preempts R once v borrows";
  ASSERT_EQ(w.preemptions_.size(), 1u);
  EXPECT_EQ(w.preemptions_[0], std::make_pair(JobId{2}, JobId{5}));
}
// Lending limits (Kueue's lendingLimit): a borrower may not take the idle guarantee a queue keeps back.
TEST(Cycle, LendingLimitKeepsIdleGuaranteeBack) {
  for (bool limit : {false, true}) {
    World w(2, 2);  // 16 GPUs
    int a = w.AddQueue("a", 8);
    int b = w.AddQueue("b", 0);
    if (limit) w.queues_[a].lending_limit_milli = 4000;  // lends 4 of its 8 idle GPUs, keeps 4
    for (int i = 0; i < 16; ++i) w.Submit(WholeJob(10 + i, 1, kTrain), b, 10000);
    Plan p = w.Cycle();
    EXPECT_EQ(w.Used(b), limit ? 12000 : 16000) << limit;
    if (limit) {
      const PendingStatus* st = StatusOf(p, 25);
      ASSERT_NE(st, nullptr);
      EXPECT_EQ(st->code, "BorrowLimit");
      EXPECT_NE(st->message.find("keep back from lending"), std::string::npos) << st->message;
      // The owner's own demand is not held back.
      for (int i = 0; i < 4; ++i) w.Submit(WholeJob(40 + i, 1, kTrain), a, 100);
      w.Cycle();
      EXPECT_EQ(w.Used(a), 4000);
    }
  }
}

// Production headroom: borrowing leaves idle GPUs for production inference, and once production work uses
// them the cycle reclaims borrowed capacity to restore them, counting capacity already vacating.
TEST(Cycle, ProductionHeadroomIsKeptAndRestored) {
  World w(2, 2);  // 16 GPUs
  int prod = w.AddQueue("serving", 0);
  int b = w.AddQueue("b", 0);
  w.options_.production_headroom_milli = 4000;
  for (int i = 0; i < 16; ++i) w.Submit(WholeJob(10 + i, 1, kTrain), b, 100000);
  Plan p = w.Cycle();
  EXPECT_EQ(w.Used(b), 12000) << "4 GPUs stay idle for production";
  const PendingStatus* st = StatusOf(p, 25);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->code, "BorrowLimit");
  w.Advance(600);  // past the minimum runtime
  w.Submit(WholeJob(1, 1, kProd), prod, 100000);
  p = w.Cycle();
  EXPECT_TRUE(w.Running(1)) << "production starts in the headroom, with no preemption";
  ASSERT_EQ(w.preemptions_.size(), 1u) << "one borrower reclaimed to restore 4 idle GPUs";
  EXPECT_EQ(w.preemptions_[0].second, -1);
  const auto pre = std::find_if(p.actions.begin(), p.actions.end(),
                                [](const Action& a) { return a.kind == ActionKind::kPreempt; });
  ASSERT_NE(pre, p.actions.end());
  EXPECT_NE(pre->reason.find("production headroom"), std::string::npos) << pre->reason;
  // The next production job takes an idle GPU; restoring the headroom needs one victim, unless a GPU is
  // already vacating.
  w.Submit(WholeJob(2, 1, kProd), prod, 100000);
  CycleInput in = w.Input();
  EXPECT_EQ(Count(RunCycle(in, *w.policy_), ActionKind::kPreempt), 1);
  in.vacating_milli = 1000;
  EXPECT_EQ(Count(RunCycle(in, *w.policy_), ActionKind::kPreempt), 0);
}

// Victims for a whole-GPU job come from the node where the fewest, cheapest victims make room, even when
// cheaper victims elsewhere would not free a node (max_victims_examined is small here).
TEST(Cycle, VictimsAreChosenByNode) {
  World w(2, 2);
  int a = w.AddQueue("a", 8);    // owner: within its guarantee with an 8-GPU job
  int keep = w.AddQueue("keep", 4);
  int b = w.AddQueue("b", 0);    // borrower
  w.options_.max_victims_examined = 8;
  w.options_.reclaim_min_runtime_s = 0;
  // Node 1: 4 GPUs of queue `keep` (within its guarantee) plus 4 young borrowers (cheap victims).
  // Node 0: 8 older borrowers. Only node 0 can be freed.
  auto run = [&](JobId id, int queue, NodeId node, int gpu, int64_t started) {
    RunningJob r;
    r.id = id;
    r.queue = queue;
    r.priority = kTrain;
    r.cls = WorkloadClass::kTraining;
    GpuGrant g;
    g.gpu = w.state_.node(node).first_gpu + gpu;
    r.tasks = {TaskPlacement{node, {g}}};
    r.cpu_milli = 1000;
    r.host_memory_mib = 1024;
    r.start_time_s = started;
    r.expected_end_s = w.now_ + 100000;
    w.state_.Apply(r.tasks, r.cpu_milli, r.host_memory_mib, false);
    w.running_.push_back(r);
    w.requests_[id] = WholeJob(id, 1, kTrain);
    w.duration_[id] = 100000;
  };
  for (int i = 0; i < 8; ++i) run(100 + i, b, 0, i, w.now_ - 5000);
  for (int i = 0; i < 4; ++i) run(200 + i, keep, 1, i, w.now_ - 5000);
  for (int i = 0; i < 4; ++i) run(300 + i, b, 1, 4 + i, w.now_ - 10);
  w.Submit(WholeJob(1, 8, kTrain), a, 1000);
  Plan p = w.Cycle();
  EXPECT_TRUE(w.Running(1)) << (StatusOf(p, 1)
                                    ? std::string(StatusOf(p, 1)->code) + ": " + StatusOf(p, 1)->message.str()
                                    : "");
  ASSERT_EQ(w.preemptions_.size(), 8u);
  for (const auto& [victim, for_job] : w.preemptions_) EXPECT_LT(victim, 200) << "victims on node 0 only";
}

TEST(Cycle, PreemptionNeverRespectedAndNeverEqualPriority) {
  World w(1);
  int a = w.AddQueue("a", 8);
  w.options_.min_runtime_s = 0;
  w.NeverPreempt(1);
  w.Submit(WholeJob(1, 4, kBest), a);
  w.Submit(WholeJob(2, 4, kInf), a);
  w.Cycle();
  w.Advance(10);
  w.Submit(WholeJob(3, 4, kInf), a);  // equal to job 2, higher than the never-preempt job 1
  Plan p = w.Cycle();
  EXPECT_EQ(Count(p, ActionKind::kPreempt), 0);
  EXPECT_FALSE(w.Running(3));
}

// A job whose class says `preempts: false` (Kubernetes' preemptionPolicy: Never) waits for capacity at its
// priority and never preempts, however low what holds the GPUs; the same job allowed to preempt does.
TEST(Cycle, AJobThatNeverPreemptsWaitsForCapacity) {
  for (bool may_preempt : {false, true}) {
    World w(1);
    int a = w.AddQueue("a", 8);
    w.options_.min_runtime_s = 0;
    w.Submit(WholeJob(1, 8, kBest), a);
    w.Cycle();
    w.Advance(10);
    Request r = WholeJob(2, 4, kInf);
    r.may_preempt = may_preempt;
    w.Submit(r, a);
    Plan p = w.Cycle();
    EXPECT_EQ(Count(p, ActionKind::kPreempt), may_preempt ? 1 : 0) << may_preempt;
    EXPECT_EQ(w.Running(2), may_preempt);
  }
}

TEST(Cycle, GangAllOrNothingWithReservationAndBackfill) {
  World w(2, 2);  // 16 GPUs under one leaf
  int a = w.AddQueue("a", 32);  // the gang is within the guarantee (reservations are for guaranteed demand)
  w.Submit(WholeJob(1, 8, kTrain), a, 1000);  // runs until t+1000
  w.Submit(WholeJob(2, 4, kTrain), a, 100);   // runs until t+100
  w.Cycle();
  w.Advance(10);
  // A 2 x 8 gang (16 GPUs) cannot fit; a 4-GPU job behind it must not take the GPUs it waits for.
  w.Submit(WholeJob(3, 8, kTrain, 2), a, 1000);
  w.now_ += 1;
  w.Submit(WholeJob(4, 4, kTrain), a, 5000);
  Plan p = w.Cycle();
  EXPECT_FALSE(w.Running(3));
  ASSERT_GE(Count(p, ActionKind::kReserve), 1);
  EXPECT_EQ(std::find_if(p.actions.begin(), p.actions.end(),
                         [](const Action& a) { return a.kind == ActionKind::kReserve; })->job,
            3);
  EXPECT_FALSE(w.Running(4)) << "backfill would delay the reservation";
  const PendingStatus* g = StatusOf(p, 3);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->estimated_start_s, 1000000 + 1000);
  EXPECT_EQ(g->code, "GangIncomplete");
  const PendingStatus* s4 = StatusOf(p, 4);
  ASSERT_NE(s4, nullptr);
  EXPECT_EQ(s4->code, "Priority");
  EXPECT_EQ(s4->pool_position, 2);
}

// Without quotas (no guarantees) a gang reserves only with reserve_beyond_guarantee; then the 4-GPU job
// behind it no longer takes the GPUs it waits for.
TEST(Cycle, GangReservesBeyondGuaranteeOnlyWhenAsked) {
  for (bool beyond : {false, true}) {
    World w(2, 2);
    int a = w.AddQueue("a", 0);
    w.options_.reserve_beyond_guarantee = beyond;
    w.Submit(WholeJob(1, 8, kTrain), a, 1000);
    w.Submit(WholeJob(2, 4, kTrain), a, 100);
    w.Cycle();
    w.Advance(10);
    w.Submit(WholeJob(3, 8, kTrain, 2), a, 1000);
    w.now_ += 1;
    w.Submit(WholeJob(4, 4, kTrain), a, 5000);
    Plan p = w.Cycle();
    EXPECT_FALSE(w.Running(3));
    if (beyond) {
      ASSERT_GE(Count(p, ActionKind::kReserve), 1);
      EXPECT_EQ(std::find_if(p.actions.begin(), p.actions.end(),
                             [](const Action& x) { return x.kind == ActionKind::kReserve; })->job,
                3);
    } else {
      EXPECT_EQ(Count(p, ActionKind::kReserve), 0);
    }
    EXPECT_EQ(w.Running(4), !beyond) << beyond;
  }
}

// Slurm-style backfill into a reservation: a whole-GPU job that ends before the reserved gang starts may use
// the held GPUs; one that would end later, or whose end is unknown, may not.
TEST(Cycle, ShortJobsBackfillIntoAReservation) {
  World w(1, 1);
  int a = w.AddQueue("a", 16);
  w.Submit(WholeJob(1, 4, kTrain), a, 1000);  // 4 GPUs until t+1000
  w.Cycle();
  w.Advance(1);
  const int64_t t0 = w.now_;
  w.Submit(WholeJob(2, 8, kTrain), a, 1000);  // the whole node: reserved from t0+999
  w.now_ += 1;
  auto job = [&](JobId id, int64_t duration, bool known) {
    Request r = WholeJob(id, 2, kTrain);
    if (known) r.expected_end_s = w.now_ + duration;
    w.Submit(r, a, duration);
  };
  job(3, 500, true);    // ends before the reservation: backfills into it
  job(4, 5000, true);   // would delay it
  job(5, 500, false);   // end unknown
  Plan p = w.Cycle();
  EXPECT_FALSE(w.Running(2));
  EXPECT_TRUE(w.Running(3));
  EXPECT_FALSE(w.Running(4));
  EXPECT_FALSE(w.Running(5));
  const PendingStatus* g = StatusOf(p, 2);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->estimated_start_s, t0 + 999) << "backfill did not delay the reservation";
  const auto bind3 = std::find_if(p.actions.begin(), p.actions.end(),
                                  [](const Action& x) { return x.kind == ActionKind::kBind && x.job == 3; });
  ASSERT_NE(bind3, p.actions.end());
  EXPECT_NE(bind3->reason.find("backfilled into reserved capacity"), std::string::npos) << bind3->reason;
  EXPECT_EQ(bind3->backfill_until_s, t0 + 999) << "the bind names the start it must be gone by";
  // Reservations without backfill into them: the same short job waits.
  World off(1, 1);
  off.options_.backfill_into_reservations = false;
  int q = off.AddQueue("a", 16);
  off.Submit(WholeJob(1, 4, kTrain), q, 1000);
  off.Cycle();
  off.Advance(1);
  off.Submit(WholeJob(2, 8, kTrain), q, 1000);
  Request r3 = WholeJob(3, 2, kTrain);
  r3.expected_end_s = off.now_ + 500;
  off.Submit(r3, q, 500);
  off.Cycle();
  EXPECT_FALSE(off.Running(3));
}

// Conservative backfill: a second reservation plans around the first, so two gangs never count on the
// same GPUs at the same time.
TEST(Cycle, SecondReservationPlansAroundTheFirst) {
  World w(1, 1);
  int a = w.AddQueue("a", 32);
  w.Submit(WholeJob(1, 8, kTrain), a, 1000);  // the whole node until t+1000
  w.Cycle();
  w.Advance(1);
  const int64_t t0 = w.now_;
  w.Submit(WholeJob(2, 8, kTrain), a, 3000);
  w.now_ += 1;
  w.Submit(WholeJob(3, 8, kTrain), a, 3000);
  Plan p = w.Cycle();
  EXPECT_EQ(Count(p, ActionKind::kReserve), 2);
  const PendingStatus* s2 = StatusOf(p, 2);
  const PendingStatus* s3 = StatusOf(p, 3);
  ASSERT_NE(s2, nullptr);
  ASSERT_NE(s3, nullptr);
  EXPECT_EQ(s2->estimated_start_s, t0 + 999);
  EXPECT_EQ(s3->estimated_start_s, t0 + 999 + 3000) << "after the first reserved gang is expected to end";
}

// A fenced reservation also keeps sub-GPU work off the partly used GPUs of its node.
TEST(Cycle, FencedReservationKeepsSlicesOffItsNode) {
  for (bool fence : {false, true}) {
    World w(1, 1);
    int a = w.AddQueue("a", 16);
    w.options_.fence_reserved_nodes = fence;
    Request slice = WholeJob(1, 1, kTrain);
    slice.gpus_per_task = 0;
    slice.gpu_milli = 100;
    slice.gpu_memory_mib = 5000;
    w.Submit(slice, a, 1000);  // a MIG instance on one GPU, until t+1000
    w.Cycle();
    ASSERT_TRUE(w.Running(1));
    w.Advance(1);
    w.Submit(WholeJob(2, 8, kTrain), a, 1000);  // waits for the slice to end: reserved
    w.now_ += 1;
    Request slice2 = slice;
    slice2.id = 3;
    w.Submit(slice2, a, 5000);  // would land on the partly used MIG GPU and push the reservation back
    Plan p = w.Cycle();
    EXPECT_EQ(Count(p, ActionKind::kReserve), 1) << fence;
    EXPECT_EQ(w.Running(3), !fence) << fence;
  }
}

// Aging: a queue whose head gang has waited gang_aging_s is examined before a queue with a lower share.
TEST(Cycle, AgedGangQueueGoesFirst) {
  for (int64_t aging : {int64_t{-1}, int64_t{0}}) {
    World w(1, 1);
    int a = w.AddQueue("a", 0);
    int b = w.AddQueue("b", 0);
    w.options_.reserve_beyond_guarantee = true;
    w.options_.gang_aging_s = aging;
    w.Submit(WholeJob(1, 4, kTrain), b, 100);  // b holds 4 GPUs until t+100
    w.Cycle();
    w.Advance(1);
    w.Submit(WholeJob(2, 8, kTrain), b, 1000);  // b's gang: needs the whole node
    w.Submit(WholeJob(3, 1, kTrain), a, 1000);  // a holds nothing: first by fair share
    Plan p = w.Cycle();
    EXPECT_FALSE(w.Running(2));
    EXPECT_EQ(w.Running(3), aging < 0) << aging;
  }
}

TEST(Cycle, InvalidAndHeldJobsAreExplained) {
  World w(1);
  int a = w.AddQueue("a", 8);
  w.Submit(WholeJob(1, 8, kTrain, 4), a);           // 32 GPUs on an 8-GPU cluster
  w.Submit(WholeJob(2, 1, kTrain), a, 3600, true);  // held
  Plan p = w.Cycle();
  EXPECT_EQ(StatusOf(p, 1)->category, WaitCategory::kInvalid);
  EXPECT_EQ(StatusOf(p, 1)->code, "RequestExceedsCluster");
  EXPECT_EQ(StatusOf(p, 2)->category, WaitCategory::kHeld);
}

// A latency-sensitive replica that finds no room says nothing about a standard replica of the same shape:
// the shared instance too busy for the tighter SLO still takes the standard one in the same cycle (the
// per-cycle failure cache keys on the sensitivity).
TEST(Cycle, SensitiveReplicaFailureDoesNotBlockAStandardOne) {
  World w(1);
  const int q = w.AddQueue("serving", 8);
  const int p7 = w.state_.kind_of_gpu(7).FindProfile("7g.80gb");
  ASSERT_GE(p7, 0);
  ASSERT_TRUE(w.state_.SetMigMode(7, true).ok());
  ASSERT_TRUE(w.state_.CreateInstance(7, static_cast<int16_t>(p7), 0).ok());
  TaskPlacement train{0, {}};
  for (GpuId g = 0; g < 7; ++g) train.gpus.push_back(GpuGrant{g, 1000, 40000});
  w.Run(1, q, kTrain, WorkloadClass::kTraining, {train});
  GpuGrant half{7, 500, 20000, static_cast<int16_t>(p7), 0};
  half.shared = true;
  w.Run(2, q, kInf, WorkloadClass::kInference, {{0, {half}}});
  auto replica = [](JobId id, bool sensitive) {
    Request r = testing::Replica(id, 100, 10000, sensitive);
    r.priority = sensitive ? kProd : kInf;
    return r;
  };
  w.Submit(replica(3, true), q);   // first in the pool (higher priority); 60% summed demand breaks a 2x SLO
  w.Submit(replica(4, false), q);  // within a 4x SLO
  const Plan plan = w.Cycle();
  EXPECT_FALSE(w.Running(3));
  ASSERT_NE(StatusOf(plan, 3), nullptr);
  EXPECT_EQ(StatusOf(plan, 3)->code, "MigProfileUnavailable") << StatusOf(plan, 3)->message;
  EXPECT_TRUE(w.Running(4)) << (StatusOf(plan, 4) ? StatusOf(plan, 4)->message.str() : "");
}

TEST(Cycle, IsDeterministic) {
  World w(4);
  int a = w.AddQueue("a", 16), b = w.AddQueue("b", 16);
  std::mt19937_64 rng(3);
  for (int i = 0; i < 60; ++i)
    w.Submit(WholeJob(i + 1, 1 << (rng() % 4), rng() % 2 ? kTrain : kInf), rng() % 2 ? a : b);
  CycleInput in = w.Input();
  Plan p1 = RunCycle(in, *w.policy_), p2 = RunCycle(in, *w.policy_);
  ASSERT_EQ(p1.actions.size(), p2.actions.size());
  for (size_t i = 0; i < p1.actions.size(); ++i) EXPECT_EQ(p1.actions[i].job, p2.actions[i].job);
  ASSERT_EQ(p1.pending.size(), p2.pending.size());
  for (size_t i = 0; i < p1.pending.size(); ++i) EXPECT_EQ(p1.pending[i].message, p2.pending[i].message);
}

TEST(Preemption, Rules) {
  CycleOptions o;
  o.min_runtime_s = 100;
  o.reclaim_min_runtime_s = 10;
  RunningJob v;
  v.queue = 1;
  v.priority = kTrain;
  v.start_time_s = 0;
  // Priority: strictly lower, old enough, own queue or borrowing.
  EXPECT_EQ(MayPreempt({kInf, 1, false}, v, false, 200, o), PreemptKind::kPriority);
  EXPECT_EQ(MayPreempt({kTrain, 1, false}, v, false, 200, o), PreemptKind::kNone);
  EXPECT_EQ(MayPreempt({kInf, 1, false}, v, false, 50, o), PreemptKind::kNone);
  EXPECT_EQ(MayPreempt({kInf, 2, false}, v, false, 200, o), PreemptKind::kNone);
  EXPECT_EQ(MayPreempt({kProd, 2, false}, v, false, 200, o), PreemptKind::kPriority);
  // Reclaim: the owner is within its guarantee and the victim's queue borrows.
  EXPECT_EQ(MayPreempt({kTrain, 2, true}, v, true, 50, o), PreemptKind::kReclaim);
  EXPECT_EQ(MayPreempt({kTrain, 2, true}, v, false, 50, o), PreemptKind::kNone);
  v.priority = kProd;  // production inference is not reclaimed by anything below it
  EXPECT_EQ(MayPreempt({kTrain, 2, true}, v, true, 500, o), PreemptKind::kNone);
  v.priority = kTrain;
  v.preemptible = false;
  EXPECT_EQ(MayPreempt({kProd, 1, true}, v, true, 500, o), PreemptKind::kNone);
  // Cost: borrowed first, then lower priority, then less lost work.
  EXPECT_TRUE(CheaperVictim({true, kInf, 1000, 1, 1}, {false, kBest, 0, 1, 2}));
  EXPECT_TRUE(CheaperVictim({false, kBest, 1000, 1, 1}, {false, kTrain, 0, 1, 2}));
  EXPECT_TRUE(CheaperVictim({false, kTrain, 10, 8, 1}, {false, kTrain, 1000, 1, 2}));
}

// Property tests: random finite workloads on a small cluster, cycles every 10 s, fixed seeds.
struct PropertyResult {
  bool all_ran = false;
  std::string left;  // why the first job left over waits
  int64_t max_guarantee_wait = 0;
  int64_t max_prod_wait = 0;
  int headroom_preemptions = 0;
};

// Every action of a plan, in order, with its placement.
std::string PlanText(const Plan& p) {
  std::string out;
  for (const Action& a : p.actions) {
    out += fmt::format("{} {} for {} reclaim {} at {}:", static_cast<int>(a.kind), a.job, a.for_job, a.reclaim,
                       a.start_s);
    for (const TaskPlacement& t : a.tasks)
      for (const GpuGrant& g : t.gpus) out += fmt::format(" {}/{}/{}/{}", t.node, g.gpu, g.milli, g.mig_profile);
    out += "\n";
  }
  return out;
}

// full: also time limits on every job (backfill into reservations), 4 reservations per cycle and 2 GPUs of
// production headroom.
PropertyResult RunRandomWorkload(uint64_t seed, bool full = false) {
  World w(4, 2);  // 32 GPUs, two leaves
  int q[4] = {w.AddQueue("a", 12), w.AddQueue("b", 8), w.AddQueue("c", 8), w.AddQueue("d", 0, -1, 2)};
  w.options_.min_runtime_s = 120;
  w.options_.reclaim_min_runtime_s = 20;
  if (full) {
    w.options_.max_reservations = 4;
    w.options_.production_headroom_milli = 2000;
  }
  std::mt19937_64 rng(seed);
  std::map<JobId, int> queue_of;
  std::map<JobId, bool> in_guarantee;
  JobId id = 1;
  PropertyResult out;
  std::map<int, int64_t> demand_since;  // queue -> first time it had unmet in-guarantee demand
  // Queue d has no guarantee and runs long jobs (2000 s) on borrowed capacity; the others run 30-330 s jobs.
  // Without reclaim an owner could wait for a borrower's 2000 s; with it the wait is bounded by the reclaim
  // guard plus the runtime of in-quota jobs that fragment the nodes.
  for (int step = 0; step < 3000; ++step) {
    if (step < 150) {
      int arrivals = static_cast<int>(rng() % 2);
      for (int k = 0; k < arrivals; ++k) {
        int qi = static_cast<int>(rng() % 4);
        int prio = rng() % 10 == 0 ? kProd : (rng() % 3 == 0 ? kInf : kTrain);
        int gpus = prio == kProd ? 1 : 1 << (rng() % 4);
        int tasks = prio == kTrain && rng() % 6 == 0 ? 2 : 1;
        if (tasks == 2) gpus = 8;
        Request r = WholeJob(id, gpus, prio, tasks);
        queue_of[id] = q[qi];
        const int64_t duration = qi == 3 ? 2000 : 30 + static_cast<int64_t>(rng() % 300);
        if (full) r.expected_end_s = w.now_ + duration;  // has a time limit (World::Input keeps it current)
        w.Submit(r, q[qi], duration);
        ++id;
      }
    }
    CycleInput in = w.Input();
    Plan p = RunCycle(in, *w.policy_);
    {  // remembering searches that found no victim changes nothing
      CycleInput scan_all = in;
      scan_all.options.remember_no_victims = false;
      EXPECT_EQ(PlanText(p), PlanText(RunCycle(scan_all, *w.policy_))) << "seed " << seed << " step " << step;
    }
    // Preemption never picks an equal-or-higher priority victim (priority preemption); reclaim never
    // takes production inference for a lower priority.
    std::map<JobId, int> prio;
    for (const PendingJob& pj : in.pending) prio[pj.request.id] = pj.request.priority;
    for (const Action& a : p.actions) {
      if (a.kind != ActionKind::kPreempt) continue;
      if (a.for_job < 0) ++out.headroom_preemptions;
      const RunningJob* v = nullptr;
      for (const RunningJob& r : in.running)
        if (r.id == a.job) v = &r;
      EXPECT_NE(v, nullptr);
      if (!v) continue;
      if (a.for_job < 0) {  // restores the production headroom: borrowed capacity below production only
        EXPECT_LT(v->priority, kProd);
        EXPECT_TRUE(v->preemptible);
        continue;
      }
      if (!a.reclaim || v->priority >= kProd) {
        EXPECT_LT(v->priority, prio[a.for_job]) << "seed " << seed;
      }
      EXPECT_TRUE(v->preemptible);
    }
    // Production inference never waits for training: if one is pending after the cycle, no training job
    // of the cycle's binds took capacity it could have used (checked as: no prod job waits > 1 cycle while
    // preemptible training runs anywhere).
    w.Apply(p);
    for (const PendingJob& pj : w.pending_) {
      if (pj.request.priority < kProd) continue;
      bool training_running = std::any_of(w.running_.begin(), w.running_.end(), [&](const RunningJob& r) {
        return r.priority < kProd && r.preemptible && w.now_ - r.start_time_s >= w.options_.min_runtime_s;
      });
      EXPECT_FALSE(training_running && w.now_ - pj.eligible_time_s > 10) << "seed " << seed << " job " << pj.request.id;
    }
    for (const auto& [job, wait] : w.waits_)
      if (w.requests_[job].priority >= kProd) out.max_prod_wait = std::max(out.max_prod_wait, wait);
    // Guarantee: a queue with pending demand that fits in its guarantee gets it within a bound.
    for (int qi = 0; qi < 4; ++qi) {
      int64_t used = w.Used(q[qi]);
      int64_t smallest = INT64_MAX;
      for (const PendingJob& pj : w.pending_)
        if (pj.queue == q[qi]) smallest = std::min<int64_t>(smallest, int64_t{1000} * pj.request.TotalGpus());
      const bool owed = smallest != INT64_MAX && used + smallest <= w.queues_[q[qi]].guaranteed_milli;
      if (owed) {
        demand_since.emplace(qi, w.now_);
        if (w.now_ - demand_since[qi] > out.max_guarantee_wait) {
          out.max_guarantee_wait = w.now_ - demand_since[qi];
          if (out.max_guarantee_wait > 370) {
            out.left = fmt::format("q{} used {} at {}:", qi, used, w.now_);
            for (const RunningJob& r : w.running_) out.left += fmt::format(" [run {} q{} p{} s{} e{} {}x{} pre{}]", r.id, r.queue, r.priority, r.start_time_s, r.expected_end_s, r.tasks.size(), r.tasks[0].gpus.size(), r.preemptible);
            for (const PendingJob& r : w.pending_) out.left += fmt::format(" [pend {} q{} p{} {}x{}]", r.request.id, r.queue, r.request.priority, r.request.tasks, r.request.gpus_per_task);
          }
        }
      } else {
        demand_since.erase(qi);
      }
    }
    w.Advance(10);
    if (step >= 150 && w.pending_.empty() && w.running_.empty()) break;
  }
  out.all_ran = w.pending_.empty();
  if (!out.all_ran) {
    Plan p = RunCycle(w.Input(), *w.policy_);
    if (!p.pending.empty())
      out.left = fmt::format("{} left; job {}: {} {} (running {})", w.pending_.size(), p.pending[0].job,
                             p.pending[0].code, p.pending[0].message, w.running_.size());
    out.left += fmt::format(" preemptions {} now {}", w.preemptions_.size(), w.now_);
    for (const RunningJob& r : w.running_) out.left += fmt::format(" [run {} q{} p{} s{} e{} t{}x{}]", r.id, r.queue, r.priority, r.start_time_s, r.expected_end_s, r.tasks.size(), r.tasks[0].gpus.size());
    for (const PendingJob& r : w.pending_) out.left += fmt::format(" [pend {} q{} p{}]", r.request.id, r.queue, r.request.priority);
  }
  return out;
}

TEST(CycleProperties, RandomWorkloads) {
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u, 6u}) {
    PropertyResult r = RunRandomWorkload(seed);
    EXPECT_TRUE(r.all_ran) << "seed " << seed << ": every job of a finite workload eventually runs; " << r.left;
    // Bound: reclaim guard (20 s) + the longest in-quota job (330 s) + two cycles (20 s), far below the
    // borrowers' 2000 s.
    EXPECT_LE(r.max_guarantee_wait, 370) << "seed " << seed << r.left;
    EXPECT_LE(r.max_prod_wait, 10) << "seed " << seed;
    EXPECT_EQ(RunRandomWorkload(seed).headroom_preemptions, 0) << "no headroom configured";
  }
}

// The same properties with time limits, backfill into reservations and production headroom.
TEST(CycleProperties, RandomWorkloadsWithBackfillAndHeadroom) {
  int headroom = 0;
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u, 6u}) {
    PropertyResult r = RunRandomWorkload(seed, true);
    headroom += r.headroom_preemptions;
    EXPECT_TRUE(r.all_ran) << "seed " << seed << ": every job of a finite workload eventually runs; " << r.left;
    EXPECT_LE(r.max_guarantee_wait, 370) << "seed " << seed << r.left;
    EXPECT_LE(r.max_prod_wait, 10) << "seed " << seed;
  }
  // The workloads exercise headroom restoration (backfill into reservations is rare here: reserved gangs
  // hold few free GPUs; Cycle.ShortJobsBackfillIntoAReservation covers it).
  EXPECT_GT(headroom, 0);
}

// Nodes cordoned and uncordoned while jobs of every priority come and go: the cycle never picks a victim
// on a cordoned node, and every plan applies to the live state (World::Apply checks the invariants).
TEST(CycleProperties, CordonsWhileJobsRun) {
  for (uint64_t seed : {11u, 12u, 13u, 14u}) {
    World w(4, 2);
    const int q = w.AddQueue("a", 16);
    w.options_.min_runtime_s = 0;
    w.options_.production_headroom_milli = 2000;
    std::mt19937_64 rng(seed);
    for (JobId id = 1; id <= 300; ++id) {
      const int prio = rng() % 4 == 0 ? kProd : (rng() % 2 ? kTrain : kBest);
      w.Submit(WholeJob(id, 1 << (rng() % 4), prio, rng() % 8 == 0 ? 2 : 1), q,
               20 + static_cast<int64_t>(rng() % 200));
      if (rng() % 5 == 0) {
        const NodeId n = static_cast<NodeId>(rng() % 4);
        ASSERT_TRUE((w.state_.node_cordoned(n) ? w.state_.UncordonNode(n) : w.state_.CordonNode(n)).ok());
      }
      CycleInput in = w.Input();
      Plan p = RunCycle(in, *w.policy_);
      for (const Action& a : p.actions) {
        if (a.kind != ActionKind::kPreempt) continue;
        for (const RunningJob& r : in.running)
          if (r.id == a.job)
            for (const TaskPlacement& t : r.tasks)
              EXPECT_FALSE(w.state_.node_cordoned(t.node)) << "seed " << seed << ": victim " << a.job;
      }
      w.Apply(p);
      if (HasFatalFailure()) return;
      w.Advance(10);
    }
  }
}

TEST(Tenancy, ParsesTreeClassesAndOptions) {
  const char* yaml = R"(
organisation: acme
slice_units: memory
fair_share: {half_life_hours: 24, history_weight: 0.3}
preemption: {min_runtime_s: 120, reclaim_min_runtime_s: 15, grace_s: 45, production_headroom_gpus: 8}
backfill: {reservations: 4, beyond_guarantee: true}
priority_classes:
  - {name: research, value: 300}
  - {name: training, preemption: never}
teams:
  - name: search
    guaranteed_gpus: 16
    limit_gpus: 32
    weight: 2
    gpu_kinds: {h100-80gb: {guaranteed_gpus: 8, limit_gpus: 16}}
    projects:
      - name: ranking
        queues:
          - {name: prod, guaranteed_gpus: 4, lending_limit_gpus: 1}
          - {name: train, guaranteed_gpus: 8}
  - name: vision
    guaranteed_gpus: 1.5
)";
  auto cfg = ParseTenancyYaml(yaml, "t.yaml", Catalog::Default());
  ASSERT_TRUE(cfg.ok()) << cfg.error();
  EXPECT_EQ(cfg->organisation, "acme");
  EXPECT_EQ(cfg->options.slice_units, SliceUnits::kMemory);
  EXPECT_DOUBLE_EQ(cfg->options.usage_half_life_s, 24 * 3600.0);
  EXPECT_EQ(cfg->options.min_runtime_s, 120);
  EXPECT_EQ(cfg->options.termination_grace_s, 45);
  EXPECT_EQ(cfg->options.production_headroom_milli, 8000);
  EXPECT_EQ(cfg->options.max_reservations, 4);
  EXPECT_TRUE(cfg->options.reserve_beyond_guarantee);
  ASSERT_EQ(cfg->queues.size(), 5u);
  int prod = cfg->FindQueue("search/ranking/prod");
  ASSERT_GE(prod, 0);
  EXPECT_EQ(cfg->queues[prod].parent, "search/ranking");
  EXPECT_EQ(cfg->queues[prod].team, "search");
  EXPECT_EQ(cfg->queues[prod].project, "ranking");
  EXPECT_EQ(cfg->queues[prod].lending_limit_milli, 1000);
  EXPECT_EQ(cfg->queues[cfg->FindQueue("vision")].lending_limit_milli, -1);
  EXPECT_EQ(cfg->queues[cfg->FindQueue("search/ranking")].guaranteed_milli, 12000);  // sum of children
  EXPECT_EQ(cfg->queues[cfg->FindQueue("vision")].guaranteed_milli, 1500);
  EXPECT_EQ(cfg->LeafFor("search"), prod);
  EXPECT_EQ(cfg->LeafFor("vision"), cfg->FindQueue("vision"));
  ASSERT_NE(cfg->FindClass("research"), nullptr);
  EXPECT_FALSE(cfg->FindClass("training")->preemptible);
  EXPECT_EQ(cfg->options.protected_priority, 1000);
  ASSERT_EQ(cfg->queues[0].kinds.size(), 1u);
  EXPECT_EQ(cfg->queues[0].kinds[0].limit_milli, 16000);
}

TEST(Tenancy, ErrorsNameTheField) {
  auto bad = [](const char* y) { return ParseTenancyYaml(y, "t.yaml", Catalog::Default()).error(); };
  EXPECT_NE(bad("teams:\n  - {name: a, guaranteed_gpus: -1}\n").find("teams[0].guaranteed_gpus"), std::string::npos);
  EXPECT_NE(bad("teams:\n  - {name: a, guarantee: 1}\n").find("t.yaml:2: teams[0].guarantee: unknown field"), std::string::npos);
  EXPECT_NE(bad("teams:\n  - {name: a, guaranteed_gpus: 8, limit_gpus: 4}\n").find("limit_gpus"), std::string::npos);
  EXPECT_NE(bad("teams:\n  - {name: a, gpu_kinds: {z100: {limit_gpus: 1}}}\n").find("unknown GPU kind 'z100'"),
            std::string::npos);
  EXPECT_NE(bad("teams:\n  - name: a\n    guaranteed_gpus: 4\n    queues: [{name: x, guaranteed_gpus: 8}]\n")
                .find("children guarantee"),
            std::string::npos);
  EXPECT_NE(bad("slice_units: bytes\nteams: [{name: a}]\n").find("slice_units"), std::string::npos);
  EXPECT_NE(bad("teams: [{name: a}]\npriority_classes: [{name: x}]\n").find("priority_classes[0].value"),
            std::string::npos);
  EXPECT_NE(bad("teams: [{name: a}, {name: a}]\n").find("duplicate queue 'a'"), std::string::npos);
  EXPECT_NE(bad("teams:\n  - {name: a, guaranteed_gpus: 4, lending_limit_gpus: 8}\n").find("is above the guarantee"),
            std::string::npos);
  EXPECT_NE(bad("teams:\n  - name: a\n    lending_limit_gpus: 1\n    queues: [{name: x, guaranteed_gpus: 8}]\n")
                .find("teams[0].lending_limit_gpus: set it on leaf queues"),
            std::string::npos);
  EXPECT_NE(bad("preemption: {grace_s: -5}\nteams: [{name: a}]\n").find("preemption"), std::string::npos);
}

}  // namespace
}  // namespace tessera
