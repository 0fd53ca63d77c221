#pragma once
// MIG repartitioning through the GPU Operator's MIG manager (kubernetes-contracts.md section 4.3), driven
// by the scheduler's passes. The scheduler plans for what its loop leaves waiting: the jobs with a MIG
// profile that its last cycle could not place and holds for capacity (cluster_room.h MigWaitingOf: not a job
// that its queue's limit or a hold keeps waiting whatever the capacity). For the repartitions mig_plan.h
// picks, one node at a time each:
//  1. cordon (spec.unschedulable=true, and the annotation tessera.io/mig-repartition naming the target and
//     the previous config, so that a restart finds it; the scheduler also keeps it cordoned in its own
//     cluster);
//  2. drain: the GPU pods there that may go for the pods the repartition is for are preempted: as the loop's
//     preemption rule says for a pod of its jobs (its priorities, queues' guarantees, minimum run time;
//     mig_plan.h DrainRules), else those of lower priority.
//     A pod of a job the loop runs is preempted by the loop (the `preempt` hook: its backend marks and
//     evicts it, and the job goes back to the queue); any other pod of ours is marked DisruptionTarget and
//     evicted here, through the Eviction API (a 429 from a PodDisruptionBudget is retried on the next
//     pass). Pods of another scheduler and pods at or above the protected priority (production) are never
//     evicted nor waited on (mig_plan.h DrainRules: a node where one runs is not planned at all); the others
//     are waited for. A drain not done within drain_timeout_s is abandoned and reported (a Warning
//     Event MigRepartitionAbandoned about the Node and the pods it was for, and a log line): the node is
//     uncordoned as it is and the pair (node, config) is not tried again for retry_after_s;
//  3. once no GPU pod is left, set nvidia.com/mig.config to the chosen config of the ConfigMap;
//  4. wait for nvidia.com/mig.config.state=success and for allocatable to show the config's devices, then
//     uncordon (the annotation removed): the scheduler then reads the node's new layout and the loop places
//     the waiting pods there.
// A `failed` state (after `pending` was seen, or still `failed` 10 s after the change) or no success within
// the timeout is reported as a Warning Event about the Node (reason MigReconfigureFailed) and about the
// waiting pods, the pair (node, config) is not tried again for 10 minutes, and the label goes back to the
// node's previous config (the MIG manager finds it applied) before the node is uncordoned; the next pass
// plans around the failure (another config or another node).
// After a restart, a node carrying the annotation is resumed from its labels: nvidia.com/mig.config at the
// target means the change was made (wait for success, then uncordon); at the previous config, the drain goes
// on (its deadline counted from the restart); a revert in progress is waited out; any other config means
// someone else changed it: the node is left as its labels say and uncordoned.
//
// Thread safety: Step and Holds are called from the scheduler's loop thread only.

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "k8s/api/api_client.h"
#include "k8s/api/object_map.h"
#include "k8s/mig/mig_plan.h"

namespace tessera {

inline constexpr std::string_view kRepartitionAnnotation = "tessera.io/mig-repartition";

struct MigRepartitionOptions {
  std::string config_map;  // NS/NAME of the MIG manager's ConfigMap (key config.yaml)
  std::string scheduler_name = "tessera";
  int64_t apply_timeout_s = 300;
  int64_t drain_timeout_s = 300;    // a drain not done by then is abandoned (the node uncordoned as it is)
  int64_t retry_after_s = 600;      // a (node, config) that failed is not tried again before this
  int protected_priority = 100000;  // pods at or above it (production) are never evicted by a drain
  const Catalog* catalog = nullptr;  // nodes' GPU kinds, for per-GPU configs (mig_plan.h); null: unknown
  // The loop's preemption rule for the pods of its jobs (DrainRules::loop_rule); null: priorities only.
  std::function<std::optional<bool>(const GpuPod& pod, int64_t for_job)> loop_rule;
};

// The loop preempts the pod's job for `why` (its backend marks and evicts the pod, the job goes back to the
// queue): true when the pod is a running job's of the loop (or its stop is under way); false when the loop
// does not hold it (the repartitioner then evicts it itself).
using PreemptPodFn = std::function<bool(const GpuPod& pod, const std::string& node, const std::string& why)>;
// What the plan is made for: the pods (or jobs, by the pods they will be) that wait for a MIG slice, in the
// order they should get one (mig_plan.h PlanRepartitions takes the highest priority first, then this order).
using MigWaitingFn = std::function<std::vector<WaitingPod>()>;

class MigRepartitioner {
 public:
  // `waiting` (when given) says what to plan for; without it, every pod of ours that waits with device
  // requests, as the informer shows it.
  MigRepartitioner(const ApiClient* api, MigRepartitionOptions options,
                   std::function<void(const std::string&)> log, PreemptPodFn preempt = nullptr,
                   MigWaitingFn waiting = nullptr);

