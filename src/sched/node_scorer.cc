#include "sched/node_scorer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace tessera {

int32_t NodeScorer::Rank(const ClusterState& s, NodeId n) const {
  if (!tie_seed_) return n;
  if (static_cast<int>(rank_.size()) != s.num_nodes()) {
    const std::vector<int32_t> order = SeededPermutation(s.num_nodes(), *tie_seed_);
    rank_.assign(order.size(), 0);
    for (size_t i = 0; i < order.size(); ++i) rank_[static_cast<size_t>(order[i])] = static_cast<int32_t>(i);
  }
  return rank_[static_cast<size_t>(n)];
}

namespace {

// GPU milli a task of `r` takes: whole GPUs x 1000, a share, or 0 (CPU only).
int64_t GpuTake(const Request& r) {
  return r.SubGpu() ? r.gpu_milli : static_cast<int64_t>(r.gpus_per_task) * kMilliPerGpu;
}

// The GPU of node n a share of `r` may take with the least free share (lowest index on ties); kNone if none.
GpuId TightestGpu(const ClusterState& s, NodeId n, const Request& r) {
  const NodeState& ns = s.node(n);
  GpuId best = kNone;
  int best_free = kMilliPerGpu + 1;
  for (GpuId g = ns.first_gpu; g < ns.first_gpu + ns.gpu_count; ++g) {
    const GpuState& gs = s.gpu(g);
    if (gs.mig_enabled || gs.free_milli < r.gpu_milli || gs.free_memory_mib < r.gpu_memory_mib) continue;
    if (gs.free_milli < best_free) {
      best = g;
      best_free = gs.free_milli;
    }
  }
  return best;
}

// GPU milli of a node stranded by host resources: free GPU capacity that the node's remaining CPU and
// memory cannot feed at the typical mix's CPU and memory per GPU milli.
double Stranded(int64_t free_gpu, int64_t cpu, int64_t mem, double cpu_per_milli, double mem_per_milli) {
  double usable = static_cast<double>(free_gpu);
  if (cpu_per_milli > 0) usable = std::min(usable, static_cast<double>(std::max<int64_t>(cpu, 0)) / cpu_per_milli);
  if (mem_per_milli > 0) usable = std::min(usable, static_cast<double>(std::max<int64_t>(mem, 0)) / mem_per_milli);
  return static_cast<double>(free_gpu) - usable;
}

// tessera's class score: FGD's integer gradient score over F(node) + Stranded(node) + reservation cost.
// FGD's measure sees GPU capacity only, so it happily puts a CPU- or memory-heavy task on a node whose
// remaining GPUs then have no host resources left; the stranded term makes that placement cost what it
// really costs.
class TesseraClassScorer : public fgd_internal::ClassScorer {
 public:
  // `reserve_cost[k]` (per GPU milli taken on kind k) is the task's reservation cost: kind k's reserve
  // weight minus the lowest weight among the kinds the task may use (tessera_internal::KindReserveWeights).
  TesseraClassScorer(double cpu_per_milli, double mem_per_milli, const std::vector<double>* reserve_cost)
      : cpm_(cpu_per_milli), mpm_(mem_per_milli), reserve_cost_(reserve_cost) {}

