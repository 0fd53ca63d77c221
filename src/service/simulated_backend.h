#pragma once
// SimulatedBackend: the service's backend (control/backend.h) when no real cluster is attached (`tessera
// serve`, the demo, tests). It runs nothing: a launched job "runs" for its work on the service's clock
// (work_s at efficiency 1; -1 = until stopped) and ends then.
//
// Injection, for tests and demos:
//  - latency_s: every call (launch, stop, reconfigure, checkpoint) completes this many wall seconds later on
//    the backend's own thread; the caller is answered at once (a launch in flight: LaunchAck::in_flight), and
//    the completion comes back as an event (kStarted / kLaunchFailed, kStopped, kCheckpointed,
//    kReconfigureFailed). The caller never waits for a slow backend.
//  - failure_probability: a launch or a reconfiguration fails with it (seeded draws).
// After a restart the service hands it the runs it recorded as running (Adopt): the simulated cluster kept
// them going while the control plane was down.
//
// Thread safety: every method may be called from any thread.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "control/backend.h"
#include "service/clock.h"

namespace tessera {

class SimulatedBackend final : public Backend {
 public:
  SimulatedBackend(const Clock* clock, double latency_s = 0, double failure_probability = 0, uint64_t seed = 1);
  ~SimulatedBackend() override;

  LaunchAck Launch(const LaunchSpec& spec, int64_t now) override;
  void Stop(JobSlot slot, uint32_t run, int64_t grace_s, std::string_view reason, int64_t now) override;
  void Checkpoint(JobSlot slot, uint32_t run, int64_t now) override;
  void Reconfigure(GpuId gpu, const std::string& layout, int64_t now) override;
  bool Adopt(const LaunchSpec& spec, int64_t started_at, int64_t now) override;
  std::vector<BackendEvent> Poll(int64_t now) override;
  int64_t NextEventS() const override;
  std::vector<BackendRun> Running() const override;
  void OnEvents(std::function<void()> wake) override;
  bool asynchronous() const override { return latency_s_ > 0; }

  size_t running() const;

 private:
  struct Call {
    double due_wall = 0;
    BackendEventKind done = BackendEventKind::kStarted;  // what the call reports when it completes
    JobSlot slot = kNoSlot;
    uint32_t run = 0;
    double work_s = -1;
    GpuId gpu = kNone;
  };
  void Worker();
  void Complete(const Call& c);
  static double WallNow();

  const Clock* clock_;
  const double latency_s_;
  const double failure_probability_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::mt19937_64 rng_;
  std::deque<Call> calls_;                                    // in flight, in order of their due time
  std::multimap<int64_t, std::pair<JobSlot, uint32_t>> ends_;  // run ends by time
  std::map<JobSlot, std::pair<uint32_t, int64_t>> runs_;      // slot -> (run, started at)
  std::vector<BackendEvent> inbox_;                           // completed calls, not yet polled
  std::function<void()> wake_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace tessera
