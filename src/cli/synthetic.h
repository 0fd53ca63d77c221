#pragma once
// Synthetic clusters for the benchmarks: HGX-style nodes on NVSwitch, 32 nodes per leaf, 8 leaves per spine.
#include <string>

#include "model/catalog.h"
#include "model/cluster.h"

namespace tessera::cli {

Cluster SyntheticHgxCluster(const Catalog& catalog, int nodes, int gpus_per_node, const std::string& kind,
                            const std::string& name);

}  // namespace tessera::cli
