#include "sim/cost_baselines.h"

#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <optional>

#include "cost/cost_model.h"
#include "sim/metrics.h"

namespace tessera {
namespace {

double Extra(const RunResult& r, const std::string& key) {
  auto it = r.extra.find(key);
  return it == r.extra.end() ? 0.0 : it->second;
}

// The on-demand pool a node of `kind` moves to: one the scenario already has, else the book's first.
Result<std::string> OnDemandPoolFor(const Scenario& s, const Catalog& catalog, const std::string& kind) {
  for (const TierPoolConfig& p : s.tiers->pools) {
    if (p.tier != Tier::kOnDemand || p.nodes.empty()) continue;
    if (catalog.kind(s.cluster.nodes[p.nodes.front()].kind).id == kind) return p.pool;
  }
  for (const Pool& p : s.tiers->book.pools())
    if (p.tier == Tier::kOnDemand && p.gpu_kind == kind) return p.name;
  return Status::Error(
      fmt::format("cost baselines: the price book has no on-demand pool for GPU kind '{}' (add one "
                  "under 'prices:', or set tiers: {{cost: {{baselines: false}}}})",
                  kind));
}

// Figures of a baseline run copied under baselines.<name>.
const char* const kBaselineFigures[] = {"total_cost",
                                        "idle_cost",
                                        "inference_queue_delay_p50_s",
                                        "inference_queue_delay_p99_s",
                                        "all_training_completed",
                                        "node_acquisitions"};

std::string Money(double v) {
  const std::string digits = fmt::format("{:.0f}", std::fabs(v));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (v < 0 ? "-$" : "$") + out;
}

}  // namespace

const char* CostBaselineName(CostBaseline b) {
  switch (b) {
    case CostBaseline::kOnDemandOnly: return "on_demand_only";
    case CostBaseline::kReservedOnDemand: return "reserved_on_demand";
    case CostBaseline::kCommitmentsOnDemand: return "commitments_on_demand";
  }
  return "?";
}

namespace {

// The cheapest 1- or 3-year commitment (a reserved pool with a term) of `kind` in the book; null if none.
const Pool* CommitmentPoolFor(const PriceBook& book, const std::string& kind) {
  const Pool* best = nullptr;
  for (const Pool& p : book.pools())
    if (p.tier == Tier::kReserved && p.gpu_kind == kind && p.commitment_term_days >= 365 &&
        (best == nullptr || p.usd_per_gpu_hour < best->usd_per_gpu_hour))
      best = &p;
  return best;
}

// Moves the cluster's nodes for baseline `b`: `level` nodes (in node order: static capacity first) stay up
// all run, always-on on-demand or under commitment; the others become elastic on-demand (reserved_on_demand:
// only spot moves). Derived always-on pools are added to `book`.
Status MoveNodes(const Scenario& s, const Catalog& catalog, CostBaseline b, int level, Scenario* out,
                 PriceBook* book) {
  std::vector<size_t> order;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < out->cluster.nodes.size(); ++i)
      if (out->cluster.nodes[i].gpu_count > 0 && ((out->cluster.nodes[i].tier == Tier::kReserved ||
                                                    out->cluster.nodes[i].tier == Tier::kOwned) == (pass == 0)))
        order.push_back(i);
  int kept = 0;
  for (size_t i : order) {
    Node& n = out->cluster.nodes[i];
    const std::string kind = catalog.kind(n.kind).id;
    if (b == CostBaseline::kReservedOnDemand && n.tier != Tier::kSpot) continue;
    Result<std::string> pool = OnDemandPoolFor(s, catalog, kind);
    if (!pool.ok()) return pool.status();
    n.price_per_gpu_hour = 0;
    const Pool* commit = b == CostBaseline::kCommitmentsOnDemand ? CommitmentPoolFor(*book, kind) : nullptr;
    if (kept < level && b != CostBaseline::kReservedOnDemand && (commit || b == CostBaseline::kOnDemandOnly)) {
      ++kept;
      if (commit) {
        n.tier = Tier::kReserved;
        n.pool = commit->name;
        continue;
      }
      Pool always = *book->FindPool(*pool);
      always.name = *pool + "-always-on";
      book->AddPool(always);
      n.tier = Tier::kOnDemand;
      n.pool = always.name;
      continue;
    }
    n.tier = Tier::kOnDemand;
    n.pool = *pool;
  }
  return Status::Ok();
}

}  // namespace

