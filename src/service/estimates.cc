// Start estimates that people can plan with. The cycle's what-if replay (sched/cycle_estimates.cc) gives
// each pending job a likely start; here, after each cycle, that estimate is
//  - bounded below by the job's own queue limit: a job waiting on its team's limit cannot start before
//    enough of that queue's running work ends (as declared), whatever capacity is free elsewhere;
//  - kept from the previous cycle while nothing changed for the job's queue (its unfinished jobs and their
//    versions, the live nodes) and the kept estimate has not passed, so that it does not jump with work
//    elsewhere in the cluster; when it changes, `estimate_change` says why.
#include <algorithm>

#include "service/service_driver.h"
#include "service/snapshot_room.h"

namespace tessera {
namespace {

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

bool QuotaWait(std::string_view code) { return code == "TeamQuotaExhausted" || code == "BorrowLimit"; }

// When `needed` GPU thousandths of the queue's running work will have ended (as declared), or -1 when not
// known (work without a declared duration).
int64_t QuotaFreeAt(const std::vector<std::pair<int64_t, int64_t>>& ends, int64_t needed, int64_t now) {
  if (needed <= 0) return now;
  int64_t freed = 0;
  for (const auto& [t, milli] : ends) {  // ascending; unknown ends (-1) were left out
    freed += milli;
    if (freed >= needed) return std::max(t, now);
  }
  return -1;
}

const char* ChangeCause(const PendingInfo& old, const PendingInfo& now_info, uint64_t old_nodes,
                        uint64_t nodes, bool passed) {
  if (passed) return "the previous estimate passed without a start";
  if (old_nodes != nodes) return "the cluster's nodes changed (a node was added, lost, cordoned or drained)";
  if (old.queue_signature == now_info.queue_signature) return "the scheduler's estimate changed";
  return "a job in its queue started, ended, arrived or changed (e.g. a priority change)";
}

}  // namespace

uint64_t NodesSignature(const Snapshot& s) {
  return s.queue_signature.empty() ? 0 : s.queue_signature.back();
}

void SnapshotRoom::QueueSignaturesLocked(Snapshot* snap) const {
  d_->book_->QueueDigests(d_->config_->tenancy.queues.size(), &snap->queue_signature, &snap->queue_ends);
  uint64_t nodes = 1;
  const ClusterState& state = d_->loop_->state();
  for (NodeId n = 0; n < static_cast<NodeId>(state.cluster().nodes.size()); ++n)
    for (char c : d_->nodes_->StateLocked(n)) nodes = Mix(nodes, static_cast<uint64_t>(c));
  snap->queue_signature.push_back(nodes);  // the last entry: the live nodes
}

// The job's estimate in `info` (fresh from the cycle, `still_needed` GPU thousandths short of its queue
// limit) made stable against the previous snapshot `old` (may be null).
void StabiliseEstimate(const JobRecord& j, int64_t still_needed, const Snapshot& snap, const Snapshot* old,
                       PendingInfo* info) {
  const bool known_queue = j.queue >= 0 && static_cast<size_t>(j.queue) < snap.queue_ends.size();
  info->queue_signature = known_queue ? snap.queue_signature[j.queue] : 0;
  int64_t likely = info->estimated_start;
  if (QuotaWait(info->code) && known_queue) {
    const int64_t free_at = QuotaFreeAt(snap.queue_ends[j.queue], still_needed, snap.at);
    likely = free_at < 0 ? -1 : std::max(likely, free_at);
  }
  const PendingInfo* prev = nullptr;
  if (old != nullptr) {
    auto it = old->pending.find(j.id);
    if (it != old->pending.end()) prev = &it->second;
  }
  const uint64_t nodes = NodesSignature(snap);
  const bool same =
      prev && prev->queue_signature == info->queue_signature && old && NodesSignature(*old) == nodes;
  const bool passed = prev && prev->estimated_start >= 0 && prev->estimated_start < snap.at;
  if (same && !passed && (prev->estimated_start >= 0 || likely < 0)) {
    info->estimated_start = prev->estimated_start;
    info->estimate_earliest = prev->estimate_earliest;
    info->estimate_latest = prev->estimate_latest;
    info->estimated_at = prev->estimated_at;
    info->estimate_change = prev->estimate_change;
    return;
  }
  info->estimated_start = likely;
  info->estimated_at = snap.at;
  const int64_t wait = likely < 0 ? 0 : likely - snap.at;
  info->estimate_earliest = likely < 0 ? -1 : snap.at + wait * 3 / 4;
  info->estimate_latest = likely < 0 ? -1 : snap.at + wait * 3 / 2;
  if (prev && prev->estimated_start != likely)
    info->estimate_change = ChangeCause(*prev, *info, old ? NodesSignature(*old) : 0, nodes, passed);
  else if (prev)
    info->estimate_change = prev->estimate_change;
}

}  // namespace tessera
