// The driver room's lifecycle, restore from the store and job version writes (the cycle: cycle.cc; its
// rooms: node_room.h, job_room.h).
#include "service/service_driver.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/mig.h"

namespace tessera {
namespace {

JobRow ToRow(const JobRecord& j) {
  return JobRow{j.id,
                j.user,
                j.team,
                j.project,
                j.name,
                WorkloadClassName(j.cls),
                j.priority_class,
                j.spec_json,
                JobStateName(j.state),
                j.submitted_at,
                j.started_at,
                j.finished_at,
                j.placements,
                j.message};
}

}  // namespace

ServiceDriver::ServiceDriver(ServiceConfig* config, Store* store, Clock* clock, Backend* backend,
                             JobBook* book, Identity* identity, Chargeback* chargeback)
    : config_(config),
      store_(store),
      clock_(clock),
      backend_(backend),
      book_(book),
      identity_(identity),
      chargeback_(chargeback),
      nodes_(std::make_unique<NodeRoom>(this)),
      jobs_(std::make_unique<JobRoom>(this)),
      cycles_(std::make_unique<CycleRoom>(this)) {}

ServiceDriver::~ServiceDriver() { Stop(); }

Status ServiceDriver::Start(const StoredState& loaded) {
  auto cs = ClusterState::Build(config_->cluster, *config_->catalog);
  if (!cs.ok()) return Status::Error("cluster: " + cs.error());
  ServiceConfig& c = *config_;
  if (c.tenancy_cycle) c.setup.tenancy_cycle = &c.tenancy.options;  // expected ends, usage, grace
  if (!c.policy) {
    auto p = MakePolicy("tessera");
    if (!p.ok()) return p.status();
    c.policy = std::shared_ptr<const Policy>(std::move(p).value());
  }
  policy_ = c.policy;
  loop_ = std::make_unique<ControlLoop>(std::move(cs).value(), c.tenancy.queues, MakeLoopOptions(c.setup));
  listener_ = std::make_unique<Listener>(this);
  outbox_ = std::make_unique<OutboxBackend>(backend_);
  driver_ = std::make_unique<Driver>(loop_.get(), outbox_.get(), MakeDriverOptions(c.setup), listener_.get());
  driver_->set_recording(c.record_decisions);
  backend_->OnEvents([this] { Notify(); });
  if (Status st = Restore(loaded); !st.ok()) return st;
  if (Status st = nodes_->Restore(loaded); !st.ok()) return st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    PublishLocked(nullptr, Now());
  }
  if (c.background_cycles && !c.view_only) cycles_->StartThread();
  return Status::Ok();
}

void ServiceDriver::Stop() {
  if (std::exchange(stopped_, true)) return;
  cycles_->Stop();
  if (!loop_ || config_->view_only) return;  // not started, or nothing to keep
  backend_->OnEvents(nullptr);  // a backend that outlives the service wakes nothing
  // Keep the service clock's position and the queues' usage, so that a restart continues from them.
  WriteBatch b;
  b.meta["clock_s"] = std::to_string(Now());
  {
    std::lock_guard<std::mutex> lock(mu_);
    loop_->AdvanceUsage(Now());
    b.meta["queue_usage"] = UsageMetaLocked();
  }
  (void)store_->WriteAndWait(std::move(b));
}

void ServiceDriver::TeamChanged(const TeamRow& row) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    EnsureQueue(row.name, &row);
  }
  Notify();  // the next cycle sees the new quota
}

int ServiceDriver::EnsureQueue(const std::string& team, const TeamRow* row) {
  TenancyConfig& t = config_->tenancy;
  int q = t.FindQueue(team);
  if (q < 0) {
    QueueConfig qc;
    qc.name = team;
    qc.team = team;
    if (row) {
      qc.guaranteed_milli = row->guaranteed_milli;
      qc.limit_milli = row->limit_milli;
      qc.over_quota_weight = row->over_quota_weight;
    }
    t.queues.push_back(qc);
    q = loop_->AddQueue(qc);
  } else if (row) {  // a stored or changed quota wins over the tenancy file's
    t.queues[q].guaranteed_milli = row->guaranteed_milli;
    t.queues[q].limit_milli = row->limit_milli;
    t.queues[q].over_quota_weight = row->over_quota_weight;
    loop_->UpdateQueue(q, t.queues[q]);
  }
  return q;
}

