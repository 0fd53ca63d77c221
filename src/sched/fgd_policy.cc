#include "sched/fgd_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>

namespace tessera {

void AppendWholeFreeGpus(const ClusterState& s, NodeId n, int count, TaskPlacement* tp) {
  const NodeState& ns = s.node(n);
  for (int i = 0; i < ns.gpu_count && static_cast<int>(tp->gpus.size()) < count; ++i) {
    if (!s.gpu(ns.first_gpu + i).WholeFree()) continue;
    GpuGrant g;
    g.gpu = ns.first_gpu + i;
    g.milli = kMilliPerGpu;
    tp->gpus.push_back(g);
  }
}

std::vector<int32_t> SeededPermutation(int32_t n, uint64_t seed) {
  std::vector<int32_t> p(static_cast<size_t>(std::max(n, 0)));
  for (int32_t i = 0; i < n; ++i) p[i] = i;
  SeededRng rng(seed);
  for (int32_t i = n - 1; i > 0; --i) std::swap(p[i], p[rng.Below(static_cast<uint64_t>(i) + 1)]);
  return p;
}

std::vector<int32_t> NodeOrder(int32_t n, std::optional<uint64_t> seed) {
  if (seed) return SeededPermutation(n, *seed);
  std::vector<int32_t> p(static_cast<size_t>(std::max(n, 0)));
  for (int32_t i = 0; i < n; ++i) p[i] = i;
  return p;
}

NodeResources NodeResourcesOf(const ClusterState& s, NodeId n) {
  const NodeState& ns = s.node(n);
  NodeResources r;
  r.kind = ns.kind;
  r.free_cpu_milli = ns.free_cpu_milli;
  r.free_milli.reserve(ns.gpu_count);
  for (int i = 0; i < ns.gpu_count; ++i) r.free_milli.push_back(s.gpu(ns.first_gpu + i).free_milli);
  return r;
}

namespace {

// The fragmented amount for one shape, from the node's per-shape summary (count of GPUs with enough free
// share, free milli of the GPUs without).
inline int64_t Term(const TaskShape& m, KindId kind, int64_t free_cpu, int64_t total, int cnt_ge, int64_t sum_lt) {
  if (m.CpuOnly() || !m.KindAllowed(kind)) return total;
  if (free_cpu >= m.cpu_milli && cnt_ge >= m.num_gpu) return sum_lt;
  return total;
}

}  // namespace

int64_t FragmentedMilli(const NodeResources& node, const TaskShape& m) {
  int64_t total = 0, sum_lt = 0;
  int cnt_ge = 0;
  for (int f : node.free_milli) {
    total += f;
    if (f >= m.gpu_milli) ++cnt_ge;
    else sum_lt += f;
  }
  return Term(m, node.kind, node.free_cpu_milli, total, cnt_ge, sum_lt);
}

double NodeFragmentation(const NodeResources& node, const TaskShapeDistribution& dist) {
  double f = 0;
  for (size_t i = 0; i < dist.shapes.size(); ++i)
    f += dist.prob[i] * static_cast<double>(FragmentedMilli(node, dist.shapes[i]));
  return f;
}

int FgdScore(double frag_before, double frag_after) {
  const double x = (frag_before - frag_after) / 1000.0;
  return static_cast<int>(100.0 / (1.0 + std::exp(-x)));
}

namespace fgd_internal {

double FragAfter(const NodeClass& c, const TaskDelta& d, int v, const TaskShapeDistribution& dist) {
  const TaskShape& t = d.shape;
  const int64_t cpu = c.free_cpu - t.cpu_milli;
  double f = 0;
  if (t.Sharing()) {
    const int nv = v - t.gpu_milli;
    const int64_t total = c.total_free - t.gpu_milli;
    for (size_t i = 0; i < dist.shapes.size(); ++i) {
      const TaskShape& m = dist.shapes[i];
      const int mm = m.gpu_milli;
      const int cnt = c.cnt_ge[i] + (nv >= mm) - (v >= mm);
      const int64_t sl = c.sum_lt[i] + (nv < mm ? nv : 0) - (v < mm ? v : 0);
      f += dist.prob[i] * static_cast<double>(Term(m, c.kind, cpu, total, cnt, sl));
    }
  } else {
    const int k = t.CpuOnly() ? 0 : t.num_gpu;  // whole GPUs taken: free 1000 -> 0
    const int64_t total = c.total_free - static_cast<int64_t>(k) * kMilliPerGpu;
    for (size_t i = 0; i < dist.shapes.size(); ++i) {
      const TaskShape& m = dist.shapes[i];
      f += dist.prob[i] * static_cast<double>(Term(m, c.kind, cpu, total, c.cnt_ge[i] - k, c.sum_lt[i]));
    }
  }
  return f;
}

ClassEngine::ClassEngine(TaskShapeDistribution dist, std::optional<uint64_t> seed)
    : dist_(std::move(dist)), seed_(seed) {}

void ClassEngine::EnsureOrder(int n) const {
  if (static_cast<int>(order_.size()) == n) return;
  order_ = NodeOrder(n, seed_);
  entries_.assign(static_cast<size_t>(n), NodeEntry{});
}

void ClassEngine::BeginRequest(int num_nodes) const {
  EnsureOrder(num_nodes);
  ++stamp_;
}

double ClassEngine::CachedScore(NodeClass& c, const TaskDelta& d, const ClassScorer& scorer) const {
  if (c.stamp != stamp_) {
    c.score = scorer.Score(c, d, dist_, ClassScorer::kAllValues, &c.best_values);
    c.stamp = stamp_;
  }
  return c.score;
}

uint16_t ClassEngine::AllowedValues(const ClusterState& s, NodeId n, const NodeClass& c, int share,
                                    int64_t gpu_memory_mib, uint16_t* fit) const {
  const NodeState& ns = s.node(n);
  uint16_t allowed = 0;
  *fit = 0;
  for (int i = 0; i < ns.gpu_count; ++i) {
    const GpuState& g = s.gpu(ns.first_gpu + i);
    if (g.free_milli < share) continue;
    const auto it = std::lower_bound(c.distinct_free.begin(), c.distinct_free.end(), g.free_milli);
    const size_t bit = static_cast<size_t>(it - c.distinct_free.begin());
    if (bit >= 16) continue;
    *fit = static_cast<uint16_t>(*fit | (1u << bit));
    if (!g.mig_enabled && g.free_memory_mib >= gpu_memory_mib) allowed = static_cast<uint16_t>(allowed | (1u << bit));
  }
  return allowed;
}

double ClassEngine::ScoreNode(const ClusterState& s, NodeId n, const TaskDelta& d, int64_t gpu_memory_mib,
                              const ClassScorer& scorer) const {
  const int32_t ci = Refresh(s, n);
  NodeClass& c = classes_[ci];
  if (!d.shape.Sharing()) return CachedScore(c, d, scorer);
  if (entries_[n].max_free < d.shape.gpu_milli) return -std::numeric_limits<double>::infinity();
  // Without a GPU memory need every GPU with the share free qualifies: the class's score is the node's.
  if (gpu_memory_mib <= 0) return CachedScore(c, d, scorer);
  uint16_t fit = 0;
  const uint16_t allowed = AllowedValues(s, n, c, d.shape.gpu_milli, gpu_memory_mib, &fit);
  if (allowed == 0) return -std::numeric_limits<double>::infinity();
  if (allowed == fit) return CachedScore(c, d, scorer);
  uint16_t best = 0;
  return scorer.Score(c, d, dist_, allowed, &best);
}

GpuId ClassEngine::ShareGpu(const ClusterState& s, NodeId n, const TaskDelta& d, int64_t gpu_memory_mib,
                            const ClassScorer& scorer) const {
  const int32_t ci = Refresh(s, n);
  NodeClass& c = classes_[ci];
  uint16_t fit = 0;
  const uint16_t allowed = AllowedValues(s, n, c, d.shape.gpu_milli, gpu_memory_mib, &fit);
  if (allowed == 0) return kNone;
  uint16_t best = 0;
  if (allowed == fit) {
    CachedScore(c, d, scorer);
    best = c.best_values;
  } else {
    scorer.Score(c, d, dist_, allowed, &best);
  }
  const NodeState& ns = s.node(n);
  for (int i = 0; i < ns.gpu_count; ++i) {
    const GpuState& g = s.gpu(ns.first_gpu + i);
    if (g.free_milli < d.shape.gpu_milli || g.mig_enabled || g.free_memory_mib < gpu_memory_mib) continue;
    const auto it = std::lower_bound(c.distinct_free.begin(), c.distinct_free.end(), g.free_milli);
    const size_t bit = static_cast<size_t>(it - c.distinct_free.begin());
    if (bit < 16 && ((best >> bit) & 1u)) return ns.first_gpu + i;
  }
  return kNone;
}

int32_t ClassEngine::Refresh(const ClusterState& s, NodeId n) const {
  NodeEntry& e = entries_[n];
  const NodeState& ns = s.node(n);
  bool same = e.cls >= 0 && e.free_cpu == ns.free_cpu_milli && e.free_mem == ns.free_memory_mib &&
              static_cast<int>(e.free_milli.size()) == ns.gpu_count;
  if (same) {
    for (int i = 0; i < ns.gpu_count; ++i) {
      if (e.free_milli[i] != s.gpu(ns.first_gpu + i).free_milli) {
        same = false;
        break;
      }
    }
  }
  if (same) return e.cls;
  e.free_cpu = ns.free_cpu_milli;
  e.free_mem = ns.free_memory_mib;
  e.free_milli.resize(ns.gpu_count);
  e.max_free = 0;
  for (int i = 0; i < ns.gpu_count; ++i) {
    e.free_milli[i] = s.gpu(ns.first_gpu + i).free_milli;
    e.max_free = std::max<int>(e.max_free, e.free_milli[i]);
  }
  e.cls = ClassFor(s, n, e);
  return e.cls;
}

int32_t ClassEngine::ClassFor(const ClusterState& s, NodeId n, const NodeEntry& e) const {
  std::vector<int16_t> sorted = e.free_milli;
  std::sort(sorted.begin(), sorted.end());
  const KindId kind = s.node(n).kind;
  std::string key(sizeof(kind) + 2 * sizeof(int64_t) + sorted.size() * sizeof(int16_t), '\0');
  char* p = key.data();
  std::memcpy(p, &kind, sizeof(kind));
  std::memcpy(p + sizeof(kind), &e.free_cpu, sizeof(int64_t));
  std::memcpy(p + sizeof(kind) + sizeof(int64_t), &e.free_mem, sizeof(int64_t));
  if (!sorted.empty()) std::memcpy(p + sizeof(kind) + 2 * sizeof(int64_t), sorted.data(), sorted.size() * sizeof(int16_t));
  auto [it, inserted] = class_index_.try_emplace(std::move(key), static_cast<int32_t>(classes_.size()));
  if (!inserted) return it->second;

  NodeClass c;
  c.kind = kind;
  c.free_cpu = e.free_cpu;
  c.free_mem = e.free_mem;
  c.sorted_free.assign(sorted.begin(), sorted.end());
  for (int f : c.sorted_free) {
    c.total_free += f;
    if (f > 0 && (c.distinct_free.empty() || c.distinct_free.back() != f)) c.distinct_free.push_back(f);
  }
  c.cnt_ge.resize(dist_.shapes.size());
  c.sum_lt.resize(dist_.shapes.size());
  for (size_t i = 0; i < dist_.shapes.size(); ++i) {
    const TaskShape& m = dist_.shapes[i];
    int cnt = 0;
    int64_t sl = 0;
    for (int f : c.sorted_free) {
      if (f >= m.gpu_milli) ++cnt;
      else sl += f;
    }
    c.cnt_ge[i] = cnt;
    c.sum_lt[i] = sl;
    c.frag += dist_.prob[i] * static_cast<double>(Term(m, kind, c.free_cpu, c.total_free, cnt, sl));
  }
  classes_.push_back(std::move(c));
  return it->second;
}

PlaceResult ClassEngine::Place(const ClusterState& s, const Request& r, const ClassScorer& scorer,
                               std::string_view policy_name) const {
  if (Status st = CheckHarnessRequest(r); !st.ok()) return PlaceResult::NoFit(NoFitCode::kInvalid, st.message());
  const TaskShape t = ShapeOf(r);
  const TaskDelta d{t, r.host_memory_mib};
  EnsureOrder(s.num_nodes());
  ++stamp_;
  double best = -std::numeric_limits<double>::infinity();
  NodeId best_node = kNone;
  int32_t best_cls = -1;
  for (NodeId n : order_) {
    const NodeState& ns = s.node(n);
    if (ns.free_cpu_milli < t.cpu_milli || ns.free_memory_mib < r.host_memory_mib) continue;
    if (!r.TierAllowed(ns.tier)) continue;
    if (!t.CpuOnly()) {
      if (ns.gpu_count == 0 || ns.kind < 0 || !r.KindAllowed(ns.kind)) continue;
      if (t.Sharing() ? ns.free_milli_total < t.gpu_milli : ns.free_whole < t.num_gpu) continue;
    }
    const int32_t ci = Refresh(s, n);
    if (t.Sharing() && entries_[n].max_free < t.gpu_milli) continue;
    NodeClass& c = classes_[ci];
    if (c.stamp != stamp_) {
      uint16_t mask = 0;
      c.score = scorer.Score(c, d, dist_, ClassScorer::kAllValues, &mask);
      c.best_values = mask;
      c.stamp = stamp_;
    }
    if (c.score > best) {
      best = c.score;
      best_node = n;
      best_cls = ci;
    }
  }
  if (best_node == kNone) {
    return PlaceResult::NoFit(
        NoFitCode::kResources,
        fmt::format("{}: no node has {} mCPU, {} MiB and {} free", policy_name, t.cpu_milli, r.host_memory_mib,
                    t.CpuOnly() ? std::string("no GPU")
                                : t.Sharing() ? fmt::format("a GPU with {} milli", t.gpu_milli)
                                              : fmt::format("{} whole GPUs", t.num_gpu)));
  }
  const NodeState& ns = s.node(best_node);
  const NodeClass& c = classes_[best_cls];
  TaskPlacement tp;
  tp.node = best_node;
  if (t.Sharing()) {
    for (int i = 0; i < ns.gpu_count; ++i) {
      const int f = s.gpu(ns.first_gpu + i).free_milli;
      if (f < t.gpu_milli) continue;
      auto it = std::lower_bound(c.distinct_free.begin(), c.distinct_free.end(), f);
      const size_t bit = static_cast<size_t>(it - c.distinct_free.begin());
      if (bit < 16 && ((c.best_values >> bit) & 1u)) {
        GpuGrant g;
        g.gpu = ns.first_gpu + i;
        g.milli = t.gpu_milli;
        tp.gpus.push_back(g);
        break;
      }
    }
    TESSERA_CHECK(!tp.gpus.empty(), "best class has no GPU reaching its score");
  } else {
    AppendWholeFreeGpus(s, best_node, t.num_gpu, &tp);
  }
  PlaceResult res;
  res.ok = true;
  res.span = tp.gpus.size() == 1 ? Span::kOneGpu : Span::kOneNode;
  res.reason = fmt::format("{}: node {} (score {})", policy_name, s.cluster().nodes[best_node].name, best);
  res.tasks.push_back(std::move(tp));
  return res;
}

}  // namespace fgd_internal

namespace {

class FgdScorer : public fgd_internal::ClassScorer {
 public:
  double Score(const fgd_internal::NodeClass& c, const fgd_internal::TaskDelta& d,
               const TaskShapeDistribution& dist, uint16_t allowed, uint16_t* best_values) const override {
    const TaskShape& t = d.shape;
    if (!t.Sharing()) return FgdScore(c.frag, fgd_internal::FragAfter(c, d, 0, dist));
    int best = -1;
    uint16_t mask = 0;
    for (size_t i = 0; i < c.distinct_free.size() && i < 16; ++i) {
      const int v = c.distinct_free[i];
      if (v < t.gpu_milli || !((allowed >> i) & 1u)) continue;
      const int sc = FgdScore(c.frag, fgd_internal::FragAfter(c, d, v, dist));
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

FgdPolicy::FgdPolicy(TaskShapeDistribution dist, std::optional<uint64_t> seed) : engine_(std::move(dist), seed) {}

PlaceResult FgdPolicy::Place(const ClusterState& snapshot, const Request& request) const {
  const FgdScorer scorer;
  return engine_.Place(snapshot, request, scorer, name());
}

}  // namespace tessera
