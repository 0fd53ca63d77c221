#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <climits>
#include <chrono>
#include <cmath>
#include <optional>
#include <set>

#include "base/random.h"
#include "control/decisions.h"
#include "control/driver.h"
#include "control/loop.h"
#include "control/options.h"
#include "sched/cluster_state.h"
#include "sched/cycle.h"
#include "sched/sharing.h"
#include "sim/event_queue.h"
#include "sim/sim_backend.h"
#include "sim/trace_cancels.h"

namespace tessera {
namespace {

// The simulator adds the trace to the loop's table in order: the job at trace index `i` has slot i, which
// also indexes SimRun's jobs_ and its result's job_records.
JobSlot SlotOfTraceJob(size_t i) { return JobSlot(static_cast<int32_t>(i)); }

// What the simulator keeps per job beyond the control loop's table: the trace entry and the metric
// contributions of its current hold (milli), added at bind/start and removed at release.
struct SimJob {
  const TraceJob* spec = nullptr;
  bool in_window = false;
  double alloc_milli = 0;
  double used_milli = 0;
  double eff_gpus = 0;
  int cls_index = 0;
  int team_index = 0;
  // Inference (docs/sharing.md): the units (GPU, instance start or -1 for a whole or shared non-MIG GPU)
  // its grants use, the compute it would use at full speed (declared demand within its grants) and whether
  // any of its time inside the window was above its SLO.
  std::vector<std::pair<GpuId, int>> units;
  double base_used_milli = 0;
  bool violated = false;
  bool served = false;  // counted in the served mix (first bound, or first harvested, inside the window)
  // Backfill into reservations: the start of the reservation a bound job was let into (-1: not
  // backfilled), and a gang's first reservation's expected start (-1: never reserved).
  int64_t backfill_until_s = -1;
  int64_t first_reserved_start_s = -1;
};

// A unit of compute that inference replicas run on: a MIG instance, a whole GPU or a GPU shared by
// fractions. Its SLO figures are integrated from `since_s` up to the next change of its members.
struct Unit {
  std::vector<JobSlot> members;
  std::vector<int> caps;  // each member's grant (thousandths), for per-client caps
  int capacity = 0;       // thousandths of a GPU
  int64_t since_s = 0;
  int64_t memory_mib = 0;       // usable memory of the instance or GPU
  int64_t members_mib = 0;      // the members' memory
  JobSlot harvester = kNoSlot;  // a waiting job running on its idle compute (sim/harvest.h)
};

// One GPU (or MIG instance) a harvester runs on: beside a unit's one owner, or on compute nobody holds (a
// free whole GPU or an idle MIG instance: reserved for a gang, or a fragment) until a bind or a repartition
// takes it.
struct HarvestPlace {
  std::pair<GpuId, int> key;
  int free_capacity = 0;  // > 0: compute nobody holds, of this capacity
};

// A waiting job running on idle compute (sim/harvest.h), one place per GPU it asks for, all on one node. Its
// progress since the last checkpoint is kept here; a checkpoint moves it into the job's remaining work, an
// eviction loses it. A gang progresses at the pace of its slowest place times its step-time efficiency.
struct Harvester {
  std::vector<HarvestPlace> places;
  double efficiency = 1;
  int64_t accrued_s = 0;   // progress accrued up to here
  int64_t run_from_s = 0;  // progress starts here (after a restore or a checkpoint write)
  int64_t next_checkpoint_s = 0;
  double work_s = 0;          // ideal seconds of work since the last checkpoint
  double useful_milli_s = 0;  // the compute they took inside the window (thousandths x seconds)
};

// Where a harvester may run: a unit with one owner (cap at the owner's declared demand), a free whole GPU or
// an idle MIG instance (its compute), with the memory left for a harvester.
struct HarvestSlot {
  int cap = 0;
  HarvestPlace place;
  NodeId node = kNone;
  int64_t memory_left_mib = 0;
};

// Slowdown histogram: bucket b holds slowdowns in (1.02^(b-1), 1.02^b] (bucket 0: exactly 1); the last one
// is saturation.
constexpr int kSlowBuckets = 350;
constexpr double kSaturated = 1000;  // what a saturated unit reports as its slowdown

struct SloAccum {
  double replica_s = 0, violation_s = 0;
  std::array<double, kSlowBuckets + 1> hist{};
  void Add(double slow, double len, bool over) {
    replica_s += len;
    if (over) violation_s += len;
    const int bucket = slow >= kSaturated ? kSlowBuckets
                                          : std::clamp(static_cast<int>(std::ceil(std::log(slow) / std::log(1.02) - 1e-9)),
                                                       0, kSlowBuckets - 1);
    hist[bucket] += len;
  }
};

constexpr int kClasses = 4;

struct Accum {
  double alloc = 0, used = 0;  // milli-seconds integrals
};

// One run: the control-loop core (control/loop.h) under the driver rules every driver shares
// (control/driver.h) with the simulated cluster as its backend (sim/sim_backend.h: run times, out of memory
// at start, injected failures), plus the simulator's own concerns: arrivals, the clock and metrics.
class SimRun final : public DriverListener, public InstantSource {
 public:
  SimRun(const Cluster& cluster, const Catalog& catalog, const std::vector<TraceJob>& trace,
         const Policy& policy, const SimOptions& opt)
      : cluster_(cluster), catalog_(catalog), trace_(trace), opt_(opt), hook_(opt.hook),
        policy_(hook_ ? hook_->Route(policy) : policy) {}
  Status Init();
  void Run();
  RunResult Finish();

  // DriverListener: metrics.
  void OnApplied(const Applied& a, int64_t now) override;
  int64_t ExtraStartDelay(JobSlot j, int64_t now) override;
  void OnStarted(JobSlot j, int64_t now, double efficiency, bool in_flight) override;
  size_t Waiting() const override { return loop_->jobs().pending().size(); }
  void OnReleased(const Released& r, int64_t now, ReleaseCause cause, int64_t lost_since_s) override;
  // InstantSource: arrivals, tiers, cycles.
  bool Arrive(int64_t now) override;
  int ReleaseBacklog(int64_t now) override;
  bool backlog() const override { return backlog_; }
  bool External(int64_t now) override;
  int Cycle(int64_t now) override;

 private:
  ControlLoop& loop() { return *loop_; }
  ClusterState& state() { return loop_->state(); }
  const ClusterState& state() const { return loop_->state(); }
  const ControlJob& job(JobSlot j) { return loop_->jobs()[j]; }
  bool Tenancy() const { return opt_.tenancy != nullptr; }

