// The search: a pod's requests become slots (one per request, with its alternatives); per node, every
// alternative is matched against every device once (CEL), then a depth-first search places the slots in
// order, trying for each device pick the candidates in policy order. GPUs whose state, shapes and matches
// are the same are interchangeable, so only the first candidate of each such class is tried.
#include "k8s/dra/dra_allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <functional>

#include "k8s/dra/dra_cel.h"
#include "sched/mig_layouts.h"

namespace tessera {
namespace {

struct Alt {
  const DraSubRequest* sub = nullptr;
  std::vector<CelSelector> selectors;  // the class's, then the request's
  std::string result_name;
  int id = 0;  // index over all alternatives of the problem
};

struct Slot {
  int claim = 0;
  std::string where;  // "claim ns/x request r"
  std::vector<Alt> alts;
};

struct Pick {
  int slot, alt, dev;
  int64_t key;
};

Status AddClaimSlots(const DraClassMap& classes, const DraClaimRef& claim, int index,
                     std::vector<Slot>* slots, int* n_alts) {
  if (claim.spec->has_constraints)
    return Status::Error(
        fmt::format("claim {}: constraints (matchAttribute, distinctAttribute) are not supported by "
                    "Tessera's allocator yet",
                    claim.name));
  for (const DraRequest& r : claim.spec->requests) {
    Slot slot{index, fmt::format("claim {} request {}", claim.name, r.name), {}};
    for (size_t i = 0; i < r.alternatives.size(); ++i) {
      const DraSubRequest& sub = r.alternatives[i];
      const std::string where = r.first_available ? slot.where + "/" + sub.name : slot.where;
      auto cls = classes.find(sub.device_class);
      if (cls == classes.end())
        return Status::Error(fmt::format("{}: DeviceClass {} does not exist", where, sub.device_class));
      if (sub.admin_access)
        return Status::Error(fmt::format("{}: adminAccess is not supported by Tessera's allocator", where));
      Alt alt{&sub, {}, r.ResultName(i), (*n_alts)++};
      for (const std::string& e : cls->second.selectors) alt.selectors.push_back(CelSelector::Compile(e));
      for (const std::string& e : sub.selectors) alt.selectors.push_back(CelSelector::Compile(e));
      for (const CelSelector& s : alt.selectors)
        if (!s.supported()) return Status::Error(fmt::format("{}: {}", where, s.unsupported_reason()));
      slot.alts.push_back(std::move(alt));
    }
    slots->push_back(std::move(slot));
  }
  return Status::Ok();
}

// Per node: which devices each alternative matches, the first runtime error per alternative, and a
// signature per GPU of its shapes and matches (for merging interchangeable GPUs).
struct NodeMatch {
  std::vector<std::vector<char>> match;  // [alt id][device]
  std::vector<std::string> error;        // [alt id]
  std::vector<std::string> gpu_sig;      // [gpu]
  std::vector<std::vector<int>> gpu_devices;
};

std::string Shape(const DraModelDevice& d) {
  const size_t dash = d.device.name.find('-', 4);
  return dash == std::string::npos ? "gpu" : d.device.name.substr(dash);
}

void MatchDevice(const DraModelDevice& d, const Alt& alt, NodeMatch* nm, int dev) {
  for (const CelSelector& s : alt.selectors) {
    CelOutcome o = s.Evaluate(d.device, d.driver);
    if (o.verdict == CelVerdict::kMatch) continue;
    if (o.verdict != CelVerdict::kNoMatch && nm->error[alt.id].empty()) nm->error[alt.id] = o.message;
    return;
  }
  nm->match[alt.id][dev] = 1;
}

NodeMatch MatchNode(const DraModelNode& node, const std::vector<Slot>& slots, int n_alts) {
  NodeMatch nm;
  nm.match.assign(n_alts, std::vector<char>(node.devices.size(), 0));
  nm.error.assign(n_alts, std::string());
  nm.gpu_sig.assign(node.gpus.size(), std::string());
  nm.gpu_devices.assign(node.gpus.size(), {});
  for (size_t i = 0; i < node.devices.size(); ++i)
    for (const Slot& s : slots)
      for (const Alt& a : s.alts) MatchDevice(node.devices[i], a, &nm, static_cast<int>(i));
  for (size_t i = 0; i < node.devices.size(); ++i) {
    const DraModelDevice& d = node.devices[i];
    if (d.gpu < 0) continue;
    std::string& sig = nm.gpu_sig[d.gpu];
    if (sig.empty()) sig = node.gpus[d.gpu].product + "#";
    sig += Shape(d) + ":";
    for (int a = 0; a < n_alts; ++a) sig += nm.match[a][i] ? '1' : '0';
    sig += ';';
    nm.gpu_devices[d.gpu].push_back(static_cast<int>(i));
  }
  return nm;
}

int Freedom(const DraModel& model, int node, int gpu, uint8_t mask) {
  const DraModelGpu& g = model.nodes[node].gpus[gpu];
  if (g.kind != kNone && Catalog::Default().kind(g.kind).mig_capable)
    return MigFreedom(Catalog::Default().kind(g.kind), mask);
  int f = 0;  // the GPU's announced placements that still fit, weighted by their memory slices
  for (uint8_t m : g.mig_masks)
    if (!(m & mask)) f += std::popcount(static_cast<unsigned>(m));
  return f;
}

class Search {
 public:
  Search(const DraModel& model, const DraUsage& usage, DraPolicy policy, int64_t budget)
      : model_(model), usage_(usage), policy_(policy), steps_(budget) {}

