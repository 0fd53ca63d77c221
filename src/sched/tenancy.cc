#include "sched/tenancy.h"

#include <fmt/format.h>

#include <climits>
#include <cmath>
#include <set>

#include "base/yaml_reader.h"

namespace tessera {
namespace {

constexpr int64_t kMaxSeconds = int64_t{1} << 40;
constexpr double kMaxGpus = 1e6;

// GPUs (decimal) -> thousandths, written to `*out` only when the key is present.
void Gpus(FieldReader& r, std::string_view key, int64_t* out) {
  double v = -1;
  r.Double(key, &v, false, 0, kMaxGpus);
  if (r.ok() && v >= 0) *out = static_cast<int64_t>(std::llround(v * kMilliPerGpu));
}

// The scalar under `name` of a map node, or "" (used before the node itself is read).
std::string NameOf(const YAML::Node& n) {
  if (!n.IsMap()) return "";
  for (auto it = n.begin(); it != n.end(); ++it)
    if (it->first.IsScalar() && it->first.Scalar() == "name" && it->second.IsScalar()) return it->second.Scalar();
  return "";
}

struct Ctx {
  std::string_view source;
  const Catalog& catalog;
};

Status ParseKinds(const Ctx& c, const YAML::Node& kinds, const std::string& path, QueueConfig* q) {
  for (auto it = kinds.begin(); it != kinds.end(); ++it) {
    auto kname = YamlString(it->first, c.source, path);
    if (!kname.ok()) return kname.status();
    const std::string kpath = path + "." + *kname;
    KindId k = c.catalog.Find(*kname);
    if (k == kNone)
      return Status::Error(fmt::format("{}: unknown GPU kind '{}' (known: {})", YamlWhere(c.source, it->first, kpath),
                                       *kname, c.catalog.KnownIds()));
    FieldReader kr(it->second, c.source, kpath);
    int64_t kg = 0, kl = -1;
    Gpus(kr, "guaranteed_gpus", &kg);
    Gpus(kr, "limit_gpus", &kl);
    if (Status st = kr.Finish(); !st.ok()) return st;
    q->kinds.push_back({k, kg, kl});
  }
  return Status::Ok();
}

// Parses one tree node (team, project or queue) and its children into `out`.
Status ParseNode(const Ctx& c, const YAML::Node& n, const std::string& path, const std::string& parent,
                 const std::string& team, const std::string& project, int depth, TenancyConfig* out) {
  FieldReader r(n, c.source, path);
  std::string own;
  r.String("name", &own, true);
  if (r.ok() && own.empty()) r.Fail("name", "must not be empty");
  if (!r.ok()) return r.status();
  QueueConfig q;
  q.name = depth == 0 ? own : parent + "/" + own;  // "team", "team/project", "team/project/queue"
  q.parent = parent;
  q.team = depth == 0 ? own : team;
  q.project = project;
  if (out->FindQueue(q.name) >= 0) r.Fail("name", "duplicate queue '" + q.name + "'");
  int64_t g = -1, l = -1, ll = -1;
  Gpus(r, "guaranteed_gpus", &g);
  Gpus(r, "limit_gpus", &l);
  Gpus(r, "lending_limit_gpus", &ll);
  q.lending_limit_milli = ll;
  r.Int("weight", &q.over_quota_weight, false, 0, 1000000);
  q.guaranteed_milli = g;
  q.limit_milli = l;
  if (r.ok() && g >= 0 && l >= 0 && l < g)
    r.Fail("limit_gpus", fmt::format("limit {} is below the guarantee {}", l / 1000.0, g / 1000.0));
  const YAML::Node kinds = r.Map("gpu_kinds");
  const YAML::Node projects = r.Seq("projects");
  const YAML::Node queues = r.Seq("queues");
  if (r.ok() && projects.IsDefined() && depth != 0) r.Fail("projects", "projects belong to teams");
  if (r.ok() && (projects.IsDefined() || queues.IsDefined()) && depth >= 6)
    r.Fail(projects.IsDefined() ? "projects" : "queues", "queue tree deeper than 6 levels");
  if (Status st = r.Finish(); !st.ok()) return st;
  if (kinds.IsDefined())
    if (Status st = ParseKinds(c, kinds, r.PathOf("gpu_kinds"), &q); !st.ok()) return st;
  out->queues.push_back(q);
  const size_t self = out->queues.size() - 1;
  int64_t child_guar = 0;
  bool any_child = false;
  for (const bool is_project : {true, false}) {
    const YAML::Node& ch = is_project ? projects : queues;
    if (!ch.IsDefined()) continue;
    for (size_t i = 0; i < ch.size(); ++i) {
      const std::string cpath = fmt::format("{}[{}]", r.PathOf(is_project ? "projects" : "queues"), i);
      const size_t before = out->queues.size();
      const std::string child_project = is_project ? NameOf(ch[i]) : q.project;
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
    return Status::Error(r.Where("guaranteed_gpus") +
                         fmt::format(": children guarantee {} GPUs in total, more than {}'s {}", child_guar / 1000.0,
                                     me.name, me.guaranteed_milli / 1000.0));
  if (me.limit_milli >= 0 && me.limit_milli < me.guaranteed_milli)
    return Status::Error(r.Where("limit_gpus") + ": limit below the guarantee");
  if (me.lending_limit_milli >= 0 && any_child)
    return Status::Error(r.Where("lending_limit_gpus") + ": set it on leaf queues (this one has children)");
  if (me.lending_limit_milli > me.guaranteed_milli)
    return Status::Error(r.Where("lending_limit_gpus") +
                         fmt::format(": {} is above the guarantee {}", me.lending_limit_milli / 1000.0,
                                     me.guaranteed_milli / 1000.0));
  return Status::Ok();
}

Status ParseOptions(const Ctx& c, FieldReader& top, const YAML::Node& fs_node, const YAML::Node& pr_node,
                    const YAML::Node& bf_node, CycleOptions* o) {
  FieldReader fs(fs_node, c.source, top.PathOf("fair_share"), /*absent_ok=*/true);
  double half_life_h = o->usage_half_life_s / 3600.0;
  fs.Double("half_life_hours", &half_life_h, false, 1e-3, 1e6);
  fs.Double("history_weight", &o->history_weight, false, 0, 1);
  o->usage_half_life_s = half_life_h * 3600.0;
  if (Status st = fs.Finish(); !st.ok()) return st;
  FieldReader pr(pr_node, c.source, top.PathOf("preemption"), true);
  pr.Bool("enabled", &o->allow_preemption);
  pr.Int("min_runtime_s", &o->min_runtime_s, false, 0, kMaxSeconds);
  pr.Int("reclaim_min_runtime_s", &o->reclaim_min_runtime_s, false, 0, kMaxSeconds);
  pr.Int("checkpoint_min_age_s", &o->checkpoint_min_age_s, false, 0, kMaxSeconds);
  pr.Bool("borrowing", &o->allow_borrowing);
  pr.Int("grace_s", &o->termination_grace_s, false, 0, kMaxSeconds);
  Gpus(pr, "production_headroom_gpus", &o->production_headroom_milli);
  if (Status st = pr.Finish(); !st.ok()) return st;
  FieldReader bf(bf_node, c.source, top.PathOf("backfill"), true);
  bf.Int("reservations", &o->max_reservations, false, 0, 100000);
  bf.Int("estimate_jobs", &o->estimate_limit, false, 0, 1000000);
  bf.Bool("beyond_guarantee", &o->reserve_beyond_guarantee);
  return bf.Finish();
}

Status ParseClasses(const Ctx& c, const YAML::Node& pcs, const std::string& path, std::vector<PriorityClass>* out) {
  for (size_t i = 0; i < pcs.size(); ++i) {
    FieldReader r(pcs[i], c.source, fmt::format("{}[{}]", path, i));
    PriorityClass pc;
    r.String("name", &pc.name, true);
    if (!r.ok()) return r.status();
    PriorityClass* existing = nullptr;
    for (PriorityClass& e : *out)
      if (e.name == pc.name) existing = &e;
    if (existing) pc = *existing;
    r.Int("value", &pc.value, !existing, -1000000000, 1000000000);
    r.Bool("reclaimable", &pc.reclaimable);
    r.Bool("preempts_other_queues", &pc.preempts_other_queues);
    r.Bool("preempts", &pc.preempts);
    std::string pm;
    r.Choice("preemption", &pm, false, {"never", "lower-priority", "allowed"});
    if (!pm.empty()) pc.preemptible = pm != "never";
    if (Status st = r.Finish(); !st.ok()) return st;
    if (existing) *existing = pc;
    else out->push_back(pc);
  }
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
  auto parsed = ParseYaml(text, source);
  if (!parsed.ok()) return parsed.status();
  return ParseTenancyNode(*parsed, source, "", catalog);
}

Result<TenancyConfig> ParseTenancyNode(const YAML::Node& root, std::string_view source, std::string_view path,
                                       const Catalog& catalog) {
  Ctx c{source, catalog};
  FieldReader top(root, source, std::string(path));
  TenancyConfig cfg;
  top.String("organization", &cfg.organisation, false);
  top.String("organisation", &cfg.organisation, false);
  std::string su;
  top.Choice("slice_units", &su, false, {"compute", "memory"});
  if (su == "compute") cfg.options.slice_units = SliceUnits::kCompute;
  if (su == "memory") cfg.options.slice_units = SliceUnits::kMemory;
  const YAML::Node fs = top.Child("fair_share");
  const YAML::Node pr = top.Child("preemption");
  const YAML::Node bf = top.Child("backfill");
  const YAML::Node pcs = top.Seq("priority_classes");
  const YAML::Node teams = top.Seq("teams", /*required=*/true);
  if (top.ok() && teams.size() == 0) top.Fail("teams", "expected a non-empty list");
  if (Status st = top.Finish(); !st.ok()) return st;
  if (Status st = ParseOptions(c, top, fs, pr, bf, &cfg.options); !st.ok()) return st;
  cfg.priority_classes = DefaultPriorityClasses();
  if (pcs.IsDefined())
    if (Status st = ParseClasses(c, pcs, top.PathOf("priority_classes"), &cfg.priority_classes); !st.ok()) return st;
  // Thresholds the cycle uses, from the classes.
  cfg.options.protected_priority = INT_MAX;
  cfg.options.cross_queue_preempt_priority = INT_MAX;
  for (const PriorityClass& pc : cfg.priority_classes) {
    if (!pc.reclaimable) cfg.options.protected_priority = std::min(cfg.options.protected_priority, pc.value);
    if (pc.preempts_other_queues)
      cfg.options.cross_queue_preempt_priority = std::min(cfg.options.cross_queue_preempt_priority, pc.value);
  }
  for (size_t i = 0; i < teams.size(); ++i)
    if (Status st = ParseNode(c, teams[i], fmt::format("{}[{}]", top.PathOf("teams"), i), "", "", "", 0, &cfg);
        !st.ok())
      return st;
  return cfg;
}

}  // namespace tessera
