#include "cli/synthetic.h"

#include <fmt/format.h>

namespace tessera::cli {

Cluster SyntheticHgxCluster(const Catalog& catalog, int nodes, int gpus_per_node, const std::string& kind,
                            const std::string& name) {
  Cluster c;
  c.name = name;
  const int per_leaf = 32;
  for (int n = 0; n < nodes; ++n) {
    Node node;
    node.name = fmt::format("n{:05d}", n);
    node.kind = catalog.Find(kind);
    node.gpu_count = gpus_per_node;
    node.cpu_milli = 192000;
    node.memory_mib = 2048 * 1024;
    node.interconnect = Interconnect::kNvSwitch;
    node.leaf = n / per_leaf;
    node.spine = n / (per_leaf * 8);
    c.nodes.push_back(node);
  }
  for (int l = 0; l <= (nodes - 1) / per_leaf; ++l) c.leaf_names.push_back(fmt::format("leaf-{}", l));
  for (int s = 0; s <= (nodes - 1) / (per_leaf * 8); ++s) c.spine_names.push_back(fmt::format("spine-{}", s));
  return c;
}

}  // namespace tessera::cli
