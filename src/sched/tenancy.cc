#include "sched/tenancy.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <climits>
#include <cmath>
#include <set>

namespace tessera {
namespace {

struct Ctx {
  std::string_view source;
  const Catalog& catalog;
};

std::string Where(const Ctx& c, const YAML::Node& n, const std::string& field) {
  return fmt::format("{}:{}: {}", c.source, n.Mark().line >= 0 ? n.Mark().line + 1 : 0, field);
}

Status CheckKeys(const Ctx& c, const YAML::Node& n, const std::string& path, const std::set<std::string>& known) {
  if (!n.IsMap()) return Status::Error(Where(c, n, path) + ": expected a mapping");
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string k = it->first.as<std::string>();
    if (!known.count(k)) {
      std::string list;
      for (const std::string& s : known) list += (list.empty() ? "" : ", ") + s;
      return Status::Error(fmt::format("{}: unknown field '{}' (known: {})", Where(c, it->first, path), k, list));
    }
  }
  return Status::Ok();
}

// GPUs (decimal) -> thousandths; `def` when absent.
Result<int64_t> Gpus(const Ctx& c, const YAML::Node& parent, const std::string& key, const std::string& path,
                     int64_t def) {
  const YAML::Node n = parent[key];
  if (!n) return def;
  double v = 0;
  try {
    v = n.as<double>();
  } catch (const YAML::Exception&) {
    return Status::Error(Where(c, n, path + "." + key) + ": must be a number of GPUs");
  }
  if (!std::isfinite(v) || v < 0) return Status::Error(Where(c, n, path + "." + key) + ": must be >= 0");
  return static_cast<int64_t>(std::llround(v * kMilliPerGpu));
}

template <typename T>
Result<T> Scalar(const Ctx& c, const YAML::Node& parent, const std::string& key, const std::string& path, T def) {
  const YAML::Node n = parent[key];
  if (!n) return def;
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    return Status::Error(Where(c, n, path + "." + key) + ": wrong type");
  }
}

const std::set<std::string> kNodeKeys = {"name",      "guaranteed_gpus", "limit_gpus", "lending_limit_gpus",
                                         "weight",    "gpu_kinds",       "projects",   "queues"};

