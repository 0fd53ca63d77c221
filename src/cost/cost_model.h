#pragma once
// CostModel: turns a Ledger (who held what, when, at what price) and a PriceBook into a CostReport:
// total cost, the same completed work priced on on-demand only, the saving, and chargeback lines per
// team, project, GPU kind, tier, pool and job, with idle capacity reported on its own.
//
// Contract (checked by Evaluate, which returns an error rather than a report that does not add up):
//   1. per pool, exactly in int64 milli-GPU-seconds: capacity = allocated + idle, idle >= 0;
//   2. total_cost = sum over teams of (cost + idle_share) + idle_unshared_cost, to 1e-9 relative;
//   3. the same for projects, GPU kinds, tiers, jobs and (team, pool) lines;
//   4. a team's idle share comes only from pools it held capacity in.
// Pure: no I/O, no clock.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"
#include "cost/ledger.h"
#include "cost/money.h"
#include "cost/pricebook.h"

namespace tessera {

// Which fraction of a GPU a partial holder is charged for (a MIG slice or a fractional share).
enum class ChargeBasis : uint8_t { kCompute, kMemory };
const char* ChargeBasisName(ChargeBasis b);
Result<ChargeBasis> ParseChargeBasis(std::string_view s);  // "compute" | "memory"

// How capacity that nobody held is shared out (as OpenCost's shareIdle). Idle is shared per pool, among
// the teams that held capacity in that pool, never across pools; the idle of a pool nobody used stays
// unshared (the platform's own row).
//   kNone: reported on its own (idle_unshared_cost); teams pay only what they held.
//   kProportional: a pool's idle in proportion to each of its teams' allocation cost in the pool
//                  (allocated GPU-seconds when the pool's price is zero).
//   kEven: a pool's idle equally among the teams that held capacity in it.
enum class IdlePolicy : uint8_t { kNone, kProportional, kEven };
const char* IdlePolicyName(IdlePolicy p);
Result<IdlePolicy> ParseIdlePolicy(std::string_view s);  // "none" | "proportional" | "even"

struct CostOptions {
  ChargeBasis charge_basis = ChargeBasis::kCompute;
  IdlePolicy idle_policy = IdlePolicy::kNone;
  // FOCUS BillingAccountId / BillingAccountName: one account per provider, "<prefix>-<provider>" and
  // "<name prefix> (<ProviderName>)"; owned hardware is the provider "onprem".
  std::string billing_account_id = "tessera";
  std::string billing_account_name = "Tessera cluster";
  // Dated pricing (the CLI and the service): every record and capacity record is priced from a book whose
  // price for its pool is valid at the record's start; none = an error naming the record's time. Off in the
  // simulator, whose run is a snapshot at the book's price_date. A record that gives its own prices is
  // attributed to the book valid at its start (BookValidOn: x_PriceBookDate).
  bool enforce_validity = false;
  // Unix time (UTC seconds) of ledger time 0, for FOCUS timestamps. Default 2025-01-01T00:00:00Z.
  int64_t epoch_unix_s = 1735689600;
};

// One chargeback line. Quantities in exact milli-GPU-seconds; costs in USD.
struct CostLine {
  std::string key;
  int64_t milli_gpu_s = 0;          // allocated (held)
  int64_t useful_milli_gpu_s = 0;   // allocated minus lost work (UsageRecord::lost_s)
  int64_t cost_cents = 0;           // sum of its records' cents (exact)
  int64_t list_cost_cents = 0;
  int64_t idle_share_cents = 0;
  double cost_usd = 0;              // allocation cost at the prices paid (= cost_cents / 100)
  double list_cost_usd = 0;         // the same quantity at on-demand list prices
  double idle_share_usd = 0;        // idle capacity cost shared to this line by the IdlePolicy
  double GpuHours() const { return static_cast<double>(milli_gpu_s) / (1000.0 * 3600.0); }
  double UsefulGpuHours() const { return static_cast<double>(useful_milli_gpu_s) / (1000.0 * 3600.0); }
  double TotalUsd() const { return CentsToUsd(TotalCents()); }
  int64_t TotalCents() const { return cost_cents + idle_share_cents; }
};

// One pool's capacity and how much of it was held.
struct PoolLine {
  std::string pool;
  Tier tier = Tier::kOnDemand;
  std::string gpu_kind;
  bool elastic = true;                 // no capacity records: capacity == usage
  int64_t capacity_milli_gpu_s = 0;
  int64_t allocated_milli_gpu_s = 0;
  int64_t idle_milli_gpu_s = 0;        // capacity - allocated, exact
  Int128 capacity_atoms = 0;          // exact cost of the capacity (atoms, cost/money.h)
  int64_t price_micros = 0;            // $/GPU-h of its (first) capacity record, micro-USD
  size_t book = 0;                     // price book of its (first) capacity record
  int64_t first_start_s = 0;           // start of its first capacity record (ledger s)
  // Cents: capacity = the capacity's cost rounded once (elastic: = allocated); allocated = sum of the
  // records' cents; idle = capacity - allocated; shared + unshared = idle.
  int64_t capacity_cents = 0, allocated_cents = 0, idle_cents = 0, idle_shared_cents = 0, idle_unshared_cents = 0;
  double capacity_usd = 0;
  double allocated_usd = 0;
  double idle_usd = 0;                 // capacity_usd - allocated_usd
  double idle_shared_usd = 0;          // part of idle_usd shared to the pool's teams
  double idle_unshared_usd = 0;        // the rest: the platform's own
};

// What one team held in one pool and the part of that pool's idle it was charged.
struct TeamPoolLine {
  std::string team;
  std::string pool;
  int64_t milli_gpu_s = 0;
  int64_t usage_cost_cents = 0;
  int64_t idle_cost_cents = 0;
  double usage_cost_usd = 0;
  double idle_cost_usd = 0;
};

// The part of a usage record inside one calendar month (UTC): one invoice line, rounded to the cent once.
struct ChargePiece {
  int64_t start_s = 0, end_s = 0;   // ledger seconds
  int64_t milli_gpu_s = 0;
  int64_t cost_cents = 0;           // nearest cent of milli_gpu_s x the price paid
  int64_t list_cost_cents = 0;      // nearest cent at the list price
};

// What one usage record costs (same order as Ledger::usage()).
struct RecordCharge {
  int64_t milli_gpu_s = 0;
  int64_t useful_milli_gpu_s = 0;
  size_t book = 0;                  // index of the price book it was priced from (CostModel::books())
  int64_t price_micros = 0, list_price_micros = 0;
  std::vector<ChargePiece> pieces;  // one per calendar month it spans
  int64_t cost_cents = 0;           // sum of its pieces
  int64_t list_cost_cents = 0;
  int64_t idle_share_cents = 0;     // its part of its pool's idle (largest remainder)
  double usd_per_gpu_hour = 0;
  double list_usd_per_gpu_hour = 0;
  double cost_usd = 0;
  double list_cost_usd = 0;
  double idle_share_usd = 0;
};

struct CostReport {
  // Exact statement figures in cents; the double figures below are these / 100.
  int64_t total_cents = 0, charged_cents = 0, idle_cents = 0, idle_shared_cents = 0, idle_unshared_cents = 0;
  int64_t list_cents = 0, on_demand_only_cents = 0;
  double total_cost = 0;              // what all capacity cost = charged_cost + idle_cost
  double charged_cost = 0;            // allocation cost of all usage records
  double idle_cost = 0;               // capacity nobody held
  double idle_shared_cost = 0;        // part of idle_cost shared out to teams
  double idle_unshared_cost = 0;      // part of idle_cost reported on its own
  double list_cost = 0;               // allocations at on-demand list prices
  double on_demand_only_cost = 0;     // useful work by kind at on-demand list prices
  double cost_saving_vs_on_demand = 0;  // 1 - total_cost / on_demand_only_cost (0 when no work)
  double capacity_gpu_hours = 0;
  double allocated_gpu_hours = 0;
  double useful_gpu_hours = 0;
  double idle_gpu_hours = 0;
  double cost_per_useful_gpu_hour = 0;  // total_cost / useful_gpu_hours (0 when none)
  ChargeBasis charge_basis = ChargeBasis::kCompute;
  IdlePolicy idle_policy = IdlePolicy::kNone;
  int64_t billing_start_s = 0;
  int64_t billing_end_s = 0;
  std::vector<CostLine> by_team;      // key: team
  std::vector<CostLine> by_project;   // key: "team/project"
  std::vector<CostLine> by_gpu_kind;  // key: kind id
  std::vector<CostLine> by_tier;      // key: TierName
  std::vector<CostLine> by_job;       // key: job id (decimal)
  std::vector<PoolLine> pools;
  std::vector<TeamPoolLine> by_team_pool;  // every (team, pool) with usage; sorted by team, then pool
  std::vector<RecordCharge> records;  // per usage record (not serialised by ToJson unless asked)
};

struct FocusRow;  // one row of the FOCUS export (focus.cc)

class CostModel {
 public:
  CostModel(PriceBook book, CostOptions options) : books_{std::move(book)}, options_(options) {}
  // Several dated books (non-empty): each record is priced from the book valid at its time
  // (CostOptions::enforce_validity); books[0] is the report's own (price_date, FOCUS list prices).
  CostModel(std::vector<PriceBook> books, CostOptions options) : books_(std::move(books)), options_(options) {}
  // Prices every record (explicit price, else its pool's), aggregates, shares idle, checks the
  // contract above. Errors name the record or pool that cannot be priced or does not reconcile.
  Result<CostReport> Evaluate(const Ledger& ledger) const;
  // FOCUS 1.0 CSV (plus FOCUS 1.1 capacity-reservation columns) of the ledger; rows and columns:
  // docs/cost.md "FOCUS export". Evaluates first.
  // `sub_account` non-empty: only that team's rows (its usage and the idle shared to it; no purchase rows,
  // no idle left unshared), priced as in the whole ledger's report.
  Result<std::string> FocusCsv(const Ledger& ledger, std::string_view sub_account = {}) const;

