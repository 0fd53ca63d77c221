#pragma once
// The mig-parted configuration (`version: v1`, `mig-configs`) of every MIG layout Tessera may ask a node of
// one GPU kind for through the GPU Operator's MIG manager (kubernetes-contracts.md section 4.3): the GPU
// Operator's own names (all-disabled, all-enabled, all-balanced, all-<profile>) and one config per maximal
// layout (model/mig.h) named after its profile counts, e.g. tessera-1x3g.40gb-1x2g.20gb-2x1g.10gb. Every
// config applies one layout to all GPUs of the node (`devices: all`); every layout is placeable (each comes
// with explicit starts from Tessera's geometry). Installed as key config.yaml of the MIG manager's ConfigMap.

#include <map>
#include <string>
#include <vector>

#include "model/catalog.h"
#include "model/mig.h"

namespace tessera {

// Profile name -> instances per GPU; empty = MIG enabled without instances; nullopt-like "disabled" is the
// config all-disabled.
using MigCounts = std::map<std::string, int>;

struct MigConfig {
  std::string name;
  bool enabled = true;
  MigCounts counts;
};

// Every config for `kind`, the GPU Operator's names first. Error when the kind has no MIG.
Result<std::vector<MigConfig>> MigConfigsFor(const GpuKind& kind);
// The configs as mig-parted YAML.
std::string MigPartedYaml(const std::vector<MigConfig>& configs);

}  // namespace tessera