  // Places slots [s, end) on `node`, then calls `then`; true when `then` returned true (the search stops).
  bool Place(int node, const NodeMatch& nm, const std::vector<Slot>& slots, size_t s, size_t end,
             const std::function<bool()>& then);
  bool exhausted() const { return steps_ < 0; }
  const std::vector<Pick>& picks() const { return picks_; }
  DraUsage& usage() { return usage_; }
  int64_t Key(int node, int dev) const;

 private:
  bool PlaceCount(int node, const NodeMatch& nm, const std::vector<Slot>& slots, size_t s, size_t end, int a,
                  int64_t remaining, const std::function<bool()>& then);
  bool PlaceAll(int node, const NodeMatch& nm, const std::vector<Slot>& slots, size_t s, size_t end, int a,
                const std::function<bool()>& then);
  std::vector<std::pair<int64_t, int>> Candidates(int node, const NodeMatch& nm, int alt_id) const;
  std::string Signature(int node, int dev, const NodeMatch& nm) const;

  const DraModel& model_;
  DraUsage usage_;
  DraPolicy policy_;
  int64_t steps_;
  std::vector<Pick> picks_;
};

int64_t Search::Key(int node, int dev) const {
  const DraModelDevice& d = model_.nodes[node].devices[dev];
  if (policy_ == DraPolicy::kFirstFit || d.gpu < 0) return 0;
  // Tessera's MIG placement rule (sched/engine_policy.cc): pack onto GPUs in use, then keep the most freedom.
  const uint8_t mask = usage_.UsedSlices(node, d.gpu) | d.slice_mask;
  return -int64_t{usage_.DevicesOnGpu(node, d.gpu)} * 1000 - Freedom(model_, node, d.gpu, mask);
}

std::string Search::Signature(int node, int dev, const NodeMatch& nm) const {
  const DraModelNode& n = model_.nodes[node];
  const DraModelDevice& d = n.devices[dev];
  if (d.gpu < 0 || d.consumes.size() != 1 || d.consumes[0].set != n.gpus[d.gpu].set)
    return "#" + d.device.name;
  std::string sig = nm.gpu_sig[d.gpu] + "|" + Shape(d) + "|";
  const int set = d.consumes[0].set;
  for (size_t c = 0; c < n.sets[set].counters.size(); ++c)
    sig += std::to_string(usage_.Used(node, set, static_cast<int>(c))) + ",";
  for (int i : nm.gpu_devices[d.gpu]) sig += usage_.Taken(node, i) ? '1' : '0';
  return sig;
}

std::vector<std::pair<int64_t, int>> Search::Candidates(int node, const NodeMatch& nm, int alt_id) const {
  std::vector<std::pair<int64_t, int>> out;
  for (size_t i = 0; i < model_.nodes[node].devices.size(); ++i)
    if (nm.match[alt_id][i] && usage_.Fits(node, static_cast<int>(i)))
      out.emplace_back(Key(node, static_cast<int>(i)), static_cast<int>(i));
  std::stable_sort(out.begin(), out.end());
  std::vector<std::string> seen;
  std::vector<std::pair<int64_t, int>> unique;
  for (const auto& c : out) {
    std::string sig = Signature(node, c.second, nm);
    if (std::find(seen.begin(), seen.end(), sig) != seen.end()) continue;
    seen.push_back(std::move(sig));
    unique.push_back(c);
  }
  return unique;
}

bool Search::Place(int node, const NodeMatch& nm, const std::vector<Slot>& slots, size_t s, size_t end,
                   const std::function<bool()>& then) {
  if (s == end) return then();
  const Slot& slot = slots[s];
  for (size_t a = 0; a < slot.alts.size(); ++a) {
    const Alt& alt = slot.alts[a];
    if (!nm.error[alt.id].empty()) continue;
    const bool done = alt.sub->mode == DraAllocationMode::kAll
                          ? PlaceAll(node, nm, slots, s, end, static_cast<int>(a), then)
                          : PlaceCount(node, nm, slots, s, end, static_cast<int>(a), alt.sub->count, then);
    if (done) return true;
    if (exhausted()) return false;
  }
  return false;
}

bool Search::PlaceCount(int node, const NodeMatch& nm, const std::vector<Slot>& slots, size_t s, size_t end,
                        int a, int64_t remaining, const std::function<bool()>& then) {
  if (remaining == 0) return Place(node, nm, slots, s + 1, end, then);
  if (--steps_ < 0) return false;
  for (const auto& [key, dev] : Candidates(node, nm, slots[s].alts[a].id)) {
    usage_.Add(node, dev);
    picks_.push_back({static_cast<int>(s), a, dev, key});
    const bool done = PlaceCount(node, nm, slots, s, end, a, remaining - 1, then);
    picks_.pop_back();
    usage_.Remove(node, dev);
    if (done) return true;
    if (exhausted()) return false;
  }
  return false;
}

bool Search::PlaceAll(int node, const NodeMatch& nm, const std::vector<Slot>& slots, size_t s, size_t end,
                      int a, const std::function<bool()>& then) {
  if (--steps_ < 0) return false;
  const int id = slots[s].alts[a].id;
  const auto& devices = model_.nodes[node].devices;
  std::vector<int> added;
  bool ok = true;
  for (size_t i = 0; i < devices.size() && ok; ++i) {
    if (!nm.match[id][i]) continue;
    ok = devices[i].pool_complete && usage_.Fits(node, static_cast<int>(i));
    if (!ok) break;
    usage_.Add(node, static_cast<int>(i));
    picks_.push_back({static_cast<int>(s), a, static_cast<int>(i), 0});
    added.push_back(static_cast<int>(i));
  }
  const bool done = ok && !added.empty() && Place(node, nm, slots, s + 1, end, then);
  for (auto it = added.rbegin(); it != added.rend(); ++it) {
    picks_.pop_back();
    usage_.Remove(node, *it);
  }
  return done;
}

// Why the slots do not fit on the node: the first request that cannot be met even alone, else the mix.
std::string WhyNot(const DraModel& model, int node, const NodeMatch& nm, const std::vector<Slot>& slots,
                   const DraUsage& usage, bool exhausted) {
  if (exhausted) return "the search for a combination ran out of its step budget";
  const DraModelNode& n = model.nodes[node];
  for (const Slot& slot : slots) {
    std::string why;
    for (const Alt& alt : slot.alts) {
      if (!nm.error[alt.id].empty()) {
        why = nm.error[alt.id];
        continue;
      }
      int64_t matching = 0, free = 0;
      for (size_t i = 0; i < n.devices.size(); ++i) {
        matching += nm.match[alt.id][i];
        free += nm.match[alt.id][i] && usage.Fits(node, static_cast<int>(i));
      }
      const bool all = alt.sub->mode == DraAllocationMode::kAll;
      if (all ? (matching > 0 && free == matching && !n.incomplete) : free >= alt.sub->count) {
        why.clear();
        break;
      }
      if (why.empty())
        why = fmt::format(
            "{} needs {} of class {}; {} match, {} free{}", slot.where,
            all ? "all devices" : fmt::format("{} device{}", alt.sub->count, alt.sub->count == 1 ? "" : "s"),
            alt.sub->device_class, matching, free, all && n.incomplete ? ", the pool is incomplete" : "");
    }
    if (!why.empty()) return why;
  }
  return "the requests do not fit together (shared counters of the GPUs)";
}

// One line per distinct reason with the nodes it applies to.
std::string Summarize(const std::vector<std::pair<std::string, std::string>>& node_reasons, size_t n_nodes) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const auto& nr : node_reasons) {  // not a structured binding: clang 14 cannot capture one
    const std::string& why = nr.second;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == why; });
    if (it == groups.end())
      groups.push_back({why, {nr.first}});
    else
      it->second.push_back(nr.first);
  }
  std::string out = fmt::format("0/{} nodes can allocate the pod's claims", n_nodes);
  for (const auto& [why, nodes] : groups) {
    std::string names;
    for (size_t i = 0; i < nodes.size() && i < 3; ++i) names += (i ? ", " : "") + nodes[i];
    if (nodes.size() > 3) names += fmt::format(" and {} more", nodes.size() - 3);
    out += fmt::format("; {}: {}", names, why);
  }
  return out;
}

