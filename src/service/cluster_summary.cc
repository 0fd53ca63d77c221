#include "service/cluster_summary.h"

namespace tessera {
namespace {

GpuSummary SummariseGpu(const ClusterState& cs, GpuId g, int index) {
  const GpuState& gs = cs.gpu(g);
  const GpuKind& kind = cs.kind_of_gpu(g);
  GpuSummary out;
  out.index = index;
  out.mig_enabled = gs.mig_enabled;
  out.tasks = cs.TasksOf(g);
  out.allocated_milli = cs.AllocatedMilliOf(g);
  for (int k = 0; gs.mig_enabled && k < gs.n_instances; ++k) {
    const MigSlot& m = gs.instances[k];
    out.instances.push_back(
        {kind.profiles[m.profile].name, m.start, m.busy && !cs.InstanceHeldByCordon(g, m.start)});
  }
  return out;
}

}  // namespace

std::shared_ptr<const ClusterSummary> SummariseCluster(const ClusterState& cs,
                                                       const std::vector<std::string>& node_states) {
  auto out = std::make_shared<ClusterSummary>();
  const Cluster& cl = cs.cluster();  // the live cluster: nodes come and go
  out->name = cl.name;
  for (NodeId n = 0; n < cs.num_nodes(); ++n) {
    if (cs.node_removed(n)) continue;
    const NodeState& ns = cs.node(n);
    const Node& node = cl.nodes[n];
    NodeSummary s;
    s.id = n;
    s.name = node.name;
    s.state = n < static_cast<NodeId>(node_states.size()) ? node_states[n]
              : cs.node_cordoned(n)                       ? "cordoned"
                                                          : "ready";
    s.gpu_kind = ns.gpu_count > 0 ? cs.kind_of_gpu(ns.first_gpu).id : "";
    s.leaf =
        node.leaf >= 0 && node.leaf < static_cast<int>(cl.leaf_names.size()) ? cl.leaf_names[node.leaf] : "";
    s.tier = node.tier;
    for (int i = 0; i < ns.gpu_count; ++i) {
      s.gpus.push_back(SummariseGpu(cs, ns.first_gpu + i, i));
      s.allocated_milli += s.gpus.back().allocated_milli;
      out->busy_gpus += s.gpus.back().tasks > 0;
    }
    out->gpus += ns.gpu_count;
    out->allocated_milli += s.allocated_milli;
    out->nodes.push_back(std::move(s));
  }
  return out;
}

}  // namespace tessera