  // One pass at `now_s` (seconds; any monotonic origin) over the informers' nodes and pods.
  void Step(const ObjectMap& nodes, const ObjectMap& pods, int64_t now_s);
  // Whether `node` is being repartitioned (it must stay cordoned).
  bool Holds(const std::string& node) const { return ops_.count(node) > 0; }
  // The config `node` is being repartitioned to ("" when none).
  std::string Target(const std::string& node) const;

 private:
  enum class Phase { kDrain, kApply, kRevert };
  struct Op {
    std::string config, previous;
    int priority = 0;
    int64_t job = 0;  // the loop's job it is for first (Repartition::job): the drain's preemptor
    Phase phase = Phase::kDrain;
    int64_t started_at = 0;  // when the drain began (or was resumed)
    int64_t changed_at = 0;  // when the label was set
    bool seen_pending = false;
    bool abandoned = false;             // its drain ran out of time: only the uncordon is left
    std::vector<std::string> for_pods;  // ns/name
  };
  void LoadConfigs(int64_t now_s);
  // A node annotated by an earlier run with no repartition here: resumed or left as its labels say.
  void Resume(const nlohmann::json& node, const MigNode& state, int64_t now_s);
  // Advances one repartition; returns false when it is over.
  bool Advance(const MigNode& node, Op* op, int64_t now_s);
  bool Drain(const MigNode& node, Op* op, int64_t now_s);
  // Evicts one pod of ours that the loop does not hold: DisruptionTarget first, then the Eviction.
  void Evict(const MigNode& node, const GpuPod& p, const std::string& why);
  bool Finish(const MigNode& node, Op* op, int64_t now_s);
  void Failed(const MigNode& node, Op* op, const std::string& why, int64_t now_s);
  void Plan(const std::vector<MigNode>& nodes, const ObjectMap& pods, int64_t now_s);
  std::vector<WaitingPod> WaitingPods(const ObjectMap& pods) const;  // the informer's (no `waiting`)
  const MigPartedConfig* ConfigNamed(const std::string& name) const;
  DrainRules Rules() const {
    return {options_.scheduler_name, options_.protected_priority, options_.loop_rule};
  }
  bool SetLabel(const std::string& node, const std::string& config);
  // Cordons (with the annotation naming `op`) or uncordons (the annotation removed) the node.
  bool SetCordon(const std::string& node, bool cordoned, const Op* op = nullptr);
  void Event(const nlohmann::json& regarding, const std::string& reason, const std::string& message);
  void Log(const std::string& s) const;

  const ApiClient* api_;
  MigRepartitionOptions options_;
  std::function<void(const std::string&)> log_;
  PreemptPodFn preempt_;
  MigWaitingFn waiting_;
  std::vector<MigPartedConfig> configs_;
  int64_t configs_at_ = INT64_MIN / 2;  // long ago (now_s - configs_at_ must not overflow)
  std::string configs_error_;
  size_t configs_count_ = SIZE_MAX;
  std::map<std::string, Op> ops_;  // by node
  bool resumed_ = false;           // annotated nodes were looked at (the first pass)
  std::map<std::pair<std::string, std::string>, int64_t> failed_;  // (node, config) -> when
  std::map<std::string, std::string> refused_;                     // node -> why no drain there (as logged)
};

}  // namespace tessera