int64_t FreeSlices(const DraModel& model, const DraUsage& usage, int node) {
  int64_t free = 0;
  const DraModelNode& n = model.nodes[node];
  for (size_t s = 0; s < n.sets.size(); ++s)
    for (int c : n.sets[s].slice_counter)
      if (c >= 0) free += n.sets[s].capacity[c] - usage.Used(node, static_cast<int>(s), c);
  for (size_t i = 0; i < n.devices.size(); ++i)
    free += n.devices[i].consumes.empty() && !usage.Taken(node, static_cast<int>(i));
  return free;
}

struct NodeFit {
  int node = -1;
  std::vector<Pick> picks;
  std::tuple<int64_t, int64_t, int> rank;  // (sum of keys, free slices after, node index): lower is better
};

std::vector<int> CandidateNodes(const DraModel& model, const DraAllocateOptions& options) {
  std::vector<int> out;
  for (size_t i = 0; i < model.nodes.size(); ++i)
    if (options.nodes.empty() ||
        std::find(options.nodes.begin(), options.nodes.end(), model.nodes[i].name) != options.nodes.end())
      out.push_back(static_cast<int>(i));
  return out;
}

DraDecision Decide(const DraModel& model, const std::vector<Slot>& slots,
                   const std::vector<DraClaimRef>& claims, const NodeFit& fit) {
  DraDecision d;
  d.fits = true;
  d.node = model.nodes[fit.node].name;
  for (const DraClaimRef& c : claims) d.claims.push_back({c.name, {}});
  for (const Pick& p : fit.picks) {
    const DraModelDevice& dev = model.nodes[fit.node].devices[p.dev];
    const Slot& slot = slots[p.slot];
    d.claims[slot.claim].results.push_back(
        {slot.alts[p.alt].result_name, dev.driver, dev.pool, dev.device.name});
  }
  return d;
}

}  // namespace

