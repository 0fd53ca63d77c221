#pragma once
// GroupRoom: PodGroups and the pods of ours outside the loop, a room of K8sScheduler (scheduler.h). A
// PodGroup of any of the three kinds (coscheduling, Volcano, KAI) is found by its gang's key; a running
// gang is bound once its GPU members are (minMember less its CPU-only companions); its status (phase,
// counts, Scheduled condition) is written from its members when it changes, as coscheduling and Volcano
// keep it. Pods of ours that ask no GPU are no jobs of the loop (which places GPU work): a gang's companions
// are bound beside its members once those run, a lone one on a node its filters pass (one without GPUs
// first), each judged by FilterRoom::Admit first and assumed in its world after.
//
// Threads: the scheduler's loop thread.

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "k8s/api/object_map.h"
#include "k8s/pod_jobs.h"

namespace tessera {

class K8sScheduler;

class GroupRoom {
 public:
  explicit GroupRoom(K8sScheduler* scheduler);

  // The PodGroup of a gang's key, whichever kind it is; nullopt while no informer has it.
  std::optional<nlohmann::json> PodGroupOf(const JobKey& key) const;
  // Whether a PodGroup's gang has its GPU members bound (minMember less its CPU-only companions).
  bool GangBound(const std::string& key, const ObjectMap& members) const;
  // Every PodGroup with pods of ours: its status written when it changes.
  void SyncStatus();
  // A running gang's waiting CPU-only members, each bound to a node its filters pass, beside the gang's
  // members when one passes.
  void BindCompanions(const std::vector<std::reference_wrapper<const nlohmann::json>>& members);
  // A lone pod of ours that asks no GPU: bound to a node its filters pass, one without GPUs first; when
  // none passes, kube-scheduler's reason goes on the pod.
  void BindCpuOnly(const nlohmann::json& pod);

 private:
  // Binds a pod outside the loop's accounting to `node` (judged by FilterRoom::Admit first, assumed in its
  // world after), with a Scheduled Event; false when refused or the binding failed (logged).
  bool BindOutsideLoop(const nlohmann::json& pod, const std::string& node);

  K8sScheduler* const s_;
  std::map<std::string, nlohmann::json> status_;  // "API/podgroup/NS/NAME" -> status last written
};

}  // namespace tessera
