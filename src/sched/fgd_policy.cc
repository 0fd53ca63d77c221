#include "sched/fgd_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>

namespace tessera {

std::vector<int32_t> SeededPermutation(int32_t n, uint64_t seed) {
  std::vector<int32_t> p(static_cast<size_t>(std::max(n, 0)));
  for (int32_t i = 0; i < n; ++i) p[i] = i;
  SeededRng rng(seed);
  for (int32_t i = n - 1; i > 0; --i) std::swap(p[i], p[rng.Below(static_cast<uint64_t>(i) + 1)]);
  return p;
}

TaskShape ShapeOf(const Request& r) {
  TaskShape t;
  t.cpu_milli = r.cpu_milli;
  t.kind_mask = r.kind_mask;
  if (r.gpus_per_task == 0) {
    if (r.gpu_milli <= 0) return t;  // CPU-only
    t.num_gpu = 1;
    t.gpu_milli = std::min(r.gpu_milli, kMilliPerGpu);
  } else {
    t.num_gpu = r.gpus_per_task;
    t.gpu_milli = kMilliPerGpu;
  }
  return t;
}

Status CheckHarnessRequest(const Request& r) {
  if (r.tasks != 1) return Status::Error(fmt::format("harness policies place single tasks, not gangs of {}", r.tasks));
  if (r.gpus_per_task < 0) return Status::Error("gpus_per_task is negative");
  if (r.gpus_per_task == 0 && (r.gpu_milli < 0 || r.gpu_milli > kMilliPerGpu))
    return Status::Error(fmt::format("gpu_milli {} is outside 0..1000", r.gpu_milli));
  if (r.gpus_per_task == 0 && r.gpu_milli > 0 && !r.allow_share)
    return Status::Error("sub-GPU task forbids sharing and harness policies do not place MIG instances");
  if (r.gpu_memory_mib > 0)
    return Status::Error("harness policies model GPU compute shares only (gpu_memory_mib must be 0)");
  if (r.cpu_milli < 0 || r.host_memory_mib < 0) return Status::Error("negative CPU or memory request");
  return Status::Ok();
}

TaskShapeDistribution TaskShapeDistribution::Typical(const std::vector<TaskShape>& tasks, double coverage) {
  using Key = std::tuple<int64_t, int, int, uint64_t>;
  std::map<Key, size_t> index;
  std::vector<std::pair<TaskShape, int64_t>> counts;  // first-seen order
  for (const TaskShape& t : tasks) {
    auto [it, inserted] = index.try_emplace(Key{t.cpu_milli, t.num_gpu, t.gpu_milli, t.kind_mask}, counts.size());
    if (inserted) counts.push_back({t, 0});
    ++counts[it->second].second;
  }
  std::stable_sort(counts.begin(), counts.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  TaskShapeDistribution d;
  const double need = coverage * static_cast<double>(tasks.size());
  int64_t covered = 0;
  for (const auto& [shape, count] : counts) {
    d.shapes.push_back(shape);
    d.prob.push_back(static_cast<double>(count));
    covered += count;
    if (static_cast<double>(covered) >= need) break;
  }
  for (double& p : d.prob) p /= static_cast<double>(covered);
  return d;
}

TaskShapeDistribution TaskShapeDistribution::FromRequests(const std::vector<Request>& requests, double coverage) {
  std::vector<TaskShape> shapes;
  shapes.reserve(requests.size());
  for (const Request& r : requests) shapes.push_back(ShapeOf(r));
  TaskShapeDistribution d = Typical(shapes, coverage);
  std::vector<std::vector<int64_t>> mem(d.shapes.size());
  for (size_t j = 0; j < requests.size(); ++j) {
    auto it = std::find(d.shapes.begin(), d.shapes.end(), shapes[j]);
    if (it != d.shapes.end()) mem[static_cast<size_t>(it - d.shapes.begin())].push_back(requests[j].host_memory_mib);
  }
  for (auto& v : mem) {
    std::sort(v.begin(), v.end());
    d.memory_mib.push_back(v.empty() ? 0 : v[v.size() / 2]);
  }
  return d;
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

ClassEngine::ClassEngine(TaskShapeDistribution dist, uint64_t seed) : dist_(std::move(dist)), seed_(seed) {}

void ClassEngine::EnsureOrder(int n) const {
  if (static_cast<int>(order_.size()) == n) return;
  order_ = SeededPermutation(n, seed_);
  entries_.assign(static_cast<size_t>(n), NodeEntry{});
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
      c.score = scorer.Score(c, d, dist_, &mask);
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
    for (int i = 0; i < ns.gpu_count && static_cast<int>(tp.gpus.size()) < t.num_gpu; ++i) {
      if (!s.gpu(ns.first_gpu + i).WholeFree()) continue;
      GpuGrant g;
      g.gpu = ns.first_gpu + i;
      g.milli = kMilliPerGpu;
      tp.gpus.push_back(g);
    }
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
               const TaskShapeDistribution& dist, uint16_t* best_values) const override {
    const TaskShape& t = d.shape;
    if (!t.Sharing()) return FgdScore(c.frag, fgd_internal::FragAfter(c, d, 0, dist));
    int best = -1;
    uint16_t mask = 0;
    for (size_t i = 0; i < c.distinct_free.size() && i < 16; ++i) {
      const int v = c.distinct_free[i];
      if (v < t.gpu_milli) continue;
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

FgdPolicy::FgdPolicy(TaskShapeDistribution dist, uint64_t seed) : engine_(std::move(dist), seed) {}

PlaceResult FgdPolicy::Place(const ClusterState& snapshot, const Request& request) const {
  const FgdScorer scorer;
  return engine_.Place(snapshot, request, scorer, name());
}

}  // namespace tessera
