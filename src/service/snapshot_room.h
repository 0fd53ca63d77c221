#pragma once
// SnapshotRoom: the service's published snapshot, a room of ServiceDriver (service_driver.h). After each
// cycle (with its plan) or a restore (without one) a new Snapshot is begun under the driver's lock (the
// allocation, copied into a recycled buffer only when it changed; each node's state; the queues'
// signatures; the current version of each pending job of the plan) and finished without it (the cluster
// summary, the queue in pool order with positions counting jobs, estimates kept stable: estimates.cc),
// then published. Readers take it with Get() and never wait for the driver's lock.
//
// Locks: snap_mu_ is a leaf; BeginLocked and PublishLocked need the driver's mu_.

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "sched/cluster_state.h"
#include "sched/cycle.h"
#include "service/job_record.h"
#include "service/service.h"

namespace tessera {

class ServiceDriver;

class SnapshotRoom {
 public:
  // A pending status's job and the gang whose reservation it waits behind (null: none), read under the lock.
  struct PendingRef {
    JobPtr job, reservation;
  };

  explicit SnapshotRoom(ServiceDriver* driver);
  std::shared_ptr<const Snapshot> Get() const;  // the latest published (null before the first)
  // The queues' figures from the snapshot into each team's view.
  void AddQueueFigures(std::vector<TeamView>* teams) const;
  // Publishes after a cycle (`plan`) or a restore (null): BeginLocked then Finish.
  void PublishLocked(const Plan* plan, int64_t now);
  // Under the lock: the snapshot's parts the lock guards, and into *jobs the current version of each
  // pending job of the plan.
  std::shared_ptr<Snapshot> BeginLocked(const Plan* plan, int64_t now, std::vector<PendingRef>* jobs);
  // Without the lock: orders the queue, keeps estimates stable and publishes.
  void Finish(std::shared_ptr<Snapshot> snap, const Plan* plan, const std::vector<PendingRef>& jobs);

 private:
  // A copy of the loop's allocation, in a recycled buffer where one is free.
  std::shared_ptr<const ClusterState> RecycledClusterLocked();
  // Each queue's signature and running jobs' expected ends into `snap` (estimates.cc).
  void QueueSignaturesLocked(Snapshot* snap) const;

  ServiceDriver* const d_;
  std::shared_ptr<const Snapshot> snapshot_;
  mutable std::mutex snap_mu_;
  // Cluster states kept for reuse by snapshots (a buffer is reused once only this list holds it).
  static constexpr size_t kSpareClusters = 4;
  std::vector<std::shared_ptr<ClusterState>> spare_clusters_;  // under the driver's lock
};

}  // namespace tessera
