#include "cost/pricebook.h"

#include <yaml-cpp/yaml.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <set>

#include "base/yaml_reader.h"
#include "base/stats.h"

namespace tessera {

std::string PriceDateConflict(const PriceValidity& v, const std::string& price_date) {
  if (price_date.empty()) return "";
  if (!v.valid_from.empty() && price_date < v.valid_from) {
    return fmt::format("the price holds from {}, after the book's price_date {}", v.valid_from, price_date);
  }
  if (!v.valid_until.empty() && price_date >= v.valid_until && v.carried_forward.empty()) {
    return fmt::format("the price held until {}, before the book's price_date {} (mark it carried_forward with "
                       "the reason, or set allow_mixed_dates: true)",
                       v.valid_until, price_date);
  }
  return "";
}

namespace {


bool IsDate(const std::string& s) {
  int y = 0, m = 0, d = 0;
  char tail = 0;
  return s.size() == 10 && std::sscanf(s.c_str(), "%4d-%2d-%2d%c", &y, &m, &d, &tail) == 3 && m >= 1 && m <= 12 &&
         d >= 1 && d <= 31 && s[4] == '-' && s[7] == '-';
}

void ReadValidity(FieldReader& r, PriceValidity* v) {
  r.String("valid_from", &v->valid_from, false);
  r.String("valid_until", &v->valid_until, false);
  r.String("carried_forward", &v->carried_forward, false);
  if (!r.status().ok()) return;
  for (const auto& [key, value] : {std::pair{"valid_from", &v->valid_from}, std::pair{"valid_until", &v->valid_until}}) {
    if (!value->empty() && !IsDate(*value)) r.Fail(key, fmt::format("'{}' is not a date YYYY-MM-DD", *value));
  }
  if (r.status().ok() && !v->valid_from.empty() && !v->valid_until.empty() && v->valid_until <= v->valid_from) {
    r.Fail("valid_until", "must be after valid_from");
  }
}

// Top-level fields of a price book text.
struct BookHeader {
  std::string price_date;
  std::string title;
  bool allow_mixed_dates = false;
  PriceValidity window;
};

// A dated book takes only dated prices: an entry needs a `date` or a validity window.
std::string Undated(const std::string& date, const PriceValidity& v, const std::string& price_date) {
  if (price_date.empty() || !date.empty() || v.Dated()) return "";
  return fmt::format("no date and no validity window (give date and valid_from / valid_until); a dated book "
                     "(price_date {}) takes only dated prices",
                     price_date);
}

Status ParseOwned(const YAML::Node& node, std::string_view source, const std::string& path, OwnedCost* o) {
  FieldReader r(node, source, path);
  int64_t gpus = o->gpus;
  r.Int("gpus", &gpus, true, 1, 1 << 20);
  o->gpus = static_cast<int>(gpus);
  r.Double("capex_usd", &o->capex_usd, true, 0, kInfinity);
  r.Double("life_months", &o->life_months, true, 1e-9, kInfinity);
  r.Double("avg_power_kw", &o->avg_power_kw, false, 0, kInfinity);
  r.Double("idle_power_kw", &o->idle_power_kw, false, 0, kInfinity);
  r.Double("usd_per_kwh", &o->usd_per_kwh, false, 0, kInfinity);
  r.Double("pue", &o->pue, false, 1.0, 10.0);
  r.Double("colo_kw", &o->colo_kw, false, 0, kInfinity);
  r.Double("colo_usd_per_kw_month", &o->colo_usd_per_kw_month, false, 0, kInfinity);
  r.Double("other_ops_usd_per_month", &o->other_ops_usd_per_month, false, 0, kInfinity);
  r.Double("discount_rate_per_year", &o->discount_rate_per_year, false, 0, 1);
  r.Double("resale_fraction", &o->resale_fraction, false, 0, 1);
  r.Double("utilization", &o->utilization, false, 1e-9, 1);
  if (r.status().ok() && o->idle_power_kw > o->avg_power_kw) {
    r.Fail("idle_power_kw", fmt::format("{:g} exceeds avg_power_kw, the busy draw ({:g})", o->idle_power_kw,
                                        o->avg_power_kw));
  }
  return r.Finish();
}

Result<Pool> ParsePool(const YAML::Node& node, std::string_view source, const std::string& path) {
  FieldReader r(node, source, path);
  Pool p;
  r.String("name", &p.name, true);
  std::string tier;
  r.String("tier", &tier, true);
  if (r.status().ok()) {
    Result<Tier> t = ParseTier(tier);
    if (!t.ok()) r.Fail("tier", t.error());
    else p.tier = *t;
  }
  r.String("gpu_kind", &p.gpu_kind, true);
  r.String("provider", &p.provider, false);
  r.String("region", &p.region, false);
  r.String("region_name", &p.region_name, false);
  r.String("sku", &p.sku, false);
  r.String("commitment_type", &p.commitment_type, false);
  r.String("commitment_category", &p.commitment_category, false);
  r.Int("commitment_term_days", &p.commitment_term_days, false, 1, 3650);
  if (r.status().ok() && !p.commitment_category.empty() && p.commitment_category != "Usage" &&
      p.commitment_category != "Spend") {
    r.Fail("commitment_category", "expected Usage or Spend (FOCUS CommitmentDiscountCategory)");
  }
  if (r.status().ok() && (!p.commitment_type.empty() || r.Has("commitment_term_days")) && p.tier != Tier::kReserved) {
    r.Fail(r.Has("commitment_term_days") ? "commitment_term_days" : "commitment_type",
           "only reserved pools are commitments");
  }
  r.String("source", &p.source, false);
  r.String("date", &p.date, false);
  ReadValidity(r, &p.validity);
  const bool owned = p.tier == Tier::kOwned;
  r.Double("usd_per_gpu_hour", &p.usd_per_gpu_hour, !owned, 0, kInfinity);
  r.Double("provisioning_delay_s", &p.provisioning_delay_s, false, 0, 1e9);  // cast to whole seconds
  r.Double("reclaim_notice_s", &p.reclaim_notice_s, false, 0, 1e9);
  r.Double("reclaim_rate_per_hour", &p.reclaim_rate_per_hour, false, 0, 1e6);
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
  r.Double("usd_per_gpu_hour", &lp.usd_per_gpu_hour, true, 0, kInfinity);
  r.String("source", &lp.source, false);
  r.String("date", &lp.date, false);
  ReadValidity(r, &lp.validity);
  Status st = r.Finish();
  if (!st.ok()) return st;
  return lp;
}

// Parses `text` into pools and list prices (no merging; duplicates within one text are errors).
Status ParseBook(std::string_view text, std::string_view source, std::vector<Pool>* pools,
                 std::vector<ListPrice>* lists, BookHeader* header) {
  auto parsed = ParseYaml(text, source);
  if (!parsed.ok()) return parsed.status();
  const YAML::Node root = *parsed;
  if (root.IsNull()) return Status::Ok();
  FieldReader r(root, source, "");
  YAML::Node pool_nodes = r.Child("pools");
  YAML::Node list_nodes = r.Child("on_demand_list");
  r.String("price_date", &header->price_date, false);
  r.String("title", &header->title, false);
  std::string mixed = "false";
  r.String("allow_mixed_dates", &mixed, false);
  if (r.status().ok() && mixed != "true" && mixed != "false") r.Fail("allow_mixed_dates", "expected true or false");
  header->allow_mixed_dates = header->allow_mixed_dates || mixed == "true";
  if (r.status().ok() && !header->price_date.empty() && !IsDate(header->price_date)) {
    r.Fail("price_date", fmt::format("'{}' is not a date YYYY-MM-DD", header->price_date));
  }
  PriceValidity window;
  ReadValidity(r, &window);
  if (window.Dated()) header->window = window;
  Status st = r.Finish();
  if (!st.ok()) return st;
  if (pool_nodes && !pool_nodes.IsSequence()) return Status::Error(YamlWhere(source, pool_nodes, "pools") + ": expected a list");
  if (list_nodes && !list_nodes.IsSequence()) {
    return Status::Error(YamlWhere(source, list_nodes, "on_demand_list") + ": expected a list");
  }
  std::set<std::string> names;
  for (size_t i = 0; pool_nodes && i < pool_nodes.size(); ++i) {
    std::string path = fmt::format("pools[{}]", i);
    Result<Pool> p = ParsePool(pool_nodes[i], source, path);
    if (!p.ok()) return p.status();
    if (!names.insert(p->name).second) {
      return Status::Error(YamlWhere(source, pool_nodes[i], path + ".name") + ": duplicate pool '" + p->name + "'");
    }
    if (std::string why = PriceDateConflict(p->validity, header->price_date); !why.empty() && !header->allow_mixed_dates) {
      return Status::Error(YamlWhere(source, pool_nodes[i], path) + ": pool '" + p->name + "': " + why);
    }
    if (std::string why = Undated(p->date, p->validity, header->price_date); !why.empty()) {
      return Status::Error(YamlWhere(source, pool_nodes[i], path) + ": pool '" + p->name + "': " + why);
    }
    pools->push_back(std::move(p).value());
  }
  std::set<std::string> kinds;
  for (size_t i = 0; list_nodes && i < list_nodes.size(); ++i) {
    std::string path = fmt::format("on_demand_list[{}]", i);
    Result<ListPrice> lp = ParseListPrice(list_nodes[i], source, path);
    if (!lp.ok()) return lp.status();
    if (!kinds.insert(lp->gpu_kind).second) {
      return Status::Error(YamlWhere(source, list_nodes[i], path + ".gpu_kind") + ": duplicate kind '" +
                           lp->gpu_kind + "'");
    }
    if (std::string why = PriceDateConflict(lp->validity, header->price_date);
        !why.empty() && !header->allow_mixed_dates) {
      return Status::Error(YamlWhere(source, list_nodes[i], path) + ": list price of '" + lp->gpu_kind + "': " + why);
    }
    if (std::string why = Undated(lp->date, lp->validity, header->price_date); !why.empty()) {
      return Status::Error(YamlWhere(source, list_nodes[i], path) + ": list price of '" + lp->gpu_kind + "': " + why);
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
  BookHeader header;
  Status st = ParseBook(text, source, &book.pools_, &book.list_prices_, &header);
  if (!st.ok()) return st;
  book.price_date_ = header.price_date;
  book.title_ = header.title;
  book.allow_mixed_dates_ = header.allow_mixed_dates;
  book.window_ = header.window;
  return book;
}

PriceValidity PriceBook::EffectiveWindow(const PriceValidity& v) const {
  if (!v.Dated() || !v.carried_forward.empty()) return window_;
  return v;
}

bool PriceBook::ValidOn(const PriceValidity& v, const std::string& day) const {
  const PriceValidity w = EffectiveWindow(v);
  return (w.valid_from.empty() || w.valid_from <= day) && (w.valid_until.empty() || day < w.valid_until);
}

BookChoice BookValidOn(const std::vector<PriceBook>& books, const std::string& day) {
  BookChoice best;
  bool any = false;
  for (size_t i = 0; i < books.size(); ++i) {
    const PriceValidity& w = books[i].window();
    const bool covers = (w.valid_from.empty() || w.valid_from <= day) && (w.valid_until.empty() || day < w.valid_until);
    if (covers && (!any || books[i].price_date() > books[best.index].price_date())) {
      best = {i, true};
      any = true;
    }
  }
  if (any) return best;
  // Nearest: before every window, the earliest start; else the latest end (an open end is the latest).
  for (size_t i = 1; i < books.size(); ++i) {
    const PriceValidity &a = books[i].window(), &b = books[best.index].window();
    const bool before_all = !a.valid_from.empty() && day < a.valid_from;
    if (before_all ? a.valid_from < b.valid_from
                   : (a.valid_until.empty() || (!b.valid_until.empty() && a.valid_until > b.valid_until)))
      best.index = i;
  }
  return best;
}

Status PriceBook::Merge(std::string_view text, std::string_view source) {
  std::vector<Pool> pools;
  std::vector<ListPrice> lists;
  BookHeader header;
  header.price_date = price_date_;  // entries of the text are checked against the book's date...
  std::string own_date;
  {
    // ...unless the text names its own, which must then be the same.
    Result<PriceBook> own = FromYaml(text, source);
    if (!own.ok()) return own.status();
    own_date = own->price_date();
    header.allow_mixed_dates = own->allow_mixed_dates() || allow_mixed_dates_;
  }
  if (!own_date.empty() && !price_date_.empty() && own_date != price_date_ && !header.allow_mixed_dates) {
    return Status::Error(fmt::format("{}: price_date {} differs from the price book's {} (mixing price dates is an "
                                     "error unless allow_mixed_dates: true)",
                                     source, own_date, price_date_));
  }
  if (!own_date.empty()) header.price_date = own_date;
  Status st = ParseBook(text, source, &pools, &lists, &header);
  if (!st.ok()) return st;
  if (price_date_.empty()) price_date_ = header.price_date;
  if (header.allow_mixed_dates && own_date != price_date_ && !own_date.empty()) allow_mixed_dates_ = true;
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

void PriceBook::AddPool(Pool p) {
  for (Pool& q : pools_) {
    if (q.name == p.name) {
      q = std::move(p);
      return;
    }
  }
  pools_.push_back(std::move(p));
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
