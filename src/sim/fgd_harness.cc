#include "sim/fgd_harness.h"

#include <fmt/format.h>

#include "sched/cluster_state.h"
#include "sched/policy.h"

namespace tessera {

int64_t RequestedGpuMilli(const Request& r) {
  if (r.gpus_per_task == 0) return r.gpu_milli;
  return static_cast<int64_t>(r.gpus_per_task) * kMilliPerGpu;
}

int64_t GpuCapacityMilli(const Cluster& cluster) {
  int64_t c = 0;
  for (const Node& n : cluster.nodes) c += static_cast<int64_t>(n.gpu_count) * kMilliPerGpu;
  return c;
}

uint64_t PolicySeed(uint64_t seed) { return SeededRng(seed ^ 0x6a09e667f3bcc909ULL).Next(); }

std::vector<Request> ShuffleAndInflate(const std::vector<Request>& pods, int64_t capacity_milli, double inflation,
                                       uint64_t seed, std::vector<int64_t>* rows) {
  std::vector<int64_t> from(pods.size());
  for (size_t i = 0; i < from.size(); ++i) from[i] = static_cast<int64_t>(i);
  SeededRng rng(seed);
  for (size_t i = from.size(); i > 1; --i) std::swap(from[i - 1], from[rng.Below(i)]);
  std::vector<Request> out;
  out.reserve(pods.size());
  for (int64_t j : from) out.push_back(pods[static_cast<size_t>(j)]);
  int64_t total = 0;
  for (const Request& r : out) total += RequestedGpuMilli(r);
  const double target = inflation * static_cast<double>(capacity_milli);
  bool any_gpu = false;
  for (const Request& r : pods) any_gpu = any_gpu || RequestedGpuMilli(r) > 0;
  while (any_gpu && static_cast<double>(total) < target) {
    const size_t j = rng.Below(pods.size());
    out.push_back(pods[j]);
    from.push_back(static_cast<int64_t>(j));
    total += RequestedGpuMilli(pods[j]);
  }
  for (size_t i = 0; i < out.size(); ++i) out[i].id = static_cast<JobId>(i);
  if (rows != nullptr) *rows = std::move(from);
  return out;
}

namespace {

// The cluster's fragmentation: per node and summed, kept current as pods land.
struct FragTracker {
  std::vector<double> node_frag;
  double total = 0;

  FragTracker(const ClusterState& state, const TaskShapeDistribution& dist)
      : node_frag(static_cast<size_t>(state.num_nodes())) {
    for (NodeId n = 0; n < state.num_nodes(); ++n) {
      node_frag[n] = NodeFragmentation(NodeResourcesOf(state, n), dist);
      total += node_frag[n];
    }
  }

