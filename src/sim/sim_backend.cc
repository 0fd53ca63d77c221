#include "sim/sim_backend.h"

#include <algorithm>
#include <cmath>

#include "base/random.h"
#include "control/loop.h"
#include "sim/simulator.h"

namespace tessera {

double HashUniform(uint64_t a, uint64_t b, uint64_t seed) {
  return UnitInterval(SplitMix64Mix(a * 0xd1b54a32d192ed03ULL + b * 0x8cb92ba72f3d8dd7ULL + kSplitMix64Gamma * (seed + 1)));
}

double DemandFactor(JobSlot j, int64_t epoch, double sigma, uint64_t seed) {
  if (!(sigma > 0)) return 1.0;
  const uint64_t id = static_cast<uint64_t>(j.value()), e = static_cast<uint64_t>(epoch);
  const double u1 = std::max(1e-12, HashUniform(id, 2 * e, seed ^ 0x5eedULL));
  const double u2 = HashUniform(id, 2 * e + 1, seed ^ 0x5eedULL);
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  return std::exp(sigma * z - 0.5 * sigma * sigma);
}

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
  SampleUntil(now);
  for (const TaskPlacement& t : spec.tasks)
    for (const GpuGrant& g : t.gpus)
      if (g.shared || (g.mig_profile < 0 && g.milli < kMilliPerGpu))  // a shared instance, or a share of a GPU
        units_[{g.gpu, g.mig_profile >= 0 ? g.mig_start : -1}].push_back(
            {spec.slot, spec.run, job != nullptr ? static_cast<double>(job->compute_milli) : g.milli,
             job != nullptr ? job->latency_sensitive : g.latency_sensitive});
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

void SimulatedCluster::Stop(JobSlot slot, uint32_t run, int64_t, std::string_view, int64_t now) {
  SampleUntil(now);
  Leave(slot, run);
}

void SimulatedCluster::Leave(JobSlot slot, uint32_t run) {
  for (auto it = units_.begin(); it != units_.end();) {
    std::vector<Member>& m = it->second;
    m.erase(std::remove_if(m.begin(), m.end(), [&](const Member& x) { return x.slot == slot && x.run == run; }),
            m.end());
    it = m.empty() ? units_.erase(it) : std::next(it);
  }
}

void SimulatedCluster::SampleUntil(int64_t t) {
  const int64_t ep = std::max<int64_t>(1, opt_.demand_epoch_s);
  for (int64_t e = sampled_until_ / ep; (e + 1) * ep <= t; ++e) {
    sampled_until_ = (e + 1) * ep;
    for (const auto& [key, members] : units_) {
      if (members.size() < 2) continue;
      double declared = 0, real = 0;
      bool sensitive = false;
      for (const Member& m : members) {
        declared += m.declared;
        real += m.declared * DemandFactor(m.slot, e, opt_.demand_sigma, opt_.demand_seed);
        sensitive |= m.sensitive;
      }
      if (declared <= 0) continue;
      BackendEvent s{BackendEventKind::kDemand, kNoSlot, 0, sampled_until_, key.first, ""};
      s.demand_ratio = real / declared;
      s.sensitive = sensitive;
      samples_.push_back(std::move(s));
    }
  }
}

std::vector<BackendEvent> SimulatedCluster::Poll(int64_t now) {
  std::vector<BackendEvent> out;
  while (!events_.empty() && events_.top().time_s <= now) {
    const Event e = events_.Pop();
    SampleUntil(e.time_s);
    Leave(e.job, e.epoch);  // ended or interrupted: it leaves its units (a stale event finds it gone)
    const BackendEventKind k =
        e.type == EventType::kCompletion ? BackendEventKind::kEnded : BackendEventKind::kInterrupted;
    out.push_back({k, e.job, e.epoch, e.time_s, kNone, ""});
  }
  SampleUntil(now);
  out.insert(out.end(), std::make_move_iterator(samples_.begin()), std::make_move_iterator(samples_.end()));
  samples_.clear();
  return out;
}

}  // namespace tessera
