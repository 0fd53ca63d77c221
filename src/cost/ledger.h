#pragma once
// Ledger: what the simulator (or the service) records about who held which GPU capacity, when, and at
// what price. Usage is charged by allocation (what a team holds), not by what it keeps busy.
//
// Units: times are integer seconds since the ledger epoch (CostOptions::epoch); GPU shares are
// thousandths of one GPU. A usage record's exact quantity is share_milli * (end_s - start_s)
// milli-GPU-seconds, so every sum over records is exact in int64.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "sched/placement.h"

namespace tessera {

// One interval during which one task held one GPU or a part of one.
struct UsageRecord {
  std::string team;
  std::string project;
  std::string queue;
  JobId job_id = 0;
  std::string gpu_kind;       // kind id, e.g. "h100-80gb"
  Tier tier = Tier::kOnDemand;
  std::string pool;           // pool name (PriceBook / cluster); empty = tier name
  std::string node;           // node name (FOCUS ResourceId)
  // Share of the GPU held, in thousandths. Whole GPU = 1000. A MIG slice: its compute fraction
  // (SMs of the instance / SMs of the GPU, MigProfile via Catalog::ProfileComputeMilli) in
  // `compute_milli` and its memory fraction (memory slices / 8) in `memory_milli`; which one is
  // charged is CostOptions::charge_basis. A fractional share: both equal the share.
  int32_t compute_milli = kMilliPerGpu;
  int32_t memory_milli = kMilliPerGpu;
  int64_t start_s = 0;
  int64_t end_s = 0;          // end_s >= start_s
  // Seconds of [start_s, end_s) whose work was lost (redone after a spot reclaim) or spent writing
  // checkpoints / restarting. Still charged; not "useful" work. 0 <= lost_s <= HeldSeconds(record).
  int64_t lost_s = 0;
  // A record that sums several runs (SumUsage): the seconds they held in all, all of them within
  // [start_s, end_s) and within one calendar month (several runs side by side may hold more than
  // end_s - start_s). -1: one run, which held [start_s, end_s).
  int64_t held_s = -1;
  // Price per whole-GPU-hour paid for this interval; < 0 = take the pool's price from the PriceBook.
  double usd_per_gpu_hour = -1;
  // On-demand list price per whole-GPU-hour of the kind (FOCUS ListCost); < 0 = from the PriceBook.
  double list_usd_per_gpu_hour = -1;
};

// Capacity that existed in a pool over an interval (nodes up, paid for whether held or not). Pools
// without capacity records are treated as elastic: their capacity is exactly their usage (no idle).
struct CapacityRecord {
  std::string pool;
  std::string node;
  std::string gpu_kind;
  Tier tier = Tier::kOnDemand;
  int32_t gpus = 0;
  int64_t start_s = 0;
  int64_t end_s = 0;
  double usd_per_gpu_hour = -1;   // < 0 = pool's price from the PriceBook
};

// The usage record of grant `g` on `node`: kind, tier, pool, node and the share held (a MIG instance's
// compute and memory fractions, else the share's milli). The caller fills who, when and the price.
UsageRecord GrantUsage(const Node& node, const GpuKind& kind, const GpuGrant& g);
// The capacity record of `node` over [start_s, end_s): its pool, kind, tier and GPUs (price: the pool's).
CapacityRecord NodeCapacity(const Node& node, const Catalog& catalog, int64_t start_s, int64_t end_s);

class Ledger {
 public:
  // Appends after validation; the error names the record (job, team) and the field.
  Status AddUsage(UsageRecord r);
  Status AddCapacity(CapacityRecord c);
  const std::vector<UsageRecord>& usage() const { return usage_; }
  const std::vector<CapacityRecord>& capacity() const { return capacity_; }

 private:
  std::vector<UsageRecord> usage_;
  std::vector<CapacityRecord> capacity_;
};

// Pool key of a record: its pool, or the tier name when none is given.
std::string PoolKey(const UsageRecord& r);

// The seconds a record held: held_s where it sums runs, else end_s - start_s.
inline int64_t HeldSeconds(const UsageRecord& r) { return r.held_s >= 0 ? r.held_s : r.end_s - r.start_s; }

// How SumUsage groups records: always by team, GPU kind, tier, pool, node and share held; by project and
// by job where asked.
struct UsageSumKey {
  bool by_project = true;
  bool by_job = true;
};

// `usage` summed per piece of `cuts` (sorted times; piece k is [cuts[k], cuts[k+1])): each record is clipped
// to each piece it meets, its lost seconds to the clipped length, then the clipped records of one piece and
// one group (UsageSumKey) become one record whose held_s and lost_s are their sums, start_s and end_s the
// earliest and latest clipped times, queue empty, prices -1, job_id 0 and project empty unless grouped by.
// A summed record in `usage` must lie within one piece (it is added as it is). Records of zero length are
// left out. In the order of the pieces, then of the group's fields; the same for any order of `usage`.
// The stores' summed reads (Store::ReadUsage with cuts) follow this rule exactly.
std::vector<UsageRecord> SumUsage(const std::vector<UsageRecord>& usage, const std::vector<int64_t>& cuts,
                                  UsageSumKey key);

}  // namespace tessera

namespace tessera {

// Parses a ledger from YAML: `capacity:` and `usage:` lists whose fields are those of CapacityRecord
// and UsageRecord (tier as TierName). For the CLI and tests; the simulator builds Ledgers directly.
// Errors name the source, line and field.
Result<Ledger> ParseLedgerYaml(std::string_view text, std::string_view source);

}  // namespace tessera
