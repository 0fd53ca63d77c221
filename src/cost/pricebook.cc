#include "cost/pricebook.h"

#include <yaml-cpp/yaml.h>

#include <fmt/format.h>

#include <cstdlib>
#include <limits>
#include <set>

#include "cost/yaml_fields.h"

namespace tessera {

using cost_internal::FieldReader;
using cost_internal::NodeWhere;

const char* TierKey(Tier t) {
  switch (t) {
    case Tier::kReserved: return "reserved";
    case Tier::kOnDemand: return "on-demand";
    case Tier::kSpot: return "spot";
    case Tier::kOwned: return "owned";
  }
  return "?";
}

Result<Tier> ParseTierKey(std::string_view s) {
  if (s == "reserved") return Tier::kReserved;
  if (s == "on-demand" || s == "on_demand" || s == "ondemand") return Tier::kOnDemand;
  if (s == "spot") return Tier::kSpot;
  if (s == "owned") return Tier::kOwned;
  return Status::Error(fmt::format("unknown tier '{}' (expected reserved, on-demand, spot or owned)", s));
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Status ParseOwned(const YAML::Node& node, std::string_view source, const std::string& path, OwnedCost* o) {
  FieldReader r(node, source, path);
  int64_t gpus = o->gpus;
  r.Int("gpus", &gpus, true, 1, 1 << 20);
  o->gpus = static_cast<int>(gpus);
  r.Double("capex_usd", &o->capex_usd, true, 0, kInf);
  r.Double("life_months", &o->life_months, true, 1e-9, kInf);
  r.Double("avg_power_kw", &o->avg_power_kw, false, 0, kInf);
  r.Double("usd_per_kwh", &o->usd_per_kwh, false, 0, kInf);
  r.Double("pue", &o->pue, false, 1.0, 10.0);
  r.Double("colo_kw", &o->colo_kw, false, 0, kInf);
  r.Double("colo_usd_per_kw_month", &o->colo_usd_per_kw_month, false, 0, kInf);
  r.Double("other_ops_usd_per_month", &o->other_ops_usd_per_month, false, 0, kInf);
  return r.Finish();
}

Result<Pool> ParsePool(const YAML::Node& node, std::string_view source, const std::string& path) {
  FieldReader r(node, source, path);
  Pool p;
  r.String("name", &p.name, true);
  std::string tier;
  r.String("tier", &tier, true);
  if (r.status().ok()) {
    Result<Tier> t = ParseTierKey(tier);
    if (!t.ok()) r.Fail("tier", t.error());
    else p.tier = *t;
  }
  r.String("gpu_kind", &p.gpu_kind, true);
  r.String("provider", &p.provider, false);
  r.String("source", &p.source, false);
  r.String("date", &p.date, false);
  const bool owned = p.tier == Tier::kOwned;
  r.Double("usd_per_gpu_hour", &p.usd_per_gpu_hour, !owned, 0, kInf);
  r.Double("provisioning_delay_s", &p.provisioning_delay_s, false, 0, kInf);
  r.Double("reclaim_notice_s", &p.reclaim_notice_s, false, 0, kInf);
  r.Double("reclaim_rate_per_hour", &p.reclaim_rate_per_hour, false, 0, kInf);
  if (r.status().ok()) {
    if (p.tier != Tier::kSpot && (r.Has("reclaim_notice_s") || r.Has("reclaim_rate_per_hour"))) {
      r.Fail(r.Has("reclaim_notice_s") ? "reclaim_notice_s" : "reclaim_rate_per_hour",
             "only spot pools are reclaimed");
    }
    if (p.tier == Tier::kSpot && !r.Has("reclaim_notice_s")) {
      r.Fail("reclaim_notice_s", "missing (required for spot pools: AWS 120, GCP/Azure 30)");
    }
  }
  YAML::Node owned_node = r.Child("owned");
  if (r.status().ok()) {
    if (owned && !owned_node) r.Fail("owned", "missing (required for owned pools)");
    else if (!owned && owned_node) r.Fail("owned", "only owned pools have purchase costs");
  }
  Status st = r.Finish();
  if (!st.ok()) return st;
  if (owned) {
    Status os = ParseOwned(owned_node, source, path + ".owned", &p.owned);
    if (!os.ok()) return os;
    if (!node["usd_per_gpu_hour"]) p.usd_per_gpu_hour = p.owned.UsdPerGpuHour();
  }
  return p;
}

Result<ListPrice> ParseListPrice(const YAML::Node& node, std::string_view source, const std::string& path) {
  FieldReader r(node, source, path);
  ListPrice lp;
  r.String("gpu_kind", &lp.gpu_kind, true);
  r.Double("usd_per_gpu_hour", &lp.usd_per_gpu_hour, true, 0, kInf);
  r.String("source", &lp.source, false);
  r.String("date", &lp.date, false);
  Status st = r.Finish();
  if (!st.ok()) return st;
  return lp;
}

// Parses `text` into pools and list prices (no merging; duplicates within one text are errors).
Status ParseBook(std::string_view text, std::string_view source, std::vector<Pool>* pools,
                 std::vector<ListPrice>* lists) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::Error(fmt::format("{}:{}: YAML syntax error: {}", source, e.mark.line + 1, e.msg));
  }
  if (root.IsNull()) return Status::Ok();
  FieldReader r(root, source, "");
  YAML::Node pool_nodes = r.Child("pools");
  YAML::Node list_nodes = r.Child("on_demand_list");
  Status st = r.Finish();
  if (!st.ok()) return st;
  if (pool_nodes && !pool_nodes.IsSequence()) return Status::Error(NodeWhere(source, pool_nodes, "pools") + ": expected a list");
  if (list_nodes && !list_nodes.IsSequence()) {
    return Status::Error(NodeWhere(source, list_nodes, "on_demand_list") + ": expected a list");
  }
  std::set<std::string> names;
  for (size_t i = 0; pool_nodes && i < pool_nodes.size(); ++i) {
    std::string path = fmt::format("pools[{}]", i);
    Result<Pool> p = ParsePool(pool_nodes[i], source, path);
    if (!p.ok()) return p.status();
    if (!names.insert(p->name).second) {
      return Status::Error(NodeWhere(source, pool_nodes[i], path + ".name") + ": duplicate pool '" + p->name + "'");
    }
    pools->push_back(std::move(p).value());
  }
  std::set<std::string> kinds;
  for (size_t i = 0; list_nodes && i < list_nodes.size(); ++i) {
    std::string path = fmt::format("on_demand_list[{}]", i);
    Result<ListPrice> lp = ParseListPrice(list_nodes[i], source, path);
    if (!lp.ok()) return lp.status();
    if (!kinds.insert(lp->gpu_kind).second) {
      return Status::Error(NodeWhere(source, list_nodes[i], path + ".gpu_kind") + ": duplicate kind '" +
                           lp->gpu_kind + "'");
    }
    lists->push_back(std::move(lp).value());
  }
  return Status::Ok();
}

}  // namespace