// Parses one tree node (team, project or queue) and its children into `out`.
Status ParseNode(const Ctx& c, const YAML::Node& n, const std::string& path, const std::string& parent,
                 const std::string& team, const std::string& project, int depth, TenancyConfig* out) {
  if (Status st = CheckKeys(c, n, path, kNodeKeys); !st.ok()) return st;
  if (!n["name"] || !n["name"].IsScalar() || n["name"].as<std::string>().empty())
    return Status::Error(Where(c, n, path + ".name") + ": required");
  QueueConfig q;
  const std::string own = n["name"].as<std::string>();
  q.name = depth == 0 ? own : parent + "/" + own;  // "team", "team/project", "team/project/queue"
  q.parent = parent;
  q.team = depth == 0 ? own : team;
  q.project = project;
  if (out->FindQueue(q.name) >= 0) return Status::Error(Where(c, n, path + ".name") + ": duplicate queue '" + q.name + "'");
  auto g = Gpus(c, n, "guaranteed_gpus", path, -1);
  if (!g.ok()) return g.status();
  auto l = Gpus(c, n, "limit_gpus", path, -1);
  if (!l.ok()) return l.status();
  auto ll = Gpus(c, n, "lending_limit_gpus", path, -1);
  if (!ll.ok()) return ll.status();
  q.lending_limit_milli = *ll;
  auto w = Scalar<int>(c, n, "weight", path, 1);
  if (!w.ok()) return w.status();
  if (*w < 0) return Status::Error(Where(c, n["weight"], path + ".weight") + ": must be >= 0");
  q.guaranteed_milli = *g;
  q.limit_milli = *l;
  q.over_quota_weight = *w;
  if (*g >= 0 && *l >= 0 && *l < *g)
    return Status::Error(Where(c, n["limit_gpus"], path + ".limit_gpus") +
                         fmt::format(": limit {} is below the guarantee {}", *l / 1000.0, *g / 1000.0));
  if (const YAML::Node kinds = n["gpu_kinds"]) {
    if (!kinds.IsMap()) return Status::Error(Where(c, kinds, path + ".gpu_kinds") + ": expected a mapping of kind to quota");
    for (auto it = kinds.begin(); it != kinds.end(); ++it) {
      const std::string kname = it->first.as<std::string>();
      const std::string kpath = path + ".gpu_kinds." + kname;
      KindId k = c.catalog.Find(kname);
      if (k == kNone)
        return Status::Error(fmt::format("{}: unknown GPU kind '{}' (known: {})", Where(c, it->first, kpath), kname,
                                         c.catalog.KnownIds()));
      if (Status st = CheckKeys(c, it->second, kpath, {"guaranteed_gpus", "limit_gpus"}); !st.ok()) return st;
      auto kg = Gpus(c, it->second, "guaranteed_gpus", kpath, 0);
      if (!kg.ok()) return kg.status();
      auto kl = Gpus(c, it->second, "limit_gpus", kpath, -1);
      if (!kl.ok()) return kl.status();
      q.kinds.push_back({k, *kg, *kl});
    }
  }
  out->queues.push_back(q);
  const size_t self = out->queues.size() - 1;
  int64_t child_guar = 0;
  bool any_child = false;
  for (const char* key : {"projects", "queues"}) {
    const YAML::Node ch = n[key];
    if (!ch) continue;
    if (!ch.IsSequence()) return Status::Error(Where(c, ch, path + "." + key) + ": expected a list");
    if (std::string(key) == "projects" && depth != 0)
      return Status::Error(Where(c, ch, path + ".projects") + ": projects belong to teams");
    if (depth >= 6) return Status::Error(Where(c, ch, path) + ": queue tree deeper than 6 levels");
    for (size_t i = 0; i < ch.size(); ++i) {
      const bool is_project = std::string(key) == "projects";
      const std::string cpath = fmt::format("{}.{}[{}]", path, key, i);
      const size_t before = out->queues.size();
      std::string child_project = q.project;
      if (is_project && ch[i].IsMap() && ch[i]["name"] && ch[i]["name"].IsScalar())
        child_project = ch[i]["name"].as<std::string>();
      if (Status st = ParseNode(c, ch[i], cpath, out->queues[self].name, q.team, child_project, depth + 1, out);
          !st.ok())
        return st;
      any_child = true;
      child_guar += std::max<int64_t>(0, out->queues[before].guaranteed_milli);
    }
  }
  QueueConfig& me = out->queues[self];
  if (me.guaranteed_milli < 0) me.guaranteed_milli = child_guar;  // default: the sum of the children
  else if (any_child && child_guar > me.guaranteed_milli)
    return Status::Error(Where(c, n, path + ".guaranteed_gpus") +
                         fmt::format(": children guarantee {} GPUs in total, more than {}'s {}", child_guar / 1000.0,
                                     me.name, me.guaranteed_milli / 1000.0));
  if (me.limit_milli >= 0 && me.limit_milli < me.guaranteed_milli)
    return Status::Error(Where(c, n, path + ".limit_gpus") + ": limit below the guarantee");
  if (me.lending_limit_milli >= 0 && any_child)
    return Status::Error(Where(c, n["lending_limit_gpus"], path + ".lending_limit_gpus") +
                         ": set it on leaf queues (this one has children)");
  if (me.lending_limit_milli > me.guaranteed_milli)
    return Status::Error(Where(c, n["lending_limit_gpus"], path + ".lending_limit_gpus") +
                         fmt::format(": {} is above the guarantee {}", me.lending_limit_milli / 1000.0,
                                     me.guaranteed_milli / 1000.0));
  return Status::Ok();
}

}  // namespace

std::vector<PriorityClass> DefaultPriorityClasses() {
  return {{"production-inference", 1000, true, false, true},
          {"inference", 800, true, true, false},
          {"training-high", 600, true, true, false},
          {"training", 400, true, true, false},
          {"best-effort", 100, true, true, false}};
}

int TenancyConfig::FindQueue(std::string_view name) const {
  for (size_t i = 0; i < queues.size(); ++i)
    if (queues[i].name == name) return static_cast<int>(i);
  return -1;
}

bool TenancyConfig::IsLeaf(int q) const {
  if (q < 0 || q >= static_cast<int>(queues.size())) return false;
  for (const QueueConfig& c : queues)
    if (c.parent == queues[q].name) return false;
  return true;
}

