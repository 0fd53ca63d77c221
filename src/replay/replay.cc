#include "replay/replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <nlohmann/json.hpp>
#include <set>

#include "service/workload_json.h"

namespace tessera {
namespace {

std::string PriorityClassName(int value) { return fmt::format("priority-{}", value); }

// The scenario's priority values as classes: the tenancy's where one has the value, else a preemptible
// class named after it (the simulator treats a value without a class as preemptible).
void AddPriorityClasses(const std::vector<TraceJob>& jobs, TenancyConfig* t) {
  std::set<int> values;
  for (const TraceJob& j : jobs) values.insert(j.priority);
  for (int v : values) {
    const bool known = std::any_of(t->priority_classes.begin(), t->priority_classes.end(),
                                   [&](const PriorityClass& p) { return p.value == v; });
    if (!known) t->priority_classes.push_back({PriorityClassName(v), v, true, true, false});
  }
}

}  // namespace

Result<std::unique_ptr<Replay>> Replay::Prepare(const std::string& scenario_path, uint64_t seed,
                                                const Catalog& catalog) {
  auto s = LoadScenario(scenario_path, catalog);
  if (!s.ok()) return s.status();
  return Prepare(std::move(s).value(), scenario_path, seed, catalog);
}

Result<std::unique_ptr<Replay>> Replay::Prepare(Scenario scenario, const std::string& scenario_path, uint64_t seed,
                                                const Catalog& catalog) {
  std::unique_ptr<Replay> r(new Replay());
  r->scenario_ = std::move(scenario);
  const Scenario& sc = r->scenario_;
  if (sc.tiers)
    return Status::Error(scenario_path + ": --replay: capacity tiers (spot, autoscaling) are not modelled by the "
                                         "service yet; replay a scenario without 'tiers'");
  if (HarvestsFor(sc, "tessera"))
    return Status::Error(scenario_path +
                         ": --replay: the opportunistic tier (harvest: {enabled: true}) is not "
                         "modelled by the service yet; replay a scenario without it");
  if (sc.seeds.empty()) return Status::Error(scenario_path + ": --replay: the scenario has no seeds");
  r->seed_ = seed != 0 ? seed : sc.seeds.front();
  r->jobs_ = JobsFor(sc, sc.variants.front(), r->seed_);
  if (Status st = r->Setup(catalog); !st.ok()) return st;
  return r;
}

// Queues, classes, policy, loop setup and the simulated cluster, as the simulator's run of the seed has them.
Status Replay::Setup(const Catalog& catalog) {
  const Scenario& sc = scenario_;
  backlog_ = sc.sim.arrivals == "backlog";
  if (sc.IsMultiTenant()) {
    tenancy_ = *sc.tenancy;
    tenancy_cycle_ = true;
    setup_.tenancy_cycle_every_s = sc.cycle_every_s;
  } else {
    for (const TraceJob& j : jobs_) {
      if (tenancy_.FindQueue(j.team) >= 0) continue;
      QueueConfig q;
      q.name = q.team = j.team;
      auto w = sc.sim.queue_weights.find(j.team);
      if (w != sc.sim.queue_weights.end()) q.over_quota_weight = w->second;
      tenancy_.queues.push_back(q);
    }
    const CycleSpec cycle = CycleFor(sc, "tessera");
    setup_.gang_backfill = cycle.gang_backfill;
    setup_.gang_reservations = sc.sim.gang_reservations;
    setup_.backfill_into_reservations = sc.sim.backfill_into_reservations;
    setup_.gang_aging_s = sc.sim.gang_aging_s;
  }
  AddPriorityClasses(jobs_, &tenancy_);
  setup_.mig_instance_delay_s = sc.sim.mig_instance_delay_s;
  setup_.mig_mode_delay_s = sc.sim.mig_mode_delay_s;
  setup_.max_cycles_per_instant = sc.sim.max_cycles_per_instant;
  setup_.demand_learning = sc.sim.demand_learning;
  setup_.workload_learning = sc.sim.workload_learning;
  auto policy = MakeScenarioPolicy(sc, "tessera");
  if (!policy.ok()) return policy.status();
  policy_ = std::shared_ptr<const Policy>(std::move(policy).value());
  PhysicsOptions physics;
  physics.fabric = sc.sim.fabric;
  if (sc.sim.fabric_oversubscription_from_cluster) physics.fabric.leaf_oversubscription = sc.cluster.spine_oversubscription;
  physics.gpu_mtbf_h = sc.sim.gpu_mtbf_h;
  physics.failure_seed = seed_;
  physics.demand_sigma = sc.sim.demand_sigma;  // measured demand: the loop learns admission headroom as the simulator's
  physics.demand_epoch_s = sc.sim.demand_epoch_s;
  physics.demand_seed = seed_;
  auto backend = SimulatedCluster::Make(
      sc.cluster, catalog,
      [this](JobSlot s) {
        const int32_t i = s.value();
        return i >= 0 && i < static_cast<int32_t>(by_slot_.size()) ? by_slot_[i] : nullptr;
      },
      physics);
  if (!backend.ok()) return backend.status();
  backend_ = std::move(backend).value();
  order_.resize(jobs_.size());
  ids_.assign(jobs_.size(), -1);
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int32_t>(i);
  if (!backlog_)
    std::stable_sort(order_.begin(), order_.end(),
                     [&](int32_t a, int32_t b) { return jobs_[a].submit_s < jobs_[b].submit_s; });
  return Status::Ok();
}

ServiceConfig Replay::Config() const {
  ServiceConfig c;
  c.cluster = scenario_.cluster;
  c.tenancy = tenancy_;
  c.tenancy_cycle = tenancy_cycle_;
  c.setup = setup_;
  c.policy = policy_;
  c.background_cycles = false;
  c.decide_nice = 0;
  c.record_decisions = true;
  return c;
}

// The job as POST /api/v1/jobs takes it; a trace team "team/queue" is the team and its project.
Status Replay::Submit(const TraceJob& j, int64_t now) {
  nlohmann::json b;
  b["name"] = std::to_string(j.id);
  b["class"] = WorkloadClassName(j.cls);
  const size_t slash = j.team.find('/');
  b["team"] = j.team.substr(0, slash);
  if (slash != std::string::npos) b["project"] = j.team.substr(slash + 1);
  for (const PriorityClass& p : tenancy_.priority_classes)
    if (p.value == j.priority) {
      b["priority_class"] = p.name;
      break;
    }
  if (j.cls == WorkloadClass::kTraining) b["workers"] = j.tasks;
  else if (j.tasks != 1)
    return Status::Error(fmt::format("replay: job {}: a {} job of {} tasks has no API form (replicas are "
                                     "independent)", j.id, WorkloadClassName(j.cls), j.tasks));
  b["gpus_per_worker"] = j.gpus_per_task;
  if (j.gpus_per_task == 0) b["gpu_milli"] = std::clamp(j.compute_milli, 1, 1000);
  b["memory_mib"] = j.memory_mib;
  b["cpu"] = static_cast<double>(j.cpu_milli) / 1000.0;
  b["host_memory_gib"] = static_cast<double>(j.host_memory_mib) / 1024.0;
  if (!j.gpu_kinds.empty()) b["gpu_kinds"] = j.gpu_kinds;
  if (j.duration_s > 0) b["duration_s"] = j.duration_s;
  SimOptions limits = scenario_.sim;  // the user's time limit, as the simulator draws it for this seed
  limits.time_limit_seed = seed_;
  const int64_t limit = SimTimeLimit(j, static_cast<size_t>(&j - jobs_.data()), limits);
  if (limit > 0 && limit != j.duration_s) b["time_limit_s"] = limit;
  b["latency_sensitive"] = j.latency_sensitive;
  b["checkpointable"] = j.checkpointable;
  auto spec = ParseJobSpec(b);
  if (!spec.ok()) return Status::Error(fmt::format("replay: job {}: {}", j.id, spec.error().message));
  auto v = service_->Submit(Caller{"admin", "", Role::kAdmin}, spec.value(), "replay-" + std::to_string(j.id));
  if (!v.ok()) return Status::Error(fmt::format("replay: job {}: {}", j.id, v.error().message));
  for (JobSlot s : service_->LoopSlotsOf(v->job->id)) {
    if (s.value() >= static_cast<int32_t>(by_slot_.size())) by_slot_.resize(s.value() + 1, nullptr);
    by_slot_[s.value()] = &j;
  }
  const int32_t index = static_cast<int32_t>(&j - jobs_.data());
  ids_[index] = v->job->id;
  cancels_.Arrived(index, j, now);
  return Status::Ok();
}

bool Replay::Over(int32_t index) const {
  JobPtr job = ids_[index] < 0 ? nullptr : service_->JobOfSlot(service_->LoopSlotsOf(ids_[index]).front());
  return job != nullptr && Terminal(job->state);
}

bool Replay::CancelDue(int64_t now) {
  bool any = false;
  for (int32_t i : cancels_.TakeDue(now)) {
    if (!error_.ok() || ids_[i] < 0 || Over(i)) continue;
    auto v = service_->Cancel(Caller{"admin", "", Role::kAdmin}, ids_[i]);
    if (!v.ok())
      error_ = Status::Error(fmt::format("replay: job {}: cancel: {}", jobs_[i].id, v.error().message));
    any = true;
  }
  return any;
}

bool Replay::Arrive(int64_t now) {
  bool any = false;
  while (error_.ok() && !backlog_ && next_ < order_.size() && jobs_[order_[next_]].submit_s == now) {
    error_ = Submit(jobs_[order_[next_++]], now);
    any = true;
  }
  return CancelDue(now) || any;
}

int Replay::ReleaseBacklog(int64_t now) {
  int n = 0;
  const size_t depth = static_cast<size_t>(std::max(1, scenario_.sim.backlog_depth));
  while (error_.ok() && backlog_ && next_ < order_.size() && service_->WaitingJobs() < depth) {
    error_ = Submit(jobs_[order_[next_++]], now);
    ++n;
  }
  return n;
}

Status Replay::Run(Service& service, const std::function<void(const std::string&)>& line) {
  service_ = &service;
  if (service.LoopSlotsOf(1).size() > 0) return Status::Error("replay: the database already holds jobs; use an empty one");
  const int64_t horizon = scenario_.sim.horizon_s;
  ReleaseBacklog(0);
  bool first = true;
  int64_t now = 0;
  while (error_.ok()) {
    int64_t own = !backlog_ && next_ < order_.size() ? jobs_[order_[next_]].submit_s : INT64_MAX;
    own = std::min(own, cancels_.NextS([&](int32_t i) { return Over(i); }));
    if (first) own = std::min<int64_t>(own, 0), first = false;
    bool tick = false;
    const int64_t t = service.NextInstant(now, own, horizon, &tick);
    if (t == INT64_MAX || (horizon > 0 && t > horizon)) break;
    clock_.Set(static_cast<double>(t));
    now = t;
    service.RunInstant(now, tick, *this);
    for (const std::string& l : service.TakeDecisionLines()) line(l);
  }
  for (const std::string& l : service.TakeDecisionLines()) line(l);
  return error_;
}

}  // namespace tessera
