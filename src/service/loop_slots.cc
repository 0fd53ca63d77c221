// The driver's jobs in the loop's table (service_driver.h): each job's slots, a job's replicas added, the
// running jobs, a run's usage records, the queues' usage as stored, the decisions' lines.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "control/decisions.h"
#include "cost/pricebook.h"
#include "service/service_driver.h"

namespace tessera {

std::vector<UsageRecord> ServiceDriver::UsageOf(const JobRecord& j, int64_t end_s) const {
  std::vector<UsageRecord> out;
  if (j.started_at < 0 || end_s <= j.started_at) return out;
  const Catalog& cat = *config_->catalog;
  for (const TaskPlacement& t : j.placements) {
    const Node& node = loop_->state().cluster().nodes[t.node];  // the live cluster (nodes are added)
    const GpuKind& kind = cat.kind(node.kind);
    auto list = PriceBook::Default().OnDemandListPrice(kind.id);
    for (const GpuGrant& g : t.gpus) {
      UsageRecord u = GrantUsage(node, kind, g);
      u.team = j.team;
      u.project = j.project;
      u.queue = config_->tenancy.queues[j.queue].name;
      u.job_id = j.id;
      u.start_s = j.started_at;
      u.end_s = end_s;
      u.list_usd_per_gpu_hour = list.ok() ? *list : 0;
      u.usd_per_gpu_hour = node.price_per_gpu_hour > 0 ? node.price_per_gpu_hour : u.list_usd_per_gpu_hour;
      out.push_back(u);
    }
  }
  return out;
}

void ServiceDriver::AddToLoopLocked(const JobRecord& j, bool queued) {
  if (static_cast<int64_t>(replicas_.size()) < j.id) replicas_.resize(j.id);
  std::vector<JobSlot>& replicas = replicas_[j.id - 1];
  const PriorityClass* pc = config_->tenancy.FindClass(j.priority_class);
  const std::vector<std::string> keys =
      config_->external_keys ? config_->external_keys(j) : std::vector<std::string>{};
  for (int r = 0; r < j.replicas; ++r) {
    ControlJob cj;
    cj.request = j.request;
    cj.queue = j.queue;
    cj.preemptible = pc == nullptr || pc->preemptible;
    cj.request.may_preempt = pc == nullptr || pc->preempts;
    cj.remaining_work_s = j.duration_s > 0 ? static_cast<double>(j.duration_s) : -1;
    cj.time_limit_factor = TimeLimitFactor(j.duration_s, j.time_limit_s);
    cj.checkpointable = j.checkpointable;
    if (static_cast<size_t>(r) < keys.size()) cj.key = keys[r];
    const JobSlot s = loop_->Add(std::move(cj));
    if (queued) loop_->Submit(s, j.submitted_at);
    replicas.push_back(s);
    job_of_slot_.push_back(j.id);
  }
  driver_->SetGroup(replicas);  // replicas launch all together
}

std::vector<int64_t> ServiceDriver::RunningLocked() const {
  std::vector<int64_t> out;
  for (JobSlot s : loop_->jobs().holding()) out.push_back(IdOfSlotLocked(s));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

const std::vector<JobSlot>& ServiceDriver::ReplicasLocked(int64_t id) const {
  static const std::vector<JobSlot> kNone;
  return id >= 1 && id <= static_cast<int64_t>(replicas_.size()) ? replicas_[id - 1] : kNone;
}

std::string ServiceDriver::UsageMetaLocked() const {
  nlohmann::json by_queue = nlohmann::json::object();
  const QueueUsage& u = loop_->usage();
  for (size_t q = 0; q < u.usage().size() && q < loop_->queues().size(); ++q)
    by_queue[loop_->queues()[q].name] = u.usage()[q];
  return nlohmann::json{{"at", u.last_s()}, {"usage", by_queue}}.dump();
}

std::vector<JobSlot> ServiceDriver::LoopSlotsOf(int64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return ReplicasLocked(id);
}

JobPtr ServiceDriver::JobOfSlot(JobSlot slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!HasSlotLocked(slot)) return nullptr;
  return book_->Current(IdOfSlotLocked(slot));
}

bool ServiceDriver::HoldsLocked(JobSlot slot) const {
  if (!HasSlotLocked(slot)) return false;
  const JobPhase phase = loop_->jobs()[slot].phase;
  return phase == JobPhase::kBound || phase == JobPhase::kRunning;
}

std::optional<bool> ServiceDriver::MayPreemptFor(JobSlot victim, int64_t for_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!HoldsLocked(victim)) return std::nullopt;
  for (JobSlot s : ReplicasLocked(for_id))
    if (loop_->jobs()[s].phase == JobPhase::kPending)
      return loop_->MayPreemptFor(victim, s, Now()) != PreemptKind::kNone;
  return std::nullopt;
}

std::optional<bool> ServiceDriver::MayPreemptFor(JobSlot victim, const JobSpec& spec) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!HoldsLocked(victim)) return std::nullopt;
  int queue = 0;
  std::string priority_class;
  auto r = jobs_->BuildRequestLocked(spec, spec.workload.team, /*id=*/0, &queue, &priority_class);
  if (!r.ok()) return std::nullopt;
  return loop_->MayPreemptFor(victim, r.value(), queue, Now()) != PreemptKind::kNone;
}

std::vector<std::string> ServiceDriver::TakeDecisionLines() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const Decision& d : driver_->TakeDecisions())
    out.push_back(DecisionLine(
        d, loop_->state(), [&](JobSlot slot) { return book_->Current(IdOfSlotLocked(slot))->name; },
        [&](int64_t n) { return loop_->state().cluster().nodes[n].name; }));
  return out;
}

}  // namespace tessera