  const PriceBook& book() const { return books_.front(); }
  const std::vector<PriceBook>& books() const { return books_; }
  const CostOptions& options() const { return options_; }

 private:
  // Index of the book to price a record of `pool` (and `kind`) starting at ledger second `start_s`.
  Result<size_t> BookFor(const std::string& pool, const std::string& kind, int64_t start_s) const;
  Status PriceUsage(const Ledger& ledger, CostReport* rep, std::map<std::string, PoolLine>* pools) const;
  Status PriceCapacity(const Ledger& ledger, std::map<std::string, PoolLine>* pools) const;
  std::vector<FocusRow> PurchaseAndUsageRows(const Ledger& ledger, const CostReport& rep) const;
  void IdleRows(const Ledger& ledger, const CostReport& rep, std::vector<FocusRow>* rows) const;
  std::vector<PriceBook> books_;
  CostOptions options_;
};

// The same completed work on on-demand capacity only: sum of GPU-hours by kind times the kind's
// on-demand list price. Error names a kind without a list price.
Result<double> OnDemandOnlyCost(const std::map<std::string, double>& gpu_hours_by_kind, const PriceBook& book);
// 1 - actual / on_demand_only; 0 when on_demand_only <= 0.
double CostSaving(double actual_cost, double on_demand_only_cost);

// FOCUS BillingAccountId of a provider's rows: "<billing_account_id>-<provider>" (one account per provider).
std::string FocusBillingAccountId(const CostOptions& o, std::string_view provider);

// JSON of a report: totals, chargeback lines and pools; per-record charges only when asked.
nlohmann::json ToJson(const CostReport& report, bool with_records = false);

}  // namespace tessera