  // Re-measures node n after a change on it.
  void Update(const ClusterState& state, NodeId n, const TaskShapeDistribution& dist) {
    const double f = NodeFragmentation(NodeResourcesOf(state, n), dist);
    total += f - node_frag[n];
    node_frag[n] = f;
  }
};

// Checks that `pr` (a placement of pod i, `r`) is one applicable task on a node whose GPU model `r` allows,
// and applies it to `state`: `decision` records where, `*allocated` grows by the milli granted.
Status ApplyPlacement(const Cluster& cluster, std::string_view policy, size_t i, const Request& r,
                      const PlaceResult& pr, ClusterState& state, PodDecision* decision, int64_t* allocated) {
  if (pr.tasks.size() != 1)
    return Status::Error(
        fmt::format("policy {} placed pod {} as {} tasks, not one", policy, i, pr.tasks.size()));
  if (Status st = state.CanApply(pr.tasks, r.cpu_milli, r.host_memory_mib); !st.ok())
    return Status::Error(
        fmt::format("policy {} returned an inapplicable placement for pod {}: {}", policy, i, st.message()));
  const NodeId placed_on = pr.tasks.front().node;
  if (RequestedGpuMilli(r) > 0 && !r.KindAllowed(state.node(placed_on).kind))
    return Status::Error(
        fmt::format("policy {} placed pod {} on node {}, whose GPU model the pod does not allow", policy, i,
                    cluster.nodes[placed_on].name));
  state.Apply(pr.tasks, r.cpu_milli, r.host_memory_mib, r.cls != WorkloadClass::kTraining);
  decision->placed = true;
  decision->node = placed_on;
  for (const GpuGrant& g : pr.tasks.front().gpus) {  // credited as granted, not as asked
    *allocated += g.milli;
    decision->gpus.emplace_back(g.gpu - state.node(placed_on).first_gpu, g.milli);
  }
  return Status::Ok();
}

// The curve after pod i: arrived and allocated GPU milli and fragmentation, against `capacity_milli` (> 0).
CurvePoint CurveAt(size_t i, int64_t arrived, int64_t allocated, double frag, int64_t capacity_milli) {
  const double cap = static_cast<double>(capacity_milli);
  CurvePoint p;
  p.pod_index = static_cast<int64_t>(i);
  p.arrived_pct = 100.0 * static_cast<double>(arrived) / cap;
  p.allocated_pct = 100.0 * static_cast<double>(allocated) / cap;
  p.frag_pct_of_capacity = 100.0 * frag / cap;
  const int64_t idle = capacity_milli - allocated;
  p.frag_pct_of_idle = idle > 0 ? 100.0 * frag / static_cast<double>(idle) : 0.0;
  return p;
}

}  // namespace

Result<FgdRunResult> RunFgdHarness(const Cluster& cluster, const Catalog& catalog, const std::vector<Request>& pods,
                                   const TaskShapeDistribution& dist, std::string_view policy, uint64_t seed,
                                   const FgdHarnessOptions& options) {
  PolicyOptions popt;
  popt.typical = dist;
  popt.tie_seed = PolicySeed(seed);
  Result<std::unique_ptr<Policy>> pol = MakePolicy(policy, popt);
  if (!pol.ok()) return pol.status();
  Result<ClusterState> built = ClusterState::Build(cluster, catalog);
  if (!built.ok()) return built.status();
  ClusterState& state = built.value();

  FgdRunResult res;
  res.policy = std::string(policy);
  res.seed = seed;
  res.capacity_milli = GpuCapacityMilli(cluster);
  if (res.capacity_milli <= 0) return Status::Error("the cluster has no GPUs");

  std::vector<int64_t> rows;
  const std::vector<Request> order = ShuffleAndInflate(pods, res.capacity_milli, options.inflation, seed, &rows);
  res.pods = static_cast<int64_t>(order.size());
  if (options.record_curve) res.curve.reserve(order.size());
  if (options.record_placements) res.decisions.reserve(order.size());

  FragTracker frag(state, dist);
  int64_t arrived = 0, allocated = 0;
  CurvePoint at100;
  bool have100 = false;
  for (size_t i = 0; i < order.size(); ++i) {
    const Request& r = order[i];
    arrived += RequestedGpuMilli(r);
    PlaceResult pr = (*pol)->Place(state, r);
    PodDecision decision;
    decision.pod_index = static_cast<int64_t>(i);
    decision.pod_row = rows[i];
    if (pr.ok) {
      if (Status st = ApplyPlacement(cluster, policy, i, r, pr, state, &decision, &allocated); !st.ok())
        return st;
      ++res.placed;
      frag.Update(state, pr.tasks.front().node, dist);
    } else {
      ++res.failed;
    }
    if (options.record_placements) res.decisions.push_back(std::move(decision));
    const CurvePoint p = CurveAt(i, arrived, allocated, frag.total, res.capacity_milli);
    if (!have100 && arrived >= res.capacity_milli) {
      at100 = p;
      have100 = true;
    }
    if (options.record_curve) res.curve.push_back(p);
    if (i + 1 == order.size() && !have100) at100 = p;
  }
  res.reached_100 = have100;
  res.unallocated_gpu_pct_at_100 = 100.0 - at100.allocated_pct;
  res.fragmentation_pct_at_100 = at100.frag_pct_of_capacity;
  res.frag_pct_of_idle_at_100 = at100.frag_pct_of_idle;
  return res;
}

}  // namespace tessera