  Status InitJobs(ClusterState state);
  void InitQueueRecords();
  void Advance(int64_t t);
  void AddContrib(SimJob& j, double alloc, double used, double effg, int sign);
  void ReleaseMetrics(const Released& r, int64_t now, bool completed);
  void OnLeftHold(JobSlot j, const std::vector<TaskPlacement>& tasks);
  void MarkArrival(JobSlot j, int64_t now);
  bool CancelDue(int64_t now);
  void CancelJob(JobSlot j, int64_t now);
  void OnBound(const Applied& a, int64_t now);
  void BackfillEnded(SimJob& j, const std::vector<TaskPlacement>& tasks, int64_t now);
  // Backfill and reservations at a bind: backfills counted, a reserved gang's start against its first
  // reservation's expected start.
  void BackfillFigures(SimJob& j, const Applied& a, int64_t now);
  void OnPreempted(const Applied& a, int64_t now);
  void OnCompleted(const Released& r, int64_t now);
  void JoinUnits(JobSlot j);
  void LeaveUnits(JobSlot j);
  void CloseUnit(Unit& u, int64_t now);
  void KilledReplicaTime(JobSlot j, int64_t now);
  void RescaleUsed(const Unit& u);
  double DemandFactor(JobSlot j, int64_t epoch) const;
  void SloFigures(int64_t end);
  bool AncestorsWithin(int q, int64_t units) const;
  // The opportunistic tier (sim/harvest.h).
  // Not with capacity tiers or tenancy: their hooks and queue records follow regular holds only.
  bool Harvesting() const { return opt_.harvest.enabled && hook_ == nullptr && !Tenancy(); }
  // Whether the next harvest tick counts as an instant when the run's own next one is `t_next`: while
  // harvesters run (each ends: it completes, or its owner or a bind evicts it), or while a job waits and
  // something else is still to come. Never else, so a run to completion ends.
  bool HarvestTickDue(int64_t t_next) const {
    return Harvesting() &&
           (!harvesters_.empty() || (!loop_->jobs().pending().empty() && t_next != INT64_MAX));
  }
  double InWindow(int64_t s, int64_t t) const {
    return static_cast<double>(std::max<int64_t>(0, std::min(t, w1_) - std::max(s, w0_)));
  }
  int OwnerReal(const Unit& u, int64_t epoch) const;
  double OwnerSlo(const Unit& u) const;
  int HarvestCap(const Unit& u, int64_t epoch) const;
  int PlaceCap(const HarvestPlace& p, int64_t epoch) const;
  double PlaceUseful(const HarvestPlace& p, int64_t epoch, double compute) const;
  void HarvestedOwnerTime(const Unit& u, SloAccum* acc, SimJob& owner, int64_t a, int64_t b);
  void SettleHarvests(int64_t now);
  void StartHarvests(int64_t now);
  std::vector<HarvestSlot> HarvestSlots() const;
  bool PickPlaces(const TraceJob& spec, const std::vector<HarvestSlot>& slots,
                  std::vector<size_t>* chosen) const;
  void StartHarvest(JobSlot j, std::vector<HarvestPlace> places, int64_t now);
  void EndHarvest(JobSlot j, bool evicted, int64_t now);
  void SettleHarvester(JobSlot j, int64_t now);
  int HarvesterCap(const Harvester& h, int64_t epoch) const;
  bool StillFree(const HarvestPlace& p) const;
  void EvictTakenFree(const std::vector<TaskPlacement>* tasks, JobSlot taker, int64_t now);
  void CountServed(SimJob& j, int64_t now);
  void UpdateGuaranteeWaits(int64_t now);
  double LimitFactor(JobSlot j) const;

  const Cluster& cluster_;
  const Catalog& catalog_;
  const std::vector<TraceJob>& trace_;
  const SimOptions& opt_;
  SimHook* const hook_;  // issue 5 tiers hook (may be null)
  const Policy& policy_;
  FabricParams fabric_;
  std::optional<ControlLoop> loop_;
  std::unique_ptr<SimulatedCluster> physics_;  // the simulated cluster: the driver's backend
  std::optional<Driver> driver_;
  RunResult res_;
  std::vector<SimJob> jobs_;
  std::vector<std::string> team_names_;
  bool backlog_ = false;
  double capacity_milli_ = 0;
  // Multi-tenant records: GPU units held and asked (pending) per queue, each queue's parent, and its subtree
  // allocation after the last cycle. A job is within its guarantee only if its queue and every ancestor
  // stay within theirs.
  std::vector<int64_t> queue_alloc_, queue_waiting_, subtree_alloc_;
  std::vector<int> queue_parent_;

  SimClock clock_;
  std::vector<int32_t> order_;  // arrival order: by submit time, then trace position
  // Inference units in use: (GPU, instance start or -1) -> the replicas on it.
  std::map<std::pair<GpuId, int>, Unit> units_;
  // Per SLO class: replica-seconds, those above the SLO, and the slowdown histogram over replica-seconds.
  std::map<std::string, SloAccum> slo_acc_;
  size_t next_arrival_ = 0;
  TraceCancels cancels_;  // the trace's cancel_s, due after each arrival
  // The opportunistic tier: harvesters by job, jobs whose next regular start restores a harvest checkpoint,
  // the next harvest tick, and the compute (thousandths x seconds inside the window) harvesters kept and
  // lost.
  std::map<JobSlot, Harvester> harvesters_;
  std::set<JobSlot> restore_on_start_;
  std::set<JobSlot> grace_on_start_;  // bound onto a free harvester's GPU: it starts after the grace period
  int64_t next_harvest_s_ = 0;
  double harvest_useful_ = 0, harvest_lost_ = 0;

