#include "sched/engine_policy.h"

#include <algorithm>
#include <array>
#include <bit>
#include <climits>
#include <fmt/format.h>
#include <limits>
#include <optional>
#include <tuple>

#include "model/workload.h"
#include "sched/mig_layouts.h"

namespace tessera {
namespace {

constexpr int kNoCat = 99;
enum Cat : int { kIdleExact = 0, kCreate = 1, kSharePartial = 2, kIdleLarger = 3, kDestroy = 4, kEnable = 5, kShareIdle = 6 };

bool NodeEligible(const NodeState& ns, const Request& r) {
  return ns.gpu_count > 0 && r.KindAllowed(ns.kind) && r.TierAllowed(ns.tier) &&
         ns.free_cpu_milli >= r.cpu_milli && ns.free_memory_mib >= r.host_memory_mib;
}

// The non-media profile of `kind` with the compute and memory slices `r` names, or -1. (The kinds a job may
// use are those whose profile of that name holds its memory: the service's request building says so.)
int NamedProfile(const GpuKind& kind, const Request& r) {
  for (int p = 0; p < static_cast<int>(kind.profiles.size()); ++p) {
    const MigProfile& m = kind.profiles[p];
    if (!m.media && m.compute_slices == r.mig_compute_slices && m.memory_slices == r.mig_memory_slices)
      return p;
  }
  return -1;
}

// Per-kind MIG profile choice for one request, computed lazily.
struct ProfileChoice {
  std::array<int16_t, 64> profile;
  std::array<uint32_t, 64> covering;  // profiles (non-media) that cover the need
  std::array<bool, 64> done{};
  bool exact = false;  // only the smallest covering profile (PolicyTraits::exact_mig_profiles)
  int Get(const Catalog& cat, KindId k, const Request& r, uint32_t* cover) {
    if (k < 0 || k >= 64) return -1;
    if (!done[k]) {
      done[k] = true;
      const GpuKind& kind = cat.kind(k);
      profile[k] = kind.mig_capable ? static_cast<int16_t>(SmallestCoveringProfile(kind, r.gpu_memory_mib, r.gpu_milli))
                                    : static_cast<int16_t>(-1);
      covering[k] = 0;
      for (int p = 0; p < static_cast<int>(kind.profiles.size()); ++p)
        if (!kind.profiles[p].media && kind.profiles[p].usable_mib >= r.gpu_memory_mib &&
            kind.ProfileComputeMilli(p) >= r.gpu_milli)
          covering[k] |= 1u << p;
      if (exact) {  // the named profile here, else the smallest that holds the need: one profile only
        profile[k] = static_cast<int16_t>(!kind.mig_capable          ? -1
                                          : r.mig_compute_slices > 0 ? NamedProfile(kind, r)
                                                                     : profile[k]);
        covering[k] = profile[k] >= 0 ? 1u << profile[k] : 0;
      } else if (r.cls == WorkloadClass::kTraining) {  // training never takes a larger slice than it needs
        covering[k] = profile[k] >= 0 ? 1u << profile[k] : 0;
      }
    }
    *cover = covering[k];
    return profile[k];
  }
};

struct SubGpuChoice {
  int cat = kNoCat;
  GpuGrant grant;
  int key = INT_MAX;  // lower is better within the node
};

// Best share of a non-MIG GPU on node n: partly used GPUs first (best fit on milli), then idle ones. With
// `admit`, a partly used GPU takes the share only if every sharer stays within its SLO (sharing.h), the
// GPU's summed demand being its shares' milli.
SubGpuChoice BestShare(const ClusterState& s, NodeId n, const Request& r, const SharingOptions* admit = nullptr) {
  SubGpuChoice best;
  const NodeState& ns = s.node(n);
  for (GpuId g = ns.first_gpu; g < ns.first_gpu + ns.gpu_count; ++g) {
    const GpuState& gs = s.gpu(g);
    if (gs.mig_enabled || gs.free_milli < r.gpu_milli || gs.free_memory_mib < r.gpu_memory_mib) continue;
    if (admit && gs.tasks > 0 &&
        !SharerFits(*admit, kMilliPerGpu - gs.free_milli, gs.tasks, gs.share_sensitive, kMilliPerGpu, r.gpu_milli,
                    r.latency_sensitive))
      continue;
    int cat = gs.tasks ? kSharePartial : kShareIdle;
    int key = gs.free_milli - r.gpu_milli;
    if (std::tie(cat, key) < std::tie(best.cat, best.key)) {
      best.cat = cat;
      best.key = key;
      best.grant = GpuGrant{};
      best.grant.gpu = g;
      best.grant.milli = r.gpu_milli;
      best.grant.memory_mib = r.gpu_memory_mib;
      best.grant.latency_sensitive = r.latency_sensitive;
    }
  }
  return best;
}

// BestShare with `admit` (may be null: by compute alone) and the headroom the snapshot learned.
SubGpuChoice AdmittedShare(const ClusterState& s, NodeId n, const Request& r, const SharingOptions* admit) {
  if (!admit) return BestShare(s, n, r);
  const SharingOptions o = WithLearned(*admit, s.learned_headroom());
  return BestShare(s, n, r, &o);
}

// The MIG options of one node, keeping the lowest (category, key); on ties the first considered.
struct MigCandidates {
  SubGpuChoice best;
  void Consider(int cat, int key, const GpuGrant& gr) {
    if (std::tie(cat, key) < std::tie(best.cat, best.key)) {
      best.cat = cat;
      best.key = key;
      best.grant = gr;
    }
  }
};

// Where enabling MIG on an idle GPU places profile `prof`: the first allowed start (largest-first layouts
// keep most room) or, `frag_aware`, the start leaving the most layout freedom. `gr->mig_start` is left as
// it is when no start is allowed.
void ChooseEnableStart(const GpuKind& kind, const MigProfile& prof, bool frag_aware, GpuGrant* gr) {
  for (int st = 0; st < kind.mig_memory_slices; ++st)
    if (prof.AllowedStart(st)) {
      gr->mig_start = static_cast<int8_t>(st);
      break;
    }
  if (!frag_aware) return;
  int bestf = -1;
  for (int st = 0; st < kind.mig_memory_slices; ++st) {
    if (!prof.AllowedStart(st)) continue;
    int f = MigFreedom(kind, prof.MaskAt(st));
    if (f > bestf) {
      bestf = f;
      gr->mig_start = static_cast<int8_t>(st);
    }
  }
}

// Idle instances of MIG GPU `gs` whose profile is in `covering`: kIdleExact for profile p, else kIdleLarger.
void ConsiderIdleInstances(const GpuKind& kind, const GpuState& gs, const GpuGrant& gr, int p,
                           uint32_t covering, MigCandidates* c) {
  for (int i = 0; i < gs.n_instances; ++i) {
    const MigSlot& m = gs.instances[i];
    if (m.busy || !((covering >> m.profile) & 1u)) continue;
    GpuGrant g2 = gr;
    g2.mig_profile = m.profile;
    g2.mig_start = m.start;
    g2.milli = kind.ProfileComputeMilli(m.profile);
    // An exact-profile need may be another kind's (a little larger): what this instance holds. Otherwise
    // only covering instances get here and this changes nothing.
    g2.memory_mib = std::min<int64_t>(g2.memory_mib, kind.profiles[m.profile].usable_mib);
    if (m.profile == p)
      c->Consider(kIdleExact, -gs.tasks, g2);
    else
      c->Consider(kIdleLarger, kind.profiles[m.profile].memory_slices * 16 - gs.tasks, g2);
  }
}

// A new instance of profile p in free slices of MIG GPU `gs` (kCreate); `count`: its instances of p.
void ConsiderCreate(const GpuKind& kind, const GpuState& gs, const GpuGrant& gr, int p, int count,
                    bool frag_aware, MigCandidates* c) {
  const MigProfile& prof = kind.profiles[p];
  if (count >= prof.max_count || gs.n_instances >= kind.mig_max_instances) return;
  for (int st = 0; st < kind.mig_memory_slices; ++st) {
    if (!prof.AllowedStart(st) || (prof.MaskAt(st) & gs.used_mask)) continue;
    GpuGrant g2 = gr;
    g2.create_instance = true;
    g2.mig_profile = static_cast<int16_t>(p);
    g2.mig_start = static_cast<int8_t>(st);
    // Prefer GPUs already in use (pack), then the start keeping the most layout freedom.
    int key = -gs.tasks * 1000 - (frag_aware ? MigFreedom(kind, gs.used_mask | prof.MaskAt(st)) : -st);
    c->Consider(kCreate, key, g2);
  }
}

// Destroying the idle instances that overlap a start of profile p on MIG GPU `gs`, then creating one there
// (kDestroy); `count`: its instances of p.
void ConsiderDestroy(const GpuKind& kind, const GpuState& gs, const GpuGrant& gr, int p, int count,
                     MigCandidates* c) {
  const MigProfile& prof = kind.profiles[p];
  for (int st = 0; st < kind.mig_memory_slices; ++st) {
    if (!prof.AllowedStart(st)) continue;
    const uint8_t mask = prof.MaskAt(st);
    if (!(mask & gs.used_mask)) continue;  // covered by kCreate
    uint8_t destroy = 0;
    bool ok = true;
    int kept_same = count;
    int destroyed = 0;
    for (int i = 0; i < gs.n_instances; ++i) {
      const MigSlot& m = gs.instances[i];
      if (!(kind.profiles[m.profile].MaskAt(m.start) & mask)) continue;
      if (m.busy) {
        ok = false;
        break;
      }
      destroy |= static_cast<uint8_t>(1u << m.start);
      ++destroyed;
      if (m.profile == p) --kept_same;
    }
    if (!ok || kept_same >= prof.max_count || gs.n_instances - destroyed >= kind.mig_max_instances) continue;
    GpuGrant g2 = gr;
    g2.destroy_mask = destroy;
    g2.create_instance = true;
    g2.mig_profile = static_cast<int16_t>(p);
    g2.mig_start = static_cast<int8_t>(st);
    c->Consider(kDestroy, destroyed * 100 - gs.tasks, g2);
  }
}

// Best MIG option on node n for profile p (categories kIdleExact..kEnable), examining GPUs.
SubGpuChoice BestMig(const ClusterState& s, NodeId n, const Request& r, int p, uint32_t covering,
                     bool repartition, bool frag_aware, bool allow_destroy) {
  MigCandidates c;
  const NodeState& ns = s.node(n);
  const GpuKind& kind = s.catalog().kind(ns.kind);
  for (GpuId g = ns.first_gpu; g < ns.first_gpu + ns.gpu_count; ++g) {
    const GpuState& gs = s.gpu(g);
    GpuGrant gr;
    gr.gpu = g;
    gr.milli = kind.ProfileComputeMilli(p);
    gr.memory_mib = r.gpu_memory_mib;
    if (!gs.mig_enabled) {
      if (repartition && gs.tasks == 0) {
        gr.enable_mig = true;
        gr.create_instance = true;
        gr.mig_profile = static_cast<int16_t>(p);
        ChooseEnableStart(kind, kind.profiles[p], frag_aware, &gr);
        c.Consider(kEnable, 0, gr);
      }
      continue;
    }
    ConsiderIdleInstances(kind, gs, gr, p, covering, &c);
    if (!repartition) continue;
    int count = 0;
    for (int i = 0; i < gs.n_instances; ++i) count += gs.instances[i].profile == p;
    ConsiderCreate(kind, gs, gr, p, count, frag_aware, &c);
    if (allow_destroy) ConsiderDestroy(kind, gs, gr, p, count, &c);
  }
  return c.best;
}

std::string NodeName(const ClusterState& s, NodeId n) { return s.cluster().nodes[n].name; }

// Class separation: 1 when node n holds work that `r` should stay away from. Sub-GPU (and GPU-less) work
// avoids nodes with training; whole-GPU work (training, large replicas) avoids nodes serving inference.
int ClassConflict(const NodeState& ns, const Request& r) {
  if (r.SubGpu()) return ns.training_tasks > 0;
  return ns.inference_tasks > 0;
}

// Whether some GPU kind the request allows can hold MIG instances.
bool AnyMigKindAllowed(const Catalog& cat, const Request& r) {
  for (KindId k = 0; k < static_cast<KindId>(cat.size()) && k < 64; ++k)
    if (cat.kind(k).mig_capable && r.KindAllowed(k)) return true;
  return false;
}

// Candidate ordering within the sub-GPU and whole-GPU searches: category, class conflict, drain extension,
// then two policy keys (packing and node index, or minus the node score and the tie rank); lower wins.
using NodeKey = std::tuple<int, int, int, int64_t, int64_t>;
constexpr NodeKey kNoKey{kNoCat, 0, 0, 0, 0};
constexpr int64_t kUnusableKey = std::numeric_limits<int64_t>::max();  // ScoreKey of a node the scorer rejects

// How far placing r on node n pushes back the node's drain time (when its last work ends), in doubling
// buckets of 10 minutes: 0 = not at all (r ends before the node's other work), 1 = up to 10 min, 2 = up to
// 20, ...; an empty node ranks last. 0 everywhere when the request or the snapshot has no times.
int DrainExtension(const ClusterState& s, NodeId n, const Request& r) {
  if (r.expected_end_s < 0 || !s.has_drain_times()) return 0;
  const int64_t d = s.drain_s(n);
  if (d == ClusterState::kNoWork) return 63;
  if (d >= r.expected_end_s) return 0;
  const uint64_t steps = static_cast<uint64_t>((r.expected_end_s - d + 599) / 600);
  return std::min(62, 1 + static_cast<int>(std::bit_width(steps - 1)));
}

}  // namespace

PolicyTraits TesseraTraits() { return PolicyTraits{"tessera", true, true, true, true, false, true, true, true}; }
PolicyTraits K8sDefaultTraits() { return PolicyTraits{"k8s-default", false, false, false, false, true, false, false}; }
PolicyTraits BestFitTraits() { return PolicyTraits{"bestfit", true, true, true, false, false, false, false}; }
PolicyTraits StaticMigTraits() { return PolicyTraits{"static-mig", true, false, false, false, true, false, false}; }
// Fractions of whole GPUs, packed best fit (no MIG): bestfit-share admits a sharer only within every SLO
// (tessera's test), hami by memory and core percentage alone (HAMi's binpack; its core limit caps each
// client).
PolicyTraits BestFitShareTraits() {
  PolicyTraits t{"bestfit-share", true, false, true, false, false, false, false};
  t.share_admission = true;
  return t;
}
PolicyTraits HamiTraits() { return PolicyTraits{"hami", true, false, true, false, false, false, false}; }
// kube-scheduler (LeastAllocated nodes, memory-blind) with the device plugin's replicas of whole GPUs.
PolicyTraits K8sReplicaTraits(std::string name) {
  return PolicyTraits{std::move(name), true, false, true, false, true, false, false};
}

PlaceResult EnginePolicy::Place(const ClusterState& s, const Request& r) const {
  if (r.tasks < 1) return PlaceResult::NoFit(NoFitCode::kInvalid, "a request needs at least one task");
  if (r.gpus_per_task == 0 && r.gpu_milli == 0) return PlaceCpuOnly(s, r);
  if (r.gpus_per_task < 0 || r.gpu_milli < 1 || r.gpu_milli > kMilliPerGpu || r.gpu_memory_mib < 0)
    return PlaceResult::NoFit(NoFitCode::kInvalid, "GPU count, share or memory out of range");
  if (r.SubGpu() && r.tasks > 1)
    return PlaceResult::NoFit(NoFitCode::kInvalid, "a gang needs whole GPUs: MIG slices and shares cannot join NCCL");
  if (r.SubGpu() && traits_.mig_aware) {
    PlaceResult res = PlaceSubGpu(s, r);
    if (res.ok || !traits_.spread) return res;  // static-mig falls back to a whole GPU (nvidia.com/gpu)
    PlaceResult whole = PlaceSpread(s, r);
    if (whole.ok) return whole;
    return res;
  }
  return traits_.spread ? PlaceSpread(s, r) : PlaceWhole(s, r);
}

PlaceResult EnginePolicy::PlaceSubGpu(const ClusterState& s, const Request& r) const {
  if (traits_.share_instances && r.allow_mig && MayShare(r)) {
    PlaceResult joined = JoinShared(s, r);
    if (joined.ok) return joined;
    PlaceResult opened = OpenShared(s, r);
    if (opened.ok) return opened;
    // A slice of its own; shared (open to later sharers) when it has room for another replica.
    PlaceResult own = PlaceSlice(s, r);
    if (own.ok && own.tasks[0].gpus[0].mig_profile >= 0 && HasRoom(s, r, own.tasks[0].gpus[0]))
      return SharedResult(s, r, own.tasks[0].gpus[0], own.tasks[0].gpus[0].create_instance ? "new shared" : "idle shared");
    return own;
  }
  return PlaceSlice(s, r);
}

bool EnginePolicy::HasRoom(const ClusterState& s, const Request& r, const GpuGrant& g) const {
  const GpuKind& kind = s.kind_of_gpu(g.gpu);
  const SharingOptions o = Sharing(s);
  const int64_t left = kind.profiles[g.mig_profile].usable_mib - r.gpu_memory_mib - o.context_mib;
  return left >= kRoomMib && SharerFits(o, r.gpu_milli, 1, r.latency_sensitive ? 1 : 0,
                                        kind.ProfileComputeMilli(g.mig_profile), kRoomMilli, false);
}

PlaceResult EnginePolicy::JoinShared(const ClusterState& s, const Request& r) const {
  std::optional<JoinKey> best;
  GpuGrant grant;
  const std::vector<uint64_t>& with_shared = s.shared_nodes();
  const SharingOptions o = Sharing(s);
  for (size_t w = 0; w < with_shared.size(); ++w)
    for (uint64_t bits = with_shared[w]; bits; bits &= bits - 1)
      JoinOnNode(s, o, r, static_cast<NodeId>(w * 64 + __builtin_ctzll(bits)), &best, &grant);
  if (!best) return PlaceResult::NoFit(NoFitCode::kMigProfileUnavailable, "no shared instance has room");
  return SharedResult(s, r, grant, "shared");
}

void EnginePolicy::JoinOnNode(const ClusterState& s, const SharingOptions& o, const Request& r, NodeId n, std::optional<JoinKey>* best,
                              GpuGrant* grant) const {
  const int64_t need_mib = r.gpu_memory_mib + o.context_mib;
  const NodeState& ns = s.node(n);
  if (!NodeEligible(ns, r)) return;
  const SharedBound& b = ns.shared;  // most nodes fail here, without a look at their instances
  if (b.max_left_mib < need_mib ||
      r.gpu_milli > MaxJoinMilli(o, b.max_headroom_milli, b.min_capacity_milli, b.min_sharers,
                                 b.min_sensitive, r.latency_sensitive))
    return;
  const GpuKind& kind = s.catalog().kind(ns.kind);
  const int sep = Separate(s) ? ClassConflict(ns, r) : 0;
  const int ext = DrainExtension(s, n, r);
  for (GpuId g = ns.first_gpu; g < ns.first_gpu + ns.gpu_count; ++g) {
    if (s.gpu_cordoned(g) || s.sharing_closed(g)) continue;
    const GpuState& gs = s.gpu(g);
    for (int i = 0; i < gs.n_instances; ++i) {
      const MigSlot& m = gs.instances[i];
      if (!m.Shared()) continue;
      const int64_t left = kind.profiles[m.profile].usable_mib - m.shared_memory_mib - need_mib;
      if (left < 0) continue;
      const JoinKey key{sep, ext, left, n, g, m.start};
      if (*best && key >= **best) continue;  // cheap tests first: most instances lose on memory or rank
      const int cap = kind.ProfileComputeMilli(m.profile);
      if (m.shared_milli + r.gpu_milli > cap ||
          !SharerFits(o, m.shared_milli, m.sharers, m.sensitive, cap, r.gpu_milli, r.latency_sensitive))
        continue;
      *best = key;
      *grant = GpuGrant{};
      grant->gpu = g;
      grant->mig_profile = m.profile;
      grant->mig_start = m.start;
    }
  }
}

PlaceResult EnginePolicy::OpenShared(const ClusterState& s, const Request& r) const {
  const Catalog& cat = s.catalog();
  // Per allowed MIG kind: the profile whose slices per replica of this demand are fewest when shared, if that
  // beats the slices of the smallest dedicated slice that covers it.
  std::vector<std::tuple<double, KindId, int>> options;  // (slices per replica, kind, profile)
  const uint64_t present = s.gpu_kinds_present();  // a superset: a kind with no node left finds no slice
  const SharingOptions o = Sharing(s);
  for (KindId k = 0; k < static_cast<KindId>(cat.size()) && k < 64; ++k) {
    const GpuKind& kind = cat.kind(k);
    if (!kind.mig_capable || !r.KindAllowed(k) || !((present >> k) & 1u)) continue;
    const int p = SmallestCoveringProfile(kind, r.gpu_memory_mib, r.gpu_milli);
    const double dedicated = p >= 0 ? kind.profiles[p].memory_slices : 1e9;
    double best = dedicated;
    int best_q = -1;
    for (int q = 0; q < static_cast<int>(kind.profiles.size()); ++q) {
      const MigProfile& prof = kind.profiles[q];
      if (prof.media) continue;
      const int fit = SharersThatFit(o, kind.ProfileComputeMilli(q), prof.usable_mib, r.gpu_milli,
                                     r.gpu_memory_mib, r.latency_sensitive);
      if (fit < 2) continue;
      const double per = static_cast<double>(prof.memory_slices) / fit;
      if (per < best - 1e-9) {
        best = per;
        best_q = q;
      }
    }
    if (best_q >= 0) options.emplace_back(best / kind.mig_memory_slices, k, best_q);
  }
  std::sort(options.begin(), options.end());
  for (const auto& [per, k, q] : options) {
    const GpuKind& kind = cat.kind(k);
    Request slot = r;  // the instance to open: sized as the profile chosen, on that kind only
    slot.kind_mask = uint64_t{1} << k;
    slot.gpu_memory_mib = kind.profiles[q].usable_mib;
    slot.gpu_milli = kind.ProfileComputeMilli(q);
    slot.allow_share = false;
    PlaceResult res = PlaceSlice(s, slot);
    if (!res.ok) continue;
    return SharedResult(s, r, res.tasks[0].gpus[0], res.tasks[0].gpus[0].create_instance ? "new shared" : "idle shared");
  }
  return PlaceResult::NoFit(NoFitCode::kMigProfileUnavailable, "no shared instance is cheaper than a slice");
}

PlaceResult EnginePolicy::SharedResult(const ClusterState& s, const Request& r, GpuGrant grant,
                                       std::string_view what) const {
  grant.shared = true;
  grant.latency_sensitive = r.latency_sensitive;
  grant.milli = r.gpu_milli;
  grant.memory_mib = r.gpu_memory_mib + sharing_.context_mib;
  const NodeId n = s.gpu(grant.gpu).node;
  const GpuKind& kind = s.kind_of_gpu(grant.gpu);
  PlaceResult res;
  res.ok = true;
  res.span = Span::kOneGpu;
  res.reason = fmt::format("{} MIG instance {}@{} on {} GPU {} ({}/1000 and {} MiB of it){}", what,
                           kind.profiles[grant.mig_profile].name, static_cast<int>(grant.mig_start), NodeName(s, n),
                           grant.gpu - s.node(n).first_gpu, grant.milli, grant.memory_mib,
                           grant.enable_mig ? " (MIG mode switched on)" : grant.destroy_mask ? " (idle instances repartitioned)" : "");
  res.tasks.push_back(TaskPlacement{n, {grant}});
  return res;
}

bool EnginePolicy::MigCandidatesOnly(const ClusterState& s, const Request& r) const {
  if (!traits_.node_index || !traits_.mig_aware || !r.allow_mig || !traits_.repartition) return false;
  if (!traits_.share || !r.allow_share) return true;
  // Shares compete only on GPU kinds without MIG (a repartitioning policy isolates sub-GPU work in
  // instances).
  const Catalog& cat = s.catalog();
  for (KindId k = 0; k < static_cast<KindId>(cat.size()); ++k)
    if (k >= 64 || (r.KindAllowed(k) && ((s.gpu_kinds_present() >> k) & 1u) && !cat.kind(k).mig_capable))
      return false;
  return true;
}

// The search for one sub-GPU task's place (PlaceSlice): the best option so far (lower key wins) and what
// the search saw, for the reason when nothing fits.
struct EnginePolicy::SliceSearch {
  ProfileChoice pc;
  int cat = kNoCat;
  NodeKey key = kNoKey;
  NodeId node = kNone;
  bool scored = false;  // the best option is a share ranked by the scorer
  bool any_eligible = false, any_memory = false;
  // Where no MIG instance can serve the request, partly used and idle shares compete on the score alone;
  // otherwise an idle non-MIG GPU comes after the MIG options (isolation first).
  bool shares_only = false;

