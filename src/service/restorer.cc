// The driver's state rebuilt from the store (restorer.h).
#include "service/restorer.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "model/mig.h"
#include "service/service_driver.h"
#include "service/workload_json.h"

namespace tessera {

Restorer::Restorer(ServiceDriver* driver) : d_(driver) {}

// Stored MIG layouts ("profile@start,..." per GPU; "" = MIG off); a row that no longer parses is skipped.
void Restorer::RestoreLayoutsLocked(const StoredState& s) {
  ClusterState& state = d_->loop_->state();
  const Cluster& cl = d_->config_->cluster;
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
Status Restorer::RestoreMetaLocked(const StoredState& s) {
  int64_t ledger_start = 0;
  for (const auto& kv : s.meta) {
    if (kv.first == "ledger_start") ledger_start = std::stoll(kv.second);
    if (kv.first == "clock_s") {
      d_->clock_->NotBefore(std::stod(kv.second));
      d_->stored_clock_ = static_cast<int64_t>(std::stod(kv.second));
    }
  }
  if (auto it = s.meta.find("queue_usage"); it != s.meta.end()) RestoreUsageLocked(it->second);
  if (ledger_start == 0 && d_->config_->view_only) {
    ledger_start = d_->Now();  // not written: the leader writes its own
  } else if (ledger_start == 0) {
    ledger_start = d_->Now();
    WriteBatch b;
    b.meta["ledger_start"] = std::to_string(ledger_start);
    if (Status st = d_->store_->WriteAndWait(std::move(b)); !st.ok()) return st;
  }
  d_->chargeback_->Restore(s.usage, ledger_start);
  for (const IdempotencyRow& k : s.keys) d_->book_->PutKey({k.user, k.key}, {k.body_hash, k.job_id, true});
  return Status::Ok();
}

// The record of stored job `row` (version 1) as the API shows it.
Result<std::shared_ptr<JobRecord>> Restorer::RecordOfRowLocked(const JobRow& row) const {
  auto spec = ParseJobSpec(nlohmann::json::parse(row.spec_json, nullptr, false));
  if (!spec.ok()) return Status::Error(fmt::format("stored job {}: {}", row.id, spec.error().message));
  auto j = std::make_shared<JobRecord>();
  j->id = row.id;
  int queue = 0;
  std::string pc;
  auto req = d_->jobs_->BuildRequestLocked(spec.value(), row.team, row.id, &queue, &pc);
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
  if (const PriorityClass* p = d_->config_->tenancy.FindClass(row.priority_class)) j->request.priority = p->value;
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

JobPtr Restorer::PageIn(const JobRow& row) const {
  std::lock_guard<std::mutex> lock(d_->mu_);
  auto j = RecordOfRowLocked(row);
  return j.ok() ? JobPtr(std::move(j).value()) : nullptr;
}

// One stored job back in the table (and in the loop when pending or running).
Status Restorer::RestoreJobLocked(const JobRow& row) {
  auto made = RecordOfRowLocked(row);
  if (!made.ok()) return made.status();
  JobPtr j = std::move(made).value();
  d_->book_->Restore(j);
  if (j->state == JobState::kPending) d_->AddToLoopLocked(*j, /*queued=*/true);
  if (j->state != JobState::kRunning) return Status::Ok();
  d_->AddToLoopLocked(*j, /*queued=*/false);
  if (Status st = ResumeLocked(*j); !st.ok())
    return Status::Error(
        fmt::format("stored job {}: its placement no longer applies: {}", row.id, st.message()));
  return Status::Ok();
}

Status Restorer::Restore(const StoredState& s) {
  std::lock_guard<std::mutex> lock(d_->mu_);
  for (const TeamRow& t : d_->identity_->Restore(s)) d_->EnsureQueue(t.name, &t);  // a stored quota wins
  RestoreLayoutsLocked(s);
  if (Status st = RestoreMetaLocked(s); !st.ok()) return st;
  for (const JobRow& row : s.jobs)
    if (Status st = RestoreJobLocked(row); !st.ok()) return st;
  if (s.max_job_id > 0) d_->book_->TakeId(s.max_job_id);  // ended jobs not loaded keep their ids
  d_->book_->FinishRestore();
  return Status::Ok();
}

// A running job's replicas take the grants it held (a gang: all its tasks; replicas: one task each).
Status Restorer::ResumeLocked(const JobRecord& j) {
  const std::vector<JobSlot>& replicas = d_->ReplicasLocked(j.id);
  const int64_t now = d_->Now();
  for (size_t r = 0; r < replicas.size(); ++r) {
    std::vector<TaskPlacement> tasks;
    if (replicas.size() == 1)
      tasks = j.placements;
    else if (r < j.placements.size())
      tasks = {j.placements[r]};
    if (Status st = d_->loop_->Resume(replicas[r], tasks, j.started_at, now, 1.0); !st.ok()) return st;
  }
  for (JobSlot r : replicas) {  // the simulated backend kept it running; a real one finds it
    if (!d_->backend_->Adopt(LaunchSpecOf(*d_->loop_, r), j.started_at, now))
      return Status::Error(fmt::format("the backend does not know job {} (replica {})", j.id, r.value()));
  }
  return Status::Ok();
}


void Restorer::RestoreUsageLocked(const std::string& meta) {
  const auto j = nlohmann::json::parse(meta, nullptr, false);
  if (!j.is_object() || !j.contains("at") || !j["at"].is_number_integer() || !j.contains("usage") ||
      !j["usage"].is_object())
    return;  // not kept by this version: history starts again
  std::vector<double> usage(d_->loop_->queues().size(), 0.0);
  for (size_t q = 0; q < usage.size(); ++q) {
    auto it = j["usage"].find(d_->loop_->queues()[q].name);
    if (it != j["usage"].end() && it->is_number()) usage[q] = std::max(0.0, it->get<double>());
  }
  d_->loop_->RestoreUsage(usage, j["at"].get<int64_t>());
}

}  // namespace tessera
