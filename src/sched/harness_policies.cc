#include "sched/harness_policies.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace tessera {

namespace {

// Cheap feasibility of a harness task on a node: CPU, memory, tier, kind and GPU counts. For sharing
// tasks also returns the node's largest free share through `max_free`.
bool Feasible(const ClusterState& s, NodeId n, const Request& r, const TaskShape& t) {
  const NodeState& ns = s.node(n);
  if (ns.free_cpu_milli < t.cpu_milli || ns.free_memory_mib < r.host_memory_mib) return false;
  if (!r.TierAllowed(ns.tier)) return false;
  if (t.CpuOnly()) return true;
  if (ns.gpu_count == 0 || ns.kind < 0 || !r.KindAllowed(ns.kind)) return false;
  if (!t.Sharing()) return ns.free_whole >= t.num_gpu;
  if (ns.free_milli_total < t.gpu_milli) return false;
  for (int i = 0; i < ns.gpu_count; ++i)
    if (s.gpu(ns.first_gpu + i).free_milli >= t.gpu_milli) return true;
  return false;
}

std::string NoNodeReason(std::string_view policy, const Request& r, const TaskShape& t) {
  return fmt::format("{}: no node has {} mCPU, {} MiB and {}", policy, t.cpu_milli, r.host_memory_mib,
                     t.CpuOnly() ? std::string("no GPU")
                                 : t.Sharing() ? fmt::format("a GPU with {} milli free", t.gpu_milli)
                                               : fmt::format("{} whole free GPUs", t.num_gpu));
}

PlaceResult OnNode(const ClusterState& s, NodeId n, const TaskShape& t, std::string_view policy, double score) {
  Result<TaskPlacement> tp = HarnessGpusOnNode(s, n, t);
  if (!tp.ok()) return PlaceResult::NoFit(NoFitCode::kResources, tp.error());
  PlaceResult res;
  res.ok = true;
  res.span = tp->gpus.size() <= 1 ? Span::kOneGpu : Span::kOneNode;
  res.reason = fmt::format("{}: node {} (score {})", policy, s.cluster().nodes[n].name, score);
  res.tasks.push_back(std::move(tp).value());
  return res;
}

}  // namespace

Result<TaskPlacement> HarnessGpusOnNode(const ClusterState& s, NodeId n, const TaskShape& t) {
  const NodeState& ns = s.node(n);
  TaskPlacement tp;
  tp.node = n;
  if (t.CpuOnly()) return tp;
  if (t.Sharing()) {
    int best = -1, best_free = kMilliPerGpu + 1;
    for (int i = 0; i < ns.gpu_count; ++i) {
      const int f = s.gpu(ns.first_gpu + i).free_milli;
      if (f >= t.gpu_milli && f < best_free) {
        best = i;
        best_free = f;
      }
    }
    if (best < 0) return Status::Error(fmt::format("node {} has no GPU with {} milli free", n, t.gpu_milli));
    GpuGrant g;
    g.gpu = ns.first_gpu + best;
    g.milli = t.gpu_milli;
    tp.gpus.push_back(g);
    return tp;
  }
  AppendWholeFreeGpus(s, n, t.num_gpu, &tp);
  if (static_cast<int>(tp.gpus.size()) < t.num_gpu)
    return Status::Error(fmt::format("node {} has fewer than {} free GPUs", n, t.num_gpu));
  return tp;
}

namespace {

// The largest node's CPU (millicores) and GPU (milli) capacities: the harness's normalisation constants.
std::pair<int64_t, int64_t> MaxNodeCapacity(const ClusterState& s) {
  int64_t max_cpu = 1, max_gpu = 1;
  for (const Node& node : s.cluster().nodes) {
    max_cpu = std::max(max_cpu, node.cpu_milli);
    max_gpu = std::max<int64_t>(max_gpu, static_cast<int64_t>(node.gpu_count) * kMilliPerGpu);
  }
  return {max_cpu, max_gpu};
}

// Walks feasible nodes in the seed's order and returns the first node with the highest `score(n)`.
template <typename ScoreFn>
NodeId BestInOrder(const ClusterState& s, const Request& r, const TaskShape& t, std::vector<int32_t>& order,
                   std::optional<uint64_t> seed, ScoreFn score, int64_t* best_score) {
  if (static_cast<int>(order.size()) != s.num_nodes()) order = NodeOrder(s.num_nodes(), seed);
  NodeId best_node = kNone;
  int64_t best = std::numeric_limits<int64_t>::min();
  for (NodeId n : order) {
    if (!Feasible(s, n, r, t)) continue;
    const int64_t sc = score(n);
    if (sc > best) {
      best = sc;
      best_node = n;
    }
  }
  *best_score = best;
  return best_node;
}

}  // namespace