const PriceBook& PriceBook::Default() {
  static const PriceBook* book = [] {
    Result<PriceBook> b = FromYaml(DefaultYaml(), "<default price book>");
    TESSERA_CHECK(b.ok(), b.error());
    return new PriceBook(std::move(b).value());
  }();
  return *book;
}

Result<PriceBook> PriceBook::FromYaml(std::string_view text, std::string_view source) {
  PriceBook book;
  Status st = ParseBook(text, source, &book.pools_, &book.list_prices_);
  if (!st.ok()) return st;
  return book;
}

Status PriceBook::Merge(std::string_view text, std::string_view source) {
  std::vector<Pool> pools;
  std::vector<ListPrice> lists;
  Status st = ParseBook(text, source, &pools, &lists);
  if (!st.ok()) return st;
  for (Pool& p : pools) {
    bool replaced = false;
    for (Pool& q : pools_) {
      if (q.name == p.name) {
        q = p;
        replaced = true;
      }
    }
    if (!replaced) pools_.push_back(std::move(p));
  }
  for (ListPrice& lp : lists) {
    bool replaced = false;
    for (ListPrice& q : list_prices_) {
      if (q.gpu_kind == lp.gpu_kind) {
        q = lp;
        replaced = true;
      }
    }
    if (!replaced) list_prices_.push_back(std::move(lp));
  }
  return Status::Ok();
}

const Pool* PriceBook::FindPool(std::string_view name) const {
  for (const Pool& p : pools_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const ListPrice* PriceBook::FindListPrice(std::string_view gpu_kind) const {
  for (const ListPrice& lp : list_prices_) {
    if (lp.gpu_kind == gpu_kind) return &lp;
  }
  return nullptr;
}

Result<double> PriceBook::OnDemandListPrice(std::string_view gpu_kind) const {
  const ListPrice* lp = FindListPrice(gpu_kind);
  if (lp == nullptr) return Status::Error(fmt::format("no on-demand list price for GPU kind '{}'", gpu_kind));
  return lp->usd_per_gpu_hour;
}

}  // namespace tessera
