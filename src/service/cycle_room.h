#pragma once
// CycleRoom: when and how the service's cycles run, a room of ServiceDriver (service_driver.h). The cycle
// thread wakes on a timer (the next due event, or tick_s) and on Notify (a submission, a change, a backend
// event), spacing event-driven cycles by at least min_cycle_gap_s and eight times the last cycle's cost so
// that a burst is batched; RunCycleNow and a driver's instants (replays) run one in the caller's thread.
// A cycle builds the loop's input under the driver's lock (the pending jobs limited to the nodes a driver
// gave them, evictions blocked where a driver asked), decides without the lock (at a lower CPU priority,
// decide_nice) and applies the plan in slices of about 256 actions, one lock hold each, a slice ending only
// where no job has actions further on; the live loop leaves requests twice a slice's time between slices.
//
// Locks: cycle_mu_ (one cycle at a time) is taken before the driver's mu_; wake_mu_ is a leaf.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "control/driver.h"
#include "sched/cluster_state.h"
#include "sched/cycle.h"

namespace tessera {

class ServiceDriver;

class CycleRoom {
 public:
  explicit CycleRoom(ServiceDriver* driver);
  ~CycleRoom();  // Stop()

  void StartThread();  // the background cycle thread
  void Stop();         // stops and joins it (a cycle under way finishes first); idempotent
  // Wakes the cycle thread (cheap when a wake is already posted).
  void Notify();

  // The loop as Service exposes it (service.h).
  void RunCycleNow();  // one cycle in the caller's thread; returns once its writes are durable
  int64_t NextInstant(int64_t now, int64_t owner_next_s, int64_t horizon_s, bool* tick) const;
  bool RunInstant(int64_t now, bool tick, InstantSource& arrivals);
  size_t WaitingJobs() const;
  void SetEvictionBlocked(std::set<int64_t> ids);
  void SetJobNodes(std::map<int64_t, std::shared_ptr<const std::set<std::string>>> nodes, bool absent_nowhere);

  // The loop's cycle input for `now` into *in, over `working`, a copy of its allocation that the caller
  // keeps (an existing `working`, and the memory of an earlier input in *in, are reused). Under the
  // driver's lock.
  void BuildInputLocked(int64_t now, std::unique_ptr<ClusterState>* working, CycleInput* in);

 private:
  void CycleLoop();
  void RunOneCycle();
  // One cycle at `now` (decide without the lock, apply in slices); returns the jobs bound. `paced`: after
  // each slice but the last, requests get twice its time before the next (the live loop; not replays).
  int CycleAt(int64_t now, bool paced = false);
  Plan DecideInBackground(const CycleInput& in) const;
  // Where a plan is cut into slices applied one lock hold each: ascending action indexes from 0 to its size
  // (at least one slice, possibly empty).
  std::vector<size_t> SliceCuts(const Plan& plan) const;
  // Limits the pending jobs of `in` to the nodes SetJobNodes gave them (Request::nodes). Under the lock.
  void ApplyJobNodesLocked(CycleInput* in) const;

  ServiceDriver* const d_;
  // Under the driver's mu_:
  std::set<int64_t> eviction_blocked_;  // jobs no cycle may preempt now (SetEvictionBlocked)
  std::map<int64_t, std::shared_ptr<const std::set<std::string>>> job_nodes_;  // SetJobNodes
  bool job_nodes_strict_ = false;  // a job absent from job_nodes_ goes nowhere

  std::mutex cycle_mu_;                          // one cycle at a time (the timer's, or RunCycleNow)
  std::unique_ptr<ClusterState> cycle_working_;  // the cycle's working allocation, reused
  CycleInput cycle_in_;                          // the cycle's input, its memory reused

  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool wake_ = false;
  std::atomic<bool> wake_posted_{false};  // a Notify is on its way or wake_ is set (see Notify)
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tessera
