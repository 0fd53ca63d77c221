#pragma once
// Helpers shared by sched tests: small clusters built in code.
#include <string>

#include "model/catalog.h"
#include "model/cluster.h"
#include "sched/request.h"

namespace tessera::testing {

// `nodes` nodes of `gpus` GPUs of `kind`, `per_leaf` nodes per leaf switch, 4 leaves per spine group.
inline Cluster MakeCluster(int nodes, int gpus, const std::string& kind, int per_leaf = 4,
                           Interconnect ic = Interconnect::kNvSwitch) {
  const Catalog& cat = Catalog::Default();
  Cluster c;
  c.name = "test";
  for (int n = 0; n < nodes; ++n) {
    Node node;
    node.name = "n" + std::to_string(n);
    node.kind = cat.Find(kind);
    node.gpu_count = gpus;
    node.cpu_milli = 128000;
    node.memory_mib = 1024 * 1024;
    node.interconnect = ic;
    node.leaf = n / per_leaf;
    node.spine = n / (per_leaf * 4);
    c.nodes.push_back(node);
  }
  for (int l = 0; l <= (nodes - 1) / per_leaf; ++l) c.leaf_names.push_back("leaf-" + std::to_string(l));
  for (int s = 0; s <= (nodes - 1) / (per_leaf * 4); ++s) c.spine_names.push_back("spine-" + std::to_string(s));
  return c;
}

// One inference replica of a sub-GPU share: `milli` thousandths of a GPU, `mib` of GPU memory.
inline Request Replica(JobId id, int milli, int64_t mib, bool sensitive = false) {
  Request r;
  r.id = id;
  r.cls = WorkloadClass::kInference;
  r.gpus_per_task = 0;
  r.gpu_milli = milli;
  r.gpu_memory_mib = mib;
  r.cpu_milli = 1000;
  r.host_memory_mib = 1024;
  r.latency_sensitive = sensitive;
  return r;
}

}  // namespace tessera::testing