Result<Scenario> BaselineScenario(const Scenario& s, const Catalog& catalog, CostBaseline b, int level) {
  if (!s.tiers) return Status::Error("cost baselines: the scenario has no 'tiers:' section");
  Scenario out = s;
  TierConfig cfg = *s.tiers;
  if (Status st = MoveNodes(s, catalog, b, level, &out, &cfg.book); !st.ok()) return st;
  // Pools again, in first-node order: settings of the scenario's pool of the same name, else the book's.
  std::map<std::string, TierPoolConfig> before;
  for (const TierPoolConfig& p : s.tiers->pools) before[p.pool] = p;
  const int64_t idle_release_s = s.tiers->pools.empty() ? 600 : s.tiers->pools.front().idle_release_s;
  cfg.pools.clear();
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < out.cluster.nodes.size(); ++i) {
    const Node& n = out.cluster.nodes[i];
    if (n.gpu_count == 0) continue;
    auto [it, fresh] = index.emplace(n.pool, cfg.pools.size());
    if (fresh) {
      TierPoolConfig p;
      if (auto f = before.find(n.pool); f != before.end()) {
        p = f->second;
      } else {
        const Pool* bp = cfg.book.FindPool(n.pool);
        p.pool = n.pool;
        p.tier = n.tier;
        p.elastic = n.tier == Tier::kOnDemand && n.pool.find("-always-on") == std::string::npos;
        p.provisioning_delay_s = static_cast<int64_t>(std::llround(bp->provisioning_delay_s));
        p.idle_release_s = idle_release_s;
      }
      p.nodes.clear();
      cfg.pools.push_back(p);
    }
    cfg.pools[it->second].nodes.push_back(static_cast<NodeId>(i));
  }
  cfg.reclaim_trace.clear();
  cfg.baselines = false;
  cfg.latency_sensitive_on_demand = b != CostBaseline::kReservedOnDemand;
  out.tiers = std::make_shared<const TierConfig>(std::move(cfg));
  out.name = s.name + " (" + CostBaselineName(b) + " baseline)";
  return out;
}

std::map<std::string, double> SavingDecomposition(const RunResult& run, const RunResult& baseline) {
  auto d = [&](const char* part) {
    const std::string k = std::string("cost_breakdown.") + part;
    return Extra(baseline, k) - Extra(run, k);
  };
  // baseline - run = sum of (baseline part - run part), discounts entering with a minus sign.
  return {{"commitment", -d("discount_committed")},
          {"spot", -d("discount_spot")},
          {"on_demand_discount", -d("discount_on_demand")},
          {"checkpoints", d("checkpoints")},
          {"lost_work", d("lost_work")},
          {"restarts", d("restarts")},
          {"paid_idle", d("paid_idle")},
          {"rounding", d("rounding")},
          {"work_volume", d("useful_at_list")}};
}