// Restores teams and users, MIG layouts, the queues' decayed usage, then the loop's table from the stored
// jobs: pending ones in the queue in id order, running ones on the grants (and MIG instances) they held,
// which the backend adopts.
// Stored MIG layouts ("profile@start,..." per GPU; "" = MIG off); a row that no longer parses is skipped.
void ServiceDriver::RestoreLayoutsLocked(const StoredState& s) {
  ClusterState& state = loop_->state();
  const Cluster& cl = config_->cluster;
  std::map<std::string, NodeId> node_by_name;
  for (NodeId n = 0; n < static_cast<NodeId>(cl.nodes.size()); ++n) node_by_name[cl.nodes[n].name] = n;
  for (const MigLayoutRow& l : s.layouts) {
    auto it = node_by_name.find(l.node);
    if (it == node_by_name.end() || l.gpu_index >= state.node(it->second).gpu_count) continue;
    const GpuId g = state.node(it->second).first_gpu + l.gpu_index;
    std::vector<MigInstance> layout;
    bool ok = true;
    for (size_t pos = 0; ok && pos < l.layout.size();) {
      size_t end = l.layout.find(',', pos);
      if (end == std::string::npos) end = l.layout.size();
      auto inst = ParseMigInstance(state.kind_of_gpu(g), l.layout.substr(pos, end - pos));
      ok = inst.ok();
      if (ok) layout.push_back(*inst);
      pos = end + 1;
    }
    if (!ok) continue;
    if (layout.empty()) {
      (void)state.SetMigMode(g, false);
    } else if (state.SetMigMode(g, true).ok()) {
      (void)state.Relayout(g, layout);
    }
  }
}

// The clock (never before the stored time), the ledger's start (written on the first start) and usage.
Status ServiceDriver::RestoreMetaLocked(const StoredState& s) {
  int64_t ledger_start = 0;
  for (const auto& kv : s.meta) {
    if (kv.first == "ledger_start") ledger_start = std::stoll(kv.second);
    if (kv.first == "clock_s") {
      clock_->NotBefore(std::stod(kv.second));
      stored_clock_ = static_cast<int64_t>(std::stod(kv.second));
    }
  }
  if (auto it = s.meta.find("queue_usage"); it != s.meta.end()) RestoreUsageLocked(it->second);
  if (ledger_start == 0 && config_->view_only) {
    ledger_start = Now();  // not written: the leader writes its own
  } else if (ledger_start == 0) {
    ledger_start = Now();
    WriteBatch b;
    b.meta["ledger_start"] = std::to_string(ledger_start);
    if (Status st = store_->WriteAndWait(std::move(b)); !st.ok()) return st;
  }
  chargeback_->Restore(s.usage, ledger_start);
  for (const IdempotencyRow& k : s.keys) book_->PutKey({k.user, k.key}, {k.body_hash, k.job_id, true});
  return Status::Ok();
}

// The record of stored job `row` (version 1) as the API shows it.
Result<std::shared_ptr<JobRecord>> ServiceDriver::RecordOfRowLocked(const JobRow& row) const {
  auto spec = ParseJobSpec(nlohmann::json::parse(row.spec_json, nullptr, false));
  if (!spec.ok()) return Status::Error(fmt::format("stored job {}: {}", row.id, spec.error().message));
  auto j = std::make_shared<JobRecord>();
  j->id = row.id;
  int queue = 0;
  std::string pc;
  auto req = jobs_->BuildRequestLocked(spec.value(), row.team, row.id, &queue, &pc);
  if (!req.ok()) return Status::Error(fmt::format("stored job {}: {}", row.id, req.error().message));
  j->request = req.value();
  j->replicas = spec->workload.cls == WorkloadClass::kTraining ? 1 : spec->workload.replicas;
  j->queue = queue;
  j->user = row.user;
  j->team = row.team;
  j->project = row.project;
  j->name = row.name;
  j->cls = spec->workload.cls;
  j->mig_profile = spec->mig_profile;
  j->duration_s = spec->workload.duration_s;
  j->time_limit_s = spec->workload.time_limit_s;
  j->checkpointable = spec->workload.checkpointable;
  j->spec_json = row.spec_json;
  j->priority_class = row.priority_class;
  if (const PriorityClass* p = config_->tenancy.FindClass(row.priority_class)) j->request.priority = p->value;
  if (!ParseJobState(row.state, &j->state))
    return Status::Error(fmt::format("stored job {}: state '{}'", row.id, row.state));
  j->submitted_at = row.submitted_at;
  j->started_at = row.started_at;
  j->finished_at = row.finished_at;
  j->placements = row.placements;
  j->message = row.message;
  j->version = 1;
  return j;
}

JobPtr ServiceDriver::PageIn(const JobRow& row) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto j = RecordOfRowLocked(row);
  return j.ok() ? JobPtr(std::move(j).value()) : nullptr;
}