  double Score(const fgd_internal::NodeClass& c, const fgd_internal::TaskDelta& d,
               const TaskShapeDistribution& dist, uint16_t allowed, uint16_t* best_values) const override {
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
      if (v < t.gpu_milli || !((allowed >> j) & 1u)) continue;
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

class TesseraNodeScorer : public NodeScorer {
 public:
  TesseraNodeScorer(TaskShapeDistribution dist, std::optional<uint64_t> tie_seed) : NodeScorer(tie_seed) {
    if (!dist.shapes.empty()) given_ = std::make_unique<Model>(std::move(dist));
  }

  void Begin(const ClusterState& s, const Request& r) const override {
    const Model* m = ModelFor(s);
    if (m == nullptr) return;
    if (m->reserve_weight.empty()) {
      m->reserve_weight = tessera_internal::KindReserveWeights(m->engine.dist(), s.cluster());
      if (m->reserve_weight.empty()) m->reserve_weight.push_back(0.0);
    }
    // Cost per milli on kind k: its weight above the cheapest kind the task may use.
    double floor = std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < m->reserve_weight.size(); ++k)
      if (r.KindAllowed(static_cast<KindId>(k))) floor = std::min(floor, m->reserve_weight[k]);
    if (!std::isfinite(floor)) floor = 0;
    reserve_cost_.resize(m->reserve_weight.size());
    for (size_t k = 0; k < m->reserve_weight.size(); ++k)
      reserve_cost_[k] = std::max(0.0, m->reserve_weight[k] - floor);
    m->engine.BeginRequest(s.num_nodes());
  }

  const TaskShapeDistribution* Workload(const ClusterState& s) const override {
    const Model* m = ModelFor(s);
    return m == nullptr ? nullptr : &m->engine.dist();
  }

  int64_t Score(const ClusterState& s, NodeId n, const Request& r) const override {
    const Model* m = ModelFor(s);
    if (m == nullptr) return Packing(s, n, r);
    if (WholeShare(r)) return WholeShareGpu(s, n, r) == kNone ? kUnusable : ClassScore(*m, s, n, r);
    return ClassScore(*m, s, n, r);
  }

  GpuId ShareGpu(const ClusterState& s, NodeId n, const Request& r) const override {
    const Model* m = ModelFor(s);
    if (m == nullptr) return PackedShareGpu(s, n, r);
    if (WholeShare(r)) return WholeShareGpu(s, n, r);
    const TesseraClassScorer scorer(m->cpu_per_milli, m->mem_per_milli, &reserve_cost_);
    return m->engine.ShareGpu(s, n, fgd_internal::TaskDelta{ShapeOf(r), r.host_memory_mib}, r.gpu_memory_mib, scorer);
  }

 private:
  // What the score keeps of one typical-task distribution.
  struct Model {
    explicit Model(TaskShapeDistribution dist) : engine(std::move(dist), std::nullopt) {
      double cpu = 0, mem = 0, gpu = 0;
      const TaskShapeDistribution& d = engine.dist();
      for (size_t i = 0; i < d.shapes.size(); ++i) {
        const TaskShape& m = d.shapes[i];
        if (m.CpuOnly()) continue;
        cpu += d.prob[i] * static_cast<double>(m.cpu_milli);
        mem += d.prob[i] * static_cast<double>(i < d.memory_mib.size() ? d.memory_mib[i] : 0);
        gpu += d.prob[i] * static_cast<double>(m.num_gpu * m.gpu_milli);
      }
      cpu_per_milli = gpu > 0 ? cpu / gpu : 0;
      mem_per_milli = gpu > 0 ? mem / gpu : 0;
    }
    fgd_internal::ClassEngine engine;
    double cpu_per_milli = 0;  // typical mix: mean CPU (millicores) per GPU milli
    double mem_per_milli = 0;  // typical mix: mean host memory (MiB) per GPU milli
    mutable std::vector<double> reserve_weight;  // per kind, from the first snapshot's cluster
  };

  // The given distribution's model; else the model of the snapshot's learned workload (rebuilt when the
  // loop publishes a new one); null when neither is known (the score is then the engine's packing).
  const Model* ModelFor(const ClusterState& s) const {
    if (given_) return given_.get();
    const std::shared_ptr<const TaskShapeDistribution>& w = s.learned_workload();
    if (!w || w->shapes.empty()) return nullptr;
    if (w != learned_from_) {
      learned_ = std::make_unique<Model>(*w);
      learned_from_ = w;
    }
    return learned_.get();
  }

  // A "share" of a whole GPU is scored as one whole GPU, on the lowest-index idle GPU with the memory.
  static bool WholeShare(const Request& r) { return r.SubGpu() && r.gpu_milli >= kMilliPerGpu; }
  static GpuId WholeShareGpu(const ClusterState& s, NodeId n, const Request& r) {
    const NodeState& ns = s.node(n);
    for (GpuId g = ns.first_gpu; g < ns.first_gpu + ns.gpu_count; ++g)
      if (s.gpu(g).WholeFree() && s.gpu(g).free_memory_mib >= r.gpu_memory_mib) return g;
    return kNone;
  }

  int64_t ClassScore(const Model& m, const ClusterState& s, NodeId n, const Request& r) const {
    const TesseraClassScorer scorer(m.cpu_per_milli, m.mem_per_milli, &reserve_cost_);
    const double sc =
        m.engine.ScoreNode(s, n, fgd_internal::TaskDelta{ShapeOf(r), r.host_memory_mib}, r.gpu_memory_mib, scorer);
    return std::isfinite(sc) ? static_cast<int64_t>(sc) : kUnusable;
  }

  // No typical tasks known: the engine's packing. Whole GPUs: fewest whole GPUs (free or idle MIG) left
  // on the node; a share: the node with the fewest idle GPUs, on a partly used GPU before an idle one,
  // the tightest first.
  static int64_t Packing(const ClusterState& s, NodeId n, const Request& r) {
    const NodeState& ns = s.node(n);
    if (!r.SubGpu() || r.gpu_milli == 0) return -(ns.free_whole + ns.idle_mig_gpus - r.gpus_per_task);
    return PackedShareGpu(s, n, r) == kNone ? kUnusable : -ns.idle_gpus;
  }
  static GpuId PackedShareGpu(const ClusterState& s, NodeId n, const Request& r) {
    const NodeState& ns = s.node(n);
    GpuId best = kNone;
    std::pair<bool, int> best_key{true, kMilliPerGpu + 1};  // (idle, free share): lower wins
    for (GpuId g = ns.first_gpu; g < ns.first_gpu + ns.gpu_count; ++g) {
      const GpuState& gs = s.gpu(g);
      if (gs.mig_enabled || gs.free_milli < r.gpu_milli || gs.free_memory_mib < r.gpu_memory_mib) continue;
      const std::pair<bool, int> key{gs.tasks == 0, gs.free_milli};
      if (key < best_key) {
        best_key = key;
        best = g;
      }
    }
    return best;
  }

  std::unique_ptr<Model> given_;                                 // null: no distribution given
  mutable std::shared_ptr<const TaskShapeDistribution> learned_from_;  // what learned_ was built from
  mutable std::unique_ptr<Model> learned_;
  mutable std::vector<double> reserve_cost_;  // per kind, for the request being scored
};

class BestFitNodeScorer : public NodeScorer {
 public:
  explicit BestFitNodeScorer(std::optional<uint64_t> tie_seed) : NodeScorer(tie_seed) {}