DraDecision AllocateDra(const DraModel& model, const DraClassMap& classes, const DraUsage& usage,
                        const std::vector<DraClaimRef>& claims, const DraAllocateOptions& options) {
  std::vector<Slot> slots;
  int n_alts = 0;
  for (size_t c = 0; c < claims.size(); ++c) {
    if (Status st = AddClaimSlots(classes, claims[c], static_cast<int>(c), &slots, &n_alts); !st.ok()) {
      DraDecision d;
      d.reason = st.message();
      d.unsupported = true;
      return d;
    }
  }
  const std::vector<int> nodes = CandidateNodes(model, options);
  std::vector<std::pair<std::string, std::string>> reasons;
  NodeFit best;
  for (int node : nodes) {
    const NodeMatch nm = MatchNode(model.nodes[node], slots, n_alts);
    Search search(model, usage, options.policy, options.search_budget);
    NodeFit fit;
    const bool ok = search.Place(node, nm, slots, 0, slots.size(), [&] {
      fit.node = node;
      fit.picks = search.picks();
      int64_t keys = 0;
      for (const Pick& p : fit.picks) keys += p.key;
      fit.rank = {keys, FreeSlices(model, search.usage(), node), node};
      return true;
    });
    if (!ok) {
      reasons.emplace_back(model.nodes[node].name, WhyNot(model, node, nm, slots, usage, search.exhausted()));
      continue;
    }
    if (best.node < 0 || fit.rank < best.rank) best = fit;
    if (options.policy == DraPolicy::kFirstFit) break;
  }
  if (best.node >= 0) return Decide(model, slots, claims, best);
  DraDecision d;
  d.reason = nodes.empty() ? "no node publishes DRA devices" : Summarize(reasons, nodes.size());
  return d;
}

