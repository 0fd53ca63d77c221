#pragma once
// LedgerBridge (issue 5): turns what the simulator held into the cost Ledger (cost/ledger.h): one usage
// record per (job hold, GPU grant) and one capacity record per node interval (static nodes for the whole
// run, elastic nodes while acquired). It keeps its own exact int64 tally of milli-GPU-seconds so that the
// CostModel's totals can be reconciled exactly against what was recorded (Reconcile), and the loss of
// each hold by cause, to split the total cost (Breakdown).

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "cost/cost_model.h"
#include "cost/ledger.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "sched/placement.h"
#include "sim/trace.h"

namespace tessera {

// The seconds of a hold that were not useful work, by cause; they add up to the hold's lost_s.
struct HoldLoss {
  int64_t restart_s = 0;      // waiting to resume: restart from a checkpoint, repartitioning
  int64_t checkpoint_s = 0;   // writing checkpoints (progress stopped)
  int64_t discarded_s = 0;    // work done and then lost (reclaim or preemption after the last checkpoint)
  int64_t Total() const { return restart_s + checkpoint_s + discarded_s; }
};

// What a run's total cost is made of, in USD:
//   total = useful_at_list - discount_committed - discount_spot - discount_on_demand
//           + checkpoints + lost_work + restarts + paid_idle
// useful_at_list: useful work (held minus lost) at the on-demand list price of its GPU kind;
// discount_*: that work's list price minus the price it was paid at, by tier (committed = reserved and
// owned); checkpoints / lost_work / restarts: held time of each HoldLoss cause at the price paid;
// paid_idle: capacity paid for and held by nobody.
struct CostBreakdown {
  double useful_at_list = 0;
  double discount_committed = 0;
  double discount_spot = 0;
  double discount_on_demand = 0;
  double checkpoints = 0;
  double lost_work = 0;
  double restarts = 0;
  double paid_idle = 0;
  // The statement's cents less the exact parts: each record is an invoice line rounded to the cent once
  // (cost/money.h), a few cents over a run.
  double rounding = 0;
  double Total() const {
    return useful_at_list - discount_committed - discount_spot - discount_on_demand + checkpoints + lost_work +
           restarts + paid_idle + rounding;
  }
};

class LedgerBridge {
 public:
  LedgerBridge(const Cluster& cluster, const Catalog& catalog) : cluster_(cluster), catalog_(catalog) {}

  // A hold of `tasks` by `job` over [start_s, end_s), of which `lost_s` seconds were not useful work
  // (discarded at a reclaim or preemption, checkpoint writes, restart). Error names the job.
  Status AddHold(int64_t job_index, const TraceJob& job, const std::vector<TaskPlacement>& tasks, int64_t start_s,
                 int64_t end_s, const HoldLoss& loss);
  // Node `n` existed (paid for) over [start_s, end_s).
  Status AddNodeCapacity(NodeId n, int64_t start_s, int64_t end_s);

  const Ledger& ledger() const { return ledger_; }
  int64_t held_milli_gpu_s() const { return held_; }
  int64_t useful_milli_gpu_s() const { return useful_; }
  int64_t capacity_milli_gpu_s() const { return capacity_; }

  // Checks the report against the bridge's own tally: allocated, useful and capacity GPU-hours equal to
  // the last exact milli-GPU-second (per-pool lines summed in int64), total = charged + idle.
  Status Reconcile(const CostReport& report) const;

  // The report's total split by CostBreakdown (the report must come from this bridge's ledger).
  CostBreakdown Breakdown(const CostReport& report) const;

 private:
  const Cluster& cluster_;
  const Catalog& catalog_;
  Ledger ledger_;
  std::vector<HoldLoss> losses_;  // per usage record, clamped to the record
  int64_t held_ = 0, useful_ = 0, capacity_ = 0;
};

}  // namespace tessera
