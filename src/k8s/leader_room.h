#pragma once
// LeaderRoom: the scheduler's leadership, a room of K8sScheduler (scheduler.h). It waits for the Lease
// (configuration problems said, with back-off), keeps it (renewals every retry period on a thread of its
// own; leading ends at the renew deadline, and the scheduler then stops, as kube-scheduler does), opens the
// store (with a PostgreSQL store, the database's lease follows the Kubernetes one and fences every write),
// releases both when the scheduler stops while leading, and gives the waits that a signal cuts short.
//
// Threads: Init, Await, OpenStore, StopRenewing and Release from the thread that starts and stops the
// scheduler; IsLeader, Pause and Cancelled from any.

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/status.h"
#include "k8s/api/api_client.h"
#include "k8s/api/informer.h"
#include "k8s/api/lease.h"
#include "store/postgres_store.h"
#include "store/store.h"

namespace tessera {

class K8sScheduler;

class LeaderRoom {
 public:
  explicit LeaderRoom(K8sScheduler* scheduler);
  ~LeaderRoom();  // StopRenewing()

  // The elector of the Lease (its namespace and identity from the options, else the kubeconfig's namespace
  // and hostname_pid); the scheduler's writes are guarded by it from now on.
  void Init();
  // Tries for the Lease every retry period until it leads, then renews it on a thread of its own; an error
  // when cancelled or stopped first.
  Status Await();
  // Waits for every informer (and the DRA room's) to list, at most 60 s; errors when leadership is lost or
  // the scheduler stops meanwhile.
  Status AwaitSynced(const std::vector<Informer*>& informers);
  // The SQLite file, or with options.store the PostgreSQL database, fenced by its lease: taken (once the
  // previous holder's ran out) while this replica holds the Kubernetes Lease.
  Result<std::unique_ptr<Store>> OpenStore();
  // Whether this replica leads now (the Lease renewed within the renew deadline).
  bool IsLeader() const { return elector_ && elector_->IsLeader(); }
  bool Cancelled() const;
  // Sleeps up to `s` seconds; false when cancelled or stopped meanwhile.
  bool Pause(double s);
  // Wakes Pause and the renewals (the scheduler is stopping) and waits for the renewals to end.
  void StopRenewing();
  // Releases the Lease (and the database's lease) unless leadership was lost, so that a standby takes over.
  void Release();

 private:
  // Renews every retry period. Leading ends once no renew succeeded within the renew deadline (IsLeader
  // checks the time, so writes stop then even while a renew hangs); the scheduler then stops.
  void RenewLoop();

  K8sScheduler* const s_;
  std::unique_ptr<ApiClient> lease_api_;  // the Lease's requests, with short timeouts
  std::unique_ptr<LeaderElector> elector_;
  std::unique_ptr<LeaderLease> db_lease_;  // with options.store: the database's lease, at db_epoch_
  int64_t db_epoch_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;  // wakes RenewLoop and Pause when stopping
  std::thread thread_;
};

}  // namespace tessera