  // Integrals over [w0_, w1_].
  std::array<Accum, kClasses> cls_acc_{};
  std::vector<Accum> team_acc_;
  double total_alloc_ = 0, total_used_ = 0, eff_integral_ = 0, train_alloc_integral_ = 0;
  std::array<double, kClasses> cls_alloc_now_{}, cls_used_now_{};
  std::vector<double> team_alloc_now_, team_used_now_;
  double alloc_now_ = 0, used_now_ = 0, eff_now_ = 0, train_alloc_now_ = 0;
  int64_t w0_ = 0, w1_ = INT64_MAX;
  int64_t last_t_ = 0, next_sample_ = 0, now_ = 0;
};

Status SimRun::Init() {
  auto built = ClusterState::Build(cluster_, catalog_);
  if (!built.ok()) return Status::Error("simulate: " + built.error());
  ClusterState state = std::move(built).value();
  fabric_ = opt_.fabric;
  if (opt_.fabric_oversubscription_from_cluster) fabric_.leaf_oversubscription = cluster_.spine_oversubscription;
  if (hook_) {
    if (Status st = hook_->Begin(state); !st.ok()) return Status::Error("simulate: " + st.message());
  }
  res_.policy = std::string(policy_.name());
  res_.demand_sigma = opt_.demand_sigma;
  res_.demand_epoch_s = opt_.demand_epoch_s;
  res_.time_limit_factor_min = opt_.time_limit_factor_min;
  res_.time_limit_factor_max = opt_.time_limit_factor_max;
  res_.sharing_mode = SharingModeName(opt_.sharing.mode);
  res_.harvest_enabled = Harvesting();
  res_.gpus = state.num_gpus();
  if (res_.gpus == 0) return Status::Error("simulate: the cluster has no GPUs");
  capacity_milli_ = 1000.0 * res_.gpus;
  backlog_ = opt_.arrivals == "backlog";
  if (!backlog_ && opt_.arrivals != "trace")
    return Status::Error(fmt::format("simulate: arrivals '{}' is not one of trace, backlog", opt_.arrivals));
  if (backlog_ && opt_.horizon_s <= 0) return Status::Error("simulate: backlog arrivals need a horizon");
  w0_ = opt_.warmup_s;
  w1_ = opt_.horizon_s > 0 ? opt_.horizon_s : INT64_MAX;
  return InitJobs(std::move(state));
}

// The loop setup's fields the simulator's options give directly (the queues and tenancy aside).
void FillSetup(const SimOptions& o, LoopSetup* setup) {
  setup->gang_backfill = o.gang_backfill;
  setup->gang_reservations = o.gang_reservations;
  setup->backfill_into_reservations = o.backfill_into_reservations;
  setup->gang_aging_s = o.gang_aging_s;
  setup->mig_instance_delay_s = o.mig_instance_delay_s;
  setup->mig_mode_delay_s = o.mig_mode_delay_s;
  setup->max_cycles_per_instant = o.max_cycles_per_instant;
  setup->demand_learning = o.demand_learning;
  setup->workload_learning = o.workload_learning;
}

// Queues (one per team, or the tenancy's), the control loop, and the job table in trace order.
Status SimRun::InitJobs(ClusterState state) {
  std::map<std::string, int> team_index;
  jobs_.resize(trace_.size());
  for (size_t i = 0; i < trace_.size(); ++i) {
    auto [it, inserted] = team_index.emplace(trace_[i].team, static_cast<int>(team_names_.size()));
    if (inserted) team_names_.push_back(trace_[i].team);
    jobs_[i].spec = &trace_[i];
    jobs_[i].cls_index = static_cast<int>(trace_[i].cls);
    jobs_[i].team_index = it->second;
  }
  for (const auto& [team, w] : opt_.queue_weights)
    if (!team_index.count(team))
      return Status::Error(
          fmt::format("simulate: queue_weights names team '{}', which no job of the stream has", team));
  std::vector<QueueConfig> queues;
  LoopSetup setup;
  if (Tenancy()) {
    queues = opt_.tenancy->queues;
    setup.tenancy_cycle = &opt_.tenancy->cycle;
    setup.tenancy_cycle_every_s = opt_.tenancy->cycle_every_s;
  } else {
    for (const std::string& t : team_names_) {
      QueueConfig q;
      q.name = t;
      auto w = opt_.queue_weights.find(t);
      if (w != opt_.queue_weights.end()) q.over_quota_weight = w->second;
      queues.push_back(std::move(q));
    }
  }
  FillSetup(opt_, &setup);
  PhysicsOptions physics;
  physics.fabric = fabric_;
  physics.gpu_mtbf_h = opt_.gpu_mtbf_h;
  physics.failure_seed = opt_.failure_seed;
  physics.demand_sigma = opt_.demand_sigma;
  physics.demand_epoch_s = opt_.demand_epoch_s;
  physics.demand_seed = opt_.demand_seed;
  physics.hook = hook_;
  auto made = SimulatedCluster::Make(
      cluster_, catalog_, [this](JobSlot j) { return jobs_[j.value()].spec; }, physics);
  if (!made.ok()) return Status::Error("simulate: " + made.error());
  physics_ = std::move(made).value();
  loop_.emplace(std::move(state), queues, MakeLoopOptions(setup));
  driver_.emplace(&*loop_, physics_.get(), MakeDriverOptions(setup), this);
  driver_->set_recording(opt_.record_decisions);
  for (size_t i = 0; i < trace_.size(); ++i) {
    auto r = ToRequest(trace_[i], catalog_);
    if (!r.ok()) return Status::Error("simulate: " + r.error());
    ControlJob j;
    j.request = *r;
    j.queue = jobs_[i].team_index;
    if (Tenancy()) {
      auto qit = opt_.tenancy->queue_of_team.find(trace_[i].team);
      j.queue = qit == opt_.tenancy->queue_of_team.end() ? 0 : qit->second;
      auto pit = opt_.tenancy->class_by_priority.find(j.request.priority);
      const PriorityClass pc = pit == opt_.tenancy->class_by_priority.end() ? PriorityClass{} : pit->second;
      j.preemptible = pc.preemptible;
      j.request.may_preempt = pc.preempts;
    }
    j.checkpointable = trace_[i].checkpointable;
    j.submit_s = trace_[i].submit_s;
    j.remaining_work_s = trace_[i].duration_s < 0 ? -1 : static_cast<double>(trace_[i].duration_s);
    j.time_limit_factor = LimitFactor(SlotOfTraceJob(i));
    loop().Add(std::move(j));  // its slot is SlotOfTraceJob(i)
  }
  InitQueueRecords();
  team_acc_.resize(team_names_.size());
  team_alloc_now_.assign(team_names_.size(), 0);
  team_used_now_.assign(team_names_.size(), 0);
  order_.resize(trace_.size());
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int32_t>(i);
  if (!backlog_)
    std::stable_sort(order_.begin(), order_.end(),
                     [&](int32_t a, int32_t b) { return trace_[a].submit_s < trace_[b].submit_s; });
  return Status::Ok();
}

void SimRun::InitQueueRecords() {
  const std::vector<QueueConfig>& queues = loop().queues();
  if (Tenancy()) res_.job_records.resize(trace_.size());
  queue_alloc_.assign(queues.size(), 0);
  queue_waiting_.assign(queues.size(), 0);
  subtree_alloc_.assign(queues.size(), 0);
  queue_parent_.assign(queues.size(), -1);
  for (size_t q = 0; q < queues.size(); ++q)
    for (size_t a = 0; a < queues.size(); ++a)
      if (!queues[q].parent.empty() && queues[a].name == queues[q].parent) queue_parent_[q] = static_cast<int>(a);
}

bool SimRun::AncestorsWithin(int q, int64_t units) const {
  for (int a = queue_parent_[q]; a >= 0; a = queue_parent_[a])
    if (subtree_alloc_[a] + units > loop_->queues()[a].guaranteed_milli) return false;
  return true;
}

// Per-job time-limit factor: the user's limit (SimTimeLimit) over the job's duration.
double SimRun::LimitFactor(JobSlot j) const {
  const TraceJob& t = trace_[j.value()];
  return TimeLimitFactor(t.duration_s, SimTimeLimit(t, static_cast<size_t>(j.value()), opt_));
}

void SimRun::Advance(int64_t t) {
  const int64_t a = std::max(last_t_, w0_), b = std::min(t, w1_);
  if (b > a) {
    const double dt = static_cast<double>(b - a);
    total_alloc_ += alloc_now_ * dt;
    total_used_ += used_now_ * dt;
    eff_integral_ += eff_now_ * dt;
    train_alloc_integral_ += train_alloc_now_ * dt;
    for (int c = 0; c < kClasses; ++c) {
      cls_acc_[c].alloc += cls_alloc_now_[c] * dt;
      cls_acc_[c].used += cls_used_now_[c] * dt;
    }
    for (size_t k = 0; k < team_acc_.size(); ++k) {
      team_acc_[k].alloc += team_alloc_now_[k] * dt;
      team_acc_[k].used += team_used_now_[k] * dt;
    }
  }
  while (next_sample_ <= t && next_sample_ <= (opt_.horizon_s > 0 ? opt_.horizon_s : t)) {
    res_.series.push_back({next_sample_ / 3600.0, alloc_now_ / capacity_milli_, used_now_ / capacity_milli_});
    next_sample_ += std::max<int64_t>(1, opt_.sample_every_s);
  }
  last_t_ = t;
  clock_.AdvanceTo(t);
}

void SimRun::AddContrib(SimJob& j, double alloc, double used, double effg, int sign) {
  alloc_now_ += sign * alloc;
  used_now_ += sign * used;
  cls_alloc_now_[j.cls_index] += sign * alloc;
  cls_used_now_[j.cls_index] += sign * used;
  team_alloc_now_[j.team_index] += sign * alloc;
  team_used_now_[j.team_index] += sign * used;
  if (j.spec->cls == WorkloadClass::kTraining) {
    eff_now_ += sign * effg;
    train_alloc_now_ += sign * alloc;
  }
}

// A hold ended (the loop released it): the tiers hook sees it and the job's contributions stop.
void SimRun::ReleaseMetrics(const Released& r, int64_t now, bool completed) {
  if (hook_)
    hook_->OnRelease(r.job, now, completed, r.from == JobPhase::kRunning ? r.start_s : -1, r.last_checkpoint_s);
  SimJob& j = jobs_[r.job.value()];
  BackfillEnded(j, r.tasks, now);
  AddContrib(j, j.alloc_milli, j.used_milli, j.eff_gpus, -1);
  j.alloc_milli = j.used_milli = j.eff_gpus = 0;
  LeaveUnits(r.job);
}

// A backfilled job let go its reserved capacity at `now` (or the run ended): past the start of the
// reservation it was let into, it held what that reservation expected free (an overrun: the measure of
// backfill delaying a gang).
void SimRun::BackfillEnded(SimJob& j, const std::vector<TaskPlacement>& tasks, int64_t now) {
  if (j.backfill_until_s < 0) return;
  if (now > j.backfill_until_s && j.backfill_until_s < w1_) {
    int gpus = 0;
    for (const TaskPlacement& t : tasks) gpus += static_cast<int>(t.gpus.size());
    ++res_.backfill_overruns;
    res_.backfill_overrun_gpu_s += static_cast<double>(std::min(now, w1_) - j.backfill_until_s) * gpus;
  }
  j.backfill_until_s = -1;
}

// The real demand's factor for replica j in demand epoch e: lognormal, mean 1, log-sd demand_sigma.
double SimRun::DemandFactor(JobSlot j, int64_t epoch) const {
  return tessera::DemandFactor(j, epoch, opt_.demand_sigma, opt_.demand_seed);  // the physics' (sim_backend.h)
}

// Integrates a unit's SLO figures over [since_s, now) inside the window, epoch by epoch of real demand:
// each member's slowdown from the members' real demands (sharing.h), its replica-seconds (on the first unit of
// its grants only) and those above its class's SLO. A replica alone is the reference (slowdown 1).
void SimRun::CloseUnit(Unit& u, int64_t now) {
  if (u.harvester != kNoSlot) SettleHarvester(u.harvester, now);
  const int64_t a = std::max(u.since_s, w0_), b = std::min(now, w1_);
  u.since_s = now;
  if (b <= a || u.members.empty()) return;
  const int k = static_cast<int>(u.members.size());
  struct Member {
    SloAccum* acc = nullptr;  // null: counted on another unit
    double declared = 0, slo = 0, cap = 0, real = 0;
    SimJob* job = nullptr;
  };
  std::vector<Member> ms(k);
  for (int i = 0; i < k; ++i) {
    SimJob& m = jobs_[u.members[i].value()];
    auto first = m.units.empty() ? units_.end() : units_.find(m.units.front());
    const bool counted = first != units_.end() && &first->second == &u;  // a replica counts once
    const bool prod = m.spec->latency_sensitive;
    ms[i] = {counted ? &slo_acc_[prod ? "production-inference" : WorkloadClassName(m.spec->cls)] : nullptr,
             static_cast<double>(std::max(0, m.spec->compute_milli)),
             prod ? opt_.sharing.sensitive_slo : opt_.sharing.standard_slo, static_cast<double>(u.caps[i]), 0, &m};
  }
  if (k == 1 && u.harvester != kNoSlot) return HarvestedOwnerTime(u, ms[0].acc, *ms[0].job, a, b);
  if (k == 1) {
    if (ms[0].acc) ms[0].acc->Add(1.0, static_cast<double>(b - a), false);
    return;
  }
  const int64_t ep = std::max<int64_t>(1, opt_.demand_epoch_s);
  for (int64_t e = a / ep; e * ep < b; ++e) {
    const double len = static_cast<double>(std::min(b, (e + 1) * ep) - std::max(a, e * ep));
    double summed = 0;
    for (int i = 0; i < k; ++i) summed += ms[i].real = ms[i].declared * DemandFactor(u.members[i], e);
    for (Member& m : ms) {
      if (!m.acc) continue;
      double slow = P99Slowdown(opt_.sharing, static_cast<int>(m.real), static_cast<int>(std::ceil(summed)),
                                u.capacity, k);
      if (opt_.sharing.per_client_cap && m.real >= m.cap) slow = kSaturated;
      const bool over = slow > m.slo + 1e-9;
      m.acc->Add(slow, len, over);
      m.job->violated |= over;
    }
  }
}

// A replica killed at start (OOM) serves none of its requests: the run it was to make, inside the window,
// counts as replica-time above its SLO.
void SimRun::KilledReplicaTime(JobSlot j, int64_t now) {
  SimJob& m = jobs_[j.value()];
  if (m.spec->cls != WorkloadClass::kInference) return;
  m.violated = true;
  const int64_t end = m.spec->duration_s < 0 ? w1_ : now + m.spec->duration_s;
  const int64_t a = std::max(now, w0_), b = std::min(end, w1_);
  if (b <= a) return;
  slo_acc_[m.spec->latency_sensitive ? "production-inference" : WorkloadClassName(m.spec->cls)].Add(
      kSaturated, static_cast<double>(b - a), true);
}

// --- The opportunistic tier (sim/harvest.h). A harvested unit has one owner. ---

// The owner's real demand in demand epoch `epoch` (thousandths of a GPU).
int SimRun::OwnerReal(const Unit& u, int64_t epoch) const {
  const JobSlot owner = u.members.front();
  return static_cast<int>(
      std::lround(std::max(0, jobs_[owner.value()].spec->compute_milli) * DemandFactor(owner, epoch)));
}

double SimRun::OwnerSlo(const Unit& u) const {
  return jobs_[u.members.front().value()].spec->latency_sensitive ? opt_.sharing.sensitive_slo
                                                                  : opt_.sharing.standard_slo;
}

// The harvester's cap over epoch `epoch`: the throttle follows the owner's demand.
int SimRun::HarvestCap(const Unit& u, int64_t epoch) const {
  if (u.members.size() != 1) return 0;
  return HarvestCapMilli(opt_.sharing, OwnerReal(u, epoch), u.capacity,
                         OwnerSlo(u) * opt_.harvest.slo_margin);
}

int SimRun::PlaceCap(const HarvestPlace& p, int64_t epoch) const {
  return p.free_capacity > 0 ? p.free_capacity : HarvestCap(units_.at(p.key), epoch);
}

// The compute a place gives a harvester of `compute` (its demand) over an epoch, contention taken off.
double SimRun::PlaceUseful(const HarvestPlace& p, int64_t epoch, double compute) const {
  if (p.free_capacity > 0) return std::min<double>(compute, p.free_capacity);
  const Unit& u = units_.at(p.key);
  return std::min(compute,
                  HarvestUsefulMilli(opt_.sharing, OwnerReal(u, epoch), HarvestCap(u, epoch), u.capacity));
}

// The owner's SLO time over [a, b) (inside the window) beside its harvester: per epoch at the cap for its
// real demand, except the first react_s of an epoch, where a higher cap of the epoch before still holds.
void SimRun::HarvestedOwnerTime(const Unit& u, SloAccum* acc, SimJob& owner, int64_t a, int64_t b) {
  const int64_t ep = std::max<int64_t>(1, opt_.demand_epoch_s);
  const double slo = OwnerSlo(u);
  for (int64_t s = a; s < b;) {
    const int64_t e = s / ep, t = std::min(b, (e + 1) * ep);
    const int own = OwnerReal(u, e), cap = HarvestCap(u, e);
    const int64_t lag = s == e * ep ? std::min(t - s, opt_.harvest.react_s) : 0;
    const int old_cap = lag > 0 ? std::max(cap, HarvestCap(u, e - 1)) : cap;
    for (const auto& [len, c] :
         {std::pair<int64_t, int>{lag, old_cap}, std::pair<int64_t, int>{t - s - lag, cap}}) {
      if (len <= 0) continue;
      double slow = HarvestedOwnerSlowdown(opt_.sharing, own, c, u.capacity);
      if (!(slow < kSaturated)) slow = kSaturated;
      const bool over = slow > slo + 1e-9;
      if (acc) acc->Add(slow, static_cast<double>(len), over);
      owner.violated |= over;
    }
    s = t;
  }
}

// A harvester leaves: evicted, its work since the last checkpoint is lost; else (it completed) the caller has
// kept its work. Its owners' units are closed at `now` first.
void SimRun::EndHarvest(JobSlot j, bool evicted, int64_t now) {
  if (!harvesters_.count(j)) return;
  const std::vector<HarvestPlace> places = harvesters_.at(j).places;
  for (const HarvestPlace& p : places)
    if (auto u = units_.find(p.key); p.free_capacity == 0 && u != units_.end()) CloseUnit(u->second, now);
  auto it = harvesters_.find(j);
  if (evicted) {
    harvest_lost_ += it->second.useful_milli_s;
    ++res_.harvest_evictions;
  }
  for (const HarvestPlace& p : places)
    if (auto u = units_.find(p.key); p.free_capacity == 0 && u != units_.end() && u->second.harvester == j)
      u->second.harvester = kNoSlot;
  harvesters_.erase(it);
}

// Brings a harvester's progress up to `now`, epoch by epoch (none before run_from_s: a restore or a
// checkpoint write). REQUIRES: its places' units have not changed since it last accrued.
void SimRun::SettleHarvester(JobSlot j, int64_t now) {
  Harvester& h = harvesters_.at(j);
  const double compute = std::max(1, jobs_[j.value()].spec->compute_milli);
  const double n = static_cast<double>(h.places.size());
  const int64_t ep = std::max<int64_t>(1, opt_.demand_epoch_s);
  for (int64_t s = std::max(h.accrued_s, h.run_from_s); s < now;) {
    const int64_t e = s / ep, t = std::min(now, (e + 1) * ep);
    double pace = compute;
    for (const HarvestPlace& p : h.places) pace = std::min(pace, PlaceUseful(p, e, compute));
    h.work_s += pace / compute * h.efficiency * static_cast<double>(t - s);
    h.useful_milli_s += n * pace * h.efficiency * InWindow(s, t);
    s = t;
  }
  h.accrued_s = std::max(h.accrued_s, now);
}

int SimRun::HarvesterCap(const Harvester& h, int64_t epoch) const {
  int cap = 0;
  for (const HarvestPlace& p : h.places) cap += PlaceCap(p, epoch);
  return cap;
}

// Whether a place on compute nobody held is still held by nobody.
bool SimRun::StillFree(const HarvestPlace& p) const {
  const GpuState& g = state().gpu(p.key.first);
  if (p.key.second < 0) return g.WholeFree();
  if (!g.mig_enabled) return false;
  for (int i = 0; i < g.n_instances; ++i)
    if (g.instances[i].start == p.key.second) return !g.instances[i].busy;
  return false;
}

// Harvesters some of whose free compute a bind or a repartition took are evicted; a job bound onto one of
// those GPUs starts after the harvester's termination grace period.
void SimRun::EvictTakenFree(const std::vector<TaskPlacement>* tasks, JobSlot taker, int64_t now) {
  std::vector<std::pair<JobSlot, GpuId>> taken;
  for (const auto& [slot, h] : harvesters_)
    for (const HarvestPlace& p : h.places)
      if (p.free_capacity > 0 && !StillFree(p)) taken.push_back({slot, p.key.first});
  for (const auto& [j, gpu] : taken) {
    if (harvesters_.count(j)) {
      SettleHarvester(j, now);
      EndHarvest(j, true, now);
    }
    if (tasks == nullptr) continue;
    for (const TaskPlacement& t : *tasks)
      for (const GpuGrant& g : t.gpus)
        if (g.gpu == gpu) grace_on_start_.insert(taker);
  }
}

// At a harvest tick, before the cycle: each harvester completes (its job leaves the queue, done) or, when
// due, writes a checkpoint (its work so far becomes the job's; no progress while it writes).
void SimRun::SettleHarvests(int64_t now) {
  std::vector<JobSlot> slots;
  for (const auto& [slot, h] : harvesters_) slots.push_back(slot);
  std::vector<JobSlot> done;
  for (JobSlot j : slots) {
    SettleHarvester(j, now);
    Harvester& h = harvesters_.at(j);
    ControlJob& cj = loop().jobs()[j];
    if (h.work_s >= cj.remaining_work_s) {
      harvest_useful_ += h.useful_milli_s * std::min(1.0, cj.remaining_work_s / std::max(1e-9, h.work_s));
      EndHarvest(j, false, now);
      cj.remaining_work_s = 0;
      cj.phase = JobPhase::kDone;
      done.push_back(j);
      ++res_.jobs_completed;
      ++res_.harvest_completions;
      res_.makespan_s = static_cast<double>(now);
      const SimJob& sj = jobs_[j.value()];
      if (sj.in_window)
        res_.by_class[WorkloadClassName(sj.spec->cls)].jct_s.push_back(
            static_cast<double>(now - cj.submit_s));
      if (sj.in_window) res_.by_team[sj.spec->team].jct_s.push_back(static_cast<double>(now - cj.submit_s));
      continue;
    }
    if (now < h.next_checkpoint_s || h.work_s <= 0) continue;
    harvest_useful_ += h.useful_milli_s;
    cj.remaining_work_s = std::max(1.0, cj.remaining_work_s - h.work_s);
    h.work_s = h.useful_milli_s = 0;
    restore_on_start_.insert(j);
    const int64_t ep = std::max<int64_t>(1, opt_.demand_epoch_s);
    harvest_lost_ += HarvesterCap(h, now / ep) * InWindow(now, now + opt_.harvest.checkpoint_cost_s);
    h.run_from_s = now + opt_.harvest.checkpoint_cost_s;
    h.next_checkpoint_s = h.run_from_s + opt_.harvest.checkpoint_every_s;
    ++res_.harvest_checkpoints;
  }
  if (!done.empty()) loop().jobs().ErasePending(done);
}

void SimRun::CountServed(SimJob& j, int64_t now) {
  if (j.served) return;
  j.served = true;
  if (now < w0_ || now >= w1_) return;
  for (ClassStats* s : {&res_.by_class[WorkloadClassName(j.spec->cls)], &res_.by_team[j.spec->team]}) {
    ++s->jobs_started;
    s->gpu_requests_served += j.spec->GpuRequests();
  }
}

void SimRun::StartHarvest(JobSlot j, std::vector<HarvestPlace> places, int64_t now) {
  const SimJob& sj = jobs_[j.value()];
  Harvester h;
  if (places.size() > 1) {  // a gang on one node: its step time there
    TaskPlacement t;
    t.node = state().gpu(places.front().key.first).node;
    for (const HarvestPlace& p : places) t.gpus.push_back(GpuGrant{p.key.first});
    h.efficiency = physics_->EfficiencyOf(*sj.spec, {t});
  }
  for (const HarvestPlace& p : places) {
    if (p.free_capacity > 0) continue;
    Unit& u = units_.at(p.key);
    CloseUnit(u, now);
    u.harvester = j;
  }
  h.places = std::move(places);
  h.accrued_s = now;
  const bool restore = restore_on_start_.count(j) > 0 || job(j).remaining_work_s < sj.spec->duration_s - 1e-9;
  h.run_from_s = now + (restore ? opt_.harvest.restore_s : 0);
  if (restore) {
    const int64_t ep = std::max<int64_t>(1, opt_.demand_epoch_s);
    harvest_lost_ += HarvesterCap(h, now / ep) * InWindow(now, h.run_from_s);
  }
  h.next_checkpoint_s = h.run_from_s + opt_.harvest.checkpoint_every_s;
  harvesters_[j] = std::move(h);
  ++res_.harvest_starts;
  CountServed(jobs_[j.value()], now);
}

std::vector<HarvestSlot> SimRun::HarvestSlots() const {
  std::vector<HarvestSlot> out;
  for (const auto& [key, u] : units_) {
    if (u.members.size() != 1 || u.harvester != kNoSlot) continue;
    const TraceJob& owner = *jobs_[u.members.front().value()].spec;
    if (owner.latency_sensitive && !opt_.harvest.sensitive_units) continue;
    const int cap = HarvestCapMilli(opt_.sharing, std::max(0, owner.compute_milli), u.capacity,
                                    OwnerSlo(u) * opt_.harvest.slo_margin);
    if (cap >= opt_.harvest.min_cap_milli)
      out.push_back({cap,
                     {key, 0},
                     state().gpu(key.first).node,
                     u.memory_mib - u.members_mib - 2 * opt_.sharing.context_mib});
  }
  if (!opt_.harvest.free_compute) return out;
  std::set<std::pair<GpuId, int>> taken;
  for (const auto& [slot, h] : harvesters_)
    for (const HarvestPlace& p : h.places)
      if (p.free_capacity > 0) taken.insert(p.key);
  for (GpuId g = 0; g < state().num_gpus(); ++g) {
    const GpuState& gs = state().gpu(g);
    const GpuKind& kind = state().kind_of_gpu(g);
    if (gs.WholeFree() && !taken.count({g, -1}))
      out.push_back(
          {kMilliPerGpu, {{g, -1}, kMilliPerGpu}, gs.node, kind.memory_mib - opt_.sharing.context_mib});
    if (!gs.mig_enabled) continue;
    for (int i = 0; i < gs.n_instances; ++i) {
      const MigSlot& m = gs.instances[i];
      if (m.busy || taken.count({g, m.start})) continue;
      const int cap = kind.ProfileComputeMilli(m.profile);
      if (cap >= opt_.harvest.min_cap_milli)
        out.push_back({cap,
                       {{g, m.start}, cap},
                       gs.node,
                       kind.profiles[m.profile].usable_mib - opt_.sharing.context_mib});
    }
  }
  return out;
}

// Places for a waiting job among `slots` (by cap, largest first): the first that holds a single-GPU job's
// memory; for a gang of G GPUs (G <= gang_max_gpus), G slots on G distinct GPUs of one node, on the node
// where the G-th best such slot is best (a gang runs at its slowest member's pace).
bool SimRun::PickPlaces(const TraceJob& spec, const std::vector<HarvestSlot>& slots,
                        std::vector<size_t>* chosen) const {
  const size_t g = static_cast<size_t>(spec.GpuRequests());
  chosen->clear();
  if (g == 1) {
    for (size_t f = 0; f < slots.size(); ++f)
      if (spec.memory_mib <= slots[f].memory_left_mib) return chosen->push_back(f), true;
    return false;
  }
  std::map<NodeId, std::vector<size_t>> by_node;
  std::map<NodeId, std::set<GpuId>> gpus;
  for (size_t f = 0; f < slots.size(); ++f) {
    const HarvestSlot& x = slots[f];
    if (spec.memory_mib > x.memory_left_mib || by_node[x.node].size() >= g) continue;
    if (!gpus[x.node].insert(x.place.key.first).second) continue;
    by_node[x.node].push_back(f);
  }
  int best = -1;
  for (const auto& [node, fs] : by_node)
    if (fs.size() == g && slots[fs.back()].cap > best) best = slots[fs.back()].cap, *chosen = fs;
  return best >= 0;
}

// At a harvest tick, after the cycle: waiting checkpointable preemptible training of whole GPUs, in queue
// order, each on the slots PickPlaces finds.
void SimRun::StartHarvests(int64_t now) {
  std::vector<HarvestSlot> free = HarvestSlots();
  std::stable_sort(free.begin(), free.end(),
                   [](const HarvestSlot& x, const HarvestSlot& y) { return x.cap > y.cap; });
  const std::vector<JobSlot> pending = loop().jobs().pending();
  std::vector<size_t> chosen;
  for (JobSlot j : pending) {
    if (free.empty()) break;
    const ControlJob& cj = job(j);
    const TraceJob& spec = *jobs_[j.value()].spec;
    if (harvesters_.count(j) || spec.cls != WorkloadClass::kTraining || !cj.checkpointable ||
        !cj.preemptible || spec.gpus_per_task < 1 || spec.GpuRequests() > opt_.harvest.gang_max_gpus ||
        cj.remaining_work_s <= 0 || !PickPlaces(spec, free, &chosen))
      continue;
    std::vector<HarvestPlace> places;
    for (size_t f : chosen) places.push_back(free[f].place);
    StartHarvest(j, std::move(places), now);
    std::sort(chosen.rbegin(), chosen.rend());
    for (size_t f : chosen) free.erase(free.begin() + static_cast<std::ptrdiff_t>(f));
  }
}

// Time-slicing's context switches cost the unit useful time: each member's utilisation is its declared use
// scaled by min(1, useful capacity / summed declared demand), recomputed on every change of the unit.
void SimRun::RescaleUsed(const Unit& u) {
  const int k = static_cast<int>(u.members.size());
  int summed = 0;
  for (JobSlot m : u.members) summed += std::max(0, jobs_[m.value()].spec->compute_milli);
  const double useful =
      u.capacity * ThroughputFactor(opt_.sharing, k, static_cast<double>(summed) / std::max(1, u.capacity));
  const double scale = summed > useful ? useful / summed : 1.0;
  for (JobSlot m : u.members) {
    SimJob& j = jobs_[m.value()];
    if (j.units.size() != 1 || j.used_milli <= 0) continue;  // multi-GPU replicas never share
    const double used = j.base_used_milli * scale;
    AddContrib(j, 0, used - j.used_milli, 0, +1);
    j.used_milli = used;
  }
}

// A started inference replica joins the units of its grants (a MIG instance, shared or not; a whole or
// shared non-MIG GPU). Each unit's figures so far are closed first.
void SimRun::JoinUnits(JobSlot idx) {
  SimJob& j = jobs_[idx.value()];
  if (j.spec->cls == WorkloadClass::kTraining) return;
  for (const TaskPlacement& t : job(idx).tasks)
    for (const GpuGrant& g : t.gpus) {
      const std::pair<GpuId, int> key{g.gpu, g.mig_profile >= 0 ? g.mig_start : -1};
      const GpuKind& kind = state().kind_of_gpu(g.gpu);
      Unit& u = units_[key];
      CloseUnit(u, now_);
      u.capacity = g.mig_profile >= 0 ? kind.ProfileComputeMilli(g.mig_profile) : kMilliPerGpu;
      u.memory_mib = g.mig_profile >= 0 ? kind.profiles[g.mig_profile].usable_mib : kind.memory_mib;
      if (u.harvester != kNoSlot) {  // a second replica: the harvester is evicted
        // A newcomer that does not fit beside the harvester's memory waits its grace period.
        const int64_t harvester_mib = jobs_[u.harvester.value()].spec->memory_mib;
        if (u.members_mib + harvester_mib + j.spec->memory_mib > u.memory_mib) {
          slo_acc_[j.spec->latency_sensitive ? "production-inference" : WorkloadClassName(j.spec->cls)].Add(
              kSaturated, InWindow(now_, now_ + opt_.harvest.grace_s), true);
          j.violated = true;
        }
        EndHarvest(u.harvester, true, now_);
      }
      u.members_mib += j.spec->memory_mib;
      u.members.push_back(idx);
      u.caps.push_back(std::min(g.milli, u.capacity));
      j.units.push_back(key);
    }
}

void SimRun::LeaveUnits(JobSlot idx) {
  SimJob& j = jobs_[idx.value()];
  for (const auto& key : j.units) {
    auto it = units_.find(key);
    if (it == units_.end()) continue;
    Unit& u = it->second;
    CloseUnit(u, now_);
    for (size_t i = 0; i < u.members.size(); ++i)
      if (u.members[i] == idx) {
        u.members.erase(u.members.begin() + static_cast<std::ptrdiff_t>(i));
        u.caps.erase(u.caps.begin() + static_cast<std::ptrdiff_t>(i));
        u.members_mib -= j.spec->memory_mib;
        break;
      }
    if (u.members.empty() && u.harvester != kNoSlot) EndHarvest(u.harvester, true, now_);  // the owner left
    if (u.members.empty()) units_.erase(it);
    else RescaleUsed(u);
  }
  j.units.clear();
}

// A bound or running job stopped before its end (preemption, failure): its queue's records count it as
// waiting again.
void SimRun::OnLeftHold(JobSlot j, const std::vector<TaskPlacement>& tasks) {
  if (!Tenancy()) return;
  queue_alloc_[job(j).queue] -= UnitsOf(state(), tasks, opt_.tenancy->cycle.slice_units);
  queue_waiting_[job(j).queue] += res_.job_records[j.value()].gpu_milli;
}

void SimRun::OnStarted(JobSlot idx, int64_t now, double efficiency, bool) {
  SimJob& j = jobs_[idx.value()];
  JoinUnits(idx);
  double used = 0;
  int gpus = 0;
  for (const TaskPlacement& t : job(idx).tasks)
    for (const GpuGrant& g : t.gpus) {
      // A share of a non-MIG GPU without a per-client limit may use more than its grant (time-slicing);
      // its unit's useful capacity bounds the sum (RescaleUsed).
      const bool uncapped = g.mig_profile < 0 && g.milli < kMilliPerGpu && !opt_.sharing.per_client_cap;
      used += uncapped ? j.spec->compute_milli : std::min<double>(j.spec->compute_milli, g.milli);
      ++gpus;
    }
  used *= efficiency;
  const double effg = j.spec->cls == WorkloadClass::kTraining ? gpus * efficiency : 0;
  AddContrib(j, 0, used, effg, +1);
  j.used_milli = j.base_used_milli = used;
  j.eff_gpus = effg;
  for (const auto& key : j.units) RescaleUsed(units_[key]);
}

void SimRun::MarkArrival(JobSlot idx, int64_t now) {
  SimJob& j = jobs_[idx.value()];
  loop().Submit(idx, now);
  cancels_.Arrived(idx.value(), *j.spec, now);
  j.in_window = now >= w0_ && now < w1_;
  if (Tenancy()) {
    const Request& req = job(idx).request;
    SimJobRecord& r = res_.job_records[idx.value()];
    r.team = j.spec->team;
    r.priority = req.priority;
    r.submit_s = now;
    r.gpu_milli = req.SubGpu() ? req.gpu_milli : int64_t{kMilliPerGpu} * req.TotalGpus();
    const int q = job(idx).queue;
    // Within the guarantee counting what the queue holds and what waits ahead of it.
    r.within_guarantee = queue_alloc_[q] + queue_waiting_[q] + r.gpu_milli <= loop().queues()[q].guaranteed_milli &&
                         AncestorsWithin(q, r.gpu_milli);
    queue_waiting_[q] += r.gpu_milli;
    r.in_window = j.in_window;
  }
  if (j.in_window) {
    ClassStats& c = res_.by_class[WorkloadClassName(j.spec->cls)];
    ClassStats& t = res_.by_team[j.spec->team];
    for (ClassStats* s : {&c, &t}) {
      ++s->jobs_arrived;
      s->gpu_requests_arrived += j.spec->GpuRequests();
    }
  }
}

void SimRun::OnBound(const Applied& a, int64_t now) {
  const JobSlot idx = a.job;
  SimJob& j = jobs_[idx.value()];
  const ControlJob& cj = job(idx);
  const int64_t granted = a.granted_s;
  if (harvesters_.count(idx)) {  // bound for real: it stops harvesting
    SettleHarvester(idx, now);
    EndHarvest(idx, true, now);
  }
  EvictTakenFree(&cj.tasks, idx, now);
  if (Tenancy()) {
    if (res_.job_records[idx.value()].first_bind_s < 0) res_.job_records[idx.value()].first_bind_s = granted;
    queue_waiting_[cj.queue] -= res_.job_records[idx.value()].gpu_milli;
    queue_alloc_[cj.queue] += UnitsOf(state(), cj.tasks, opt_.tenancy->cycle.slice_units);
  }
  if (a.first_bind) {
    ClassStats& c = res_.by_class[WorkloadClassName(j.spec->cls)];
    ClassStats& t = res_.by_team[j.spec->team];
    for (ClassStats* s : {&c, &t}) {
      // Served mix: work first started inside the window (whenever it arrived), harvesting included.
      if (now >= w0_ && now < w1_ && !j.served) {
        ++s->jobs_started;
        s->gpu_requests_served += j.spec->GpuRequests();
      }
      if (j.in_window) s->queue_delays_s.push_back(static_cast<double>(granted - cj.submit_s));
    }
    j.served = true;
  }
  BackfillFigures(j, a, now);
  res_.mig_repartitions += a.mig_mode_gpus + a.mig_instance_gpus;
  j.alloc_milli = static_cast<double>(cj.held_milli);
  AddContrib(j, j.alloc_milli, 0, 0, +1);
}

void SimRun::BackfillFigures(SimJob& j, const Applied& a, int64_t now) {
  const bool in_window = now >= w0_ && now < w1_;
  if (a.backfill_until_s >= 0) {
    j.backfill_until_s = a.backfill_until_s;
    res_.backfills += in_window;
  }
  if (a.first_bind && j.first_reserved_start_s >= 0 && in_window) {
    const int64_t late = a.granted_s - j.first_reserved_start_s;
    ++res_.reserved_gangs_started;
    res_.reserved_gangs_late += late > 0;
    res_.reserved_gang_lateness_s.push_back(static_cast<double>(std::max<int64_t>(0, late)));
  }
}

int64_t SimRun::ExtraStartDelay(JobSlot j, int64_t now) {
  int64_t delay = hook_ ? hook_->OnBind(j, job(j).tasks, now) : 0;  // issue 5: restart cost
  if (grace_on_start_.erase(j)) delay += opt_.harvest.grace_s;
  if (restore_on_start_.erase(j)) {  // it resumes from a checkpoint it wrote while harvesting
    delay += opt_.harvest.restore_s;
    harvest_lost_ += kMilliPerGpu * InWindow(now, now + opt_.harvest.restore_s);
  }
  return delay;
}

void SimRun::OnPreempted(const Applied& a, int64_t now) {
  OnLeftHold(a.job, a.tasks);
  if (Tenancy() && a.lost_since_s >= 0)
    res_.lost_gpu_s += static_cast<double>(now - a.lost_since_s) * UnitsOf(state(), a.tasks, SliceUnits::kCompute) / 1000.0;
  ++res_.preemptions;
  if (a.released) return;  // the release reports the rest
  // It holds its GPUs, doing no work, until it vacates after the grace period.
  SimJob& j = jobs_[a.job.value()];
  AddContrib(j, 0, j.used_milli, j.eff_gpus, -1);
  j.used_milli = j.eff_gpus = 0;
}

void SimRun::OnApplied(const Applied& a, int64_t now) {
  if (a.kind == ActionKind::kRepartition) {  // per GPU (an unknown job: one conflict)
    EvictTakenFree(nullptr, kNoSlot, now);
    res_.mig_repartitions += a.gpus_reconfigured;
    res_.apply_conflicts += a.gpus_failed > 0 ? a.gpus_failed : (a.conflict ? 1 : 0);
    return;
  }
  if (a.conflict) {
    ++res_.apply_conflicts;
    return;
  }
  switch (a.kind) {
    case ActionKind::kBind: OnBound(a, now); break;
    case ActionKind::kPreempt: OnPreempted(a, now); break;
    case ActionKind::kCheckpoint: res_.checkpoints += a.done ? 1 : 0; break;
    case ActionKind::kReserve: {
      ++res_.reservations;
      SimJob& j = jobs_[a.job.value()];
      if (j.first_reserved_start_s < 0) j.first_reserved_start_s = a.reserve_start_s;
      break;
    }
    case ActionKind::kRepartition: break;
  }
}

void SimRun::OnReleased(const Released& r, int64_t now, ReleaseCause cause, int64_t lost_since_s) {
  switch (cause) {
    case ReleaseCause::kCompleted: OnCompleted(r, now); return;
    case ReleaseCause::kLaunchRefused:
      ++res_.oom_events;
      ++res_.jobs_failed;
      KilledReplicaTime(r.job, now);
      break;
    case ReleaseCause::kInterrupted: {  // an injected GPU failure: back to the queue
      ++res_.job_failures;
      int gpus = 0;
      for (const TaskPlacement& t : r.tasks) gpus += static_cast<int>(t.gpus.size());
      OnLeftHold(r.job, r.tasks);
      res_.failure_lost_gpu_s += static_cast<double>(now - lost_since_s) * gpus;
      break;
    }
    default: break;
  }
  ReleaseMetrics(r, now, false);
}

int SimRun::Cycle(int64_t now) {
  ++res_.cycles;
  Plan plan = loop().Decide(now, policy_);
  if (Tenancy())
    for (size_t q = 0; q < plan.queues.size() && q < subtree_alloc_.size(); ++q)
      subtree_alloc_[q] = plan.queues[q].allocated_milli;
  return driver_->ApplyPlan(plan, now);
}

// Backlog arrivals: jobs become visible in trace order whenever fewer than backlog_depth wait. A harvester
// runs (on harvested compute) and does not count as waiting, though it stays in the queue for a regular
// start.
int SimRun::ReleaseBacklog(int64_t now) {
  int n = 0;
  while (backlog_ &&
         loop().jobs().pending().size() - harvesters_.size() <
             static_cast<size_t>(std::max(1, opt_.backlog_depth)) &&
         next_arrival_ < order_.size()) {
    MarkArrival(SlotOfTraceJob(order_[next_arrival_++]), now);
    ++n;
  }
  if (backlog_ && next_arrival_ >= order_.size() && res_.backlog_dry_s < 0) res_.backlog_dry_s = now;
  return n;
}

bool SimRun::Arrive(int64_t now) {
  bool any = false;
  while (!backlog_ && next_arrival_ < order_.size() && trace_[order_[next_arrival_]].submit_s == now) {
    MarkArrival(SlotOfTraceJob(order_[next_arrival_++]), now);
    any = true;
  }
  return CancelDue(now) || any;
}

// The trace's cancellations due at `now` (after the instant's arrivals, as the service's replay makes them).
bool SimRun::CancelDue(int64_t now) {
  bool any = false;
  for (int32_t i : cancels_.TakeDue(now)) {
    const JobPhase phase = job(SlotOfTraceJob(i)).phase;
    if (phase == JobPhase::kFuture || phase == JobPhase::kDone || phase == JobPhase::kFailed) continue;
    CancelJob(SlotOfTraceJob(i), now);
    any = true;
  }
  return any;
}

// A cancel: a waiting job leaves the queue (a harvester stops harvesting), a holding one is stopped and its
// usage ends now (Driver::Cancel reports the release).
void SimRun::CancelJob(JobSlot idx, int64_t now) {
  const ControlJob& cj = job(idx);
  if (harvesters_.count(idx)) {
    SettleHarvester(idx, now);
    EndHarvest(idx, false, now);
  }
  if (Tenancy()) {
    const int64_t waiting = res_.job_records[idx.value()].gpu_milli;
    if (cj.phase == JobPhase::kBound || cj.phase == JobPhase::kRunning)
      queue_alloc_[cj.queue] -= UnitsOf(state(), cj.tasks, opt_.tenancy->cycle.slice_units);
    else  // pending, or terminating after a preemption (its hold was counted as waiting again)
      queue_waiting_[cj.queue] -= waiting;
  }
  ++res_.jobs_cancelled;
  driver_->Cancel(idx, now, "cancelled (the trace's cancel_s)");
}

// Issue 5: node arrivals, spot notices and reclaims, applied like cycle actions.
bool SimRun::External(int64_t now) {
  if (!hook_) return false;
  bool changed = false;
  for (int k = 0; k < 8; ++k) {
    Plan hp;
    hook_->OnTime(now, state(), &hp, &changed);
    if (hp.actions.empty()) break;
    driver_->ApplyPlan(hp, now);
    changed = true;
  }
  return changed;
}

void SimRun::OnCompleted(const Released& r, int64_t now) {
  const JobSlot idx = r.job;
  SimJob& j = jobs_[idx.value()];
  if (Tenancy()) queue_alloc_[job(idx).queue] -= UnitsOf(state(), r.tasks, opt_.tenancy->cycle.slice_units);
  ReleaseMetrics(r, now, true);
  ++res_.jobs_completed;
  res_.makespan_s = static_cast<double>(now);
  if (j.in_window) {
    const double jct = static_cast<double>(now - job(idx).submit_s);
    res_.by_class[WorkloadClassName(j.spec->cls)].jct_s.push_back(jct);
    res_.by_team[j.spec->team].jct_s.push_back(jct);
  }
}

// Multi-tenant records: guarantee waits end once the queue's own work covers its guarantee.
void SimRun::UpdateGuaranteeWaits(int64_t now) {
  for (JobSlot p : loop().jobs().pending()) {
    SimJobRecord& r = res_.job_records[p.value()];
    const int q = job(p).queue;
    if (r.within_guarantee && r.first_bind_s < 0 && r.guarantee_met_s < 0 &&
        (queue_alloc_[q] + r.gpu_milli > loop().queues()[q].guaranteed_milli || !AncestorsWithin(q, r.gpu_milli)))
      r.guarantee_met_s = now;
  }
}

void SimRun::Run() {
  ReleaseBacklog(0);
  bool first = true;
  const std::vector<JobSlot>& pending = loop().jobs().pending();
  while (true) {
    int64_t own = INT64_MAX;
    if (!backlog_ && next_arrival_ < order_.size()) own = trace_[order_[next_arrival_]].submit_s;
    own = std::min(own, cancels_.NextS([&](int32_t i) {
      const JobPhase phase = job(SlotOfTraceJob(i)).phase;
      return phase == JobPhase::kDone || phase == JobPhase::kFailed;
    }));
    if (hook_) own = std::min(own, hook_->NextTimeS());  // issue 5
    if (first) own = std::min<int64_t>(own, 0), first = false;
    bool tick = false;  // multi-tenant runs: a periodic cycle while jobs wait (guards expire, reclaim)
    int64_t t_next = driver_->NextInstant(now_, own, opt_.horizon_s, &tick);
    if (HarvestTickDue(t_next) && next_harvest_s_ < t_next) t_next = next_harvest_s_, tick = false;
    if (t_next == INT64_MAX) break;
    if (opt_.horizon_s > 0 && t_next > opt_.horizon_s) break;
    Advance(t_next);
    const int64_t now = now_ = t_next;
    const bool harvest_tick = Harvesting() && now >= next_harvest_s_;  // also at an instant past the tick
    if (harvest_tick) SettleHarvests(now);  // checkpoints and completions before the cycle
    const bool changed = driver_->RunInstant(now, tick, *this);
    if (harvest_tick) StartHarvests(now);  // new harvesters on what the cycle left waiting
    if (now >= next_harvest_s_) {          // the next tick: the next demand epoch's start
      const int64_t ep = std::max<int64_t>(1, opt_.demand_epoch_s);
      next_harvest_s_ = (now / ep + 1) * ep;
    }
    if (Tenancy() && changed) UpdateGuaranteeWaits(now);
    if (hook_) hook_->AfterCycles(now, state(), pending);  // issue 5: autoscaling
  }
}

// Per SLO class (production-inference for latency-sensitive replicas, else the workload class; training
// never shares): replicas with any time above their SLO, and the p99 slowdown over replica-time.
void SimRun::SloFigures(int64_t end) {
  for (auto& [key, u] : units_) CloseUnit(u, end);
  for (const SimJob& j : jobs_)
    if (j.violated)
      ++res_.slo_violations[j.spec->latency_sensitive ? "production-inference" : WorkloadClassName(j.spec->cls)];
  for (const auto& [name, acc] : slo_acc_) {
    res_.slo_replica_s[name] = acc.replica_s;
    res_.slo_violation_s[name] = acc.violation_s;
    res_.slo_violations.emplace(name, 0);
    double total = 0, seen = 0;
    for (double h : acc.hist) total += h;
    for (int b = 0; b <= kSlowBuckets; ++b) {
      seen += acc.hist[b];
      if (seen >= 0.99 * total) {
        res_.p99_slowdown[name] = b == kSlowBuckets ? kSaturated : std::pow(1.02, b);
        break;
      }
    }
  }
}

RunResult SimRun::Finish() {
  const int64_t end = opt_.horizon_s > 0 ? opt_.horizon_s : now_;
  Advance(end);
  if (hook_) hook_->End(end, &res_);  // issue 5
  const double window = static_cast<double>(std::max<int64_t>(1, std::min(end, w1_) - w0_));
  const double denom = capacity_milli_ * window;
  for (JobSlot s : loop().jobs().holding()) BackfillEnded(jobs_[s.value()], job(s).tasks, end);
  for (auto& [slot, h] : harvesters_) {  // work in progress at the end counts, as a running job's does
    SettleHarvester(slot, end);
    harvest_useful_ += h.useful_milli_s;
  }
  res_.gpu_allocation = total_alloc_ / denom;
  res_.gpu_utilization = (total_used_ + harvest_useful_) / denom;
  res_.harvested_utilization = harvest_useful_ / denom;
  res_.lost_compute = harvest_lost_ / denom;
  res_.effective_training_throughput = eff_integral_ / window;
  res_.training_gpus_allocated = train_alloc_integral_ / 1000.0 / window;
  for (int c = 0; c < kClasses; ++c) {
    const std::string name = WorkloadClassName(static_cast<WorkloadClass>(c));
    if (!res_.by_class.count(name) && cls_acc_[c].alloc == 0) continue;
    res_.by_class[name].allocation = cls_acc_[c].alloc / denom;
    res_.by_class[name].utilization =
        (cls_acc_[c].used + (c == static_cast<int>(WorkloadClass::kTraining) ? harvest_useful_ : 0)) / denom;
  }
  for (size_t k = 0; k < team_names_.size(); ++k) {
    res_.by_team[team_names_[k]].allocation = team_acc_[k].alloc / denom;
    res_.by_team[team_names_[k]].utilization = team_acc_[k].used / denom;
  }
  SloFigures(end);
  for (const Decision& d : driver_->decisions())
    res_.decisions.push_back(DecisionLine(
        d, state(), [&](JobSlot j) { return std::to_string(trace_[j.value()].id); },
        [&](int64_t n) { return cluster_.nodes[n].name; }));
  const JobTable& jobs = loop().jobs();
  res_.unplaced_jobs = static_cast<int64_t>(jobs.pending().size());
  for (JobSlot p : jobs.pending()) res_.unplaced_gpu_requests += jobs_[p.value()].spec->GpuRequests();
  res_.all_completed = jobs.pending().empty() && jobs.holding().empty() && next_arrival_ == order_.size();
  for (int32_t i = 0; res_.all_completed && i < jobs.size(); ++i) {
    const JobPhase phase = jobs[JobSlot(i)].phase;
    if (phase == JobPhase::kRunning || phase == JobPhase::kBound) res_.all_completed = false;
  }
  return std::move(res_);
}

}  // namespace

int64_t SimTimeLimit(const TraceJob& job, size_t index, const SimOptions& o) {
  if (job.duration_s <= 0) return 0;
  double f = o.time_limit_factor_min;
  if (o.time_limit_factor_max > o.time_limit_factor_min)
    f += HashUniform(static_cast<uint64_t>(index), 0, o.time_limit_seed) *
         (o.time_limit_factor_max - o.time_limit_factor_min);
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(static_cast<double>(job.duration_s) * f - 1e-9)));
}

Result<RunResult> Simulate(const Cluster& cluster, const Catalog& catalog, const std::vector<TraceJob>& trace,
                           const Policy& policy, const SimOptions& opt) {
  const auto wall0 = std::chrono::steady_clock::now();
  SimRun run(cluster, catalog, trace, policy, opt);
  if (Status st = run.Init(); !st.ok()) return st;
  run.Run();
  RunResult res = run.Finish();
  res.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall0).count();
  return res;
}

}  // namespace tessera