namespace {

// Whether every run of `o` meets the inference SLO.
bool SloMet(const ScenarioOutcome& o, double slo_s) {
  for (const VariantOutcome& v : o.variants)
    for (const auto& runs : v.runs)
      for (const RunResult& r : runs)
        if (Extra(r, "inference_queue_delay_p99_s") > slo_s) return false;
  return true;
}

// Mean total cost over every run of `o`.
double MeanTotal(const ScenarioOutcome& o) {
  double sum = 0;
  int n = 0;
  for (const VariantOutcome& v : o.variants)
    for (const auto& runs : v.runs)
      for (const RunResult& r : runs) {
        sum += Extra(r, "total_cost");
        ++n;
      }
  return n > 0 ? sum / n : 0;
}

struct BaselineOutcome {
  ScenarioOutcome outcome;
  int level = 0;       // nodes always on / under commitment
  bool met = false;    // the SLO in every run
};

// Runs baseline `b`: reserved_on_demand as it is; on_demand_only at the least always-on level that meets
// the SLO; commitments_on_demand at the level of least mean cost among those that meet it.
Result<BaselineOutcome> RunBaseline(const Scenario& s, const std::vector<std::string>& policies,
                                    const Catalog& catalog, CostBaseline b) {
  const double slo = s.tiers->inference_slo_p99_wait_s;
  int nodes = 0;
  for (const Node& n : s.cluster.nodes) nodes += n.gpu_count > 0 ? 1 : 0;
  const int last = b == CostBaseline::kReservedOnDemand ? 0 : nodes;
  std::optional<BaselineOutcome> best;
  for (int level = 0; level <= last; ++level) {
    Result<Scenario> bs = BaselineScenario(s, catalog, b, level);
    if (!bs.ok()) return bs.status();
    Result<ScenarioOutcome> res = RunScenario(*bs, policies, catalog);
    if (!res.ok()) return Status::Error(fmt::format("{} baseline: {}", CostBaselineName(b), res.error()));
    BaselineOutcome o{std::move(res).value(), level, false};
    o.met = SloMet(o.outcome, slo);
    const bool better = !best || (o.met && (!best->met || MeanTotal(o.outcome) < MeanTotal(best->outcome)));
    if (better) best = std::move(o);
    if (best->met && b == CostBaseline::kOnDemandOnly) break;
  }
  return std::move(*best);
}

// Copies baseline `name`'s figures into every run of `out`, with the savings and the decomposition.
Status CopyBaseline(const std::string& name, const BaselineOutcome& bo, int gpus_per_node_level, double slo,
                    ScenarioOutcome* out) {
  const ScenarioOutcome& res = bo.outcome;
  for (size_t v = 0; v < out->variants.size(); ++v)
    for (size_t p = 0; p < out->variants[v].runs.size(); ++p)
      for (size_t k = 0; k < out->variants[v].runs[p].size(); ++k) {
        RunResult& r = out->variants[v].runs[p][k];
        const RunResult& base = res.variants[v].runs[p][k];
        if (Extra(base, "ledger_error") != 0)
          return Status::Error(fmt::format("{} baseline, seed {}: the cost ledger does not reconcile", name, base.seed));
        const std::string pre = "baselines." + name + ".";
        for (const char* fig : kBaselineFigures) r.extra[pre + fig] = Extra(base, fig);
        r.extra[pre + "makespan_h"] = base.makespan_s / 3600.0;
        r.extra[pre + "inference_p99_wait_s"] = Extra(base, "inference_queue_delay_p99_s");
        r.extra[pre + "inference_slo_p99_wait_s"] = slo;
        r.extra[pre + "slo_met"] = Extra(base, "inference_queue_delay_p99_s") <= slo ? 1 : 0;
        if (name == "on_demand_only") r.extra[pre + "always_on_gpus"] = gpus_per_node_level;
        if (name == "commitments_on_demand") r.extra[pre + "commitment_gpus"] = gpus_per_node_level;
        r.extra[name == "on_demand_only" ? "cost_saving_vs_on_demand" : "cost_saving_vs_" + name] =
            CostSaving(Extra(r, "total_cost"), Extra(base, "total_cost"));
        if (name == "commitments_on_demand") continue;
        const std::string prefix = name == "on_demand_only" ? "saving_decomposition." : "saving_vs_reserved_on_demand.";
        for (const auto& [part, usd] : SavingDecomposition(r, base)) r.extra[prefix + part] = usd;
      }
  return Status::Ok();
}

// GPUs on the first `level` nodes of baseline `b`'s order (static capacity first).
int LevelGpus(const Scenario& s, int level) {
  std::vector<int> gpus;
  for (int pass = 0; pass < 2; ++pass)
    for (const Node& n : s.cluster.nodes)
      if (n.gpu_count > 0 && ((n.tier == Tier::kReserved || n.tier == Tier::kOwned) == (pass == 0)))
        gpus.push_back(n.gpu_count);
  int sum = 0;
  for (int i = 0; i < level && i < static_cast<int>(gpus.size()); ++i) sum += gpus[i];
  return sum;
}

}  // namespace

