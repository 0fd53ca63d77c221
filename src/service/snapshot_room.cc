// The service's snapshot (snapshot_room.h): built under the driver's lock after a cycle or a restore,
// finished (queue order, positions, stable estimates, the cluster summary) without it.
#include "service/snapshot_room.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "base/utc_time.h"
#include "service/service_driver.h"

namespace tessera {

SnapshotRoom::SnapshotRoom(ServiceDriver* driver) : d_(driver) {}

std::shared_ptr<const Snapshot> SnapshotRoom::Get() const {
  std::lock_guard<std::mutex> lock(snap_mu_);
  return snapshot_;
}

void SnapshotRoom::AddQueueFigures(std::vector<TeamView>* teams) const {
  auto snap = Get();
  std::lock_guard<std::mutex> lock(d_->mu_);  // the tenancy's queues grow under it
  for (TeamView& v : *teams) {
    const int q = d_->config_->tenancy.FindQueue(v.name);
    if (q < 0 || q >= static_cast<int>(snap->queues.size())) continue;
    v.allocated_milli = snap->queues[q].allocated_milli;
    v.fair_share_milli = snap->queues[q].fair_share_milli;
    v.pending_milli = std::max<int64_t>(0, snap->queues[q].demand_milli - snap->queues[q].allocated_milli);
  }
}

std::shared_ptr<Snapshot> SnapshotRoom::BeginLocked(const Plan* plan, int64_t now,
                                                             std::vector<PendingRef>* jobs) {
  auto snap = std::make_shared<Snapshot>();
  snap->at = now;
  snap->cycle = d_->cycle_seq_;
  auto old = Get();
  if (d_->state_changed_ || !old)
    snap->cluster = RecycledClusterLocked();
  else
    snap->cluster = old->cluster;
  d_->state_changed_ = false;
  snap->node_states.reserve(d_->loop_->state().num_nodes());
  for (NodeId n = 0; n < d_->loop_->state().num_nodes(); ++n) snap->node_states.push_back(d_->nodes_->StateLocked(n));
  for (const QueueConfig& q : d_->config_->tenancy.queues) snap->queue_names.push_back(q.name);
  QueueSignaturesLocked(snap.get());
  if (plan == nullptr) {
    if (old) snap->queues = old->queues;
    return snap;
  }
  snap->queues = plan->queues;
  jobs->reserve(plan->pending.size());
  for (const PendingStatus& p : plan->pending) {
    const JobSlot gang = p.reservation_job >= 0 ? SlotOf(p.reservation_job) : kNoSlot;
    jobs->push_back({d_->book_->Current(d_->IdOfSlotLocked(SlotOf(p.job))),
                     d_->HasSlotLocked(gang) ? d_->book_->Current(d_->IdOfSlotLocked(gang)) : nullptr});
  }
  return snap;
}

std::shared_ptr<const ClusterState> SnapshotRoom::RecycledClusterLocked() {
  // A buffer no snapshot or reader holds any more is overwritten in place (see BuildInputLocked).
  for (std::shared_ptr<ClusterState>& c : spare_clusters_)
    if (c.use_count() == 1) {
      *c = d_->loop_->state();
      return c;
    }
  auto c = std::make_shared<ClusterState>(d_->loop_->state());
  if (spare_clusters_.size() < kSpareClusters) spare_clusters_.push_back(c);
  return c;
}

namespace {

// The cycle's "waits behind a reserved gang" names the gang: its job id, name and the reservation's start.
void NameReservation(const JobPtr& gang, int64_t start, PendingInfo* info) {
  constexpr std::string_view kPrefix = "waits behind a reserved gang";
  info->reservation = gang;
  info->reservation_start = start;
  const std::string& m = info->message.str();
  if (m.rfind(kPrefix, 0) != 0) return;
  info->message = fmt::format("waits behind the reservation of job {} ({}, {} GPUs from {}){}", gang->id,
                              gang->name, TotalGpus(*gang), FormatIsoUtc(start), m.substr(kPrefix.size()));
}

}  // namespace

void SnapshotRoom::Finish(std::shared_ptr<Snapshot> snap, const Plan* plan,
                                   const std::vector<PendingRef>& jobs) {
  const std::shared_ptr<const Snapshot> old = Get();
  if (old && old->summary && old->cluster == snap->cluster && old->node_states == snap->node_states)
    snap->summary = old->summary;
  else
    snap->summary = SummariseCluster(*snap->cluster, snap->node_states);
  if (plan != nullptr) {
    std::unordered_map<int64_t, JobPtr> by_id;
    std::unordered_map<int64_t, int64_t> needed;  // GPU thousandths short of the queue limit
    for (size_t i = 0; i < plan->pending.size(); ++i) {
      const PendingStatus& p = plan->pending[i];
      const JobPtr& j = jobs[i].job;
      if (!j || j->state != JobState::kPending) continue;
      auto [it, fresh] = snap->pending.try_emplace(j->id);
      if (!fresh && it->second.pool_position <= p.pool_position) continue;
      PendingInfo& info = it->second = PendingInfo{};
      info.team_position = p.team_position;
      info.pool_position = p.pool_position;
      info.code = p.code;
      info.message = p.message;
      info.estimated_start = p.estimated_start_s;
      if (jobs[i].reservation) NameReservation(jobs[i].reservation, p.reservation_start_s, &info);
      by_id[j->id] = j;
      needed[j->id] = p.still_needed;
    }
    std::vector<std::pair<int, int64_t>> order;  // (pool position of the job's first replica, job)
    order.reserve(snap->pending.size());
    for (const auto& [id, info] : snap->pending) order.push_back({info.pool_position, id});
    std::sort(order.begin(), order.end());
    int pos = 0;
    std::map<int, int> team_pos;
    snap->queue.reserve(order.size());
    for (const auto& [p, id] : order) {
      PendingInfo& info = snap->pending[id];
      const JobPtr& j = by_id[id];
      info.pool_position = ++pos;  // positions count jobs, not replicas
      info.team_position = ++team_pos[j->queue];
      StabiliseEstimate(*j, needed[id], *snap, old.get(), &info);
      snap->queue.push_back({j, info});
    }
  }
  std::lock_guard<std::mutex> lock(snap_mu_);
  snapshot_ = std::move(snap);
}

void SnapshotRoom::PublishLocked(const Plan* plan, int64_t now) {
  std::vector<PendingRef> jobs;
  Finish(BeginLocked(plan, now, &jobs), plan, jobs);
}

}  // namespace tessera
