#include "sim/ledger_bridge.h"

#include <fmt/format.h>

#include <cmath>

namespace tessera {

Status LedgerBridge::AddHold(int64_t job_index, const TraceJob& job, const std::vector<TaskPlacement>& tasks,
                             int64_t start_s, int64_t end_s, const HoldLoss& loss_in) {
  if (end_s <= start_s) return Status::Ok();
  const int64_t dur = end_s - start_s;
  HoldLoss loss;
  loss.restart_s = std::clamp<int64_t>(loss_in.restart_s, 0, dur);
  loss.checkpoint_s = std::clamp<int64_t>(loss_in.checkpoint_s, 0, dur - loss.restart_s);
  loss.discarded_s = std::clamp<int64_t>(loss_in.discarded_s, 0, dur - loss.restart_s - loss.checkpoint_s);
  const int64_t lost_s = loss.Total();
  for (const TaskPlacement& t : tasks) {
    const Node& node = cluster_.nodes[t.node];
    const GpuKind& kind = catalog_.kind(node.kind);
    for (const GpuGrant& g : t.gpus) {
      UsageRecord u = GrantUsage(node, kind, g);
      u.team = job.team;
      u.project = WorkloadClassName(job.cls);
      u.queue = job.team;
      u.job_id = job_index;
      u.start_s = start_s;
      u.end_s = end_s;
      u.lost_s = lost_s;
      if (Status st = ledger_.AddUsage(u); !st.ok())
        return Status::Error(fmt::format("ledger: job {}: {}", job_index, st.message()));
      losses_.push_back(loss);
      held_ += int64_t{u.compute_milli} * dur;
      useful_ += int64_t{u.compute_milli} * (dur - lost_s);
    }
  }
  return Status::Ok();
}

Status LedgerBridge::AddNodeCapacity(NodeId n, int64_t start_s, int64_t end_s) {
  if (end_s <= start_s) return Status::Ok();
  const Node& node = cluster_.nodes[n];
  if (node.gpu_count == 0) return Status::Ok();
  const CapacityRecord c = NodeCapacity(node, catalog_, start_s, end_s);
  if (Status st = ledger_.AddCapacity(c); !st.ok()) return Status::Error("ledger: " + st.message());
  capacity_ += int64_t{1000} * node.gpu_count * (end_s - start_s);
  return Status::Ok();
}

Status LedgerBridge::Reconcile(const CostReport& r) const {
  int64_t alloc = 0, cap = 0;
  for (const PoolLine& p : r.pools) {
    alloc += p.allocated_milli_gpu_s;
    cap += p.capacity_milli_gpu_s;
  }
  int64_t useful = 0;
  for (const CostLine& l : r.by_tier) useful += l.useful_milli_gpu_s;
  if (alloc != held_ || useful != useful_ || cap != capacity_)
    return Status::Error(fmt::format(
        "ledger does not reconcile: allocated {} vs recorded {}, useful {} vs {}, capacity {} vs {} milli-GPU-s",
        alloc, held_, useful, useful_, cap, capacity_));
  if (r.charged_cents + r.idle_cents != r.total_cents)
    return Status::Error(fmt::format("ledger: total {} != charged {} + idle {}", r.total_cost, r.charged_cost,
                                     r.idle_cost));
  return Status::Ok();
}

CostBreakdown LedgerBridge::Breakdown(const CostReport& r) const {
  CostBreakdown b;
  const std::vector<UsageRecord>& usage = ledger_.usage();
  for (size_t i = 0; i < usage.size() && i < r.records.size(); ++i) {
    const RecordCharge& c = r.records[i];
    const int64_t dur = usage[i].end_s - usage[i].start_s;
    if (dur <= 0) continue;
    const double share_h = static_cast<double>(c.milli_gpu_s) / static_cast<double>(dur) / 3.6e6;  // GPU-h per s
    const double useful_h = static_cast<double>(c.useful_milli_gpu_s) / 3.6e6;
    b.useful_at_list += useful_h * c.list_usd_per_gpu_hour;
    const double discount = useful_h * (c.list_usd_per_gpu_hour - c.usd_per_gpu_hour);
    switch (usage[i].tier) {
      case Tier::kReserved:
      case Tier::kOwned: b.discount_committed += discount; break;
      case Tier::kSpot: b.discount_spot += discount; break;
      case Tier::kOnDemand: b.discount_on_demand += discount; break;
    }
    const HoldLoss& l = losses_[i];
    b.restarts += share_h * static_cast<double>(l.restart_s) * c.usd_per_gpu_hour;
    b.checkpoints += share_h * static_cast<double>(l.checkpoint_s) * c.usd_per_gpu_hour;
    b.lost_work += share_h * static_cast<double>(l.discarded_s) * c.usd_per_gpu_hour;
  }
  b.paid_idle = r.idle_cost;
  b.rounding = r.total_cost - b.Total();
  return b;
}

}  // namespace tessera