Status AddCostBaselines(const Scenario& s, const std::vector<std::string>& policies, const Catalog& catalog,
                        ScenarioOutcome* out) {
  if (!s.tiers || !s.tiers->baselines) return Status::Ok();
  const double slo = s.tiers->inference_slo_p99_wait_s;
  std::vector<BaselineOutcome> met;
  for (CostBaseline b : {CostBaseline::kOnDemandOnly, CostBaseline::kCommitmentsOnDemand,
                         CostBaseline::kReservedOnDemand}) {
    Result<BaselineOutcome> bo = RunBaseline(s, policies, catalog, b);
    if (!bo.ok()) return bo.status();
    if (Status st = CopyBaseline(CostBaselineName(b), *bo, LevelGpus(s, bo->level), slo, out); !st.ok()) return st;
    if (bo->met) met.push_back(std::move(bo).value());
  }
  // The headline, per policy: against the cheapest baseline that met the SLO, on the mean costs over seeds.
  auto mean = [](const std::vector<RunResult>& runs) {
    double sum = 0;
    for (const RunResult& r : runs) sum += Extra(r, "total_cost");
    return runs.empty() ? 0.0 : sum / static_cast<double>(runs.size());
  };
  for (size_t v = 0; v < out->variants.size(); ++v)
    for (size_t p = 0; p < out->variants[v].runs.size(); ++p) {
      double best = 0;
      for (const BaselineOutcome& bo : met) {
        const double m = mean(bo.outcome.variants[v].runs[p]);
        if (best == 0 || m < best) best = m;
      }
      const double saving = CostSaving(mean(out->variants[v].runs[p]), best);
      for (RunResult& r : out->variants[v].runs[p]) {
        r.extra["cost_saving_vs_best"] = saving;
        r.extra["inference_slo_p99_wait_s"] = slo;
        r.extra["slo_met"] = Extra(r, "inference_queue_delay_p99_s") <= slo ? 1 : 0;
      }
    }
  return Status::Ok();
}

std::string CostTable(const ScenarioOutcome& o, const std::string& price_date) {
  std::string out;
  for (const VariantOutcome& v : o.variants) {
    for (const std::vector<RunResult>& runs : v.runs) {
      if (runs.empty() || !runs.front().extra.count("total_cost")) continue;
      auto mean = [&](const std::string& key) {
        double sum = 0;
        for (const RunResult& r : runs) sum += Extra(r, key);
        return sum / static_cast<double>(runs.size());
      };
      out += fmt::format("\ncost of {}{} (price date {}; means over {} seeds)\n", runs.front().policy,
                         v.variant.label.empty() ? "" : ", " + v.variant.label, price_date, runs.size());
      const double total = mean("total_cost");
      out += fmt::format("  {:<40} {:>12}\n", "this run (reserved + on-demand + spot)", Money(total));
      if (!runs.front().extra.count("baselines.on_demand_only.total_cost")) continue;
      for (const auto& [key, label] : {std::pair{"on_demand_only", "on-demand only (simulated)"},
                                       std::pair{"commitments_on_demand", "commitments + on-demand"},
                                       std::pair{"reserved_on_demand", "reserved + on-demand, no spot"}}) {
        const std::string b = std::string("baselines.") + key + ".";
        const double base = mean(b + "total_cost");
        const double level = mean(b + (std::string(key) == "on_demand_only" ? "always_on_gpus" : "commitment_gpus"));
        out += fmt::format("  {:<40} {:>12}   saving {:5.1f}%   inference p99 wait {:.0f} s (run {:.0f} s), SLO {:g} s "
                           "{}{}\n",
                           label, Money(base), 100 * CostSaving(total, base), mean(b + "inference_p99_wait_s"),
                           mean("inference_queue_delay_p99_s"), mean(b + "inference_slo_p99_wait_s"),
                           mean(b + "slo_met") >= 1 ? "met" : "NOT met in every seed",
                           level > 0 ? fmt::format(", {:g} GPUs {}", level,
                                                   std::string(key) == "on_demand_only" ? "always on" : "committed")
                                     : "");
      }
      out += fmt::format("  {:<40} {:>12}   saving {:5.1f}%\n", "headline: against the cheapest baseline", "",
                         100 * mean("cost_saving_vs_best"));
      out +=
          fmt::format("  saving vs on-demand only, by part:        {:>12}   vs reserved + on-demand:\n", "");
      double sum_od = 0, sum_rod = 0;
      for (const char* part : {"commitment", "spot", "on_demand_discount", "checkpoints", "lost_work",
                               "restarts", "paid_idle", "rounding", "work_volume"}) {
        const double a = mean(std::string("saving_decomposition.") + part);
        const double b = mean(std::string("saving_vs_reserved_on_demand.") + part);
        sum_od += a;
        sum_rod += b;
        out += fmt::format("    {:<38} {:>12}   {:>12}\n", part, Money(a), Money(b));
      }
      out += fmt::format("    {:<38} {:>12}   {:>12}\n", "total", Money(sum_od), Money(sum_rod));
    }
  }
  return out;
}

}  // namespace tessera
