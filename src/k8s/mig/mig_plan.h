#pragma once
// Which MIG nodes to repartition, and to which config of the MIG manager's ConfigMap, for the GPU pods that
// no node can hold as the nodes are partitioned now (kubernetes-contracts.md section 4.3). Pure functions:
// objects and configs in, a plan out.
//
// The rule: waiting pods (highest priority first) take the free devices of schedulable nodes first, then
// what nodes being repartitioned will offer; for the pods left, each MIG-capable node (strategy mixed) not
// being repartitioned is scored against each config: how many of them it would hold (first fit), then
// what its drain costs (memory slices of the GPU pods there that may not be preempted and must be waited
// for, then how many are evicted: those of lower priority than the pods it is for), then the config's
// order in the ConfigMap. The best (node, config) is taken, its pods leave the list, and so on while pods
// are left and a pair holds any. A (node, config) that failed recently is not tried again.
//
// Every config of the ConfigMap is a candidate, per-GPU ones included (`devices: [0, 1]`, `device-filter`):
// what it gives a node is its layout GPU by GPU (mig_node_layout.h MigPartedLayouts) on the node's GPU
// kind, checked against NVIDIA's placement rules; a config that cannot be laid out exactly on a node (no
// spec for some GPU, a profile the kind lacks, an impossible layout) is not a target there. On a node whose
// GPU kind Tessera does not know, only configs of one `devices: all` spec without a device-filter are, as
// their counts say.

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "k8s/mig/mig_config.h"
#include "k8s/mig/mig_node_layout.h"
#include "model/catalog.h"

namespace tessera {

inline constexpr std::string_view kMigConfigLabel = "nvidia.com/mig.config";
inline constexpr std::string_view kMigStateLabel = "nvidia.com/mig.config.state";

// Device resources (nvidia.com/gpu, nvidia.com/mig-<profile>) -> whole units.
using Devices = std::map<std::string, int64_t>;

struct GpuPod {
  std::string ns, name, uid;
  int priority = 0;
  bool terminating = false;  // deletionTimestamp set
  Devices requests;
  std::string scheduler;           // spec.schedulerName
  bool disruption_target = false;  // a DisruptionTarget=True condition (marked for eviction already)
};

// What a drain may do to the GPU pods of a node: never evict another scheduler's pod nor a pod at or above
// `protected_priority` (production), nor wait on one (when it ends is not ours to know): a node where such a
// pod runs is not drained at all. A pod of a job the loop runs goes as the loop's preemption rule says for
// the job the drain is for (`loop_rule`: sched/preemption.h MayPreempt, its queues' guarantees, minimum
// run time and `preemption: never` included); any other pod of ours (and every pod when the loop has no
// answer) goes when its priority is below the plan's. The pods that may not go are waited for.
struct DrainRules {
  std::string scheduler_name;          // ours; empty: every pod counts as ours
  int protected_priority = INT32_MAX;  // pods at or above it are never evicted
  // Whether the loop may preempt the job of `pod` for loop job `for_job` now; nullopt when the loop does not
  // run the pod's job or has no pending `for_job`.
  std::function<std::optional<bool>(const GpuPod& pod, int64_t for_job)> loop_rule;
};
// Whether a drain for pods of `priority` (the first of them loop job `for_job`; 0: none) may evict `p`.
bool Evictable(const GpuPod& p, int priority, const DrainRules& rules, int64_t for_job = 0);

struct MigNode {
  std::string name, uid;
  int gpus = 0;               // nvidia.com/gpu.count
  const GpuKind* kind = nullptr;  // the catalog's kind of nvidia.com/gpu.product (null: not known)
  bool capable = false;       // nvidia.com/mig.capable=true and nvidia.com/mig.strategy=mixed
  bool schedulable = true;    // not cordoned, Ready
  std::string config, state;  // nvidia.com/mig.config, nvidia.com/mig.config.state
  Devices allocatable;        // device resources only
  std::vector<GpuPod> pods;   // bound, unfinished pods that ask for devices
  Devices Free() const;       // allocatable less what `pods` request (never below 0)
};

// Why `node` may not be drained ("" when it may): an unfinished GPU pod there of another scheduler, or of
// production priority.
std::string DrainRefusal(const MigNode& node, const DrainRules& rules);

struct Repartition {
  std::string node, config;
  int priority = 0;                   // of the highest-priority pod it is for: GPU pods below it are evicted
  std::vector<std::string> for_pods;  // ns/name
  int64_t job = 0;                    // that pod's loop job (WaitingPod::job): the drain's preemptor
};

// The mig-parted config file (`version: v1`, `mig-configs`) as configs this planner can name in a node's
// label: every config that reads (mig_node_layout.h ReadMigPartedConfigs) whose name is a valid label value
// (the others are named in *skipped). Error when the text is not a mig-parted config.
Result<std::vector<MigPartedConfig>> ParseMigParted(const std::string& text,
                                                    std::vector<std::string>* skipped);

// What `node` advertises under the mixed strategy once `config` is applied (see the header); error when
// the config cannot be laid out exactly on it.
Result<Devices> DevicesOf(const MigPartedConfig& config, const MigNode& node);
// Whether the node's allocatable shows exactly the devices of `config` (zero counts may be absent); true
// when DevicesOf cannot tell (nothing to compare with, as for a config the ConfigMap no longer has).
bool Advertises(const MigNode& node, const MigPartedConfig& config);

// A node and the GPU pods bound there (`pods`: every pod; those of other nodes are ignored); its GPU kind
// from `catalog` when given.
MigNode ReadMigNode(const nlohmann::json& node, const std::vector<const nlohmann::json*>& pods,
                    const Catalog* catalog = nullptr);
// A pod's device requests (empty when it asks none or does not parse).
Devices DeviceRequests(const nlohmann::json& pod);

struct WaitingPod {
  std::string ns, name;
  int priority = 0;
  Devices requests;
  int64_t job = 0;  // the loop's job it is a task of (0: a pod the loop does not hold)
};

// `busy`: node -> the config it is being repartitioned to (its devices count as coming);
// `failed`: (node, config) pairs not to try. Nodes DrainRefusal refuses are not candidates; *refused (when
// given) gets node -> why, for each such node that was otherwise one.
std::vector<Repartition> PlanRepartitions(std::vector<WaitingPod> waiting, const std::vector<MigNode>& nodes,
                                          const std::vector<MigPartedConfig>& configs,
                                          const std::map<std::string, std::string>& busy,
                                          const std::set<std::pair<std::string, std::string>>& failed,
                                          const DrainRules& rules = {},
                                          std::map<std::string, std::string>* refused = nullptr);

}  // namespace tessera
