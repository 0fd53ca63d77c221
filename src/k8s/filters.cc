#include "k8s/filters.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <deque>
#include <optional>
#include <tuple>

#include "k8s/api/objects.h"
#include "k8s/api/quantity.h"

namespace tessera {
namespace {

using json = nlohmann::json;
using Labels = std::map<std::string, std::string>;

const json kNull;

const json& At(const json& o, std::string_view key) {
  const json* v = Field(o, key);
  return v != nullptr ? *v : kNull;
}

const json& Path(const json& o, std::initializer_list<std::string_view> keys) {
  const json* cur = &o;
  for (std::string_view k : keys) {
    cur = Field(*cur, k);
    if (cur == nullptr) return kNull;
  }
  return *cur;
}

Labels LabelsOf(const json& object) {
  Labels out;
  const json& l = Path(object, {"metadata", "labels"});
  if (l.is_object())
    for (const auto& [k, v] : l.items())
      if (v.is_string()) out[k] = v.get<std::string>();
  return out;
}

std::vector<std::string> Strings(const json& list) {
  std::vector<std::string> out;
  if (list.is_array())
    for (const json& v : list)
      if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::optional<int64_t> Int(const std::string& s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// A node selector requirement (In, NotIn, Exists, DoesNotExist, Gt, Lt) on one value (nullptr = absent).
bool NodeRequirement(const json& req, const std::string* value) {
  const std::string op = StringField(req, "operator");
  const std::vector<std::string> values = Strings(At(req, "values"));
  if (op == "In") return value != nullptr && Contains(values, *value);
  if (op == "NotIn") return value == nullptr || !Contains(values, *value);
  if (op == "Exists") return value != nullptr;
  if (op == "DoesNotExist") return value == nullptr;
  if ((op == "Gt" || op == "Lt") && value != nullptr && values.size() == 1) {
    auto have = Int(*value), want = Int(values[0]);
    if (!have || !want) return false;
    return op == "Gt" ? *have > *want : *have < *want;
  }
  return false;
}

// One nodeSelectorTerm: every matchExpression (labels) and matchField (metadata.name) holds; an empty term
// matches nothing.
bool TermMatches(const json& term, const Labels& labels, const std::string& name) {
  const json& exprs = At(term, "matchExpressions");
  const json& fields = At(term, "matchFields");
  if ((!exprs.is_array() || exprs.empty()) && (!fields.is_array() || fields.empty())) return false;
  if (exprs.is_array())
    for (const json& e : exprs) {
      auto it = labels.find(StringField(e, "key"));
      if (!NodeRequirement(e, it == labels.end() ? nullptr : &it->second)) return false;
    }
  if (fields.is_array())
    for (const json& f : fields)
      if (StringField(f, "key") != "metadata.name" || !NodeRequirement(f, &name)) return false;
  return true;
}

// nodeSelector and requiredDuringSchedulingIgnoredDuringExecution (NodeAffinity's filter).
bool NodeAffinityMatches(const json& spec, const Labels& labels, const std::string& name) {
  const json& sel = At(spec, "nodeSelector");
  if (sel.is_object())
    for (const auto& [k, v] : sel.items()) {
      auto it = labels.find(k);
      if (!v.is_string() || it == labels.end() || it->second != v.get<std::string>()) return false;
    }
  const json& terms =
      Path(spec, {"affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"});
  if (terms.is_null()) return true;
  if (terms.is_array())
    for (const json& t : terms)
      if (TermMatches(t, labels, name)) return true;
  return false;
}

// A metav1.LabelSelector: null matches nothing, {} everything.
bool SelectorMatches(const json& sel, const Labels& labels) {
  if (!sel.is_object()) return false;
  const json& ml = At(sel, "matchLabels");
  if (ml.is_object())
    for (const auto& [k, v] : ml.items()) {
      auto it = labels.find(k);
      if (!v.is_string() || it == labels.end() || it->second != v.get<std::string>()) return false;
    }
  const json& me = At(sel, "matchExpressions");
  if (me.is_array())
    for (const json& e : me) {
      const std::string op = StringField(e, "operator");
      auto it = labels.find(StringField(e, "key"));
      const std::vector<std::string> values = Strings(At(e, "values"));
      const bool has = it != labels.end();
      if (op == "In" && !(has && Contains(values, it->second))) return false;
      if (op == "NotIn" && has && Contains(values, it->second)) return false;
      if (op == "Exists" && !has) return false;
      if (op == "DoesNotExist" && has) return false;
      if (op != "In" && op != "NotIn" && op != "Exists" && op != "DoesNotExist") return false;
    }
  return true;
}

struct Taint {
  std::string key, value, effect;
};

bool Tolerates(const json& tolerations, const Taint& t) {
  if (!tolerations.is_array()) return false;
  for (const json& tol : tolerations) {
    const std::string effect = StringField(tol, "effect"), key = StringField(tol, "key");
    const std::string op = StringField(tol, "operator");
    if (!effect.empty() && effect != t.effect) continue;
    if (key.empty() ? op != "Exists" : key != t.key) continue;
    if (op == "Exists" || ((op.empty() || op == "Equal") && StringField(tol, "value") == t.value)) return true;
  }
  return false;
}

// (protocol, hostIP, hostPort) of each container port with a hostPort.
using HostPort = std::tuple<std::string, std::string, int64_t>;

std::vector<HostPort> HostPorts(const json& spec) {
  std::vector<HostPort> out;
  const json& cs = At(spec, "containers");
  if (!cs.is_array()) return out;
  for (const json& c : cs) {
    const json& ports = At(c, "ports");
    if (!ports.is_array()) continue;
    for (const json& p : ports) {
      const json& hp = At(p, "hostPort");
      if (!hp.is_number_integer() || hp.get<int64_t>() <= 0) continue;
      std::string proto = StringField(p, "protocol");
      std::string ip = StringField(p, "hostIP");
      out.emplace_back(proto.empty() ? "TCP" : proto, ip.empty() ? "0.0.0.0" : ip, hp.get<int64_t>());
    }
  }
  return out;
}

bool PortsConflict(const HostPort& a, const HostPort& b) {
  if (std::get<0>(a) != std::get<0>(b) || std::get<2>(a) != std::get<2>(b)) return false;
  return std::get<1>(a) == std::get<1>(b) || std::get<1>(a) == "0.0.0.0" || std::get<1>(b) == "0.0.0.0";
}

// A required pod (anti-)affinity term, its namespaces resolved against its pod's (empty = every namespace).
struct PodTerm {
  json selector;
  std::vector<std::string> namespaces;
  bool all_namespaces = false;
  std::string topology_key;
  bool Covers(const std::string& ns) const { return all_namespaces || Contains(namespaces, ns); }
};

// A namespaceSelector is read as every namespace (namespaces' labels are not watched): wider for
// anti-affinity, the safe side.
std::vector<PodTerm> PodTerms(const json& spec, const char* kind, const std::string& pod_ns) {
  std::vector<PodTerm> out;
  const json& terms = Path(spec, {"affinity", kind, "requiredDuringSchedulingIgnoredDuringExecution"});
  if (!terms.is_array()) return out;
  for (const json& t : terms) {
    PodTerm pt;
    pt.selector = At(t, "labelSelector");
    pt.namespaces = Strings(At(t, "namespaces"));
    pt.all_namespaces = At(t, "namespaceSelector").is_object();
    if (pt.namespaces.empty() && !pt.all_namespaces) pt.namespaces.push_back(pod_ns);
    pt.topology_key = StringField(t, "topologyKey");
    out.push_back(std::move(pt));
  }
  return out;
}

struct PodInfo {
  std::string ns, name, node;
  Labels labels;
  std::map<std::string, int64_t> requests;  // milli
  std::vector<HostPort> ports;
  std::vector<PodTerm> anti;  // its required anti-affinity terms
  bool terminating = false;
};

PodInfo ReadPod(const json& pod) {
  PodInfo p;
  p.ns = Meta(pod, "namespace");
  p.name = Meta(pod, "name");
  const json& spec = At(pod, "spec");
  p.node = StringField(spec, "nodeName");
  p.labels = LabelsOf(pod);
  if (auto r = PodResources(spec); r.ok()) p.requests = std::move(r).value();
  p.ports = HostPorts(spec);
  p.anti = PodTerms(spec, "podAntiAffinity", p.ns);
  p.terminating = !Path(pod, {"metadata", "deletionTimestamp"}).is_null();
  return p;
}

bool PodDone(const json& pod) {
  const std::string phase = StringField(At(pod, "status"), "phase");
  return phase == "Succeeded" || phase == "Failed";
}

struct NodeInfo {
  std::string name;
  Labels labels;
  std::vector<Taint> taints;
  bool unschedulable = false;
  std::map<std::string, int64_t> allocatable, used;  // milli
  int64_t pods = 0;
  std::vector<const PodInfo*> bound;
};

NodeInfo ReadNode(const std::string& name, const json& node) {
  NodeInfo n;
  n.name = name;
  n.labels = LabelsOf(node);
  const json& spec = At(node, "spec");
  n.unschedulable = At(spec, "unschedulable").is_boolean() && At(spec, "unschedulable").get<bool>();
  const json& taints = At(spec, "taints");
  if (taints.is_array())
    for (const json& t : taints) n.taints.push_back({StringField(t, "key"), StringField(t, "value"), StringField(t, "effect")});
  const json& alloc = Path(node, {"status", "allocatable"});
  if (alloc.is_object())
    for (const auto& [r, q] : alloc.items())
      if (q.is_string())
        if (auto v = ParseQuantityMilli(q.get<std::string>()); v.ok()) n.allocatable[r] = *v;
  return n;
}

}  // namespace

struct FilterCache::Impl {
  // Object -> (the object kept alive, so that its address is not reused while cached; what was read of it,
  // null when it does not count: not bound, or done).
  std::unordered_map<const json*, std::pair<ObjectMap::Ptr, std::shared_ptr<const PodInfo>>> pods;
};

FilterCache::FilterCache() : impl_(std::make_unique<Impl>()) {}
FilterCache::~FilterCache() = default;
size_t FilterCache::size() const { return impl_->pods.size(); }

struct FilterWorld::Impl {
  std::map<std::string, NodeInfo> nodes;
  std::vector<std::shared_ptr<const PodInfo>> pods;     // bound, unfinished
  std::set<std::pair<std::string, std::string>> known;  // (namespace, name) of the pods counted
  std::vector<const PodInfo*> with_anti;         // bound pods with required anti-affinity terms

  void Add(PodInfo p) { Add(std::make_shared<const PodInfo>(std::move(p))); }
  void Add(std::shared_ptr<const PodInfo> p) {
    auto node = nodes.find(p->node);
    if (node == nodes.end() || !known.insert({p->ns, p->name}).second) return;
    pods.push_back(std::move(p));
    const PodInfo* pi = pods.back().get();
    NodeInfo& n = node->second;
    n.bound.push_back(pi);
    for (const auto& [r, v] : pi->requests) n.used[r] += v;
    ++n.pods;
    if (!pi->anti.empty()) with_anti.push_back(pi);
  }
  std::string Domain(const NodeInfo& n, const std::string& key) const {
    auto it = n.labels.find(key);
    return it == n.labels.end() ? std::string() : it->second;
  }
};

// What Judge needs of the pod, derived once per pod (topology spread counts and affinity domains span nodes).
struct PodView {
  const json* spec = nullptr;
  PodInfo info;
  struct Spread {
    std::string key;
    int64_t max_skew = 1;
    std::map<std::string, int64_t> counts;  // domain -> matching pods (eligible domains only)
    int64_t min_match = 0;
    int self = 0;
  };
  std::vector<Spread> spreads;
  std::vector<std::pair<std::string, std::set<std::string>>> anti_domains;      // key -> domains with a match
  std::vector<std::pair<std::string, std::set<std::string>>> affinity_domains;  // key -> domains with a match
  std::vector<bool> affinity_free;  // the term matches no pod anywhere but the pod itself: passes everywhere
  std::vector<std::pair<std::string, std::string>> forbidden;  // (key, domain) existing pods' anti-affinity forbids
};

namespace {

bool TermCovers(const PodTerm& t, const PodInfo& other) {
  return t.Covers(other.ns) && SelectorMatches(t.selector, other.labels);
}

std::set<std::string> DomainsWithMatch(const std::map<std::string, NodeInfo>& nodes, const PodTerm& t) {
  std::set<std::string> out;
  for (const auto& [name, n] : nodes) {
    auto key = n.labels.find(t.topology_key);
    if (key == n.labels.end()) continue;
    for (const PodInfo* p : n.bound)
      if (TermCovers(t, *p)) {
        out.insert(key->second);
        break;
      }
  }
  return out;
}

}  // namespace

FilterWorld::FilterWorld(const ObjectMap& nodes, const ObjectMap& pods, FilterCache* cache)
    : impl_(std::make_unique<Impl>()) {
  for (const auto& [k, n] : nodes) {
    const std::string name = Meta(n, "name");
    impl_->nodes.emplace(name, ReadNode(name, n));
  }
  auto counts = [](const json& p) { return !PodDone(p) && !StringField(At(p, "spec"), "nodeName").empty(); };
  if (cache == nullptr) {
    for (const auto& [k, p] : pods)
      if (counts(p)) impl_->Add(ReadPod(p));
    return;
  }
  auto& cached = cache->impl_->pods;
  for (auto it = pods.begin(); it != pods.end(); ++it) {
    const json& p = (*it).second;
    auto [at, fresh] = cached.try_emplace(&p);
    if (fresh) at->second = {it.ptr(), counts(p) ? std::make_shared<const PodInfo>(ReadPod(p)) : nullptr};
    if (at->second.second) impl_->Add(at->second.second);
  }
  // Pods no one else holds any more (changed or gone) leave the cache.
  std::erase_if(cached, [](const auto& e) { return e.second.first.use_count() == 1; });
}

FilterWorld::~FilterWorld() = default;
FilterWorld::FilterWorld(FilterWorld&&) noexcept = default;
bool FilterWorld::LabelsMatter() const { return !impl_->with_anti.empty(); }

size_t FilterWorld::num_nodes() const { return impl_->nodes.size(); }

void FilterWorld::Assume(const json& pod, const std::string& node) {
  PodInfo p = ReadPod(pod);
  p.node = node;
  impl_->Add(std::move(p));
}

namespace {

void SetupSpread(const std::map<std::string, NodeInfo>& nodes, const json& spec, PodView* v) {
  const json& cs = At(spec, "topologySpreadConstraints");
  if (!cs.is_array()) return;
  for (const json& c : cs) {
    const std::string when = StringField(c, "whenUnsatisfiable");
    if (!when.empty() && when != "DoNotSchedule") continue;  // ScheduleAnyway is a score, not a filter
    PodView::Spread s;
    s.key = StringField(c, "topologyKey");
    if (At(c, "maxSkew").is_number_integer()) s.max_skew = At(c, "maxSkew").get<int64_t>();
    json sel = At(c, "labelSelector");
    for (const std::string& k : Strings(At(c, "matchLabelKeys")))  // the pod's own values join the selector
      if (auto it = v->info.labels.find(k); it != v->info.labels.end() && sel.is_object())
        sel["matchLabels"][k] = it->second;
    const bool honor_affinity = StringField(c, "nodeAffinityPolicy") != "Ignore";
    for (const auto& [name, n] : nodes) {
      auto d = n.labels.find(s.key);
      if (d == n.labels.end() || (honor_affinity && !NodeAffinityMatches(spec, n.labels, name))) continue;
      int64_t& count = s.counts[d->second];
      for (const PodInfo* p : n.bound)
        if (p->ns == v->info.ns && !p->terminating && SelectorMatches(sel, p->labels)) ++count;
    }
    s.min_match = s.counts.empty() ? 0 : INT64_MAX;
    for (const auto& [d, c] : s.counts) s.min_match = std::min(s.min_match, c);
    if (const json& md = At(c, "minDomains"); md.is_number_integer() && static_cast<int64_t>(s.counts.size()) < md.get<int64_t>())
      s.min_match = 0;
    s.self = SelectorMatches(sel, v->info.labels) ? 1 : 0;
    v->spreads.push_back(std::move(s));
  }
}

void SetupAffinity(const FilterWorld::Impl& w, const json& spec, PodView* v) {
  for (const PodTerm& t : PodTerms(spec, "podAntiAffinity", v->info.ns))
    v->anti_domains.push_back({t.topology_key, DomainsWithMatch(w.nodes, t)});
  for (const PodTerm& t : PodTerms(spec, "podAffinity", v->info.ns)) {
    auto domains = DomainsWithMatch(w.nodes, t);
    bool any = !domains.empty();
    for (const auto& p : w.pods) any = any || TermCovers(t, *p);
    v->affinity_free.push_back(!any && TermCovers(t, v->info));
    v->affinity_domains.push_back({t.topology_key, std::move(domains)});
  }
  for (const PodInfo* p : w.with_anti) {
    auto node = w.nodes.find(p->node);
    if (node == w.nodes.end()) continue;
    for (const PodTerm& t : p->anti)
      if (TermCovers(t, v->info))
        if (auto d = node->second.labels.find(t.topology_key); d != node->second.labels.end())
          v->forbidden.push_back({t.topology_key, d->second});
  }
}

PodView View(const FilterWorld::Impl& w, const json& pod) {
  PodView v;
  v.spec = &At(pod, "spec");
  v.info = ReadPod(pod);
  SetupSpread(w.nodes, *v.spec, &v);
  SetupAffinity(w, *v.spec, &v);
  return v;
}

FilterVerdict Reject(const char* plugin, std::string reason) { return {plugin, {std::move(reason)}}; }

FilterVerdict Resources(const PodView& v, const NodeInfo& n) {
  FilterVerdict out{"NodeResourcesFit", {}};
  auto alloc = [&](const std::string& r) {
    auto it = n.allocatable.find(r);
    return it == n.allocatable.end() ? int64_t{0} : it->second;
  };
  if (n.allocatable.count("pods") && (n.pods + 1) * 1000 > alloc("pods")) out.reasons.push_back("Too many pods");
  for (const auto& [r, want] : v.info.requests) {
    if (want <= 0 || r == "pods") continue;
    auto used = n.used.find(r);
    if (alloc(r) - (used == n.used.end() ? 0 : used->second) < want) out.reasons.push_back("Insufficient " + r);
  }
  return out;
}

FilterVerdict Spread(const PodView& v, const NodeInfo& n) {
  for (const PodView::Spread& s : v.spreads) {
    auto d = n.labels.find(s.key);
    if (d == n.labels.end())
      return Reject("PodTopologySpread", "node(s) didn't match pod topology spread constraints (missing required label)");
    auto c = s.counts.find(d->second);
    const int64_t here = c == s.counts.end() ? 0 : c->second;
    if (here + s.self - s.min_match > s.max_skew)
      return Reject("PodTopologySpread", "node(s) didn't match pod topology spread constraints");
  }
  return {};
}

FilterVerdict InterPod(const PodView& v, const NodeInfo& n) {
  auto domain = [&](const std::string& key) -> const std::string* {
    auto it = n.labels.find(key);
    return it == n.labels.end() ? nullptr : &it->second;
  };
  for (size_t i = 0; i < v.affinity_domains.size(); ++i) {
    const auto& [key, domains] = v.affinity_domains[i];
    const std::string* d = domain(key);
    if (!v.affinity_free[i] && (d == nullptr || !domains.count(*d)))
      return Reject("InterPodAffinity", "node(s) didn't match pod affinity rules");
  }
  for (const auto& [key, domains] : v.anti_domains)
    if (const std::string* d = domain(key); d != nullptr && domains.count(*d))
      return Reject("InterPodAffinity", "node(s) didn't match pod anti-affinity rules");
  for (const auto& [key, value] : v.forbidden)
    if (const std::string* d = domain(key); d != nullptr && *d == value)
      return Reject("InterPodAffinity", "node(s) didn't satisfy existing pods anti-affinity rules");
  return {};
}

FilterVerdict JudgeNode(const PodView& v, const NodeInfo& n) {
  const json& tolerations = At(*v.spec, "tolerations");
  if (n.unschedulable && !Tolerates(tolerations, {"node.kubernetes.io/unschedulable", "", "NoSchedule"}))
    return Reject("NodeUnschedulable", "node(s) were unschedulable");
  for (const Taint& t : n.taints)
    if ((t.effect == "NoSchedule" || t.effect == "NoExecute") && !Tolerates(tolerations, t))
      return Reject("TaintToleration", fmt::format("node(s) had untolerated taint {{{}: {}}}", t.key, t.value));
  if (!NodeAffinityMatches(*v.spec, n.labels, n.name))
    return Reject("NodeAffinity", "node(s) didn't match Pod's node affinity/selector");
  for (const HostPort& want : v.info.ports)
    for (const PodInfo* p : n.bound)
      for (const HostPort& have : p->ports)
        if (PortsConflict(want, have))
          return Reject("NodePorts", "node(s) didn't have free ports for the requested pod ports");
  if (FilterVerdict r = Resources(v, n); !r.ok()) return r;
  if (FilterVerdict s = Spread(v, n); !s.ok()) return s;
  return InterPod(v, n);
}

}  // namespace

FilterVerdict FilterWorld::Judge(const json& pod, const std::string& node) const {
  auto n = impl_->nodes.find(node);
  if (n == impl_->nodes.end()) return Reject("NodeName", "node(s) didn't exist");
  return JudgeNode(View(*impl_, pod), n->second);
}

namespace {

bool ModelledShortage(const FilterVerdict& r) {
  if (r.plugin != "NodeResourcesFit") return false;
  for (const std::string& why : r.reasons)
    if (why != "Insufficient cpu" && why != "Insufficient memory" && why != "Insufficient nvidia.com/gpu" &&
        why.rfind("Insufficient nvidia.com/mig-", 0) != 0)
      return false;
  return true;
}

}  // namespace

std::set<std::string> FilterWorld::Passing(const json& pod, std::map<std::string, int>* rejected,
                                           std::set<std::string>* if_freed) const {
  const PodView v = View(*impl_, pod);
  std::set<std::string> out;
  for (const auto& [name, n] : impl_->nodes) {
    FilterVerdict r = JudgeNode(v, n);
    if (r.ok()) {
      out.insert(name);
      continue;
    }
    if (rejected != nullptr)
      for (const std::string& why : r.reasons) ++(*rejected)[why];
    if (if_freed != nullptr && ModelledShortage(r)) if_freed->insert(name);
  }
  return out;
}

std::string UnschedulableMessage(size_t nodes, const std::map<std::string, int>& rejected) {
  std::vector<std::string> parts;
  for (const auto& [why, count] : rejected) parts.push_back(fmt::format("{} {}", count, why));
  std::sort(parts.begin(), parts.end());
  std::string joined;
  for (const std::string& p : parts) joined += (joined.empty() ? "" : ", ") + p;
  return fmt::format("0/{} nodes are available: {}.", nodes, joined.empty() ? "no nodes" : joined);
}

bool PodHasPlacementConstraints(const json& pod) {
  const json& spec = At(pod, "spec");
  if (At(spec, "nodeSelector").is_object() && !At(spec, "nodeSelector").empty()) return true;
  if (At(spec, "affinity").is_object() && !At(spec, "affinity").empty()) return true;
  if (At(spec, "topologySpreadConstraints").is_array() && !At(spec, "topologySpreadConstraints").empty()) return true;
  if (At(spec, "tolerations").is_array() && !At(spec, "tolerations").empty()) return true;
  return !HostPorts(spec).empty();
}

}  // namespace tessera
