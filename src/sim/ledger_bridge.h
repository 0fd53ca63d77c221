#pragma once
// LedgerBridge (issue 5): turns what the simulator held into the cost Ledger (cost/ledger.h): one usage
// record per (job hold, GPU grant) and one capacity record per node interval (static nodes for the whole
// run, elastic nodes while acquired). It keeps its own exact int64 tally of milli-GPU-seconds so that the
// CostModel's totals can be reconciled exactly against what was recorded (Reconcile).

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

class LedgerBridge {
 public:
  LedgerBridge(const Cluster& cluster, const Catalog& catalog) : cluster_(cluster), catalog_(catalog) {}

  // A hold of `tasks` by `job` over [start_s, end_s), of which `lost_s` seconds were not useful work
  // (discarded at a reclaim or preemption, checkpoint writes, restart). Error names the job.
  Status AddHold(int64_t job_index, const TraceJob& job, const std::vector<TaskPlacement>& tasks, int64_t start_s,
                 int64_t end_s, int64_t lost_s);
  // Node `n` existed (paid for) over [start_s, end_s).
  Status AddNodeCapacity(NodeId n, int64_t start_s, int64_t end_s);

  const Ledger& ledger() const { return ledger_; }
  int64_t held_milli_gpu_s() const { return held_; }
  int64_t useful_milli_gpu_s() const { return useful_; }
  int64_t capacity_milli_gpu_s() const { return capacity_; }

  // Checks the report against the bridge's own tally: allocated, useful and capacity GPU-hours equal to
  // the last exact milli-GPU-second (per-pool lines summed in int64), total = charged + idle.
  Status Reconcile(const CostReport& report) const;

 private:
  const Cluster& cluster_;
  const Catalog& catalog_;
  Ledger ledger_;
  int64_t held_ = 0, useful_ = 0, capacity_ = 0;
};

}  // namespace tessera
