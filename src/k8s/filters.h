#pragma once
// kube-scheduler's Filter plugins, judged on the informer cache of nodes and bound pods (any scheduler's):
// NodeUnschedulable, TaintToleration, NodeAffinity (nodeSelector and required node affinity), NodePorts,
// NodeResourcesFit (cpu, memory, ephemeral-storage, pods and every extended resource the pod requests),
// PodTopologySpread (DoNotSchedule constraints) and InterPodAffinity (required affinity and anti-affinity,
// the pod's and the existing pods'), in kube-scheduler's order: a node fails with the first plugin that
// rejects it, with kube-scheduler's reason strings, so a pod no node passes gets kube-scheduler's message
// ("0/10 nodes are available: 1 node(s) were unschedulable, 9 node(s) didn't match Pod's node
// affinity/selector."). Pure: objects in, verdicts out.

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "k8s/api/object_map.h"

namespace tessera {

// One node's rejection: the plugin and its reasons (NodeResourcesFit may give several); empty = passes.
struct FilterVerdict {
  std::string plugin;
  std::vector<std::string> reasons;
  bool ok() const { return reasons.empty(); }
};

// What FilterWorld reads of each pod, kept across worlds for pods that did not change (an informer's objects
// are immutable shared values: a changed pod is a new one). One thread at a time.
class FilterCache {
 public:
  FilterCache();
  ~FilterCache();
  size_t size() const;
  struct Impl;  // opaque

 private:
  friend class FilterWorld;
  std::unique_ptr<Impl> impl_;
};

// Nodes and the pods bound to them, as the filters see them.
class FilterWorld {
 public:
  // `nodes` and `pods` by any key (the informers' maps). Pods count on their spec.nodeName unless they are
  // Succeeded or Failed; pods whose requests do not parse count with no requests.
  // With `cache`, pods read for an earlier world are not read again.
  FilterWorld(const ObjectMap& nodes, const ObjectMap& pods, FilterCache* cache = nullptr);
  ~FilterWorld();
  FilterWorld(FilterWorld&&) noexcept;

  // A pod placed on `node` that `pods` does not show bound yet (a binding in flight or just made); a pod
  // already counted (same namespace and name) is not counted twice.
  void Assume(const nlohmann::json& pod, const std::string& node);

  // The pod on one node (unknown node: a NodeName rejection).
  FilterVerdict Judge(const nlohmann::json& pod, const std::string& node) const;
  // The nodes the pod passes, in name order; `rejected` (optional) counts each rejection reason;
  // `if_freed` (optional) gets the nodes that fail only for want of resources Tessera's model holds (cpu,
  // memory, nvidia.com/gpu, nvidia.com/mig-*: its placement and preemption decide those).
  std::set<std::string> Passing(const nlohmann::json& pod, std::map<std::string, int>* rejected = nullptr,
                                std::set<std::string>* if_freed = nullptr) const;
  size_t num_nodes() const;
  // Whether a pod's labels can change its verdicts: some pod counted has required pod anti-affinity terms
  // (a pod's own affinity terms are placement constraints of its own).
  bool LabelsMatter() const;

  struct Impl;  // opaque

 private:
  std::unique_ptr<Impl> impl_;
};

// kube-scheduler's message for a pod no node passes: "0/N nodes are available: <count> <reason>, ...."
// (reasons in string order).
std::string UnschedulableMessage(size_t nodes, const std::map<std::string, int>& rejected);

// Whether the pod's spec asks for anything beyond its resource requests that the filters judge (node
// selector or affinity, tolerations, host ports, topology spread, pod (anti-)affinity).
bool PodHasPlacementConstraints(const nlohmann::json& pod);

}  // namespace tessera
