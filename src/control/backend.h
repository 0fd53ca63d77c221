#pragma once
// Backend: the seam between the control loop's drivers and where jobs really run (docs/architecture.md
// "The backend seam"). The simulator's physics, the service's simulated backend and the Kubernetes adapter
// implement it; the Driver (control/driver.h) is its only caller in the loop.
//
// Contract:
//  - Launch(spec) asks the backend to run one job of the loop's table on its grants. The answer is an
//    acknowledgement: `failed` = the job cannot run there at all (it fails for good: e.g. out of memory at
//    start); otherwise the backend accepted it, and `efficiency` is the progress rate it expects (1 = ideal).
//    A backend that works asynchronously reports later: kStarted once it runs, kLaunchFailed when the launch
//    did not happen (the driver requeues the job with the backend's reason).
//  - Stop(slot, run, grace, reason): the run must end within `grace` seconds (checkpointing first when it
//    can); kStopped reports that it did. Stopping a run the backend does not know is a no-op.
//  - Checkpoint(slot, run): a checkpoint now (kCheckpointed reports it, if the backend reports at all).
//  - Reconfigure(gpu, layout): the GPU's MIG layout becomes `layout` (profile@start, ...; empty = MIG off);
//    kReconfigureFailed marks the layout unknown.
//  - Poll(now) returns every event that happened at or before `now`, in order; NextEventS() is the time of
//    the next event the backend already knows of (-1 = none), so a virtual clock can jump to it.
//  - Adopt() and Running(): after a restart the driver adopts what runs rather than launch it again, and
//    learns what runs that it does not know.
// Every event names the run (the job's epoch when launched): reports of older runs are ignored.
// Thread safety: a backend is called by one driver thread; backends that do slow work do it elsewhere.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/ids.h"
#include "control/job_table.h"
#include "sched/placement.h"

namespace tessera {

struct LaunchSpec {
  JobSlot slot = kNoSlot;
  uint32_t run = 0;                  // the job's epoch at launch
  std::vector<TaskPlacement> tasks;  // its grants (dense ids of the driver's ClusterState)
  double work_s = -1;                // ideal seconds of work left (-1 = runs until stopped)
  // What the backend runs the job as (ControlJob::key, as its driver named it; empty: the driver did not)
  // and the name of each task's node in the loop's cluster, so that a launch needs no lookup in the driver.
  std::string key;
  std::vector<std::string> node_names;
};

struct LaunchAck {
  bool failed = false;      // it cannot run at all: the job fails for good
  std::string reason;
  double efficiency = 1.0;  // expected progress rate
  bool in_flight = false;   // accepted; kStarted or kLaunchFailed follows
};

enum class BackendEventKind : uint8_t {
  kStarted,            // the job runs (asynchronous backends)
  kEnded,              // it completed its work
  kFailed,             // it failed while running (for good, or back to the queue: FailurePolicy says)
  kInterrupted,        // it stopped through no fault of its own (GPU failure): back to the queue
  kLaunchFailed,       // the launch did not happen: back to the queue
  kStopped,            // a Stop completed
  kCheckpointed,       // a checkpoint completed
  kReconfigureFailed,  // a MIG reconfiguration failed: the GPU's layout is unknown
  kDemand,             // a shared unit's measured demand over an interval (admission learns its headroom)
};
const char* BackendEventName(BackendEventKind k);

struct BackendEvent {
  BackendEventKind kind = BackendEventKind::kEnded;
  JobSlot slot = kNoSlot;
  uint32_t run = 0;
  int64_t at = 0;
  GpuId gpu = kNone;  // kReconfigureFailed
  std::string message;
  // kDemand: the unit's summed real demand / summed declared demand, and whether it holds a latency-sensitive
  // replica (ControlLoop::ObserveDemand).
  double demand_ratio = 0;
  bool sensitive = false;
};

// A run the backend knows of (for adoption after a driver restart).
struct BackendRun {
  JobSlot slot = kNoSlot;
  uint32_t run = 0;
  int64_t started_at = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual LaunchAck Launch(const LaunchSpec& spec, int64_t now) = 0;
  virtual void Stop(JobSlot slot, uint32_t run, int64_t grace_s, std::string_view reason, int64_t now) = 0;
  virtual void Checkpoint(JobSlot slot, uint32_t run, int64_t now) {}
  virtual void Reconfigure(GpuId gpu, const std::string& layout, int64_t now) {}
  virtual std::vector<BackendEvent> Poll(int64_t now) = 0;
  virtual int64_t NextEventS() const = 0;
  // A run the driver recorded as running before it restarted: the backend confirms it knows it (a real
  // cluster finds its pods; the simulated one takes it as still running since `started_at`), or answers
  // false and the driver requeues the job.
  virtual bool Adopt(const LaunchSpec& spec, int64_t started_at, int64_t now) { return false; }
  virtual std::vector<BackendRun> Running() const { return {}; }
  // Whether calls complete later (as events) rather than when they return.
  virtual bool asynchronous() const { return false; }
  // Asynchronous backends call `wake` (from any thread) when an event arrives, so the driver polls soon.
  virtual void OnEvents(std::function<void()> wake) {}
};

}  // namespace tessera