PlaceResult DotProdPolicy::Place(const ClusterState& s, const Request& r) const {
  if (Status st = CheckHarnessRequest(r); !st.ok()) return PlaceResult::NoFit(NoFitCode::kInvalid, st.message());
  const TaskShape t = ShapeOf(r);
  // Plain variables, not a structured binding: the lambda below captures them (clang 14 cannot).
  const std::pair<int64_t, int64_t> max_capacity = MaxNodeCapacity(s);
  const int64_t max_cpu = max_capacity.first, max_gpu = max_capacity.second;
  const double cpu_d = static_cast<double>(t.cpu_milli) / static_cast<double>(max_cpu);
  const double gpu_d = static_cast<double>(t.CpuOnly() ? 0 : int64_t{t.num_gpu} * t.gpu_milli) / static_cast<double>(max_gpu);
  int64_t best = 0;
  const NodeId n = BestInOrder(s, r, t, order_, seed_, [&](NodeId n) {
    const NodeState& ns = s.node(n);
    const double dot = cpu_d * static_cast<double>(ns.free_cpu_milli) / static_cast<double>(max_cpu) +
                       gpu_d * static_cast<double>(ns.free_milli_total) / static_cast<double>(max_gpu);
    return static_cast<int64_t>(100.0 * (1.0 - dot / 2.0));
  }, &best);
  if (n == kNone) return PlaceResult::NoFit(NoFitCode::kResources, NoNodeReason(name(), r, t));
  return OnNode(s, n, t, name(), static_cast<double>(best));
}

PlaceResult GpuClusteringPolicy::Place(const ClusterState& s, const Request& r) const {
  if (Status st = CheckHarnessRequest(r); !st.ok()) return PlaceResult::NoFit(NoFitCode::kInvalid, st.message());
  const TaskShape t = ShapeOf(r);
  const int64_t max_gpu = MaxNodeCapacity(s).second;
  int64_t best = 0;
  const NodeId n = BestInOrder(s, r, t, order_, seed_, [&](NodeId n) -> int64_t {
    if (t.CpuOnly()) return 0;
    const NodeState& ns = s.node(n);
    bool has_share = false, has_whole = false;
    for (int i = 0; i < ns.gpu_count; ++i) {
      const GpuState& g = s.gpu(ns.first_gpu + i);
      if (g.mig_enabled || g.tasks == 0) continue;
      if (g.tasks == 1 && g.free_milli == 0) has_whole = true;
      else has_share = true;
    }
    const bool same = t.Sharing() ? has_share : has_whole;
    const bool other = t.Sharing() ? has_whole : has_share;
    const int64_t base = same ? (other ? 50 : 75) : (other ? 0 : 25);
    return base + 25 * (max_gpu - ns.free_milli_total) / max_gpu;
  }, &best);
  if (n == kNone) return PlaceResult::NoFit(NoFitCode::kResources, NoNodeReason(name(), r, t));
  return OnNode(s, n, t, name(), static_cast<double>(best));
}

PlaceResult GpuPackingPolicy::Place(const ClusterState& s, const Request& r) const {
  if (Status st = CheckHarnessRequest(r); !st.ok()) return PlaceResult::NoFit(NoFitCode::kInvalid, st.message());
  const TaskShape t = ShapeOf(r);
  int64_t best = 0;
  const NodeId n = BestInOrder(s, r, t, order_, seed_, [&](NodeId n) -> int64_t {
    if (t.CpuOnly()) return 0;
    const NodeState& ns = s.node(n);
    if (ns.free_whole == ns.gpu_count) return std::max(33 - ns.free_whole, ns.free_whole);
    if (!t.Sharing()) return std::max(50 - t.num_gpu, 33);  // whole tasks take fully free GPUs
    int tightest = kMilliPerGpu + 1;
    for (int i = 0; i < ns.gpu_count; ++i) {
      const int f = s.gpu(ns.first_gpu + i).free_milli;
      if (f >= t.gpu_milli) tightest = std::min(tightest, f);
    }
    if (tightest >= kMilliPerGpu) return std::max(50 - 1, 33);  // must open a fully free GPU
    return std::max(100 - (tightest * 100 / kMilliPerGpu) / 10, 50);
  }, &best);
  if (n == kNone) return PlaceResult::NoFit(NoFitCode::kResources, NoNodeReason(name(), r, t));
  return OnNode(s, n, t, name(), static_cast<double>(best));
}

PlaceResult RandomPolicy::Place(const ClusterState& s, const Request& r) const {
  if (Status st = CheckHarnessRequest(r); !st.ok()) return PlaceResult::NoFit(NoFitCode::kInvalid, st.message());
  const TaskShape t = ShapeOf(r);
  std::vector<NodeId> feasible;
  for (NodeId n = 0; n < s.num_nodes(); ++n)
    if (Feasible(s, n, r, t)) feasible.push_back(n);
  if (feasible.empty()) return PlaceResult::NoFit(NoFitCode::kResources, NoNodeReason(name(), r, t));
  SeededRng rng(seed_.value_or(0) ^ (static_cast<uint64_t>(r.id) * 0x9e3779b97f4a7c15ULL));
  const NodeId n = feasible[rng.Below(feasible.size())];
  if (!t.Sharing()) return OnNode(s, n, t, name(), 0);
  // A sharing task takes a random GPU among those with enough free share.
  const NodeState& ns = s.node(n);
  std::vector<GpuId> fits;
  for (int i = 0; i < ns.gpu_count; ++i)
    if (s.gpu(ns.first_gpu + i).free_milli >= t.gpu_milli) fits.push_back(ns.first_gpu + i);
  PlaceResult res;
  res.ok = true;
  res.span = Span::kOneGpu;
  TaskPlacement tp;
  tp.node = n;
  GpuGrant g;
  g.gpu = fits[rng.Below(fits.size())];
  g.milli = t.gpu_milli;
  tp.gpus.push_back(g);
  res.tasks.push_back(std::move(tp));
  res.reason = fmt::format("{}: node {} (random)", name(), s.cluster().nodes[n].name);
  return res;
}

}  // namespace tessera
