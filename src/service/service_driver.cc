// The driver room's lifecycle, its queues and the job version writes (its rooms: service_driver.h).
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
      cycles_(std::make_unique<CycleRoom>(this)),
      snapshots_(std::make_unique<SnapshotRoom>(this)),
      restorer_(std::make_unique<Restorer>(this)),
      reports_(std::make_unique<ReportRoom>(this)) {}

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
  outbox_ = std::make_unique<OutboxBackend>(backend_);
  driver_ = std::make_unique<Driver>(loop_.get(), outbox_.get(), MakeDriverOptions(c.setup), reports_.get());
  driver_->set_recording(c.record_decisions);
  backend_->OnEvents([this] { Notify(); });
  if (Status st = restorer_->Restore(loaded); !st.ok()) return st;
  if (Status st = nodes_->Restore(loaded); !st.ok()) return st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    snapshots_->PublishLocked(nullptr, Now());
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
