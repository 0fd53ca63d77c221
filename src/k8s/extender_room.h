#pragma once
// ExtenderRoom: kube-scheduler's extender verbs served by the scheduler's process, from the loop's view
// (`tessera k8s scheduler --extender-listen`), a room of K8sScheduler (scheduler.h). For clusters where
// kube-scheduler keeps placing some pods and asks Tessera: /filter and /prioritize judge the pod as one task
// of a job on the loop's allocation now (what its jobs run, what pods outside it hold, cordons and MIG
// layouts) with the loop's policy (Service::RankNodes); /preempt chooses victims by the cycle's rules
// (extender.h), a victim that is a pod of a job the loop runs as the loop judges it now (MayTake). Pods it
// lets kube-scheduler place are pods outside the loop: once bound, ClusterRoom holds what they use.
//
// Threads: Start and Stop from the thread that starts and stops the scheduler; Fits on the listener's.

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "k8s/extender/extender.h"
#include "k8s/extender/extender_server.h"
#include "service/service.h"

namespace tessera {

class K8sScheduler;

class ExtenderRoom {
 public:
  explicit ExtenderRoom(K8sScheduler* scheduler);
  ~ExtenderRoom();  // Stop()

  // Listens as `options` say and serves on a thread of its own; an error names the address or TLS file.
  Status Start(ExtenderServerOptions options);
  void Stop();
  std::string url() const { return server_ ? server_->url() : ""; }
  // The loop's view of `pod` on `nodes`: its spec as a job of its own (one task; its namespace's team),
  // each node's fit and the policy's first choices (at most kRanked).
  Result<std::vector<LoopFit>> Fits(const nlohmann::json& pod, const std::vector<std::string>& nodes) const;
  // Whether the loop's preemption rule lets `pod` (as that job) take `victim` now (Service::MayPreemptFor);
  // nullopt when no run of the loop holds `victim` or the pod's spec does not build.
  std::optional<bool> MayTake(const nlohmann::json& pod, const nlohmann::json& victim) const;

  static constexpr int kRanked = 8;

 private:
  Result<JobSpec> SpecOf(const nlohmann::json& pod) const;  // the pod as a job of its own, one task

  K8sScheduler* const s_;
  std::unique_ptr<Extender> extender_;
  std::unique_ptr<ExtenderServer> server_;
  std::thread thread_;
};

}  // namespace tessera