  // Takes the option when it beats the best so far; returns whether it did.
  bool Offer(const NodeKey& k, NodeId n, bool by_score) {
    if (!(k < key)) return false;
    key = k;
    cat = std::get<0>(k);
    node = n;
    scored = by_score;
    return true;
  }
};

PlaceResult EnginePolicy::PlaceSlice(const ClusterState& s, const Request& r) const {
  SliceSearch q;
  q.pc.exact = traits_.exact_mig_profiles;
  if (scorer_) scorer_->Begin(s, r);
  q.shares_only = !(traits_.mig_aware && r.allow_mig && AnyMigKindAllowed(s.catalog(), r));
  SliceFastPath(s, r, &q);
  // Pass 1 beyond the fast path: the candidate nodes from the bitsets, else every node.
  const bool searched = q.cat > kCreate && SliceCandidates(s, r, &q);
  for (NodeId n = 0; !searched && n < s.num_nodes() && q.cat > kCreate; ++n)
    if (SliceNode(s, r, n, &q)) break;
  // Pass 2: destroying idle instances, only when nothing better exists anywhere.
  if (q.cat > kDestroy && traits_.repartition && r.allow_mig) SliceDestroy(s, r, &q);
  if (q.cat == kNoCat) return SliceNoFit(r, q);
  return SliceResult(s, r, &q);
}

// An exact idle instance, else a creatable one, found through the per-profile node bitsets. The result
// equals a scan's: these categories beat every other option on any node.
void EnginePolicy::SliceFastPath(const ClusterState& s, const Request& r, SliceSearch* q) const {
  if (!traits_.mig_aware || !r.allow_mig) return;
  const Catalog& cat = s.catalog();
  const int cats = traits_.repartition ? 2 : 1;
  for (int c = 0; c < cats && q->cat == kNoCat; ++c) {
    for (KindId k = 0; k < static_cast<KindId>(cat.size()) && k < 64; ++k) {
      if (!cat.kind(k).mig_capable || !r.KindAllowed(k)) continue;
      uint32_t cover = 0;
      const int p = q->pc.Get(cat, k, r, &cover);
      if (p < 0 || p >= 32) continue;
      const std::vector<uint64_t>& bits =
          c == 0 ? s.idle_profile_nodes(k, p) : s.creatable_profile_nodes(k, p);
      for (size_t w = 0; w < bits.size(); ++w) {
        for (uint64_t word = bits[w]; word; word &= word - 1) {
          const NodeId n = static_cast<NodeId>(w * 64 + __builtin_ctzll(word));
          const NodeState& ns = s.node(n);
          if (!NodeEligible(ns, r)) continue;
          const int sep = Separate(s) ? ClassConflict(ns, r) : 0;
          const int pack = traits_.spread ? -ns.idle_gpus : ns.idle_gpus;
          q->Offer(NodeKey{c, sep, DrainExtension(s, n, r), pack, n}, n, false);
        }
      }
    }
  }
}

// Only idle larger instances and free whole GPUs (MIG mode switched on) are left when MigCandidatesOnly:
// visits the nodes that have either, from the node bitsets. Every other node's category is kNoCat, so the
// choice is a scan's. Returns whether it found an option (false: a scan must run, also to tell why not).
bool EnginePolicy::SliceCandidates(const ClusterState& s, const Request& r, SliceSearch* q) const {
  if (!MigCandidatesOnly(s, r)) return false;
  const Catalog& cat = s.catalog();
  std::array<const std::vector<uint64_t>*, 64> sets{};
  int nsets = 0;
  sets[nsets++] = &s.free_whole_nodes();
  for (KindId k = 0; k < static_cast<KindId>(cat.size()) && k < 64; ++k) {
    if (!cat.kind(k).mig_capable || !r.KindAllowed(k) || !((s.gpu_kinds_present() >> k) & 1u)) continue;
    uint32_t cover = 0;
    if (q->pc.Get(cat, k, r, &cover) < 0) continue;
    for (; cover; cover &= cover - 1) {
      if (nsets == static_cast<int>(sets.size())) return false;  // too many sets: scan every node instead
      sets[nsets++] = &s.idle_profile_nodes(k, __builtin_ctz(cover));
    }
  }
  for (size_t w = 0; w < sets[0]->size(); ++w) {
    uint64_t word = 0;
    for (int i = 0; i < nsets; ++i) word |= (*sets[i])[w];
    for (; word; word &= word - 1) SliceNode(s, r, static_cast<NodeId>(w * 64 + __builtin_ctzll(word)), q);
  }
  return q->cat != kNoCat;
}

// One node's best option in the categories the fast path does not cover; true: nothing can beat it.
bool EnginePolicy::SliceNode(const ClusterState& s, const Request& r, NodeId n, SliceSearch* q) const {
  const NodeState& ns = s.node(n);
  if (!NodeEligible(ns, r)) return false;
  q->any_eligible = true;
  const GpuKind& kind = s.catalog().kind(ns.kind);
  int c = kNoCat;
  if (r.allow_mig && kind.mig_capable) {
    uint32_t cover = 0;
    const int p = q->pc.Get(s.catalog(), ns.kind, r, &cover);
    if (p >= 0) {
      q->any_memory = true;
      if ((ns.idle_profile_mask >> p) & 1u)
        c = kIdleExact;
      else if (traits_.repartition && ((ns.creatable_profile_mask >> p) & 1u))
        c = kCreate;
      else if (ns.idle_profile_mask & cover)
        c = kIdleLarger;
      else if (traits_.repartition && ns.free_whole > 0)
        c = kEnable;
    }
  }
  // On MIG-capable kinds a repartitioning policy isolates sub-GPU work in instances, never in shares.
  const bool mig_path = kind.mig_capable && r.allow_mig && traits_.repartition;
  int64_t share_score = 0;  // minus the scorer's score
  if (c > kSharePartial && !mig_path && traits_.share && r.allow_share && ns.mig_gpus < ns.gpu_count &&
      ns.free_milli_total >= r.gpu_milli && kind.memory_mib >= r.gpu_memory_mib) {
    q->any_memory = true;
    c = std::min(c, ShareCategory(s, r, n, q->shares_only, &share_score));
  }
  if (kind.memory_mib >= r.gpu_memory_mib && traits_.share) q->any_memory = true;
  if (c == kNoCat) return false;
  const int sep = Separate(s) ? ClassConflict(ns, r) : 0;
  const int pack = traits_.spread ? -ns.idle_gpus : ns.idle_gpus;
  const int ext = DrainExtension(s, n, r);
  const bool scored = scorer_ && (c == kSharePartial || c == kShareIdle);
  const bool took = q->Offer(
      NodeKey{c, sep, ext, scored ? share_score : pack, scored ? scorer_->Rank(s, n) : n}, n, scored);
  // Nothing later can beat an exact idle instance on a node with no idle GPU and no training.
  return took && c == kIdleExact && sep == 0 && ext == 0 && !traits_.spread && pack == 0;
}

// The category of a fractional share of a non-MIG GPU on node n (kNoCat: none), and with a scorer its key.
int EnginePolicy::ShareCategory(const ClusterState& s, const Request& r, NodeId n, bool shares_only,
                                int64_t* share_score) const {
  if (!scorer_) return AdmittedShare(s, n, r, Admit()).cat;
  *share_score = ScoreKey(s, n, r);
  if (*share_score == kUnusableKey) return kNoCat;
  if (shares_only) return kSharePartial;
  const GpuId g = scorer_->ShareGpu(s, n, r);  // partly used before idle: needs the GPU the share would take
  return g == kNone ? kNoCat : s.gpu(g).tasks ? kSharePartial : kShareIdle;
}

void EnginePolicy::SliceDestroy(const ClusterState& s, const Request& r, SliceSearch* q) const {
  for (NodeId n = 0; n < s.num_nodes(); ++n) {
    const NodeState& ns = s.node(n);
    if (!NodeEligible(ns, r) || !ns.mig_gpus || ns.idle_profile_mask == 0) continue;
    uint32_t cover = 0;
    const int p = q->pc.Get(s.catalog(), ns.kind, r, &cover);
    if (p < 0) continue;
    SubGpuChoice d = BestMig(s, n, r, p, cover, true, traits_.frag_aware, true);
    if (d.cat != kDestroy) continue;
    const int sep = Separate(s) ? ClassConflict(ns, r) : 0;
    q->Offer(NodeKey{kDestroy, sep, DrainExtension(s, n, r), d.key, n}, n, false);
  }
}

PlaceResult EnginePolicy::SliceNoFit(const Request& r, const SliceSearch& q) const {
  if (!q.any_eligible)
    return PlaceResult::NoFit(NoFitCode::kResources,
                              "no node of an allowed GPU kind and tier has the CPU and host memory free");
  if (!q.any_memory)
    return PlaceResult::NoFit(
        NoFitCode::kMemory,
        fmt::format("needs {} MiB of GPU memory; no allowed MIG profile or GPU has that much",
                    r.gpu_memory_mib));
  return PlaceResult::NoFit(
      NoFitCode::kMigProfileUnavailable,
      fmt::format("needs {} MiB and {}/1000 of a GPU; no idle MIG instance, free slices or "
                  "shareable GPU can take it now",
                  r.gpu_memory_mib, r.gpu_milli));
}

// The GPU (and instance) on the chosen node, and the placement with its reason.
PlaceResult EnginePolicy::SliceResult(const ClusterState& s, const Request& r, SliceSearch* q) const {
  const NodeId n = q->node;
  const NodeState& ns = s.node(n);
  SubGpuChoice choice;
  if (q->scored) {
    choice.cat = q->cat;
    choice.grant.gpu = scorer_->ShareGpu(s, n, r);
    TESSERA_CHECK(choice.grant.gpu != kNone, "the node scorer ranked a node it has no GPU for");
    choice.grant.milli = r.gpu_milli;
    choice.grant.memory_mib = r.gpu_memory_mib;
    choice.grant.latency_sensitive = r.latency_sensitive;
  } else if (q->cat == kSharePartial || q->cat == kShareIdle) {
    choice = AdmittedShare(s, n, r, Admit());
  } else {
    uint32_t cover = 0;
    const int p = q->pc.Get(s.catalog(), ns.kind, r, &cover);
    choice = BestMig(s, n, r, p, cover, traits_.repartition, traits_.frag_aware, q->cat == kDestroy);
    if (choice.cat > q->cat && traits_.share) {  // defensive: share may be the summary's choice
      SubGpuChoice sh = AdmittedShare(s, n, r, Admit());
      if (sh.cat < choice.cat) choice = sh;
    }
  }
  TESSERA_CHECK(choice.cat != kNoCat, "node summary promised a sub-GPU option that the GPU scan did not find");
  PlaceResult res;
  res.ok = true;
  res.span = Span::kOneGpu;
  res.tasks.push_back(TaskPlacement{n, {choice.grant}});
  const GpuGrant& g = choice.grant;
  const GpuKind& kind = s.catalog().kind(ns.kind);
  if (g.mig_profile >= 0) {
    res.reason = fmt::format("{} {}@{} on {} GPU {}{}", g.create_instance ? "new MIG instance" : "idle MIG instance",
                             kind.profiles[g.mig_profile].name, static_cast<int>(g.mig_start), NodeName(s, n),
                             g.gpu - ns.first_gpu,
                             g.enable_mig ? " (MIG mode switched on)" : g.destroy_mask ? " (idle instances repartitioned)" : "");
  } else {
    res.reason = fmt::format("share {}/1000 with {} MiB of {} GPU {}", g.milli, g.memory_mib, NodeName(s, n),
                             g.gpu - ns.first_gpu);
  }
  return res;
}

namespace {

// Whole GPUs a node can give a task of this request right now, and how many tasks fit.
struct NodeCap {
  int avail = 0;   // whole GPUs usable (free, plus idle MIG GPUs when repartitioning)
  int tasks = 0;   // tasks of the request that fit
};

NodeCap CapOf(const ClusterState& s, const NodeState& ns, const Request& r, bool repartition, bool memory_aware) {
  NodeCap c;
  if (!NodeEligible(ns, r)) return c;
  if (memory_aware && s.catalog().kind(ns.kind).memory_mib < r.gpu_memory_mib) return c;
  c.avail = ns.free_whole + (repartition ? ns.idle_mig_gpus : 0);
  int t = c.avail / r.GpusPerTask();
  if (r.cpu_milli > 0) t = static_cast<int>(std::min<int64_t>(t, ns.free_cpu_milli / r.cpu_milli));
  if (r.host_memory_mib > 0) t = static_cast<int>(std::min<int64_t>(t, ns.free_memory_mib / r.host_memory_mib));
  c.tasks = t;
  return c;
}

// Chooses `count` whole GPUs on node n, keeping NVLink pairs / PCIe groups together, free GPUs before idle
// MIG GPUs (which need MIG switched off).
std::vector<GpuGrant> PickGpus(const ClusterState& s, NodeId n, int count, bool repartition, int64_t mem) {
  const NodeState& ns = s.node(n);
  const Node& node = s.cluster().nodes[n];
  int group = 0;
  if (node.interconnect == Interconnect::kNvLinkPairs) group = 2;
  else if (node.interconnect == Interconnect::kPcie) group = node.pcie_group_size;
  if (group <= 0 || group >= ns.gpu_count) group = ns.gpu_count;
  const int groups = (ns.gpu_count + group - 1) / group;
  std::vector<std::pair<int, int>> order;  // (free in group, group index)
  for (int gi = 0; gi < groups; ++gi) {
    int f = 0;
    for (GpuId g = ns.first_gpu + gi * group; g < std::min(ns.first_gpu + (gi + 1) * group, ns.first_gpu + ns.gpu_count); ++g)
      f += s.gpu(g).WholeFree();
    order.push_back({f, gi});
  }
  // Best fit: a single group that holds them all, smallest first; else biggest groups first.
  std::sort(order.begin(), order.end(), [&](auto a, auto b) {
    bool fa = a.first >= count, fb = b.first >= count;
    if (fa != fb) return fa;
    if (fa) return a.first != b.first ? a.first < b.first : a.second < b.second;
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<GpuGrant> out;
  for (int pass = 0; pass < 2 && static_cast<int>(out.size()) < count; ++pass) {
    for (auto [f, gi] : order) {
      for (GpuId g = ns.first_gpu + gi * group;
           g < std::min(ns.first_gpu + (gi + 1) * group, ns.first_gpu + ns.gpu_count) && static_cast<int>(out.size()) < count; ++g) {
        const GpuState& gs = s.gpu(g);
        GpuGrant gr;
        gr.gpu = g;
        gr.milli = kMilliPerGpu;
        gr.memory_mib = mem;
        if (pass == 0 && gs.WholeFree()) out.push_back(gr);
        if (pass == 1 && repartition && gs.mig_enabled && gs.tasks == 0) {
          gr.disable_mig = true;
          out.push_back(gr);
        }
      }
    }
  }
  return out;
}

}  // namespace

// What a pass over the nodes found for a whole-GPU request: per node capacity, tasks per leaf and spine,
// and the best node that holds every task.
struct WholeScan {
  std::vector<NodeCap> caps;
  std::vector<int> leaf_tasks, spine_tasks;
  int total_tasks = 0;
  bool any_kind = false;  // some allowed node has the GPUs and memory at all
  NodeId best_single = kNone;
};

namespace {

PlaceResult WholeNoFit(const WholeScan& w, const Request& r) {
  const int g = r.GpusPerTask(), T = r.tasks;
  if (!w.any_kind)
    return PlaceResult::NoFit(NoFitCode::kRequestExceedsCluster,
                              fmt::format("needs {} GPUs per task with {} MiB each; no allowed node has that", g,
                                          r.gpu_memory_mib));
  if (w.total_tasks >= T) {
    const int best_leaf = *std::max_element(w.leaf_tasks.begin(), w.leaf_tasks.end());
    return PlaceResult::NoFit(NoFitCode::kTopologyUnsatisfiable,
                              fmt::format("needs {} GPUs under one leaf; the largest free block is {}", T * g,
                                          best_leaf * g));
  }
  return PlaceResult::NoFit(NoFitCode::kResources,
                            fmt::format("needs {} tasks x {} GPUs; {} such task{} fit in the whole cluster now", T, g,
                                        w.total_tasks, w.total_tasks == 1 ? "" : "s"));
}

// `picks` (node, tasks) as the placement: each node's tasks get their GPUs from PickGpus.
PlaceResult FinishWhole(const ClusterState& s, const Request& r, bool repartition,
                        const std::vector<std::pair<NodeId, int>>& picks, Span span, const std::string& where) {
  const int g = r.GpusPerTask();
  PlaceResult res;
  res.ok = true;
  res.span = span;
  for (auto [n, k] : picks) {
    std::vector<GpuGrant> gpus = PickGpus(s, n, k * g, repartition, r.gpu_memory_mib);
    TESSERA_CHECK(static_cast<int>(gpus.size()) == k * g, "node capacity disagrees with its GPUs");
    for (int t = 0; t < k; ++t) {
      TaskPlacement tp;
      tp.node = n;
      tp.gpus.assign(gpus.begin() + t * g, gpus.begin() + (t + 1) * g);
      res.tasks.push_back(std::move(tp));
    }
  }
  res.reason = fmt::format("{} x {} GPUs on {} node{} ({})", r.tasks, g, picks.size(), picks.size() == 1 ? "" : "s", where);
  return res;
}

// The nodes of a domain, most tasks per node first (fewest nodes), node order on ties, until `tasks` fit.
template <typename InDomain>
std::vector<std::pair<NodeId, int>> FillDomain(const ClusterState& s, const WholeScan& w, int tasks, InDomain in_domain) {
  std::vector<std::pair<int, NodeId>> cand;
  for (NodeId n = 0; n < s.num_nodes(); ++n)
    if (w.caps[n].tasks > 0 && in_domain(n)) cand.push_back({-w.caps[n].tasks, n});
  std::sort(cand.begin(), cand.end());
  std::vector<std::pair<NodeId, int>> picks;
  for (auto [neg, n] : cand) {
    if (tasks == 0) break;
    const int k = std::min(-neg, tasks);
    picks.push_back({n, k});
    tasks -= k;
  }
  return picks;
}

// Without topology: fewest free GPUs first; the span is whatever the picks happen to share.
PlaceResult BestFitWhole(const ClusterState& s, const Request& r, bool repartition, const WholeScan& w) {
  std::vector<std::pair<int, NodeId>> cand;
  for (NodeId n = 0; n < s.num_nodes(); ++n)
    if (w.caps[n].tasks > 0) cand.push_back({w.caps[n].avail, n});
  std::sort(cand.begin(), cand.end());
  std::vector<std::pair<NodeId, int>> picks;
  int left = r.tasks;
  for (auto [avail, n] : cand) {
    if (left == 0) break;
    const int k = std::min(w.caps[n].tasks, left);
    picks.push_back({n, k});
    left -= k;
  }
  Span span = picks.size() == 1 ? Span::kOneNode : Span::kCrossSpine;
  if (picks.size() > 1) {
    bool one_leaf = true, one_spine = true;
    for (auto [n, k] : picks) {
      one_leaf &= s.node(n).leaf == s.node(picks[0].first).leaf;
      one_spine &= s.node(n).spine == s.node(picks[0].first).spine;
    }
    span = one_leaf ? Span::kOneLeaf : one_spine ? Span::kOneSpine : Span::kCrossSpine;
  }
  return FinishWhole(s, r, repartition, picks, span, "best fit");
}

// With topology: one leaf by best fit (the fewest fitting tasks that still hold the gang), else one spine
// group (unless the request needs one leaf), else across spine groups.
PlaceResult TopologyWhole(const ClusterState& s, const Request& r, bool repartition, const WholeScan& w) {
  const int T = r.tasks;
  int best_leaf = -1;
  for (int l = 0; l < s.num_leaves(); ++l)
    if (w.leaf_tasks[l] >= T && (best_leaf < 0 || w.leaf_tasks[l] < w.leaf_tasks[best_leaf])) best_leaf = l;
  if (best_leaf >= 0)
    return FinishWhole(s, r, repartition, FillDomain(s, w, T, [&](NodeId n) { return s.node(n).leaf == best_leaf; }),
                       Span::kOneLeaf, s.cluster().leaf_names[best_leaf]);
  if (r.require_same_leaf) return WholeNoFit(w, r);
  int best_spine = -1;
  for (int sp = 0; sp < s.num_spines(); ++sp)
    if (w.spine_tasks[sp] >= T && (best_spine < 0 || w.spine_tasks[sp] < w.spine_tasks[best_spine])) best_spine = sp;
  if (best_spine >= 0)
    return FinishWhole(s, r, repartition, FillDomain(s, w, T, [&](NodeId n) { return s.node(n).spine == best_spine; }),
                       Span::kOneSpine, s.cluster().spine_names[best_spine]);
  return FinishWhole(s, r, repartition, FillDomain(s, w, T, [](NodeId) { return true; }), Span::kCrossSpine,
                     "across spine groups");
}

}  // namespace

void EnginePolicy::ScanWhole(const ClusterState& s, const Request& r, WholeScan* w) const {
  const int g = r.GpusPerTask();
  const int T = r.tasks;
  w->caps.assign(s.num_nodes(), NodeCap{});
  w->leaf_tasks.assign(s.num_leaves(), 0);
  w->spine_tasks.assign(s.num_spines(), 0);
  NodeKey best_single_key{INT_MAX, 0, 0, 0, 0};
  const bool single = T == 1;
  const bool scored = single && scorer_ != nullptr;
  if (scored) scorer_->Begin(s, r);
  const std::vector<uint8_t>& avail_index = traits_.repartition ? s.convertible_index() : s.free_whole_index();
  for (NodeId n = 0; n < s.num_nodes(); ++n) {
    // Fast reject for single tasks from the dense index: not enough whole GPUs here.
    if (single && w->any_kind && avail_index[n] < g) continue;
    const NodeState& ns = s.node(n);
    if (!w->any_kind && ns.gpu_count >= g && r.KindAllowed(ns.kind) && r.TierAllowed(ns.tier) &&
        s.catalog().kind(ns.kind).memory_mib >= r.gpu_memory_mib)
      w->any_kind = true;
    const NodeCap c = CapOf(s, ns, r, traits_.repartition, /*memory_aware=*/true);
    w->caps[n] = c;
    if (c.tasks <= 0) continue;
    w->total_tasks += c.tasks;
    w->leaf_tasks[ns.leaf] += c.tasks;
    w->spine_tasks[ns.spine] += c.tasks;
    if (c.tasks < T) continue;
    const int need = T * g;
    const int uses_mig = std::max(0, need - ns.free_whole);  // idle MIG GPUs to switch off
    const int sep = Separate(s) ? ClassConflict(ns, r) : 0;
    // A scorer ranks nodes that need no MIG GPU switched off (its view of a node is its free GPUs).
    const bool by_score = scored && uses_mig == 0;
    const NodeKey key{uses_mig, sep, single ? DrainExtension(s, n, r) : 0,
                      by_score ? ScoreKey(s, n, r) : c.avail - need, by_score ? scorer_->Rank(s, n) : n};
    if (key < best_single_key) {
      best_single_key = key;
      w->best_single = n;
    }
  }
}

PlaceResult EnginePolicy::PlaceWhole(const ClusterState& s, const Request& r) const {
  WholeScan w;
  ScanWhole(s, r, &w);
  if (w.best_single != kNone && (traits_.topology || r.tasks == 1))
    return FinishWhole(s, r, traits_.repartition, {{w.best_single, r.tasks}},
                       r.tasks * r.GpusPerTask() == 1 ? Span::kOneGpu : Span::kOneNode, NodeName(s, w.best_single));
  if (w.total_tasks < r.tasks) return WholeNoFit(w, r);
  return traits_.topology ? TopologyWhole(s, r, traits_.repartition, w) : BestFitWhole(s, r, traits_.repartition, w);
}

namespace {

// kube-scheduler's choice for each task alone: the least-allocated node (NodeResourcesFit LeastAllocated over
// CPU and memory; GPUs only filter), ties to the lowest index. One entry (node, 1) per task, or a no-fit.
Result<std::vector<std::pair<NodeId, int>>> SpreadPicks(const ClusterState& s, const Request& r) {
  const int g = r.GpusPerTask();
  struct Used {
    NodeId n;
    int gpus;
  };
  std::vector<Used> used;
  std::vector<std::pair<NodeId, int>> picks;  // per task
  for (int t = 0; t < r.tasks; ++t) {
    NodeId best = kNone;
    int64_t best_score = -1;
    for (NodeId n = 0; n < s.num_nodes(); ++n) {
      const NodeState& ns = s.node(n);
      if (ns.gpu_count == 0 || !r.KindAllowed(ns.kind) || !r.TierAllowed(ns.tier)) continue;
      int taken = 0;
      for (const Used& u : used)
        if (u.n == n) taken = u.gpus;
      const int tasks_here = taken / g;
      const int64_t cpu_free = ns.free_cpu_milli - (tasks_here + 1) * r.cpu_milli;
      const int64_t mem_free = ns.free_memory_mib - (tasks_here + 1) * r.host_memory_mib;
      if (ns.free_whole - taken < g || cpu_free < 0 || mem_free < 0) continue;
      const Node& node = s.cluster().nodes[n];
      const int64_t cpu_score = node.cpu_milli > 0 ? cpu_free * 100 / node.cpu_milli : 0;
      const int64_t mem_score = node.memory_mib > 0 ? mem_free * 100 / node.memory_mib : 0;
      const int64_t score = (cpu_score + mem_score) / 2;
      if (score > best_score) {
        best_score = score;
        best = n;
      }
    }
    if (best == kNone) {
      int total_free = 0;
      for (NodeId n = 0; n < s.num_nodes(); ++n)
        if (r.KindAllowed(s.node(n).kind) && r.TierAllowed(s.node(n).tier)) total_free += s.node(n).free_whole;
      return Status::Error(fmt::format("needs {} tasks x {} whole GPUs; {} whole GPUs free in allowed nodes, "
                                       "{} of the tasks placed before one did not fit",
                                       r.tasks, g, total_free, t));
    }
    bool found = false;
    for (Used& u : used)
      if (u.n == best) {
        u.gpus += g;
        found = true;
      }
    if (!found) used.push_back({best, g});
    picks.push_back({best, 1});
  }
  return picks;
}

}  // namespace

PlaceResult EnginePolicy::PlaceSpread(const ClusterState& s, const Request& r) const {
  // kube-scheduler with the device plugin: each task (pod) is scored alone; all tasks of a gang must fit
  // (coscheduling), else nothing is placed.
  const int g = r.GpusPerTask();
  auto chosen = SpreadPicks(s, r);
  if (!chosen.ok()) return PlaceResult::NoFit(NoFitCode::kResources, chosen.error());
  const std::vector<std::pair<NodeId, int>>& picks = *chosen;
  PlaceResult res;
  res.ok = true;
  // Grants: per node, take the lowest-index free GPUs.
  std::vector<std::pair<NodeId, int>> next_gpu;  // node -> next candidate offset
  auto take = [&](NodeId n) {
    GpuId start = s.node(n).first_gpu;
    for (auto& [nn, off] : next_gpu)
      if (nn == n) start = off;
    std::vector<GpuGrant> out;
    GpuId gg = start;
    for (; gg < s.node(n).first_gpu + s.node(n).gpu_count && static_cast<int>(out.size()) < g; ++gg) {
      if (!s.gpu(gg).WholeFree()) continue;
      GpuGrant gr;
      gr.gpu = gg;
      gr.milli = kMilliPerGpu;
      gr.memory_mib = std::min(r.gpu_memory_mib, s.kind_of_gpu(gg).memory_mib);
      out.push_back(gr);
    }
    bool found = false;
    for (auto& [nn, off] : next_gpu)
      if (nn == n) {
        off = gg;
        found = true;
      }
    if (!found) next_gpu.push_back({n, gg});
    return out;
  };
  std::vector<LeafId> leaves;
  std::vector<SpineId> spines;
  for (auto [n, k] : picks) {
    TaskPlacement tp;
    tp.node = n;
    tp.gpus = take(n);
    TESSERA_CHECK(static_cast<int>(tp.gpus.size()) == g, "spread placement lost track of free GPUs");
    res.tasks.push_back(std::move(tp));
    if (std::find(leaves.begin(), leaves.end(), s.node(n).leaf) == leaves.end()) leaves.push_back(s.node(n).leaf);
    if (std::find(spines.begin(), spines.end(), s.node(n).spine) == spines.end()) spines.push_back(s.node(n).spine);
  }
  int distinct_nodes = static_cast<int>(next_gpu.size());
  res.span = distinct_nodes == 1 ? (r.TotalGpus() == 1 ? Span::kOneGpu : Span::kOneNode)
             : leaves.size() == 1 ? Span::kOneLeaf
             : spines.size() == 1 ? Span::kOneSpine
                                  : Span::kCrossSpine;
  res.reason = fmt::format("{} x {} GPUs, least-allocated nodes ({} node{}, {})", r.tasks, g, distinct_nodes,
                           distinct_nodes == 1 ? "" : "s", SpanName(res.span));
  return res;
}

int64_t EnginePolicy::ScoreKey(const ClusterState& s, NodeId n, const Request& r) const {
  const int64_t score = scorer_->Score(s, n, r);
  return score == NodeScorer::kUnusable ? kUnusableKey : -score;
}

PlaceResult EnginePolicy::PlaceCpuOnly(const ClusterState& s, const Request& r) const {
  if (r.tasks != 1) return PlaceResult::NoFit(NoFitCode::kInvalid, "a request without GPUs places one task, not a gang");
  if (r.cpu_milli < 0 || r.host_memory_mib < 0) return PlaceResult::NoFit(NoFitCode::kInvalid, "negative CPU or memory");
  if (scorer_) scorer_->Begin(s, r);
  NodeKey best_key{INT_MAX, 0, 0, 0, 0};
  NodeId best = kNone;
  for (NodeId n = 0; n < s.num_nodes(); ++n) {
    const NodeState& ns = s.node(n);
    if (s.node_cordoned(n) || !r.TierAllowed(ns.tier) || ns.free_cpu_milli < r.cpu_milli ||
        ns.free_memory_mib < r.host_memory_mib)
      continue;
    const int sep = Separate(s) ? ClassConflict(ns, r) : 0;
    int64_t k1 = 0, k2 = n;
    if (scorer_) {
      k1 = ScoreKey(s, n, r);
      k2 = scorer_->Rank(s, n);
    } else if (traits_.spread) {  // LeastAllocated over CPU and memory, as kube-scheduler scores
      const Node& node = s.cluster().nodes[n];
      const int64_t cpu = node.cpu_milli > 0 ? (ns.free_cpu_milli - r.cpu_milli) * 100 / node.cpu_milli : 0;
      const int64_t mem = node.memory_mib > 0 ? (ns.free_memory_mib - r.host_memory_mib) * 100 / node.memory_mib : 0;
      k1 = -(cpu + mem) / 2;
    }
    const NodeKey key{0, sep, DrainExtension(s, n, r), k1, k2};
    if (key < best_key) {
      best_key = key;
      best = n;
    }
  }
  if (best == kNone)
    return PlaceResult::NoFit(NoFitCode::kResources,
                              fmt::format("no node of an allowed tier has {} mCPU and {} MiB of host memory free",
                                          r.cpu_milli, r.host_memory_mib));
  PlaceResult res;
  res.ok = true;
  res.span = Span::kOneNode;
  res.tasks.push_back(TaskPlacement{best, {}});
  res.reason = fmt::format("no GPU: {} mCPU and {} MiB on {}", r.cpu_milli, r.host_memory_mib, NodeName(s, best));
  return res;
}

}  // namespace tessera
