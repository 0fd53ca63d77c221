#include "sim/sim_backend.h"

#include <algorithm>
#include <cmath>

#include "base/random.h"
#include "control/loop.h"
#include "sim/simulator.h"

namespace tessera {
namespace {

// A uniform draw in [0, 1) from (a, b, seed): splitmix64 of their mix. Deterministic, no shared state.
double HashUniform(uint64_t a, uint64_t b, uint64_t seed) {
  return UnitInterval(SplitMix64Mix(a * 0xd1b54a32d192ed03ULL + b * 0x8cb92ba72f3d8dd7ULL + kSplitMix64Gamma * (seed + 1)));
}

}  // namespace

Result<std::unique_ptr<SimulatedCluster>> SimulatedCluster::Make(const Cluster& cluster, const Catalog& catalog,
                                                                 std::function<const TraceJob*(JobSlot)> spec_of,
                                                                 PhysicsOptions options) {
  auto layout = ClusterState::Build(cluster, catalog);
  if (!layout.ok()) return layout.status();
  return std::unique_ptr<SimulatedCluster>(
      new SimulatedCluster(cluster, std::move(layout).value(), std::move(spec_of), options));
}

SimulatedCluster::SimulatedCluster(const Cluster& cluster, ClusterState layout,
                                   std::function<const TraceJob*(JobSlot)> spec_of, PhysicsOptions options)
    : cluster_(cluster), layout_(std::move(layout)), spec_of_(std::move(spec_of)), opt_(options) {}

double SimulatedCluster::EfficiencyOf(const TraceJob& s, const std::vector<TaskPlacement>& tasks) const {
  if (s.cls != WorkloadClass::kTraining || s.step_compute_s <= 0 || s.grad_bytes <= 0) return 1.0;
  GangLayout l;
  std::vector<std::pair<NodeId, int>> per_node;
  std::set<LeafId> leaves;
  std::set<SpineId> spines;
  l.gpus = 0;
  l.nic_gbps_per_gpu = 1e18;
  for (const TaskPlacement& t : tasks) {
    l.gpus += static_cast<int>(t.gpus.size());
    auto it = std::find_if(per_node.begin(), per_node.end(), [&](auto& p) { return p.first == t.node; });
    if (it == per_node.end()) per_node.push_back({t.node, static_cast<int>(t.gpus.size())});
    else it->second += static_cast<int>(t.gpus.size());
    leaves.insert(layout_.node(t.node).leaf);
    spines.insert(layout_.node(t.node).spine);
    l.nic_gbps_per_gpu = std::min(l.nic_gbps_per_gpu, cluster_.nodes[t.node].nic_gbps_per_gpu);
    l.interconnect = cluster_.nodes[t.node].interconnect;
  }
  for (auto& p : per_node) l.gpus_per_node.push_back(p.second);
  l.span = l.gpus <= 1 ? Span::kOneGpu
           : per_node.size() == 1 ? Span::kOneNode
           : leaves.size() == 1   ? Span::kOneLeaf
           : spines.size() == 1   ? Span::kOneSpine
                                  : Span::kCrossSpine;
  return ComputeStepTime(opt_.fabric, l, s.grad_bytes, s.step_compute_s).Efficiency();
}

int64_t SimulatedCluster::GrantMemory(const GpuGrant& g) const {
  const GpuKind& kind = layout_.kind_of_gpu(g.gpu);
  if (g.shared) return g.memory_mib;  // its part of a shared instance
  if (g.mig_profile >= 0) return kind.profiles[g.mig_profile].usable_mib;
  if (g.milli >= kMilliPerGpu) return kind.memory_mib;
  return g.memory_mib;
}

LaunchAck SimulatedCluster::Launch(const LaunchSpec& spec, int64_t now) {
  const TraceJob* job = spec_of_ ? spec_of_(spec.slot) : nullptr;
  if (job != nullptr) {
    for (const TaskPlacement& t : spec.tasks)
      for (const GpuGrant& g : t.gpus)
        if (GrantMemory(g) < job->memory_mib) oom_.insert(spec.slot);
  }
  if (oom_.count(spec.slot)) return {true, "out of memory: a grant holds less than the task's memory", 0};
  double efficiency = job != nullptr ? EfficiencyOf(*job, spec.tasks) : 1.0;
  if (opt_.hook) efficiency *= opt_.hook->OnRun(spec.slot, now);  // issue 5: periodic checkpoint overhead
  const int64_t end_s = RunEnd(now, spec.work_s, efficiency);
  if (end_s >= 0) events_.Push({end_s, EventType::kCompletion, spec.slot, spec.run, 0});
  int gpus = 0;
  for (const TaskPlacement& t : spec.tasks) gpus += static_cast<int>(t.gpus.size());
  if (opt_.gpu_mtbf_h > 0 && gpus > 0) {  // failure injection: exponential time to this run's first failure
    const double u = HashUniform(static_cast<uint64_t>(spec.slot.value()), spec.run, opt_.failure_seed);
    const double dt = -std::log1p(-u) * opt_.gpu_mtbf_h * 3600.0 / gpus;
    const int64_t at = now + std::max<int64_t>(1, static_cast<int64_t>(dt));
    if (end_s < 0 || at < end_s) events_.Push({at, EventType::kFailure, spec.slot, spec.run, 0});
  }
  return {false, "", efficiency};
}

std::vector<BackendEvent> SimulatedCluster::Poll(int64_t now) {
  std::vector<BackendEvent> out;
  while (!events_.empty() && events_.top().time_s <= now) {
    const Event e = events_.Pop();
    const BackendEventKind k =
        e.type == EventType::kCompletion ? BackendEventKind::kEnded : BackendEventKind::kInterrupted;
    out.push_back({k, e.job, e.epoch, e.time_s, kNone, ""});
  }
  return out;
}

}  // namespace tessera
