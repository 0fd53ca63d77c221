#include "sim/bound.h"

#include <algorithm>
#include <set>

namespace tessera {
namespace {

// One job's column of the linear programme: compute a, memory b (per second of work) and its work cap.
struct Item {
  double a = 0, b = 0, cap_s = 0;
};

// Whether some GPU of the cluster that the job may use holds its memory need.
bool Runnable(const TraceJob& j, const Catalog& catalog, const std::set<KindId>& kinds) {
  for (KindId k : kinds) {
    if (catalog.kind(k).memory_mib < j.memory_mib) continue;
    if (j.gpu_kinds.empty()) return true;
    for (const std::string& name : j.gpu_kinds)
      if (catalog.Find(name) == k) return true;
  }
  return false;
}

std::vector<Item> Items(const std::vector<TraceJob>& jobs, const Catalog& catalog,
                        const std::set<KindId>& kinds, const SimOptions& o, bool work_may_repeat) {
  std::vector<Item> items;
  for (const TraceJob& j : jobs) {
    const double gpus = static_cast<double>(j.tasks) * std::max(1, j.gpus_per_task);
    const double a = gpus * std::clamp(j.compute_milli, 0, 1000) / 1000.0;
    // Backlog streams have submit_s 0: every job may be visible from the start.
    const int64_t from = std::max(j.submit_s, o.warmup_s);
    if (a <= 0 || from >= o.horizon_s || !Runnable(j, catalog, kinds)) continue;
    double cap = static_cast<double>(o.horizon_s - from);
    if (!work_may_repeat && j.duration_s >= 0) cap = std::min(cap, static_cast<double>(j.duration_s));
    items.push_back({a, gpus * static_cast<double>(std::max<int64_t>(0, j.memory_mib)), cap});
  }
  return items;
}

}  // namespace

UtilizationBound BoundUtilization(const Cluster& cluster, const Catalog& catalog,
                                  const std::vector<TraceJob>& jobs, const SimOptions& o,
                                  bool work_may_repeat) {
  UtilizationBound out;
  double gpus = 0, memory_mib = 0;
  std::set<KindId> kinds;
  for (const Node& n : cluster.nodes) {
    if (n.kind == kNone || n.gpu_count <= 0) continue;
    gpus += n.gpu_count;
    memory_mib += static_cast<double>(n.gpu_count) * catalog.kind(n.kind).memory_mib;
    kinds.insert(n.kind);
  }
  if (gpus <= 0) return out;
  if (o.horizon_s <= 0 || o.horizon_s <= o.warmup_s) {
    out.gpu_utilization = 1.0;
    out.limit = "compute";
    return out;
  }
  const double window = static_cast<double>(o.horizon_s - o.warmup_s);
  const double compute_cap = gpus * window, memory_cap = memory_mib * window;
  std::vector<Item> items = Items(jobs, catalog, kinds, o, work_may_repeat);
  // Fractional knapsack on memory: most compute per MiB first (no memory first); exact for one constraint.
  std::sort(items.begin(), items.end(), [](const Item& x, const Item& y) { return x.a * y.b > y.a * x.b; });
  const double eps = 1e-12 * memory_cap;
  double value = 0, memory_left = memory_cap, offered = 0;
  for (const Item& it : items) offered += it.a * it.cap_s;
  for (const Item& it : items) {
    if (memory_left <= eps || value >= compute_cap) break;
    const double x = it.b > 0 ? std::min(it.cap_s, memory_left / it.b) : it.cap_s;
    value += it.a * x;
    memory_left -= it.b * x;
  }
  // The compute row: scaling the knapsack's solution down to G W keeps it feasible, so min() is the optimum.
  out.offered_compute = offered / compute_cap;
  out.gpu_utilization = std::min(value, compute_cap) / compute_cap;
  out.limit = value >= compute_cap ? "compute" : memory_left <= eps ? "memory" : "work";
  return out;
}

}  // namespace tessera
