#pragma once
// The kube-scheduler extender (k8s.io/kube-scheduler/extender/v1; kubernetes-contracts.md section 1), for
// clusters that keep kube-scheduler and ask Tessera: /filter (which nodes can hold the pod, each refusal
// with its reason and numbers), /prioritize (0..10 per node: fullest fitting node first, so whole nodes
// stay free for gangs), /preempt (per candidate node, the victims the scheduling cycle would take: see
// Preempt) and /bind. Requests are read as Go's encoding/json reads them (keys case-insensitive, unknown
// keys ignored); answers use the Go field names. Malformed input gets a 4xx with the reason, or a filter
// result whose Error is set: never a crash.
//
// Without a node cache (no --kubeconfig) the extender is nodeCacheCapable: false: it needs Nodes.items,
// and /bind answers an Error (kube-scheduler then binds itself).

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/catalog.h"

namespace tessera {

// One node as the loop sees a pod (Service::RankNodes through the scheduler's ExtenderRoom).
struct LoopFit {
  std::string node;
  bool fits = false;
  int rank = -1;       // the loop policy's order among the nodes that fit (0 = first); -1 = past its ranks
  std::string reason;  // why it does not fit
};

struct ExtenderOptions {
  const Catalog* catalog = nullptr;
  std::string leaf_label = "tessera.io/leaf";
  std::string spine_label;
  // Preemption as the loop's (sched/preemption.h): a victim younger than this is never taken
  // (CycleOptions::min_runtime_s; `tessera k8s scheduler --min-runtime`).
  int64_t min_runtime_s = 300;
  std::function<int64_t()> now_s;  // the time (Unix seconds) victims' ages count to; null: ages unknown
  // The loop's view, when the scheduler serves the verbs (`tessera k8s scheduler --extender-listen`): for a
  // pod that asks for GPUs, each node's fit on the loop's allocation now and the loop's policy's order
  // (Service::RankNodes); /filter passes the nodes that fit and gives the loop's reason for the others,
  // /prioritize scores the policy's choices 10, 9, ... and other fitting nodes 1. Unset (the standalone
  // extender), or for a pod without GPUs: allocatable and best fit, as below. An error fails the verb.
  std::function<Result<std::vector<LoopFit>>(const nlohmann::json& pod,
                                             const std::vector<std::string>& nodes)>
      loop_view;
  // With the loop's view, /preempt asks the loop about each victim that is a pod of a job the loop runs:
  // whether its preemption rule lets `pod` take it now (its queues' guarantees, `preemption: never`, the run
  // time as the loop counts it; Service::MayPreemptFor); nullopt for a victim the loop does not run, which
  // the rule below judges from the pod alone.
  std::function<std::optional<bool>(const nlohmann::json& pod, const nlohmann::json& victim)> loop_victim;
};

struct ExtenderAnswer {
  int status = 200;
  nlohmann::json body;
};

class Extender {
 public:
  explicit Extender(ExtenderOptions options) : options_(std::move(options)) {}
  ExtenderAnswer Filter(std::string_view body) const;
  ExtenderAnswer Prioritize(std::string_view body) const;
  // Per candidate node (full victims): the victims kube-scheduler named, as the scheduling cycle chooses
  // them (sched/preemption.h): only those the loop's rule lets go (lower priority than the pod, run at least
  // min_runtime_s; a victim without status.startTime counts as old enough), cheapest first (lower priority,
  // then less work lost since it started, in GPU-seconds), released until they free the GPU resources the
  // pod asks for, then every released victim whose release is not needed spared (fewest victims). When
  // even all of them free less (kube-scheduler also counts what is free there), all are taken; a node where
  // none may be taken is no candidate. Meta victims (UIDs only) are kept as sent.
  ExtenderAnswer Preempt(std::string_view body) const;
  ExtenderAnswer Bind(std::string_view body) const;

 private:
  ExtenderOptions options_;
};

}  // namespace tessera
