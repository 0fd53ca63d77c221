#include "sim/cost_baselines.h"

#include <fmt/format.h>

#include <cmath>
#include <memory>

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
  return b == CostBaseline::kOnDemandOnly ? "on_demand_only" : "reserved_on_demand";
}

Result<Scenario> BaselineScenario(const Scenario& s, const Catalog& catalog, CostBaseline b) {
  if (!s.tiers) return Status::Error("cost baselines: the scenario has no 'tiers:' section");
  Scenario out = s;
  TierConfig cfg = *s.tiers;
  auto moves = [&](Tier t) {
    return b == CostBaseline::kOnDemandOnly ? t != Tier::kOnDemand : t == Tier::kSpot;
  };
  for (Node& n : out.cluster.nodes) {
    if (n.gpu_count == 0 || !moves(n.tier)) continue;
    Result<std::string> pool = OnDemandPoolFor(s, catalog, catalog.kind(n.kind).id);
    if (!pool.ok()) return pool.status();
    n.tier = Tier::kOnDemand;
    n.pool = *pool;
    n.price_per_gpu_hour = cfg.book.FindPool(n.pool)->usd_per_gpu_hour;
  }
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
        p.tier = Tier::kOnDemand;
        p.elastic = true;
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
  cfg.latency_sensitive_on_demand = b == CostBaseline::kOnDemandOnly;
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
          {"work_volume", d("useful_at_list")}};
}

Status AddCostBaselines(const Scenario& s, const std::vector<std::string>& policies, const Catalog& catalog,
                        ScenarioOutcome* out) {
  if (!s.tiers || !s.tiers->baselines) return Status::Ok();
  for (CostBaseline b : {CostBaseline::kOnDemandOnly, CostBaseline::kReservedOnDemand}) {
    Result<Scenario> bs = BaselineScenario(s, catalog, b);
    if (!bs.ok()) return bs.status();
    Result<ScenarioOutcome> res = RunScenario(*bs, policies, catalog);
    if (!res.ok()) return Status::Error(fmt::format("{} baseline: {}", CostBaselineName(b), res.error()));
    const std::string name = CostBaselineName(b);
    const bool od = b == CostBaseline::kOnDemandOnly;
    for (size_t v = 0; v < out->variants.size(); ++v) {
      for (size_t p = 0; p < out->variants[v].runs.size(); ++p) {
        for (size_t k = 0; k < out->variants[v].runs[p].size(); ++k) {
          RunResult& r = out->variants[v].runs[p][k];
          const RunResult& base = res->variants[v].runs[p][k];
          if (Extra(base, "ledger_error") != 0)
            return Status::Error(
                fmt::format("{} baseline, seed {}: the cost ledger does not reconcile", name, base.seed));
          for (const char* fig : kBaselineFigures)
            r.extra["baselines." + name + "." + fig] = Extra(base, fig);
          r.extra["baselines." + name + ".makespan_h"] = base.makespan_s / 3600.0;
          r.extra[od ? "cost_saving_vs_on_demand" : "cost_saving_vs_reserved_on_demand"] =
              CostSaving(Extra(r, "total_cost"), Extra(base, "total_cost"));
          const std::string prefix = od ? "saving_decomposition." : "saving_vs_reserved_on_demand.";
          for (const auto& [part, usd] : SavingDecomposition(r, base)) r.extra[prefix + part] = usd;
        }
      }
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
                                       std::pair{"reserved_on_demand", "reserved + on-demand, no spot"}}) {
        const double base = mean(std::string("baselines.") + key + ".total_cost");
        out += fmt::format("  {:<40} {:>12}   saving {:5.1f}%   inference p99 wait {:.0f} s (run {:.0f} s)\n",
                           label, Money(base), 100 * CostSaving(total, base),
                           mean(std::string("baselines.") + key + ".inference_queue_delay_p99_s"),
                           mean("inference_queue_delay_p99_s"));
      }
      out +=
          fmt::format("  saving vs on-demand only, by part:        {:>12}   vs reserved + on-demand:\n", "");
      double sum_od = 0, sum_rod = 0;
      for (const char* part : {"commitment", "spot", "on_demand_discount", "checkpoints", "lost_work",
                               "restarts", "paid_idle", "work_volume"}) {
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