int TenancyConfig::LeafFor(std::string_view team, std::string_view project) const {
  int start = FindQueue(project.empty() ? std::string(team) : fmt::format("{}/{}", team, project));
  if (start < 0 && !project.empty()) start = FindQueue(project);
  if (start < 0) start = FindQueue(team);
  if (start < 0) return -1;
  // Depth-first: the first leaf at or below `start` in declaration order.
  for (int q = start; q < static_cast<int>(queues.size()); ++q) {
    int a = q;
    while (a >= 0 && a != start) a = FindQueue(queues[a].parent);
    if (a == start && IsLeaf(q)) return q;
  }
  return -1;
}

const PriorityClass* TenancyConfig::FindClass(std::string_view name) const {
  for (const PriorityClass& p : priority_classes)
    if (p.name == name) return &p;
  return nullptr;
}

Result<TenancyConfig> ParseTenancyYaml(std::string_view text, std::string_view source, const Catalog& catalog) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::Error(fmt::format("{}:{}: YAML: {}", source, e.mark.line + 1, e.msg));
  }
  Ctx c{source, catalog};
  if (Status st = CheckKeys(c, root, "tenancy",
                            {"organisation", "organization", "slice_units", "fair_share", "preemption",
                             "priority_classes", "teams", "backfill"});
      !st.ok())
    return st;
  TenancyConfig cfg;
  cfg.organisation = root["organisation"] ? root["organisation"].as<std::string>()
                     : root["organization"] ? root["organization"].as<std::string>()
                                            : "";
  if (const YAML::Node su = root["slice_units"]) {
    const std::string v = su.as<std::string>();
    if (v == "compute") cfg.options.slice_units = SliceUnits::kCompute;
    else if (v == "memory") cfg.options.slice_units = SliceUnits::kMemory;
    else return Status::Error(Where(c, su, "slice_units") + ": must be 'compute' or 'memory', not '" + v + "'");
  }
  if (const YAML::Node fs = root["fair_share"]) {
    if (Status st = CheckKeys(c, fs, "fair_share", {"half_life_hours", "history_weight"}); !st.ok()) return st;
    auto h = Scalar<double>(c, fs, "half_life_hours", "fair_share", cfg.options.usage_half_life_s / 3600.0);
    if (!h.ok()) return h.status();
    auto w = Scalar<double>(c, fs, "history_weight", "fair_share", cfg.options.history_weight);
    if (!w.ok()) return w.status();
    if (*h <= 0) return Status::Error(Where(c, fs["half_life_hours"], "fair_share.half_life_hours") + ": must be > 0");
    if (*w < 0 || *w > 1)
      return Status::Error(Where(c, fs["history_weight"], "fair_share.history_weight") + ": must be within [0, 1]");
    cfg.options.usage_half_life_s = *h * 3600.0;
    cfg.options.history_weight = *w;
  }
  if (const YAML::Node pr = root["preemption"]) {
    if (Status st = CheckKeys(c, pr, "preemption",
                              {"enabled", "min_runtime_s", "reclaim_min_runtime_s", "checkpoint_min_age_s",
                               "borrowing", "grace_s", "production_headroom_gpus"});
        !st.ok())
      return st;
    auto en = Scalar<bool>(c, pr, "enabled", "preemption", true);
    auto mr = Scalar<int64_t>(c, pr, "min_runtime_s", "preemption", cfg.options.min_runtime_s);
    auto rr = Scalar<int64_t>(c, pr, "reclaim_min_runtime_s", "preemption", cfg.options.reclaim_min_runtime_s);
    auto ck = Scalar<int64_t>(c, pr, "checkpoint_min_age_s", "preemption", cfg.options.checkpoint_min_age_s);
    auto bo = Scalar<bool>(c, pr, "borrowing", "preemption", true);
    auto gr = Scalar<int64_t>(c, pr, "grace_s", "preemption", cfg.options.termination_grace_s);
    for (const Status& st : {en.status(), mr.status(), rr.status(), ck.status(), bo.status(), gr.status()})
      if (!st.ok()) return st;
    if (*mr < 0 || *rr < 0 || *ck < 0 || *gr < 0)
      return Status::Error(Where(c, pr, "preemption") + ": times must be >= 0");
    cfg.options.termination_grace_s = *gr;
    auto hr = Gpus(c, pr, "production_headroom_gpus", "preemption", cfg.options.production_headroom_milli);
    if (!hr.ok()) return hr.status();
    cfg.options.production_headroom_milli = *hr;
    cfg.options.allow_preemption = *en;
    cfg.options.min_runtime_s = *mr;
    cfg.options.reclaim_min_runtime_s = *rr;
    cfg.options.checkpoint_min_age_s = *ck;
    cfg.options.allow_borrowing = *bo;
  }
  if (const YAML::Node bf = root["backfill"]) {
    if (Status st = CheckKeys(c, bf, "backfill", {"reservations", "estimate_jobs", "beyond_guarantee"}); !st.ok())
      return st;
    auto rs = Scalar<int>(c, bf, "reservations", "backfill", cfg.options.max_reservations);
    auto ej = Scalar<int>(c, bf, "estimate_jobs", "backfill", cfg.options.estimate_limit);
    auto bg = Scalar<bool>(c, bf, "beyond_guarantee", "backfill", cfg.options.reserve_beyond_guarantee);
    if (!rs.ok()) return rs.status();
    if (!ej.ok()) return ej.status();
    if (!bg.ok()) return bg.status();
    cfg.options.reserve_beyond_guarantee = *bg;
    cfg.options.max_reservations = std::max(0, *rs);
    cfg.options.estimate_limit = std::max(0, *ej);
  }
  cfg.priority_classes = DefaultPriorityClasses();
  if (const YAML::Node pcs = root["priority_classes"]) {
    if (!pcs.IsSequence()) return Status::Error(Where(c, pcs, "priority_classes") + ": expected a list");
    for (size_t i = 0; i < pcs.size(); ++i) {
      const std::string path = fmt::format("priority_classes[{}]", i);
      const YAML::Node n = pcs[i];
      if (Status st = CheckKeys(c, n, path, {"name", "value", "preemption", "reclaimable", "preempts_other_queues"});
          !st.ok())
        return st;
      if (!n["name"]) return Status::Error(Where(c, n, path + ".name") + ": required");
      PriorityClass pc;
      pc.name = n["name"].as<std::string>();
      PriorityClass* existing = nullptr;
      for (PriorityClass& e : cfg.priority_classes)
        if (e.name == pc.name) existing = &e;
      if (existing) pc = *existing;
      else if (!n["value"]) return Status::Error(Where(c, n, path + ".value") + ": required for a new class");
      auto v = Scalar<int>(c, n, "value", path, pc.value);
      auto rc = Scalar<bool>(c, n, "reclaimable", path, pc.reclaimable);
      auto px = Scalar<bool>(c, n, "preempts_other_queues", path, pc.preempts_other_queues);
      for (const Status& st : {v.status(), rc.status(), px.status()})
        if (!st.ok()) return st;
      pc.value = *v;
      pc.reclaimable = *rc;
      pc.preempts_other_queues = *px;
      if (const YAML::Node pm = n["preemption"]) {
        const std::string s = pm.as<std::string>();
        if (s == "never") pc.preemptible = false;
        else if (s == "lower-priority" || s == "allowed") pc.preemptible = true;
        else return Status::Error(Where(c, pm, path + ".preemption") + ": must be 'never' or 'lower-priority', not '" + s + "'");
      }
      if (existing) *existing = pc;
      else cfg.priority_classes.push_back(pc);
    }
  }
  // Thresholds the cycle uses, from the classes.
  cfg.options.protected_priority = INT_MAX;
  cfg.options.cross_queue_preempt_priority = INT_MAX;
  for (const PriorityClass& pc : cfg.priority_classes) {
    if (!pc.reclaimable) cfg.options.protected_priority = std::min(cfg.options.protected_priority, pc.value);
    if (pc.preempts_other_queues)
      cfg.options.cross_queue_preempt_priority = std::min(cfg.options.cross_queue_preempt_priority, pc.value);
  }
  const YAML::Node teams = root["teams"];
  if (!teams || !teams.IsSequence() || teams.size() == 0)
    return Status::Error(fmt::format("{}: teams: required, a non-empty list", source));
  for (size_t i = 0; i < teams.size(); ++i)
    if (Status st = ParseNode(c, teams[i], fmt::format("teams[{}]", i), "", "", "", 0, &cfg); !st.ok()) return st;
  return cfg;
}

}  // namespace tessera
