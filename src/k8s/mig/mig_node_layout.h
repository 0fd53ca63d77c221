#pragma once
// A MIG node's layout, GPU by GPU, as Tessera models it from the name in its nvidia.com/mig.config label
// (kubernetes-contracts.md section 4.3, hardware-facts.md section 2.1), resolved in this order:
//  1. a config of the GPU Operator's mig-parted ConfigMaps (--mig-config-map, then the one its ClusterPolicy
//     names), with every device spec: `devices: all` or GPU indices, `device-filter` by PCI device ID;
//  2. one of Tessera's names (all-disabled, all-enabled, all-balanced, all-<profile>,
//  tessera-<n>x<profile>-...);
//  3. a node that neither describes exactly (a name in no ConfigMap, a config with a GPU no spec matches, a
//     device-filter Tessera cannot match, compute-instance forms) is modelled from what GPU Feature Discovery
//     and the device plugin advertise: allocatable nvidia.com/mig-<profile> (else the labels
//     nvidia.com/mig-<profile>.count) laid out over its GPUs as a fixed layout, with a note saying why.
// Every layout is checked against NVIDIA's placement rules (model/mig.h); a node none of these can lay out is
// an error naming the node, its config and the reason. Pure functions: objects and text in, values out.

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "k8s/api/objects.h"
#include "k8s/mig/mig_config.h"
#include "model/catalog.h"
#include "model/mig.h"

namespace tessera {

// One device spec of a mig-parted config.
struct MigPartedSpec {
  std::vector<std::string> device_filter;  // PCI device IDs as written (0xDDDD10DE); empty = every GPU model
  bool all_devices = false;                // `devices: all`
  std::vector<int> devices;                // else these GPU indices
  bool enabled = false;                    // mig-enabled
  MigCounts counts;                        // mig-devices: profile -> instances per GPU
};

struct MigPartedConfig {
  std::string name;
  std::vector<MigPartedSpec> specs;
};

// Every config of a mig-parted file (`version: v1`, `mig-configs`) with all its specs; a config that does
// not read is left out and named in *skipped ("mig-configs.NAME: why"). Error when the text is no such file.
Result<std::vector<MigPartedConfig>> ReadMigPartedConfigs(const std::string& text,
                                                          std::vector<std::string>* skipped);

// The configs of one ConfigMap, in the order the resolution searches them.
struct MigConfigSource {
  std::string config_map;  // NS/NAME
  std::vector<MigPartedConfig> configs;
};

// mig-parted's device IDs (0xDDDD10DE, upper case) of the GPUs of a catalog kind (hardware-facts.md
// section 1.2); empty when Tessera knows none.
std::vector<std::string> MigPartedDeviceIds(std::string_view kind_id);

// `config` on a node of `gpus` GPUs of `kind`: each GPU takes the spec that matches it (its index, and a
// device-filter naming one of the kind's device IDs), placed with Tessera's geometry. Error when no spec or
// two different specs match a GPU, a filter names only IDs Tessera cannot tell apart from this kind's,
// a profile is not the kind's (or is a compute-instance form such as 1c.3g.40gb), or the counts cannot be
// placed on one GPU.
Result<std::vector<GpuMigLayout>> MigPartedLayouts(const MigPartedConfig& config, const GpuKind& kind,
                                                   int gpus);

// What the node advertises, laid out on its n.gpu_count GPUs: allocatable nvidia.com/mig-<profile> when it
// has any (else GFD's nvidia.com/mig-<profile>.count labels); as many GPUs as allocatable nvidia.com/gpu
// have MIG disabled (the mixed strategy). The same layout on every MIG GPU when the counts divide evenly,
// else each profile's instances spread round the GPUs, largest profiles first. Error when nothing is
// advertised or the instances cannot be placed.
Result<std::vector<GpuMigLayout>> GfdMigLayouts(const NodeModel& n, const GpuKind& kind);

struct NodeMigLayout {
  std::vector<GpuMigLayout> gpus;  // one per GPU
  std::string source;  // where it came from, e.g. "ConfigMap gpu-operator/default-mig-parted-config"
  std::string note;    // why the node was modelled from GFD instead of its config ("" when not)
};

// The layout of node `n` (of `kind`, n.mig_config set), resolved as the header says.
Result<NodeMigLayout> ResolveNodeMigLayout(const NodeModel& n, const GpuKind& kind,
                                           const std::vector<MigConfigSource>& sources);

}  // namespace tessera
