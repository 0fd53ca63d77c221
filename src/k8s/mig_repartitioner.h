#pragma once
// MIG repartitioning through the GPU Operator's MIG manager (kubernetes-contracts.md section 4.3), driven
// by the scheduler's passes. For the repartitions mig_plan.h picks, one node at a time each:
//  1. cordon (spec.unschedulable=true; the scheduler also keeps it cordoned in its own cluster);
//  2. drain: evict, through the Eviction API, the GPU pods there of lower priority than the pods the
//     repartition is for (a 429 from a PodDisruptionBudget is retried on the next pass), and wait for the
//     others to finish;
//  3. once no GPU pod is left, set nvidia.com/mig.config to the chosen config of the ConfigMap;
//  4. wait for nvidia.com/mig.config.state=success and for allocatable to show the config's devices, then
//     uncordon: the scheduler then reads the node's new layout and the loop places the waiting pods there.
// A `failed` state (after `pending` was seen, or still `failed` 10 s after the change) or no success within
// the timeout is reported as a Warning Event about the Node (reason MigReconfigureFailed) and about the
// waiting pods, the pair (node, config) is not tried again for 10 minutes, and the label goes back to the
// node's previous config (the MIG manager finds it applied) before the node is uncordoned; the next pass
// plans around the failure (another config or another node).
//
// Thread safety: Step and Holds are called from the scheduler's loop thread only.

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "k8s/api_client.h"
#include "k8s/mig_plan.h"

namespace tessera {

struct MigRepartitionOptions {
  std::string config_map;     // NS/NAME of the MIG manager's ConfigMap (key config.yaml)
  std::string scheduler_name = "tessera";
  int64_t apply_timeout_s = 300;
  int64_t retry_after_s = 600;  // a (node, config) that failed is not tried again before this
};

class MigRepartitioner {
 public:
  MigRepartitioner(const ApiClient* api, MigRepartitionOptions options, std::function<void(const std::string&)> log);

  // One pass at `now_s` (seconds; any monotonic origin) over the informers' nodes and pods.
  void Step(const std::map<std::string, nlohmann::json>& nodes, const std::map<std::string, nlohmann::json>& pods,
            int64_t now_s);
  // Whether `node` is being repartitioned (it must stay cordoned).
  bool Holds(const std::string& node) const { return ops_.count(node) > 0; }
  // The config `node` is being repartitioned to ("" when none).
  std::string Target(const std::string& node) const;

 private:
  enum class Phase { kDrain, kApply, kRevert };
  struct Op {
    std::string config, previous;
    int priority = 0;
    Phase phase = Phase::kDrain;
    int64_t changed_at = 0;  // when the label was set
    bool seen_pending = false;
    std::vector<std::string> for_pods;  // ns/name
  };
  void LoadConfigs(int64_t now_s);
  // Advances one repartition; returns false when it is over.
  bool Advance(const MigNode& node, Op* op, int64_t now_s);
  bool Drain(const MigNode& node, Op* op, int64_t now_s);
  bool Finish(const MigNode& node, Op* op, int64_t now_s);
  void Failed(const MigNode& node, Op* op, const std::string& why, int64_t now_s);
  void Plan(const std::vector<MigNode>& nodes, const std::map<std::string, nlohmann::json>& pods, int64_t now_s);
  const MigConfig* ConfigNamed(const std::string& name) const;
  bool SetLabel(const std::string& node, const std::string& config);
  bool SetCordon(const std::string& node, bool cordoned);
  void Event(const nlohmann::json& regarding, const std::string& reason, const std::string& message);
  void Log(const std::string& s) const;

  const ApiClient* api_;
  MigRepartitionOptions options_;
  std::function<void(const std::string&)> log_;
  std::vector<MigConfig> configs_;
  int64_t configs_at_ = INT64_MIN / 2;  // long ago (now_s - configs_at_ must not overflow)
  std::string configs_error_;
  size_t configs_count_ = SIZE_MAX;
  std::map<std::string, Op> ops_;                                   // by node
  std::map<std::pair<std::string, std::string>, int64_t> failed_;  // (node, config) -> when
};

}  // namespace tessera