// One stored job back in the table (and in the loop when pending or running).
Status ServiceDriver::RestoreJobLocked(const JobRow& row) {
  auto made = RecordOfRowLocked(row);
  if (!made.ok()) return made.status();
  JobPtr j = std::move(made).value();
  book_->Restore(j);
  if (j->state == JobState::kPending) AddToLoopLocked(*j, /*queued=*/true);
  if (j->state != JobState::kRunning) return Status::Ok();
  AddToLoopLocked(*j, /*queued=*/false);
  if (Status st = ResumeLocked(*j); !st.ok())
    return Status::Error(
        fmt::format("stored job {}: its placement no longer applies: {}", row.id, st.message()));
  return Status::Ok();
}

Status ServiceDriver::Restore(const StoredState& s) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const TeamRow& t : identity_->Restore(s)) EnsureQueue(t.name, &t);  // a stored quota wins
  RestoreLayoutsLocked(s);
  if (Status st = RestoreMetaLocked(s); !st.ok()) return st;
  for (const JobRow& row : s.jobs)
    if (Status st = RestoreJobLocked(row); !st.ok()) return st;
  if (s.max_job_id > 0) book_->TakeId(s.max_job_id);  // ended jobs not loaded keep their ids
  book_->FinishRestore();
  return Status::Ok();
}

// A running job's replicas take the grants it held (a gang: all its tasks; replicas: one task each).
Status ServiceDriver::ResumeLocked(const JobRecord& j) {
  const std::vector<JobSlot>& replicas = ReplicasLocked(j.id);
  const int64_t now = Now();
  for (size_t r = 0; r < replicas.size(); ++r) {
    std::vector<TaskPlacement> tasks;
    if (replicas.size() == 1)
      tasks = j.placements;
    else if (r < j.placements.size())
      tasks = {j.placements[r]};
    if (Status st = loop_->Resume(replicas[r], tasks, j.started_at, now, 1.0); !st.ok()) return st;
  }
  for (JobSlot r : replicas) {  // the simulated backend kept it running; a real one finds it
    const ControlJob& cj = loop_->jobs()[r];
    if (!backend_->Adopt({r, cj.epoch, cj.tasks, cj.remaining_work_s}, j.started_at, now))
      return Status::Error(fmt::format("the backend does not know job {} (replica {})", j.id, r.value()));
  }
  return Status::Ok();
}

std::shared_ptr<const Snapshot> ServiceDriver::snapshot() const {
  std::lock_guard<std::mutex> lock(snap_mu_);
  return snapshot_;
}

void ServiceDriver::AddQueueFigures(std::vector<TeamView>* teams) const {
  auto snap = snapshot();
  std::lock_guard<std::mutex> lock(mu_);  // config_->tenancy's queues grow under it
  for (TeamView& v : *teams) {
    const int q = config_->tenancy.FindQueue(v.name);
    if (q < 0 || q >= static_cast<int>(snap->queues.size())) continue;
    v.allocated_milli = snap->queues[q].allocated_milli;
    v.fair_share_milli = snap->queues[q].fair_share_milli;
    v.pending_milli = std::max<int64_t>(0, snap->queues[q].demand_milli - snap->queues[q].allocated_milli);
  }
}

void ServiceDriver::PutLocked(std::vector<JobPtr> next, WriteBatch batch,
                              std::function<void(const Status&)> done) {
  Effects e;
  e.fresh = book_->SetCurrent(next);
  for (const JobPtr& j : next) batch.jobs.push_back(ToRow(*j));
  e.next = std::move(next);
  e.usage = batch.usage;
  KeepClockLocked(Now(), &batch);
  store_->Write(std::move(batch), [this, e, done = std::move(done)](const Status& st) {
    ApplyEffects(e, st);
    if (done) done(st);
  });
}

void ServiceDriver::KeepClockLocked(int64_t at, WriteBatch* b) {
  if (at <= stored_clock_) return;
  stored_clock_ = at;
  b->meta["clock_s"] = std::to_string(at);
}

void ServiceDriver::ApplyEffects(const Effects& e, const Status& st) {
  bool added = false;
  {
    // Under mu_: a job becomes visible in one step with its entry into the loop, so that a change that
    // finds it visible finds its replicas.
    std::lock_guard<std::mutex> lock(mu_);
    const std::vector<bool> first = book_->Commit(e.next, e.fresh, st.ok());
    for (size_t i = 0; i < e.next.size(); ++i)
      if (first[i] && e.next[i]->state == JobState::kPending) {
        AddToLoopLocked(*e.next[i], /*queued=*/true);
        added = true;
      }
    if (st.ok()) chargeback_->Add(e.usage);  // under mu_: a usage query counts each run once
  }
  if (added) Notify();
}

}  // namespace tessera
