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
                   uint64_t seed, ScoreFn score, int64_t* best_score) {
  if (static_cast<int>(order.size()) != s.num_nodes()) order = SeededPermutation(s.num_nodes(), seed);
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
  SeededRng rng(seed_ ^ (static_cast<uint64_t>(r.id) * 0x9e3779b97f4a7c15ULL));
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

namespace {

// GPU milli of a node stranded by host resources: free GPU capacity that the node's remaining CPU and
// memory cannot feed at the typical mix's CPU and memory per GPU milli.
double Stranded(int64_t free_gpu, int64_t cpu, int64_t mem, double cpu_per_milli, double mem_per_milli) {
  double usable = static_cast<double>(free_gpu);
  if (cpu_per_milli > 0) usable = std::min(usable, static_cast<double>(std::max<int64_t>(cpu, 0)) / cpu_per_milli);
  if (mem_per_milli > 0) usable = std::min(usable, static_cast<double>(std::max<int64_t>(mem, 0)) / mem_per_milli);
  return static_cast<double>(free_gpu) - usable;
}

// tessera's class score: FGD's integer gradient score over F(node) + Stranded(node). FGD's measure sees
// GPU capacity only, so it happily puts a CPU- or memory-heavy task on a node whose remaining GPUs then
// have no host resources left; the stranded term makes that placement cost what it really costs. Same
// integer sigmoid scale and tie rule (earliest node in the seed's order) as FGD.
class TesseraScorer : public fgd_internal::ClassScorer {
 public:
  // `reserve_cost[k]` (per GPU milli taken on kind k) is the task's reservation cost: kind k's reserve
  // weight minus the lowest weight among the kinds the task may use (tessera_internal::KindReserveWeights).
  TesseraScorer(double cpu_per_milli, double mem_per_milli, const std::vector<double>* reserve_cost)
      : cpm_(cpu_per_milli), mpm_(mem_per_milli), reserve_cost_(reserve_cost) {}

  double Score(const fgd_internal::NodeClass& c, const fgd_internal::TaskDelta& d,
               const TaskShapeDistribution& dist, uint16_t* best_values) const override {
    const TaskShape& t = d.shape;
    const int64_t take = t.CpuOnly() ? 0 : int64_t{t.num_gpu} * t.gpu_milli;
    const double before = c.frag + Stranded(c.total_free, c.free_cpu, c.free_mem, cpm_, mpm_);
    double stranded_after =
        Stranded(c.total_free - take, c.free_cpu - t.cpu_milli, c.free_mem - d.host_memory_mib, cpm_, mpm_);
    if (c.kind >= 0 && static_cast<size_t>(c.kind) < reserve_cost_->size())
      stranded_after += static_cast<double>(take) * (*reserve_cost_)[static_cast<size_t>(c.kind)];
    if (!t.Sharing()) return FgdScore(before, fgd_internal::FragAfter(c, d, 0, dist) + stranded_after);
    int best = -1;
    uint16_t mask = 0;
    for (size_t j = 0; j < c.distinct_free.size() && j < 16; ++j) {
      const int v = c.distinct_free[j];
      if (v < t.gpu_milli) continue;
      const int sc = FgdScore(before, fgd_internal::FragAfter(c, d, v, dist) + stranded_after);
      if (sc > best) {
        best = sc;
        mask = static_cast<uint16_t>(1u << j);
      } else if (sc == best) {
        mask = static_cast<uint16_t>(mask | (1u << j));
      }
    }
    *best_values = mask;
    return best;
  }

 private:
  double cpm_, mpm_;
  const std::vector<double>* reserve_cost_;
};

}  // namespace

TesseraPackingPolicy::TesseraPackingPolicy(TaskShapeDistribution dist, uint64_t seed)
    : engine_(std::move(dist), seed) {
  double cpu = 0, mem = 0, gpu = 0;
  const TaskShapeDistribution& d = engine_.dist();
  for (size_t i = 0; i < d.shapes.size(); ++i) {
    const TaskShape& m = d.shapes[i];
    if (m.CpuOnly()) continue;
    cpu += d.prob[i] * static_cast<double>(m.cpu_milli);
    mem += d.prob[i] * static_cast<double>(i < d.memory_mib.size() ? d.memory_mib[i] : 0);
    gpu += d.prob[i] * static_cast<double>(m.num_gpu * m.gpu_milli);
  }
  cpu_per_milli_ = gpu > 0 ? cpu / gpu : 0;
  mem_per_milli_ = gpu > 0 ? mem / gpu : 0;
}

namespace tessera_internal {

std::vector<double> KindReserveWeights(const TaskShapeDistribution& dist, const Cluster& cluster) {
  std::vector<double> cap;  // GPU milli per kind
  for (const Node& n : cluster.nodes) {
    if (n.kind < 0 || n.gpu_count <= 0) continue;
    if (cap.size() <= static_cast<size_t>(n.kind)) cap.resize(static_cast<size_t>(n.kind) + 1, 0.0);
    cap[static_cast<size_t>(n.kind)] += static_cast<double>(n.gpu_count) * kMilliPerGpu;
  }
  double cap_total = 0;
  for (double c : cap) cap_total += c;
  std::vector<double> demand(cap.size(), 0.0);  // constrained GPU demand per kind, per task drawn
  double demand_total = 0;                       // all GPU demand per task drawn
  for (size_t i = 0; i < dist.shapes.size(); ++i) {
    const TaskShape& m = dist.shapes[i];
    if (m.CpuOnly()) continue;
    const double d = dist.prob[i] * static_cast<double>(m.num_gpu) * m.gpu_milli;
    demand_total += d;
    if (m.kind_mask == 0) continue;
    double allowed_cap = 0;
    for (size_t k = 0; k < cap.size(); ++k)
      if (m.KindAllowed(static_cast<KindId>(k))) allowed_cap += cap[k];
    if (allowed_cap <= 0) continue;
    for (size_t k = 0; k < cap.size(); ++k)
      if (m.KindAllowed(static_cast<KindId>(k))) demand[k] += d * cap[k] / allowed_cap;
  }
  std::vector<double> w(cap.size(), 0.0);
  if (demand_total <= 0 || cap_total <= 0) return w;
  for (size_t k = 0; k < cap.size(); ++k)
    if (cap[k] > 0) w[k] = std::min(1.0, (demand[k] / demand_total) * cap_total / cap[k]);
  return w;
}

}  // namespace tessera_internal

PlaceResult TesseraPackingPolicy::Place(const ClusterState& s, const Request& r) const {
  if (reserve_weight_.empty()) {
    reserve_weight_ = tessera_internal::KindReserveWeights(engine_.dist(), s.cluster());
    if (reserve_weight_.empty()) reserve_weight_.push_back(0.0);
  }
  // Cost per milli on kind k: its weight above the cheapest kind the task may use.
  double floor = std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < reserve_weight_.size(); ++k)
    if (r.KindAllowed(static_cast<KindId>(k))) floor = std::min(floor, reserve_weight_[k]);
  if (!std::isfinite(floor)) floor = 0;
  reserve_cost_.resize(reserve_weight_.size());
  for (size_t k = 0; k < reserve_weight_.size(); ++k) reserve_cost_[k] = std::max(0.0, reserve_weight_[k] - floor);
  const TesseraScorer scorer(cpu_per_milli_, mem_per_milli_, &reserve_cost_);
  return engine_.Place(s, r, scorer, name());
}

std::vector<std::string> HarnessPolicyNames() {
  return {"fgd", "bestfit", "random", "dotprod", "gpuclustering", "gpupacking", "tessera"};
}

Result<std::unique_ptr<Policy>> MakeHarnessPolicy(std::string_view name, const TaskShapeDistribution& dist,
                                                  uint64_t seed) {
  if (name == "fgd") return std::unique_ptr<Policy>(new FgdPolicy(dist, seed));
  if (name == "tessera") return std::unique_ptr<Policy>(new TesseraPackingPolicy(dist, seed));
  if (name == "bestfit") return std::unique_ptr<Policy>(new BestFitPolicy(seed));
  if (name == "random") return std::unique_ptr<Policy>(new RandomPolicy(seed));
  if (name == "dotprod") return std::unique_ptr<Policy>(new DotProdPolicy(seed));
  if (name == "gpuclustering") return std::unique_ptr<Policy>(new GpuClusteringPolicy(seed));
  if (name == "gpupacking") return std::unique_ptr<Policy>(new GpuPackingPolicy(seed));
  return Status::Error(fmt::format(
      "unknown harness policy '{}' (known: fgd, bestfit, random, dotprod, gpuclustering, gpupacking, tessera)", name));
}

}  // namespace tessera
