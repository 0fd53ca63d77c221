#include "sim/bound.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

namespace tessera {
namespace {

// One job's column of the linear programme: value a (compute used), c (GPU compute it holds) and b (memory
// it holds) per second of work, and its work cap.
struct Item {
  double a = 0, c = 0, b = 0, cap_s = 0;
};

// The smallest memory of the cluster's GPU kinds the job may use that holds its need per GPU (0: none).
int64_t SmallestFittingMib(const TraceJob& j, const Catalog& catalog, const std::set<KindId>& kinds) {
  int64_t best = 0;
  for (KindId k : kinds) {
    const int64_t mib = catalog.kind(k).memory_mib;
    if (mib < j.memory_mib) continue;
    bool allowed = j.gpu_kinds.empty();
    for (const std::string& name : j.gpu_kinds) allowed = allowed || catalog.Find(name) == k;
    if (allowed && (best == 0 || mib < best)) best = mib;
  }
  return best;
}

std::vector<Item> Items(const std::vector<TraceJob>& jobs, const Catalog& catalog,
                        const std::set<KindId>& kinds, const SimOptions& o, bool work_may_repeat) {
  std::vector<Item> items;
  for (const TraceJob& j : jobs) {
    const bool whole = j.gpus_per_task > 0;
    const double gpus = static_cast<double>(j.tasks) * std::max(1, j.gpus_per_task);
    const double a = gpus * std::clamp(j.compute_milli, 0, 1000) / 1000.0;
    const int64_t gpu_mib = SmallestFittingMib(j, catalog, kinds);
    // Backlog streams have submit_s 0: every job may be visible from the start.
    const int64_t from = std::max(j.submit_s, o.warmup_s);
    if (a <= 0 || from >= o.horizon_s || gpu_mib == 0) continue;
    double cap = static_cast<double>(o.horizon_s - from);
    if (!work_may_repeat && j.duration_s >= 0) cap = std::min(cap, static_cast<double>(j.duration_s));
    // A whole-GPU task holds its GPUs' compute and memory; a sub-GPU task at least its own need.
    const double c = whole ? gpus : a;
    const double b = gpus * static_cast<double>(whole ? gpu_mib : std::max<int64_t>(0, j.memory_mib));
    items.push_back({a, c, b, cap});
  }
  return items;
}

// The Lagrangian dual of the programme at memory price mu, minimised over the compute price:
//   g(mu) = min over lambda >= 0 of  lambda C + mu B + sum cap_j max(0, a_j - lambda c_j - mu b_j).
// Each term's kink lies at lambda_j = (a_j - mu b_j) / c_j; the minimum is at the first kink (highest
// first) where the caps' summed c_j reach C, or at 0 when they never do. `order` is scratch space.
double DualAt(const std::vector<Item>& items, double mu, double C, double B,
              std::vector<std::pair<double, int>>* order) {
  order->clear();
  for (int i = 0; i < static_cast<int>(items.size()); ++i) {
    const Item& it = items[i];
    const double net = it.a - mu * it.b;
    if (net > 0) order->emplace_back(net / it.c, i);
  }
  std::sort(order->begin(), order->end(), std::greater<>());
  double lambda = 0, held = 0;
  for (const auto& [ratio, i] : *order) {
    held += items[i].cap_s * items[i].c;
    if (held >= C) {
      lambda = ratio;
      break;
    }
  }
  double value = lambda * C + mu * B;
  for (const auto& [ratio, i] : *order)
    if (ratio > lambda) value += items[i].cap_s * (items[i].a - mu * items[i].b - lambda * items[i].c);
  return value;
}

// min over mu >= 0 of g(mu), g being convex (a partial minimum of a convex function): golden-section search
// on [0, max a_j / b_j] (beyond it every term is 0 and g grows). Any mu gives an upper bound (weak
// duality); the search only makes it tight.
double MinimiseDual(const std::vector<Item>& items, double C, double B) {
  std::vector<std::pair<double, int>> order;
  double hi = 0;
  for (const Item& it : items)
    if (it.b > 0) hi = std::max(hi, it.a / it.b);
  double best = DualAt(items, 0, C, B, &order);
  if (hi <= 0) return best;
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double lo = 0, x1 = hi - phi * hi, x2 = phi * hi;
  double f1 = DualAt(items, x1, C, B, &order), f2 = DualAt(items, x2, C, B, &order);
  for (int k = 0; k < 100 && hi - lo > 1e-15 * std::max(1.0, hi); ++k) {
    if (f1 <= f2) {
      hi = x2, x2 = x1, f2 = f1;
      x1 = hi - phi * (hi - lo);
      f1 = DualAt(items, x1, C, B, &order);
    } else {
      lo = x1, x1 = x2, f1 = f2;
      x2 = lo + phi * (hi - lo);
      f2 = DualAt(items, x2, C, B, &order);
    }
    best = std::min({best, f1, f2});
  }
  return best;
}

// The programme with one row only (a fractional knapsack by value per unit of that row), for `limit`.
double OneRow(std::vector<Item> items, double cap, bool memory_row) {
  auto weight = [&](const Item& it) { return memory_row ? it.b : it.c; };
  std::sort(items.begin(), items.end(),
            [&](const Item& x, const Item& y) { return x.a * weight(y) > y.a * weight(x); });
  double value = 0, left = cap;
  for (const Item& it : items) {
    if (left <= 0) break;
    const double x = weight(it) > 0 ? std::min(it.cap_s, left / weight(it)) : it.cap_s;
    value += it.a * x;
    left -= weight(it) * x;
  }
  return value;
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
  const std::vector<Item> items = Items(jobs, catalog, kinds, o, work_may_repeat);
  double offered = 0;
  for (const Item& it : items) offered += it.a * it.cap_s;
  const double value = std::min({MinimiseDual(items, compute_cap, memory_cap), offered, compute_cap});
  out.offered_compute = offered / compute_cap;
  out.gpu_utilization = value / compute_cap;
  const double tol = 1e-9 * compute_cap;
  out.limit = value >= offered - tol                             ? "work"
              : value >= OneRow(items, compute_cap, false) - tol ? "compute"
              : value >= OneRow(items, memory_cap, true) - tol   ? "memory"
                                                                 : "compute and memory";
  return out;
}

}  // namespace tessera
