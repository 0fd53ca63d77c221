#pragma once
// Chargeback: the service's usage and cost room. It keeps the durable usage records (what each job held,
// where and from when to when) and the ledger's start, and answers usage queries: the records of an interval
// with every node's capacity over it as a cost ledger (cost/ledger.h), priced with the book valid at each
// piece's time, then grouped by team, project or job and tier, or written as FOCUS CSV. Idle capacity is
// shared in proportion to use; a team sees its records and its share of idle.
//
// With a store (UseStore: a service that pages ended jobs out), the records stay in the store: a usage
// query reads those of its interval there, summed by the database (Store::ReadUsage with cuts), so that its
// memory follows its answer's groups, not the history. Rows are priced from the records summed per group
// and per piece of the interval where the price book or the calendar month changes (SumUsage), with a
// store or without, so both answer alike.
//
// Thread safety: every method from any thread (the records under its own lock).

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cost/cost_model.h"
#include "cost/ledger.h"
#include "cost/pricebook.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "service/api_error.h"
#include "service/identity.h"
#include "store/store.h"

namespace tessera {

struct UsageQuery {
  int64_t from = -1, to = -1;     // service time; -1 = start of the ledger / now
  std::string group_by = "team";  // team, project, job
};

// How a query's rows group the records (group_by team: by team; project: and project; job: and job).
UsageSumKey SumKeyOf(const UsageQuery& q);

// The usage of a query's interval as a cost ledger (records clipped to it, the cluster's capacity over it).
struct UsageLedgerOf {
  Ledger ledger;
  CostOptions options;
};

struct UsageRow {
  std::string team, project, job, tier;
  bool idle = false;
  double gpu_hours = 0, cost = 0, idle_share_cost = 0;
  std::string price_book_date;  // price_date of the book its usage was priced with (rows split by book)
};

class Chargeback {
 public:
  // `catalog` and `books` (at least one) outlive it.
  Chargeback(const Catalog* catalog, const std::vector<PriceBook>* books)
      : catalog_(catalog), books_(books) {}

  // The records live in `store` (outlives the room): set before Restore, whose records are then none.
  void UseStore(Store* store) { store_ = store; }
  Store* store() const { return store_; }
  void Restore(std::vector<UsageRecord> usage, int64_t ledger_start);
  // Records made durable (a job's run ended or was cut); kept only without a store.
  void Add(const std::vector<UsageRecord>& usage);
  // A copy of the durable records, and the ledger's start (without a store).
  std::vector<UsageRecord> Records(int64_t* ledger_start) const;
  int64_t LedgerStart() const;
  // [from, to) cut where a price book's window or a calendar month (UTC) begins or ends: from, the cuts
  // between, to. Each piece is priced with one book on one month's invoice.
  std::vector<int64_t> Cuts(int64_t from, int64_t to) const;

  // `usage` (durable records and the running jobs' usage so far, as written or summed with Cuts) over the
  // query's interval on `cluster` (the live nodes) at `now`, with every node's capacity, priced.
  Outcome<UsageLedgerOf> Ledger(const UsageQuery& q, const std::vector<UsageRecord>& usage,
                                int64_t ledger_start, const Cluster& cluster, int64_t now) const;
  // The ledger's rows for `c`: an admin every team's and each pool's idle; others their team's and their
  // share of idle.
  Outcome<std::vector<UsageRow>> Rows(const Caller& c, const UsageQuery& q, const UsageLedgerOf& built) const;
  Outcome<std::string> FocusCsv(const Caller& c, const UsageLedgerOf& built) const;

 private:
  const Catalog* catalog_;
  const std::vector<PriceBook>* books_;
  mutable std::mutex mu_;
  std::vector<UsageRecord> usage_;  // durable records (without a store)
  int64_t ledger_start_ = 0;
  Store* store_ = nullptr;
};

}  // namespace tessera