  GpuId ShareGpu(const ClusterState& s, NodeId n, const Request& r) const override { return TightestGpu(s, n, r); }

  void Begin(const ClusterState& s, const Request&) const override {
    if (max_cpu_ > 0) return;
    max_cpu_ = 1;
    max_gpu_ = 1;
    for (const Node& node : s.cluster().nodes) {
      max_cpu_ = std::max(max_cpu_, node.cpu_milli);
      max_gpu_ = std::max<int64_t>(max_gpu_, static_cast<int64_t>(node.gpu_count) * kMilliPerGpu);
    }
  }

  int64_t Score(const ClusterState& s, NodeId n, const Request& r) const override {
    if (r.SubGpu() && r.gpu_milli > 0 && TightestGpu(s, n, r) == kNone) return kUnusable;
    const NodeState& ns = s.node(n);
    const double cpu_left = static_cast<double>(ns.free_cpu_milli - r.cpu_milli);
    const double gpu_left = static_cast<double>(ns.free_milli_total - GpuTake(r));
    return static_cast<int64_t>(100.0 * (1.0 - 0.5 * cpu_left / static_cast<double>(max_cpu_) -
                                         0.5 * gpu_left / static_cast<double>(max_gpu_)));
  }

 private:
  mutable int64_t max_cpu_ = 0;  // from the first snapshot's cluster
  mutable int64_t max_gpu_ = 0;
};

}  // namespace

std::unique_ptr<NodeScorer> MakeTesseraScorer(TaskShapeDistribution dist, std::optional<uint64_t> tie_seed) {
  return std::make_unique<TesseraNodeScorer>(std::move(dist), tie_seed);
}

std::unique_ptr<NodeScorer> MakeBestFitScorer(std::optional<uint64_t> tie_seed) {
  return std::make_unique<BestFitNodeScorer>(tie_seed);
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

}  // namespace tessera
