#pragma once
// FilterRoom: Kubernetes' node filters for the scheduler (filters.h), a room of K8sScheduler (scheduler.h).
// Every pass it judges each pending job's first waiting pod on the informer cache of nodes and bound pods
// (any scheduler's) plus our bindings the cache does not show yet, and limits the job to the nodes it passes
// (or would once the loop frees what it holds there): Service::SetJobNodes; a job no node passes keeps
// kube-scheduler's message. Before each binding (the backend's threads) the pod is judged again on the state
// now, with the bindings made since assumed.
//
// Threads: Sync, PassWorld, RefreshPassWorld, NoNodeMessage and the verdicts run on the scheduler's loop
// thread; Admit and Forget on the backend's threads (admit_mu_, assumed_mu_).

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "k8s/filters.h"
#include "k8s/k8s_backend.h"

namespace tessera {

class K8sScheduler;

class FilterRoom {
 public:
  explicit FilterRoom(K8sScheduler* scheduler);

  // The pass's world of nodes and pods: built on first use, kept until RefreshPassWorld finds it older than
  // a second (building it reads every pod).
  FilterWorld& PassWorld();
  void RefreshPassWorld(int64_t now_us);
  // Judges every pending job and gives the Service the nodes each may go to.
  void Sync();
  // The last Sync's verdicts for a job's key: kube-scheduler's message when no node passes (null: some
  // does), and how many nodes its first waiting pod passes (nullopt: not judged).
  const std::string* UnschedulableOf(const std::string& key) const;
  std::optional<size_t> PassingOf(const std::string& key) const;
  // kube-scheduler's message when no node passes the pod's filters (on the pass's world), else "".
  std::string NoNodeMessage(const nlohmann::json& pod);
  // Before a binding (any thread): "" = bind (the pod is then assumed bound there until the cache shows
  // it), else why not.
  std::string Admit(const PodRef& pod, const std::string& node);
  void Forget(const PodRef& pod);  // a binding that failed after Admit

 private:
  // The cache of nodes and pods with our bindings not seen there yet assumed; `cache` (loop thread only)
  // spares reading pods that did not change since the last world.
  FilterWorld MakeWorld(FilterCache* cache = nullptr) const;

  K8sScheduler* const s_;
  // Loop thread.
  std::unique_ptr<FilterWorld> world_;
  FilterCache world_cache_;
  static constexpr int64_t kPassWorldUs = 1'000'000;
  int64_t world_us_ = 0;
  std::map<std::string, std::string> unschedulable_;  // JobKey::str() -> kube-scheduler's message
  std::map<std::string, size_t> passing_;             // JobKey::str() -> nodes its first pod passes
  // Backend threads.
  std::mutex admit_mu_;  // guards admit_world_
  std::unique_ptr<FilterWorld> admit_world_;
  int64_t admit_world_us_ = 0;     // when admit_world_ was made
  mutable std::mutex assumed_mu_;  // guards assumed_
  std::map<std::string, std::pair<nlohmann::json, std::string>> assumed_;  // uid -> (pod, node) we bound
};

}  // namespace tessera
