#include "sched/cluster_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "model/mig.h"
#include "sched/mig_layouts.h"

namespace tessera {
namespace {

constexpr int kMaxSharers = 48;  // MPS clients per GPU or MIG instance (hardware-facts.md 1.8)

bool IsInference(bool inference) { return inference; }

// Adds one sharer to instance `m` of GPU `g` (idle: it becomes shared; busy: it must be shared already). The
// summed demand must fit the instance's compute and usable memory exactly.
Status JoinShared(GpuState& g, const GpuKind& kind, const GpuGrant& grant, MigSlot& m) {
  const MigProfile& p = kind.profiles[m.profile];
  if (m.busy && !m.Shared())
    return Status::Error(fmt::format("GPU {}: instance {}@{} is held by one task and cannot be shared",
                                     grant.gpu, p.name, static_cast<int>(m.start)));
  if (grant.milli <= 0 || grant.memory_mib < 0)
    return Status::Error(fmt::format("GPU {}: a shared grant needs a positive share", grant.gpu));
  if (m.shared_milli + grant.milli > kind.ProfileComputeMilli(m.profile))
    return Status::Error(fmt::format("GPU {}: instance {}@{} has {} of {} milli in use, {} more do not fit",
                                     grant.gpu, p.name, static_cast<int>(m.start), m.shared_milli,
                                     kind.ProfileComputeMilli(m.profile), grant.milli));
  if (m.shared_memory_mib + grant.memory_mib > p.usable_mib)
    return Status::Error(fmt::format("GPU {}: instance {}@{} has {} of {} MiB in use, {} more do not fit",
                                     grant.gpu, p.name, static_cast<int>(m.start), m.shared_memory_mib,
                                     p.usable_mib, grant.memory_mib));
  if (m.sharers >= kMaxSharers)
    return Status::Error(fmt::format("GPU {}: instance {}@{} already has {} sharers", grant.gpu, p.name,
                                     static_cast<int>(m.start), m.sharers));
  m.busy = true;
  ++m.sharers;
  m.sensitive = static_cast<int8_t>(m.sensitive + (grant.latency_sensitive ? 1 : 0));
  m.shared_milli = static_cast<int16_t>(m.shared_milli + grant.milli);
  m.shared_memory_mib += grant.memory_mib;
  g.busy_mask |= static_cast<uint8_t>(1u << m.start);
  ++g.tasks;
  return Status::Ok();
}

// Removes one sharer from instance `m`; the last one leaves it idle. REQUIRES: the grant joined it.
void LeaveShared(GpuState& g, const GpuGrant& grant, MigSlot& m) {
  TESSERA_CHECK(m.busy && m.sharers > 0 && m.shared_milli >= grant.milli &&
                    m.shared_memory_mib >= grant.memory_mib && (!grant.latency_sensitive || m.sensitive > 0),
                fmt::format("Release of GPU {}: the shared instance at {} does not hold this grant",
                            grant.gpu, static_cast<int>(grant.mig_start)));
  --m.sharers;
  m.sensitive = static_cast<int8_t>(m.sensitive - (grant.latency_sensitive ? 1 : 0));
  m.shared_milli = static_cast<int16_t>(m.shared_milli - grant.milli);
  m.shared_memory_mib -= grant.memory_mib;
  if (m.sharers == 0) {
    TESSERA_CHECK(m.shared_milli == 0 && m.shared_memory_mib == 0 && m.sensitive == 0,
                  fmt::format("GPU {}: shared instance emptied with demand left", grant.gpu));
    m.busy = false;
    g.busy_mask &= static_cast<uint8_t>(~(1u << m.start));
  }
}

// The steps of ApplyGrant, in its order; each returns an error (leaving `g` unspecified) when it does not
// fit.
Status ApplyModeChange(GpuState& g, const GpuKind& kind, const GpuGrant& grant) {
  if (grant.disable_mig) {
    if (!g.mig_enabled)
      return Status::Error(fmt::format("GPU {}: disable_mig on a GPU not in MIG mode", grant.gpu));
    if (g.busy_mask)
      return Status::Error(fmt::format("GPU {}: MIG mode can change only on an idle GPU", grant.gpu));
    g.mig_enabled = false;
    g.n_instances = 0;
    g.used_mask = 0;
    g.instances = {};
    g.free_milli = kMilliPerGpu;
    g.free_memory_mib = kind.memory_mib;
  }
  if (grant.enable_mig) {
    if (!kind.mig_capable)
      return Status::Error(fmt::format("GPU {}: kind {} is not MIG-capable", grant.gpu, kind.id));
    if (g.mig_enabled)
      return Status::Error(fmt::format("GPU {}: enable_mig on a GPU already in MIG mode", grant.gpu));
    if (g.tasks)
      return Status::Error(fmt::format("GPU {}: MIG mode can change only on an idle GPU", grant.gpu));
    g.mig_enabled = true;
    g.free_milli = 0;
    g.free_memory_mib = 0;
  }
  return Status::Ok();
}

Status ApplyDestroy(GpuState& g, const GpuKind& kind, const GpuGrant& grant) {
  if (!grant.destroy_mask) return Status::Ok();
  if (!g.mig_enabled)
    return Status::Error(fmt::format("GPU {}: destroy on a GPU not in MIG mode", grant.gpu));
  for (int s = 0; s < 8; ++s) {
    if (!((grant.destroy_mask >> s) & 1u)) continue;
    if ((g.busy_mask >> s) & 1u)
      return Status::Error(
          fmt::format("GPU {}: instance at slice {} is busy and cannot be destroyed", grant.gpu, s));
    int idx = -1;
    for (int i = 0; i < g.n_instances; ++i)
      if (g.instances[i].start == s) idx = i;
    if (idx < 0) return Status::Error(fmt::format("GPU {}: no instance starts at slice {}", grant.gpu, s));
    const MigProfile& p = kind.profiles[g.instances[idx].profile];
    g.used_mask &= static_cast<uint8_t>(~p.MaskAt(s));
    g.instances[idx] = g.instances[g.n_instances - 1];
    g.instances[--g.n_instances] = MigSlot{};
  }
  return Status::Ok();
}

// A grant of (a place in) a MIG instance, created first when the grant says so.
Status ApplyMigGrant(GpuState& g, const GpuKind& kind, const GpuGrant& grant) {
  if (!g.mig_enabled)
    return Status::Error(fmt::format("GPU {}: MIG grant on a GPU not in MIG mode", grant.gpu));
  if (grant.mig_profile >= static_cast<int>(kind.profiles.size()))
    return Status::Error(fmt::format("GPU {}: unknown MIG profile index {}", grant.gpu, grant.mig_profile));
  const MigProfile& p = kind.profiles[grant.mig_profile];
  if (grant.create_instance) {
    std::vector<MigInstance> existing;
    for (int i = 0; i < g.n_instances; ++i)
      existing.push_back({g.instances[i].profile, g.instances[i].start});
    if (!CanAddInstance(kind, existing, {grant.mig_profile, grant.mig_start}))
      return Status::Error(fmt::format("GPU {}: {}@{} does not fit the current layout", grant.gpu, p.name,
                                       static_cast<int>(grant.mig_start)));
    g.instances[g.n_instances++] = MigSlot{grant.mig_profile, grant.mig_start, false};
    g.used_mask |= p.MaskAt(grant.mig_start);
  }
  int idx = -1;
  for (int i = 0; i < g.n_instances; ++i)
    if (g.instances[i].start == grant.mig_start && g.instances[i].profile == grant.mig_profile) idx = i;
  if (idx < 0)
    return Status::Error(fmt::format("GPU {}: no {} instance at slice {}", grant.gpu, p.name,
                                     static_cast<int>(grant.mig_start)));
  if (grant.shared) return JoinShared(g, kind, grant, g.instances[idx]);
  if (g.instances[idx].busy)
    return Status::Error(
        fmt::format("GPU {}: instance {}@{} is busy", grant.gpu, p.name, static_cast<int>(grant.mig_start)));
  if (grant.memory_mib > p.usable_mib)
    return Status::Error(fmt::format("GPU {}: needs {} MiB, instance {} has {} MiB usable", grant.gpu,
                                     grant.memory_mib, p.name, p.usable_mib));
  g.instances[idx].busy = true;
  g.busy_mask |= static_cast<uint8_t>(1u << grant.mig_start);
  ++g.tasks;
  return Status::Ok();
}

// A whole GPU, or a share of one, outside MIG.
Status ApplyPlainGrant(GpuState& g, const GpuKind& kind, const GpuGrant& grant) {
  if (g.mig_enabled)
    return Status::Error(fmt::format("GPU {}: whole/share grant on a GPU in MIG mode", grant.gpu));
  if (grant.milli >= kMilliPerGpu) {
    if (g.tasks) return Status::Error(fmt::format("GPU {}: whole GPU requested but it is in use", grant.gpu));
    if (grant.memory_mib > kind.memory_mib)
      return Status::Error(
          fmt::format("GPU {}: needs {} MiB, GPU has {} MiB", grant.gpu, grant.memory_mib, kind.memory_mib));
    g.free_milli = 0;
    g.free_memory_mib = 0;
    ++g.tasks;
    return Status::Ok();
  }
  if (grant.milli <= 0) return Status::Error(fmt::format("GPU {}: share must be positive", grant.gpu));
  if (g.free_milli < grant.milli)
    return Status::Error(
        fmt::format("GPU {}: needs {} milli, {} free", grant.gpu, grant.milli, g.free_milli));
  if (g.free_memory_mib < grant.memory_mib)
    return Status::Error(
        fmt::format("GPU {}: needs {} MiB, {} MiB free", grant.gpu, grant.memory_mib, g.free_memory_mib));
  g.free_milli = static_cast<int16_t>(g.free_milli - grant.milli);
  g.free_memory_mib -= grant.memory_mib;
  ++g.tasks;
  if (grant.latency_sensitive) ++g.share_sensitive;
  return Status::Ok();
}

// Applies one grant to a GPU state copy: MIG mode change, instances destroyed, then the grant itself.
// Returns an error (and leaves `g` in an unspecified state) when the grant does not fit; callers work on
// copies.
Status ApplyGrant(GpuState& g, const GpuKind& kind, const GpuGrant& grant) {
  if (Status st = ApplyModeChange(g, kind, grant); !st.ok()) return st;
  if (Status st = ApplyDestroy(g, kind, grant); !st.ok()) return st;
  return grant.mig_profile >= 0 ? ApplyMigGrant(g, kind, grant) : ApplyPlainGrant(g, kind, grant);
}

// Invariant 3 for one instance.
Status CheckSlot(const GpuKind& kind, const MigSlot& m) {
  const MigProfile& p = kind.profiles[m.profile];
  if (!m.Shared()) {
    if (m.sharers != 0 || m.sensitive != 0 || m.shared_milli != 0 || m.shared_memory_mib != 0)
      return Status::Error(
          fmt::format("instance {}@{} holds shared demand without sharers", p.name, (int)m.start));
    return Status::Ok();
  }
  if (!m.busy) return Status::Error(fmt::format("shared instance {}@{} is not busy", p.name, (int)m.start));
  if (m.sensitive < 0 || m.sensitive > m.sharers)
    return Status::Error(fmt::format("instance {}@{}: {} latency-sensitive of {} sharers", p.name,
                                     (int)m.start, m.sensitive, m.sharers));
  if (m.shared_milli <= 0 || m.shared_milli > kind.ProfileComputeMilli(m.profile) ||
      m.shared_memory_mib < 0 || m.shared_memory_mib > p.usable_mib)
    return Status::Error(fmt::format("instance {}@{}: shared demand {} milli / {} MiB out of range", p.name,
                                     (int)m.start, m.shared_milli, m.shared_memory_mib));
  return Status::Ok();
}

}  // namespace

const char* SpanName(Span s) {
  switch (s) {
    case Span::kOneGpu:
      return "one-gpu";
    case Span::kOneNode:
      return "one-node";
    case Span::kOneLeaf:
      return "one-leaf";
    case Span::kOneSpine:
      return "one-spine";
    case Span::kCrossSpine:
      return "cross-spine";
  }
  return "?";
}

const char* NoFitCodeName(NoFitCode c) {
  switch (c) {
    case NoFitCode::kNone:
      return "None";
    case NoFitCode::kInvalid:
      return "Invalid";
    case NoFitCode::kRequestExceedsCluster:
      return "RequestExceedsCluster";
    case NoFitCode::kResources:
      return "Resources";
    case NoFitCode::kMigProfileUnavailable:
      return "MigProfileUnavailable";
    case NoFitCode::kMemory:
      return "Memory";
    case NoFitCode::kTopologyUnsatisfiable:
      return "TopologyUnsatisfiable";
    case NoFitCode::kFragmented:
      return "Fragmented";
  }
  return "?";
}

Result<ClusterState> ClusterState::Build(const Cluster& cluster, const Catalog& catalog) {
  ClusterState s;
  s.catalog_ = &catalog;
  s.cluster_ = &cluster;
  s.num_leaves_ = std::max<int>(1, static_cast<int>(cluster.leaf_names.size()));
  s.num_spines_ = std::max<int>(1, static_cast<int>(cluster.spine_names.size()));
  s.leaf_free_whole_.assign(s.num_leaves_, 0);
  s.creatable_by_mask_.resize(catalog.size());
  s.media_profiles_.assign(catalog.size(), 0);
  for (KindId k = 0; k < static_cast<KindId>(catalog.size()); ++k) {
    const GpuKind& kind = catalog.kind(k);
    for (int used = 0; used < 256; ++used) {
      uint32_t m = 0;
      for (int p = 0; p < static_cast<int>(kind.profiles.size()) && p < 32; ++p)
        for (int st = 0; st < kind.mig_memory_slices; ++st)
          if (kind.profiles[p].AllowedStart(st) && !(kind.profiles[p].MaskAt(st) & used)) {
            m |= 1u << p;
            break;
          }
      s.creatable_by_mask_[k][used] = m;
    }
    // Profiles whose max count is below what free slices alone would allow.
    for (int p = 0; p < static_cast<int>(kind.profiles.size()) && p < 32; ++p) {
      int positions = 0;
      uint8_t covered = 0;
      for (int st = 0; st < kind.mig_memory_slices; ++st)
        if (kind.profiles[p].AllowedStart(st) && !(kind.profiles[p].MaskAt(st) & covered)) {
          covered |= kind.profiles[p].MaskAt(st);
          ++positions;
        }
      if (kind.profiles[p].max_count < positions) s.media_profiles_[k] |= 1u << p;
    }
  }
  s.idle_nodes_.assign(catalog.size() * 32, {});
  s.create_nodes_.assign(catalog.size() * 32, {});
  const size_t words = (cluster.nodes.size() + 63) / 64;
  for (KindId k = 0; k < static_cast<KindId>(catalog.size()); ++k) {
    if (!catalog.kind(k).mig_capable) continue;
    for (int p = 0; p < static_cast<int>(catalog.kind(k).profiles.size()) && p < 32; ++p) {
      s.idle_nodes_[k * 32 + p].assign(words, 0);
      s.create_nodes_[k * 32 + p].assign(words, 0);
    }
  }
  s.nodes_.reserve(cluster.nodes.size());
  for (const Node& node : cluster.nodes)
    if (Status st = s.AppendNode(node); !st.ok()) return st;
  return s;
}

namespace {

// Each GPU's initial layout: the node's explicit per-GPU layouts (checked again: a node built in code skips
// the YAML reader), else the layout its mig_config names on every GPU.
Result<std::vector<GpuMigLayout>> NodeInitialMigLayouts(const Node& node, const Catalog& catalog) {
  const size_t gpus = static_cast<size_t>(std::max(0, node.gpu_count));
  if (!node.mig_layouts.empty()) {
    if (node.mig_layouts.size() != gpus)
      return Status::Error(fmt::format("node '{}': {} per-GPU MIG layouts for {} GPUs", node.name,
                                       node.mig_layouts.size(), gpus));
    for (size_t i = 0; i < gpus; ++i)
      if (Status st = CheckMigLayout(catalog.kind(node.kind), node.mig_layouts[i].instances);
          !st.ok() && node.mig_layouts[i].enabled)
        return Status::Error(fmt::format("node '{}': GPU {}: MIG layout: {}", node.name, i, st.message()));
    return node.mig_layouts;
  }
  GpuMigLayout all;
  if (gpus > 0 && node.mig_enabled && !node.mig_config.empty()) {
    auto l = NamedMigLayout(catalog.kind(node.kind), node.mig_config);
    if (!l.ok()) return Status::Error(fmt::format("node '{}': mig config: {}", node.name, l.error()));
    all.instances = *l;
  }
  return std::vector<GpuMigLayout>(gpus, all);
}

}  // namespace

// Appends the state of `node` (an empty node) with id num_nodes(), extending every per-node index.
Status ClusterState::AppendNode(const Node& node) {
  const NodeId n = num_nodes();
  if (node.leaf < 0 || node.leaf >= num_leaves_)
    return Status::Error(fmt::format("node '{}': leaf index out of range", node.name));
  if (node.gpu_count > 0 && (node.kind < 0 || node.kind >= static_cast<KindId>(catalog_->size())))
    return Status::Error(fmt::format("node '{}': unknown GPU kind", node.name));
  NodeState ns;
  ns.kind = node.kind;
  if (node.gpu_count > 0 && node.kind < 64) gpu_kinds_present_ |= uint64_t{1} << node.kind;
  ns.first_gpu = static_cast<GpuId>(gpus_.size());
  ns.gpu_count = node.gpu_count;
  ns.leaf = node.leaf;
  ns.spine = node.spine;
  ns.tier = node.tier;
  ns.interconnect = node.interconnect;
  ns.free_cpu_milli = node.cpu_milli;
  ns.free_memory_mib = node.memory_mib;
  auto layouts = NodeInitialMigLayouts(node, *catalog_);
  if (!layouts.ok()) return layouts.status();
  for (int i = 0; i < node.gpu_count; ++i) {
    GpuState g;
    g.kind = node.kind;
    g.node = n;
    const GpuKind& kind = catalog_->kind(node.kind);
    g.free_memory_mib = kind.memory_mib;
    if (node.mig_enabled && (*layouts)[i].enabled) {
      g.mig_enabled = true;
      g.free_milli = 0;
      g.free_memory_mib = 0;
      for (const MigInstance& m : (*layouts)[i].instances) {
        g.instances[g.n_instances++] =
            MigSlot{static_cast<int16_t>(m.profile), static_cast<int8_t>(m.start), false};
        g.used_mask |= kind.profiles[m.profile].MaskAt(m.start);
      }
    }
    gpus_.push_back(g);
  }
  nodes_.push_back(ns);
  free_whole_index_.push_back(0);
  convertible_index_.push_back(0);
  mig_profile_index_.push_back(0);
  const size_t words = (nodes_.size() + 63) / 64;
  for (std::vector<std::vector<uint64_t>>* bits : {&idle_nodes_, &create_nodes_})
    for (std::vector<uint64_t>& b : *bits)
      if (!b.empty() && b.size() < words) b.resize(words, 0);
  shared_nodes_.resize(words, 0);
  free_whole_nodes_.resize(words, 0);
  if (!drain_s_.empty()) drain_s_.push_back(kNoWork);
  if (!holds_.empty()) holds_.resize(gpus_.size());
  if (!node_flags_.empty()) {
    node_flags_.push_back(0);
    host_hold_.push_back({0, 0});
  }
  if (!outside_hold_.empty()) outside_hold_.push_back({0, 0});
  RefreshNode(n);
  return Status::Ok();
}

uint32_t ClusterState::CreatableProfiles(const GpuState& gs) const {
  if (!gs.mig_enabled) return 0;
  const GpuKind& kind = catalog_->kind(gs.kind);
  if (gs.n_instances >= kind.mig_max_instances) return 0;
  uint32_t mask = creatable_by_mask_[gs.kind][gs.used_mask];
  // Free slices bound every count except the one-per-GPU ones (e.g. +me); check those by counting.
  uint32_t check = mask & media_profiles_[gs.kind];
  while (check) {
    const int p = __builtin_ctz(check);
    check &= check - 1;
    int count = 0;
    for (int i = 0; i < gs.n_instances; ++i) count += gs.instances[i].profile == p;
    if (count >= kind.profiles[p].max_count) mask &= ~(1u << p);
  }
  return mask;
}

void SharedBound::Add(const GpuKind& kind, const MigSlot& m) {
  const int64_t left = kind.profiles[m.profile].usable_mib - m.shared_memory_mib;
  const int32_t capacity = kind.ProfileComputeMilli(m.profile);
  const int32_t headroom = capacity - m.shared_milli;
  if (min_sharers == 0) {  // the first instance (a shared one has at least one sharer)
    *this = SharedBound{left, headroom, capacity, m.sharers, m.sensitive};
    return;
  }
  max_left_mib = std::max(max_left_mib, left);
  max_headroom_milli = std::max(max_headroom_milli, headroom);
  min_capacity_milli = std::min(min_capacity_milli, capacity);
  min_sharers = std::min(min_sharers, m.sharers);
  min_sensitive = std::min(min_sensitive, m.sensitive);
}

void ClusterState::RefreshNode(NodeId n) {
  NodeState& ns = nodes_[n];
  const int old_free = ns.free_whole;
  const bool old_shared = ns.shared_slots > 0;
  const uint32_t old_idle = ns.idle_profile_mask, old_create = ns.creatable_profile_mask;
  ns.free_whole = ns.mig_gpus = ns.idle_gpus = ns.idle_mig_gpus = ns.shared_slots = 0;
  ns.free_milli_total = 0;
  ns.idle_profile_mask = ns.creatable_profile_mask = 0;
  ns.shared = SharedBound{};
  for (GpuId g = ns.first_gpu; g < ns.first_gpu + ns.gpu_count; ++g) {
    const GpuState& gs = gpus_[g];
    ns.free_whole += gs.WholeFree();
    ns.mig_gpus += gs.mig_enabled;
    ns.idle_gpus += gs.Idle();
    if (!gs.mig_enabled) {
      ns.free_milli_total += gs.free_milli;
      continue;
    }
    ns.idle_mig_gpus += gs.Idle();
    for (int i = 0; i < gs.n_instances; ++i) {
      if (!gs.instances[i].busy) ns.idle_profile_mask |= 1u << gs.instances[i].profile;
      if (!gs.instances[i].Shared()) continue;
      ++ns.shared_slots;
      ns.shared.Add(catalog_->kind(gs.kind), gs.instances[i]);
    }
    ns.creatable_profile_mask |= CreatableProfiles(gs);
  }
  leaf_free_whole_[ns.leaf] += ns.free_whole - old_free;
  free_whole_index_[n] = static_cast<uint8_t>(std::min(ns.free_whole, 255));
  convertible_index_[n] = static_cast<uint8_t>(std::min(ns.free_whole + ns.idle_mig_gpus, 255));
  mig_profile_index_[n] = ns.idle_profile_mask | ns.creatable_profile_mask;
  if (old_shared != (ns.shared_slots > 0)) shared_nodes_[n >> 6] ^= uint64_t{1} << (n & 63);
  if ((old_free > 0) != (ns.free_whole > 0)) free_whole_nodes_[n >> 6] ^= uint64_t{1} << (n & 63);
  if (ns.kind >= 0 && (old_idle != ns.idle_profile_mask || old_create != ns.creatable_profile_mask)) {
    const uint64_t bit = uint64_t{1} << (n & 63);
    for (uint32_t changed = old_idle ^ ns.idle_profile_mask; changed; changed &= changed - 1) {
      const int p = __builtin_ctz(changed);
      idle_nodes_[ns.kind * 32 + p][n >> 6] ^= bit;
    }
    for (uint32_t changed = old_create ^ ns.creatable_profile_mask; changed; changed &= changed - 1) {
      const int p = __builtin_ctz(changed);
      create_nodes_[ns.kind * 32 + p][n >> 6] ^= bit;
    }
  }
  ++ns.version;
}

Status ClusterState::CanApply(const std::vector<TaskPlacement>& tasks, int64_t cpu_milli,
                              int64_t host_memory_mib) const {
  std::map<GpuId, GpuState> copies;
  std::map<NodeId, std::pair<int64_t, int64_t>> node_use;
  for (const TaskPlacement& t : tasks) {
    if (t.node < 0 || t.node >= num_nodes())
      return Status::Error(fmt::format("node index {} out of range", t.node));
    auto& use = node_use[t.node];
    use.first += cpu_milli;
    use.second += host_memory_mib;
    const NodeState& ns = nodes_[t.node];
    for (const GpuGrant& gr : t.gpus) {
      if (gr.gpu < ns.first_gpu || gr.gpu >= ns.first_gpu + ns.gpu_count)
        return Status::Error(fmt::format("GPU {} is not on node {}", gr.gpu, cluster_->nodes[t.node].name));
      if (Status st = Cordoned(gr.gpu); !st.ok()) return st;
      auto it = copies.try_emplace(gr.gpu, gpus_[gr.gpu]).first;
      if (Status st = ApplyGrant(it->second, catalog_->kind(gpus_[gr.gpu].kind), gr); !st.ok()) return st;
    }
  }
  for (const auto& [n, use] : node_use) {
    if (use.first > nodes_[n].free_cpu_milli)
      return Status::Error(fmt::format("node {}: needs {} CPU milli, {} free", cluster_->nodes[n].name,
                                       use.first, nodes_[n].free_cpu_milli));
    if (use.second > nodes_[n].free_memory_mib)
      return Status::Error(fmt::format("node {}: needs {} MiB host memory, {} free", cluster_->nodes[n].name,
                                       use.second, nodes_[n].free_memory_mib));
  }
  return Status::Ok();
}

void ClusterState::Apply(const std::vector<TaskPlacement>& tasks, int64_t cpu_milli, int64_t host_memory_mib,
                         bool inference) {
  for (const TaskPlacement& t : tasks) {
    NodeState& ns = nodes_[t.node];
    TESSERA_CHECK(ns.free_cpu_milli >= cpu_milli && ns.free_memory_mib >= host_memory_mib,
                  fmt::format("Apply without CanApply: node {} CPU/memory", t.node));
    ns.free_cpu_milli -= cpu_milli;
    ns.free_memory_mib -= host_memory_mib;
    for (const GpuGrant& gr : t.gpus) {
      Status st = ApplyGrant(gpus_[gr.gpu], catalog_->kind(gpus_[gr.gpu].kind), gr);
      TESSERA_CHECK(st.ok(), "Apply without CanApply: " + st.message());
    }
    if (IsInference(inference))
      ++ns.inference_tasks;
    else
      ++ns.training_tasks;
    RefreshNode(t.node);
  }
}

void ClusterState::Release(const std::vector<TaskPlacement>& tasks, int64_t cpu_milli,
                           int64_t host_memory_mib, bool inference) {
  for (const TaskPlacement& t : tasks) {
    NodeState& ns = nodes_[t.node];
    ns.free_cpu_milli += cpu_milli;
    ns.free_memory_mib += host_memory_mib;
    if (node_cordoned(t.node)) HoldHost(t.node);
    for (const GpuGrant& gr : t.gpus) {
      GpuState& g = gpus_[gr.gpu];
      const GpuKind& kind = catalog_->kind(g.kind);
      TESSERA_CHECK(g.tasks > 0, fmt::format("Release of GPU {} that holds no task", gr.gpu));
      if (gr.mig_profile >= 0 && gr.shared) {
        MigSlot* slot = nullptr;
        for (int i = 0; i < g.n_instances; ++i)
          if (g.instances[i].start == gr.mig_start && g.instances[i].profile == gr.mig_profile)
            slot = &g.instances[i];
        TESSERA_CHECK(slot != nullptr,
                      fmt::format("Release of GPU {}: no instance at {}", gr.gpu, (int)gr.mig_start));
        LeaveShared(g, gr, *slot);
      } else if (gr.mig_profile >= 0) {
        bool found = false;
        for (int i = 0; i < g.n_instances; ++i) {
          MigSlot& m = g.instances[i];
          if (m.start == gr.mig_start && m.profile == gr.mig_profile && m.busy && !m.Shared()) {
            m.busy = false;
            found = true;
          }
        }
        TESSERA_CHECK(found,
                      fmt::format("Release of GPU {}: no busy instance at {}", gr.gpu, (int)gr.mig_start));
        g.busy_mask &= static_cast<uint8_t>(~(1u << gr.mig_start));
      } else if (gr.milli >= kMilliPerGpu) {
        g.free_milli = kMilliPerGpu;
        g.free_memory_mib = kind.memory_mib;
      } else {
        g.free_milli = static_cast<int16_t>(g.free_milli + gr.milli);
        g.free_memory_mib += gr.memory_mib;
        if (gr.latency_sensitive) --g.share_sensitive;
        TESSERA_CHECK(g.free_milli <= kMilliPerGpu, fmt::format("GPU {}: share released twice", gr.gpu));
      }
      --g.tasks;
      if (!holds_.empty() && holds_[gr.gpu].on()) Absorb(gr.gpu);
    }
    if (IsInference(inference))
      --ns.inference_tasks;
    else
      --ns.training_tasks;
    RefreshNode(t.node);
  }
}

Status ClusterState::SetMigMode(GpuId g, bool enabled) {
  if (Status st = Cordoned(g); !st.ok()) return st;
  GpuState copy = gpus_[g];
  GpuGrant gr;
  gr.gpu = g;
  gr.enable_mig = enabled;
  gr.disable_mig = !enabled;
  gr.milli = 0;
  // Reuse the grant logic for the mode change only (no task is granted).
  const GpuKind& kind = catalog_->kind(copy.kind);
  if (enabled && copy.mig_enabled) return Status::Ok();
  if (!enabled && !copy.mig_enabled) return Status::Ok();
  if (copy.tasks) return Status::Error(fmt::format("GPU {}: MIG mode can change only on an idle GPU", g));
  if (enabled) {
    if (!kind.mig_capable)
      return Status::Error(fmt::format("GPU {}: kind {} is not MIG-capable", g, kind.id));
    copy.mig_enabled = true;
    copy.free_milli = 0;
    copy.free_memory_mib = 0;
  } else {
    copy.mig_enabled = false;
    copy.n_instances = 0;
    copy.used_mask = 0;
    copy.instances = {};
    copy.free_milli = kMilliPerGpu;
    copy.free_memory_mib = kind.memory_mib;
  }
  gpus_[g] = copy;
  RefreshNode(copy.node);
  return Status::Ok();
}

Status ClusterState::CreateInstance(GpuId g, int profile, int start) {
  if (Status st = Cordoned(g); !st.ok()) return st;
  GpuState& gs = gpus_[g];
  const GpuKind& kind = catalog_->kind(gs.kind);
  if (!gs.mig_enabled) return Status::Error(fmt::format("GPU {}: not in MIG mode", g));
  std::vector<MigInstance> existing;
  for (int i = 0; i < gs.n_instances; ++i)
    existing.push_back({gs.instances[i].profile, gs.instances[i].start});
  if (profile < 0 || profile >= static_cast<int>(kind.profiles.size()) ||
      !CanAddInstance(kind, existing, {profile, start}))
    return Status::Error(fmt::format("GPU {}: instance does not fit the layout", g));
  gs.instances[gs.n_instances++] = MigSlot{static_cast<int16_t>(profile), static_cast<int8_t>(start), false};
  gs.used_mask |= kind.profiles[profile].MaskAt(start);
  RefreshNode(gs.node);
  return Status::Ok();
}

Status ClusterState::DestroyInstance(GpuId g, int start) {
  if (Status st = Cordoned(g); !st.ok()) return st;
  GpuState copy = gpus_[g];
  GpuGrant gr;
  gr.gpu = g;
  gr.destroy_mask = static_cast<uint8_t>(1u << start);
  gr.milli = 0;
  if (!copy.mig_enabled) return Status::Error(fmt::format("GPU {}: not in MIG mode", g));
  if ((copy.busy_mask >> start) & 1u)
    return Status::Error(fmt::format("GPU {}: instance at {} is busy", g, start));
  int idx = -1;
  for (int i = 0; i < copy.n_instances; ++i)
    if (copy.instances[i].start == start) idx = i;
  if (idx < 0) return Status::Error(fmt::format("GPU {}: no instance at slice {}", g, start));
  const GpuKind& kind = catalog_->kind(copy.kind);
  copy.used_mask &= static_cast<uint8_t>(~kind.profiles[copy.instances[idx].profile].MaskAt(start));
  copy.instances[idx] = copy.instances[copy.n_instances - 1];
  copy.instances[--copy.n_instances] = MigSlot{};
  gpus_[g] = copy;
  RefreshNode(copy.node);
  return Status::Ok();
}

Status ClusterState::Relayout(GpuId g, const std::vector<MigInstance>& layout) {
  if (Status st = Cordoned(g); !st.ok()) return st;
  GpuState& gs = gpus_[g];
  const GpuKind& kind = catalog_->kind(gs.kind);
  if (!gs.mig_enabled) return Status::Error(fmt::format("GPU {}: not in MIG mode", g));
  if (Status st = CheckMigLayout(kind, layout); !st.ok()) return st;
  // Every busy instance must survive unchanged.
  for (int i = 0; i < gs.n_instances; ++i) {
    if (!gs.instances[i].busy) continue;
    MigInstance busy{gs.instances[i].profile, gs.instances[i].start};
    if (std::find(layout.begin(), layout.end(), busy) == layout.end())
      return Status::Error(fmt::format("GPU {}: relayout would destroy a busy {}@{}", g,
                                       kind.profiles[busy.profile].name, busy.start));
  }
  GpuState next = gs;
  next.n_instances = 0;
  next.used_mask = 0;
  next.instances = {};
  for (const MigInstance& m : layout) {
    bool busy = (gs.busy_mask >> m.start) & 1u;
    if (busy) {
      bool same = false;
      for (int i = 0; i < gs.n_instances; ++i)
        if (gs.instances[i].busy && gs.instances[i].start == m.start && gs.instances[i].profile == m.profile)
          same = true;
      busy = same;
    }
    next.instances[next.n_instances++] =
        MigSlot{static_cast<int16_t>(m.profile), static_cast<int8_t>(m.start), busy};
    next.used_mask |= kind.profiles[m.profile].MaskAt(m.start);
  }
  gs = next;
  RefreshNode(gs.node);
  return Status::Ok();
}

int64_t ClusterState::AllocatedMilliOf(GpuId g) const {
  const GpuState& gs = gpus_[g];
  const CordonHold* h = holds_.empty() ? nullptr : &holds_[g];
  if (!gs.mig_enabled) return kMilliPerGpu - gs.free_milli - (h ? h->milli : 0);
  const GpuKind& kind = catalog_->kind(gs.kind);
  int64_t total = 0;
  for (int i = 0; i < gs.n_instances; ++i)
    if (gs.instances[i].busy && !InstanceHeldByCordon(g, gs.instances[i].start))
      total += kind.ProfileComputeMilli(gs.instances[i].profile);
  return total;
}

int ClusterState::TasksOf(GpuId g) const { return gpus_[g].tasks - PhantomTasks(g); }

bool ClusterState::InstanceHeldByCordon(GpuId g, int start) const {
  return !holds_.empty() && ((holds_[g].instances >> start) & 1u);
}

int64_t ClusterState::AllocatedMilli() const {
  int64_t total = 0;
  for (GpuId id = 0; id < num_gpus(); ++id) total += AllocatedMilliOf(id);
  return total;
}

// A GPU not in MIG mode: no instances, its share capacity in range and agreeing with its tasks.
Status ClusterState::CheckShareGpu(GpuId g) const {
  const GpuState& gs = gpus_[g];
  const GpuKind& kind = catalog_->kind(gs.kind);
  if (gs.n_instances || gs.used_mask || gs.busy_mask)
    return Status::Error(fmt::format("GPU {}: instances on a GPU not in MIG mode", g));
  if (gs.free_milli < 0 || gs.free_milli > kMilliPerGpu)
    return Status::Error(fmt::format("GPU {}: free_milli {} out of range", g, gs.free_milli));
  if (gs.free_memory_mib < 0 || gs.free_memory_mib > kind.memory_mib)
    return Status::Error(fmt::format("GPU {}: free memory {} out of range", g, gs.free_memory_mib));
  if (gs.share_sensitive < 0 || gs.share_sensitive > gs.tasks)
    return Status::Error(
        fmt::format("GPU {}: {} latency-sensitive shares of {} tasks", g, gs.share_sensitive, gs.tasks));
  if ((gs.free_milli == kMilliPerGpu) != (gs.tasks == 0))
    return Status::Error(
        fmt::format("GPU {}: free_milli {} disagrees with {} tasks", g, gs.free_milli, gs.tasks));
  return Status::Ok();
}

// A GPU in MIG mode: a valid layout whose masks, busy slots and task count agree with its instances; its
// shared instances counted into `shared` and `bound`.
Status ClusterState::CheckMigGpu(GpuId g, int* shared, SharedBound* bound) const {
  const GpuState& gs = gpus_[g];
  const GpuKind& kind = catalog_->kind(gs.kind);
  if (gs.free_milli != 0 || gs.free_memory_mib != 0)
    return Status::Error(fmt::format("GPU {}: MIG GPU with share capacity", g));
  std::vector<MigInstance> layout;
  uint8_t mask = 0, busy = 0;
  int busy_count = 0;
  for (int i = 0; i < gs.n_instances; ++i) {
    layout.push_back({gs.instances[i].profile, gs.instances[i].start});
    mask |= kind.profiles[gs.instances[i].profile].MaskAt(gs.instances[i].start);
    const MigSlot& m = gs.instances[i];
    if (Status st = CheckSlot(kind, m); !st.ok())
      return Status::Error(fmt::format("GPU {}: {}", g, st.message()));
    if (m.busy) {
      busy |= static_cast<uint8_t>(1u << m.start);
      busy_count += std::max<int>(1, m.sharers);
    }
    if (m.Shared()) {
      ++*shared;
      bound->Add(kind, m);
    }
  }
  if (Status st = CheckMigLayout(kind, layout); !st.ok())
    return Status::Error(fmt::format("GPU {}: invalid layout: {}", g, st.message()));
  const uint8_t held = holds_.empty() ? 0 : holds_[g].slices;
  if ((mask & held) || (mask | held) != gs.used_mask)
    return Status::Error(fmt::format("GPU {}: used_mask out of date", g));
  if (busy != gs.busy_mask) return Status::Error(fmt::format("GPU {}: busy_mask out of date", g));
  if (busy_count + (gpu_cordoned(g) ? 1 : 0) != gs.tasks)
    return Status::Error(fmt::format("GPU {}: task count out of date", g));
  return Status::Ok();
}

// The per-leaf and per-profile node indexes agree with the nodes.
Status ClusterState::CheckIndexes() const {
  for (NodeId n = 0; n < num_nodes(); ++n) {
    const NodeState& ns = nodes_[n];
    if (static_cast<bool>((shared_nodes_[n >> 6] >> (n & 63)) & 1u) != (ns.shared_slots > 0))
      return Status::Error(fmt::format("node {}: shared-instance index out of date", n));
    if (static_cast<bool>((free_whole_nodes_[n >> 6] >> (n & 63)) & 1u) != (ns.free_whole > 0))
      return Status::Error(fmt::format("node {}: free-GPU index out of date", n));
    if (ns.kind < 0 || !catalog_->kind(ns.kind).mig_capable) continue;
    for (int p = 0; p < static_cast<int>(catalog_->kind(ns.kind).profiles.size()) && p < 32; ++p) {
      const bool idle = (idle_nodes_[ns.kind * 32 + p][n >> 6] >> (n & 63)) & 1u;
      const bool create = (create_nodes_[ns.kind * 32 + p][n >> 6] >> (n & 63)) & 1u;
      if (idle != static_cast<bool>((ns.idle_profile_mask >> p) & 1u) ||
          create != static_cast<bool>((ns.creatable_profile_mask >> p) & 1u))
        return Status::Error(fmt::format("node {}: MIG profile index out of date", n));
    }
  }
  return Status::Ok();
}

Status ClusterState::CheckInvariants() const {
  std::vector<int> leaf_free(num_leaves_, 0);
  for (NodeId n = 0; n < num_nodes(); ++n) {
    const NodeState& ns = nodes_[n];
    int free_whole = 0, mig = 0, idle = 0, milli = 0, shared = 0;
    SharedBound bound;
    for (GpuId g = ns.first_gpu; g < ns.first_gpu + ns.gpu_count; ++g) {
      const GpuState& gs = gpus_[g];
      if (!gs.mig_enabled) {
        if (Status st = CheckShareGpu(g); !st.ok()) return st;
        milli += gs.free_milli;
      } else {
        if (Status st = CheckMigGpu(g, &shared, &bound); !st.ok()) return st;
        ++mig;
      }
      if (Status st = CheckHold(g); !st.ok()) return st;
      free_whole += gs.WholeFree();
      idle += gs.Idle();
    }
    if (free_whole != ns.free_whole || mig != ns.mig_gpus || idle != ns.idle_gpus ||
        milli != ns.free_milli_total || shared != ns.shared_slots || !(bound == ns.shared))
      return Status::Error(fmt::format("node {}: aggregates out of date", n));
    if (ns.free_cpu_milli < 0 || ns.free_memory_mib < 0)
      return Status::Error(fmt::format("node {}: negative free CPU or memory", n));
    if (node_removed(n) && (!node_cordoned(n) || ns.inference_tasks + ns.training_tasks > 0))
      return Status::Error(fmt::format("node {}: removed but not drained", n));
    if (node_cordoned(n) && (ns.free_cpu_milli != 0 || ns.free_memory_mib != 0))
      return Status::Error(fmt::format("node {}: cordoned node shows free CPU or memory", n));
    leaf_free[ns.leaf] += free_whole;
  }
  if (leaf_free != leaf_free_whole_) return Status::Error("leaf free-GPU counters out of date");
  return CheckIndexes();
}

// --- Nodes that come and go ---

Status ClusterState::Cordoned(GpuId g) const {
  if (gpu_cordoned(g))
    return Status::Error(
        fmt::format("GPU {} on node {} is cordoned", g, cluster_->nodes[gpus_[g].node].name));
  return Status::Ok();
}

// Tasks the state itself counts on a cordoned GPU (see invariant 4).
int ClusterState::PhantomTasks(GpuId g) const {
  if (!gpu_cordoned(g)) return 0;
  return 1 + (gpus_[g].mig_enabled ? __builtin_popcount(holds_[g].instances) : 0);
}

// A cordoned node's free CPU and host memory are held too (no CPU-only task lands there).
void ClusterState::HoldHost(NodeId n) {
  NodeState& ns = nodes_[n];
  host_hold_[n].first += ns.free_cpu_milli;
  host_hold_[n].second += ns.free_memory_mib;
  ns.free_cpu_milli = 0;
  ns.free_memory_mib = 0;
}

// The GPU becomes cordoned: the state takes every free share, idle instance and free slice.
void ClusterState::Hold(GpuId g) {
  GpuState& gs = gpus_[g];
  CordonHold& h = holds_[g];
  if (!gs.mig_enabled) {
    h.milli = gs.free_milli;
    h.memory_mib = gs.free_memory_mib;
    gs.free_milli = 0;
    gs.free_memory_mib = 0;
    ++gs.tasks;
    return;
  }
  const GpuKind& kind = catalog_->kind(gs.kind);
  h.slices = static_cast<uint8_t>(~gs.used_mask & ((1u << kind.mig_memory_slices) - 1));
  gs.used_mask |= h.slices;
  ++gs.tasks;  // never idle: no mode switch or relayout
  Absorb(g);
}

// Capacity freed on a cordoned GPU is held at once.
void ClusterState::Absorb(GpuId g) {
  GpuState& gs = gpus_[g];
  CordonHold& h = holds_[g];
  if (!gs.mig_enabled) {
    h.milli = static_cast<int16_t>(h.milli + gs.free_milli);
    h.memory_mib += gs.free_memory_mib;
    gs.free_milli = 0;
    gs.free_memory_mib = 0;
    return;
  }
  for (int i = 0; i < gs.n_instances; ++i) {
    MigSlot& m = gs.instances[i];
    if (m.busy) continue;
    m.busy = true;
    gs.busy_mask |= static_cast<uint8_t>(1u << m.start);
    h.instances |= static_cast<uint8_t>(1u << m.start);
    ++gs.tasks;
  }
}

void ClusterState::Unhold(GpuId g) {
  GpuState& gs = gpus_[g];
  CordonHold& h = holds_[g];
  if (!gs.mig_enabled) {
    gs.free_milli = static_cast<int16_t>(gs.free_milli + h.milli);
    gs.free_memory_mib += h.memory_mib;
    --gs.tasks;
  } else {
    for (int i = 0; i < gs.n_instances; ++i) {
      MigSlot& m = gs.instances[i];
      if (!((h.instances >> m.start) & 1u)) continue;
      m.busy = false;
      gs.busy_mask &= static_cast<uint8_t>(~(1u << m.start));
      --gs.tasks;
    }
    gs.used_mask &= static_cast<uint8_t>(~h.slices);
    --gs.tasks;
  }
  h = CordonHold{};
}

Status ClusterState::CheckHold(GpuId g) const {
  if (holds_.empty()) return Status::Ok();
  const GpuState& gs = gpus_[g];
  const CordonHold& h = holds_[g];
  if (!h.on()) {
    if (h.milli || h.memory_mib || h.slices || h.instances)
      return Status::Error(fmt::format("GPU {}: holds capacity but is not cordoned", g));
    return Status::Ok();
  }
  if (h.by_node != node_cordoned(gs.node))
    return Status::Error(fmt::format("GPU {}: node cordon out of date", g));
  if (!gs.mig_enabled) {
    if (gs.free_milli != 0 || gs.free_memory_mib != 0 || gs.tasks < 1 || h.milli < 0 ||
        h.milli > kMilliPerGpu || h.memory_mib < 0 || (h.milli == kMilliPerGpu) != (gs.tasks == 1))
      return Status::Error(fmt::format("GPU {}: cordoned GPU shows free capacity or miscounts its hold", g));
    return Status::Ok();
  }
  for (int i = 0; i < gs.n_instances; ++i)
    if (!gs.instances[i].busy)
      return Status::Error(fmt::format("GPU {}: idle instance on a cordoned GPU", g));
  if ((h.instances & gs.busy_mask) != h.instances)
    return Status::Error(fmt::format("GPU {}: held instance not marked busy", g));
  return Status::Ok();
}

Status ClusterState::CordonGpu(GpuId g) {
  if (g < 0 || g >= num_gpus()) return Status::Error(fmt::format("GPU index {} out of range", g));
  if (holds_.empty()) holds_.resize(gpus_.size());
  if (!holds_[g].on()) Hold(g);
  holds_[g].by_gpu = true;
  RefreshNode(gpus_[g].node);
  return Status::Ok();
}

Status ClusterState::UncordonGpu(GpuId g) {
  if (g < 0 || g >= num_gpus()) return Status::Error(fmt::format("GPU index {} out of range", g));
  if (node_removed(gpus_[g].node))
    return Status::Error(fmt::format("GPU {}: node {} was removed", g, cluster_->nodes[gpus_[g].node].name));
  if (!gpu_cordoned(g)) return Status::Ok();
  holds_[g].by_gpu = false;
  if (!holds_[g].on()) Unhold(g);
  RefreshNode(gpus_[g].node);
  return Status::Ok();
}

Status ClusterState::CordonNode(NodeId n) {
  if (n < 0 || n >= num_nodes()) return Status::Error(fmt::format("node index {} out of range", n));
  if (holds_.empty()) holds_.resize(gpus_.size());
  if (node_flags_.empty()) {
    node_flags_.assign(nodes_.size(), 0);
    host_hold_.assign(nodes_.size(), {0, 0});
  }
  node_flags_[n] |= kNodeCordoned;
  HoldHost(n);
  const NodeState& ns = nodes_[n];
  for (GpuId g = ns.first_gpu; g < ns.first_gpu + ns.gpu_count; ++g) {
    if (!holds_[g].on()) Hold(g);
    holds_[g].by_node = true;
  }
  RefreshNode(n);
  return Status::Ok();
}

Status ClusterState::UncordonNode(NodeId n) {
  if (n < 0 || n >= num_nodes()) return Status::Error(fmt::format("node index {} out of range", n));
  if (node_removed(n)) return Status::Error(fmt::format("node {} was removed", cluster_->nodes[n].name));
  if (!node_cordoned(n)) return Status::Ok();
  node_flags_[n] &= static_cast<uint8_t>(~kNodeCordoned);
  nodes_[n].free_cpu_milli += host_hold_[n].first;
  nodes_[n].free_memory_mib += host_hold_[n].second;
  host_hold_[n] = {0, 0};
  const NodeState& ns = nodes_[n];
  for (GpuId g = ns.first_gpu; g < ns.first_gpu + ns.gpu_count; ++g) {
    holds_[g].by_node = false;
    if (!holds_[g].on()) Unhold(g);
  }
  RefreshNode(n);
  return Status::Ok();
}

Status ClusterState::RemoveNode(NodeId n) {
  if (n < 0 || n >= num_nodes()) return Status::Error(fmt::format("node index {} out of range", n));
  const std::string& name = cluster_->nodes[n].name;
  if (node_removed(n)) return Status::Error(fmt::format("node {} was already removed", name));
  if (!node_cordoned(n)) return Status::Error(fmt::format("node {} is not drained: cordon it first", name));
  const NodeState& ns = nodes_[n];
  int tasks = 0;
  for (GpuId g = ns.first_gpu; g < ns.first_gpu + ns.gpu_count; ++g)
    tasks += gpus_[g].tasks - PhantomTasks(g);
  tasks = std::max(tasks, ns.inference_tasks + ns.training_tasks);
  const auto outside = outside_host(n);
  if (tasks > 0 || host_hold_[n].first + outside.first != cluster_->nodes[n].cpu_milli ||
      host_hold_[n].second + outside.second != cluster_->nodes[n].memory_mib)
    return Status::Error(fmt::format("node {} still runs {} task(s): drain it first", name, tasks));
  node_flags_[n] |= kNodeRemoved;
  ++nodes_[n].version;
  return Status::Ok();
}

Result<std::pair<int64_t, int64_t>> ClusterState::HoldOutsideHost(NodeId n, int64_t cpu_milli,
                                                                  int64_t memory_mib) {
  if (n < 0 || n >= num_nodes()) return Status::Error(fmt::format("node index {} out of range", n));
  if (node_removed(n)) return Status::Error(fmt::format("node {} was removed", cluster_->nodes[n].name));
  if (cpu_milli < 0 || memory_mib < 0) return Status::Error("a host hold cannot be negative");
  if (outside_hold_.empty()) outside_hold_.assign(nodes_.size(), {0, 0});
  std::pair<int64_t, int64_t>& held = outside_hold_[n];
  // What a hold may take: the node's free host capacity, or what its cordon holds (invariant: a cordoned
  // node shows none free).
  const bool cordoned = node_cordoned(n);
  int64_t& free_cpu = cordoned ? host_hold_[n].first : nodes_[n].free_cpu_milli;
  int64_t& free_mem = cordoned ? host_hold_[n].second : nodes_[n].free_memory_mib;
  const int64_t cpu = std::min(cpu_milli, held.first + free_cpu);
  const int64_t mem = std::min(memory_mib, held.second + free_mem);
  free_cpu -= cpu - held.first;
  free_mem -= mem - held.second;
  held = {cpu, mem};
  ++nodes_[n].version;
  return held;
}

Result<NodeId> ClusterState::AddNode(const Node& node) {
  if (node.spine < 0 || node.spine >= num_spines_)
    return Status::Error(fmt::format("node '{}': spine index out of range", node.name));
  auto copy = std::make_shared<Cluster>(*cluster_);
  copy->nodes.push_back(node);
  const Cluster* before = cluster_;
  cluster_ = copy.get();
  if (Status st = AppendNode(node); !st.ok()) {
    cluster_ = before;
    return st;
  }
  owned_cluster_ = std::move(copy);
  return static_cast<NodeId>(nodes_.size() - 1);
}

}  // namespace tessera