void CommitDra(const DraDecision& decision, DraUsage* usage) {
  for (const DraClaimChoice& c : decision.claims) usage->AddResults(c.results);
}

DraPackingBound DraBestPacking(const DraModel& model, const DraClassMap& classes, const DraUsage& usage,
                               const std::vector<DraClaimSpec>& musts,
                               const std::vector<DraClaimSpec>& optional, int64_t budget) {
  std::vector<DraClaimRef> refs;
  for (const DraClaimSpec& s : musts) refs.push_back({fmt::format("must-{}", refs.size()), &s});
  for (const DraClaimSpec& s : optional) refs.push_back({fmt::format("optional-{}", refs.size()), &s});
  std::vector<Slot> slots;
  std::vector<size_t> begin;
  int n_alts = 0;
  for (size_t c = 0; c < refs.size(); ++c) {
    begin.push_back(slots.size());
    if (!AddClaimSlots(classes, refs[c], static_cast<int>(c), &slots, &n_alts).ok()) return {-1, true};
  }
  begin.push_back(slots.size());
  std::vector<NodeMatch> nms;
  for (const DraModelNode& n : model.nodes) nms.push_back(MatchNode(n, slots, n_alts));
  Search search(model, usage, DraPolicy::kFirstFit, budget);
  const int m = static_cast<int>(musts.size()), k = static_cast<int>(optional.size());
  int best = -1;
  std::function<bool(int, int)> rec = [&](int i, int placed) -> bool {
    if (search.exhausted()) return true;
    const int j = i - m;
    if (j >= 0 && placed + (k - j) <= best) return false;
    if (j == k) {
      best = std::max(best, placed);
      return best == k;
    }
    for (size_t node = 0; node < model.nodes.size(); ++node)
      if (search.Place(static_cast<int>(node), nms[node], slots, begin[i], begin[i + 1],
                       [&] { return rec(i + 1, placed + (j >= 0)); }))
        return true;
    return j >= 0 && rec(i + 1, placed);
  };
  rec(0, 0);
  return {best, !search.exhausted()};
}

}  // namespace tessera
