#include "sched/harness_policies.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

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
  for (int i = 0; i < ns.gpu_count && static_cast<int>(tp.gpus.size()) < t.num_gpu; ++i) {
    if (!s.gpu(ns.first_gpu + i).WholeFree()) continue;
    GpuGrant g;
    g.gpu = ns.first_gpu + i;
    g.milli = kMilliPerGpu;
    tp.gpus.push_back(g);
  }
  if (static_cast<int>(tp.gpus.size()) < t.num_gpu)
    return Status::Error(fmt::format("node {} has fewer than {} free GPUs", n, t.num_gpu));
  return tp;
}

PlaceResult BestFitPolicy::Place(const ClusterState& s, const Request& r) const {
  if (Status st = CheckHarnessRequest(r); !st.ok()) return PlaceResult::NoFit(NoFitCode::kInvalid, st.message());
  const TaskShape t = ShapeOf(r);
  if (static_cast<int>(order_.size()) != s.num_nodes()) order_ = SeededPermutation(s.num_nodes(), seed_);
  int64_t max_cpu = 1, max_gpu = 1;
  for (const Node& node : s.cluster().nodes) {
    max_cpu = std::max(max_cpu, node.cpu_milli);
    max_gpu = std::max<int64_t>(max_gpu, static_cast<int64_t>(node.gpu_count) * kMilliPerGpu);
  }
  const int64_t gpu_take = t.CpuOnly() ? 0 : static_cast<int64_t>(t.num_gpu) * t.gpu_milli;
  int best = -1;
  NodeId best_node = kNone;
  for (NodeId n : order_) {
    if (!Feasible(s, n, r, t)) continue;
    const NodeState& ns = s.node(n);
    const double cpu_left = static_cast<double>(ns.free_cpu_milli - t.cpu_milli);
    const double gpu_left = static_cast<double>(ns.free_milli_total - gpu_take);
    const int score = static_cast<int>(100.0 * (1.0 - 0.5 * cpu_left / static_cast<double>(max_cpu) -
                                                0.5 * gpu_left / static_cast<double>(max_gpu)));
    if (score > best) {
      best = score;
      best_node = n;
    }
  }
  if (best_node == kNone) return PlaceResult::NoFit(NoFitCode::kResources, NoNodeReason(name(), r, t));
  return OnNode(s, best_node, t, name(), best);
}

PlaceResult RandomPolicy::Place(const ClusterState& s, const Request& r) const {
  if (Status st = CheckHarnessRequest(r); !st.ok()) return PlaceResult::NoFit(NoFitCode::kInvalid, st.message());
  const TaskShape t = ShapeOf(r);
  std::vector<NodeId> feasible;
  for (NodeId n = 0; n < s.num_nodes(); ++n)
    if (Feasible(s, n, r, t)) feasible.push_back(n);
  if (feasible.empty()) return PlaceResult::NoFit(NoFitCode::kResources, NoNodeReason(name(), r, t));
  SeededRng rng(seed_ ^ (static_cast<uint64_t>(r.id) * 0x9e3779b97f4a7c15ULL));
  const NodeId n = feasible[rng.Below(feasible.size())];
  return OnNode(s, n, t, name(), 0);
}

namespace {

// tessera's class score. Two changes to FGD, both aimed at where FGD loses capacity on sharing clusters
// (fgd-harness.md, last section):
//  1. the measure counts host memory as well as CPU when deciding whether a typical task still fits a
//     node, so GPUs stranded by exhausted host resources count as fragmented;
//  2. the same integer sigmoid scale as FGD, ties to the earliest node in the seed's order (packing).
class TesseraScorer : public fgd_internal::ClassScorer {
 public:
  double Score(const fgd_internal::NodeClass& c, const fgd_internal::TaskDelta& d,
               const TaskShapeDistribution& dist, uint16_t* best_values) const override {
    const TaskShape& t = d.shape;
    if (!t.Sharing()) return FgdScore(c.frag_mem, fgd_internal::FragAfter(c, d, 0, dist, true));
    int best = -1;
    uint16_t mask = 0;
    for (size_t i = 0; i < c.distinct_free.size() && i < 16; ++i) {
      const int v = c.distinct_free[i];
      if (v < t.gpu_milli) continue;
      const int sc = FgdScore(c.frag_mem, fgd_internal::FragAfter(c, d, v, dist, true));
      if (sc > best) {
        best = sc;
        mask = static_cast<uint16_t>(1u << i);
      } else if (sc == best) {
        mask = static_cast<uint16_t>(mask | (1u << i));
      }
    }
    *best_values = mask;
    return best;
  }
};

}  // namespace

TesseraPackingPolicy::TesseraPackingPolicy(TaskShapeDistribution dist, uint64_t seed)
    : engine_(std::move(dist), seed) {}

PlaceResult TesseraPackingPolicy::Place(const ClusterState& s, const Request& r) const {
  const TesseraScorer scorer;
  return engine_.Place(s, r, scorer, name());
}

std::vector<std::string> HarnessPolicyNames() { return {"fgd", "bestfit", "random", "tessera"}; }

Result<std::unique_ptr<Policy>> MakeHarnessPolicy(std::string_view name, const TaskShapeDistribution& dist,
                                                  uint64_t seed) {
  if (name == "fgd") return std::unique_ptr<Policy>(new FgdPolicy(dist, seed));
  if (name == "tessera") return std::unique_ptr<Policy>(new TesseraPackingPolicy(dist, seed));
  if (name == "bestfit") return std::unique_ptr<Policy>(new BestFitPolicy(seed));
  if (name == "random") return std::unique_ptr<Policy>(new RandomPolicy(seed));
  return Status::Error(fmt::format("unknown harness policy '{}' (known: fgd, bestfit, random, tessera)", name));
}

}  // namespace tessera
