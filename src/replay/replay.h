#pragma once
// Replay (`tessera serve --replay SCENARIO`): a scenario run by the service instead of the simulator, to
// show that both make the same decisions. The scenario's jobs of one seed go through the service's own
// submission path (validation, store, idempotency) at the times the simulator submits them (backlog
// arrivals included), on a virtual clock that jumps to the next event, with the scenario's simulated
// cluster (sim/sim_backend.h) as the backend; the service's driver runs the instants (control/driver.h).
// The run ends when the scenario does (its horizon, or when nothing is left to happen). A trace job's
// cancel_s goes through the service's cancel (as an admin), at the instant the simulator cancels it.
//
// Refused with a clear message: scenarios with capacity tiers (spot, autoscaling) and with time limits
// other than the jobs' durations, which the service does not model yet.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "control/driver.h"
#include "service/clock.h"
#include "service/service.h"
#include "sim/scenario.h"
#include "sim/sim_backend.h"
#include "sim/trace_cancels.h"

namespace tessera {

class Replay final : public InstantSource {
 public:
  // Reads the scenario and prepares one seed's jobs (`seed` 0 = the scenario's first).
  static Result<std::unique_ptr<Replay>> Prepare(const std::string& scenario_path, uint64_t seed,
                                                 const Catalog& catalog);
  // The same for a scenario already read (`source` names it in messages).
  static Result<std::unique_ptr<Replay>> Prepare(Scenario scenario, const std::string& source, uint64_t seed,
                                                 const Catalog& catalog);

  // The service configuration the replay needs (cluster, tenancy, policy, loop setup; no timer cycles).
  ServiceConfig Config() const;
  Backend* backend() { return backend_.get(); }
  VirtualClock* clock() { return &clock_; }
  uint64_t seed() const { return seed_; }
  size_t jobs() const { return jobs_.size(); }

  // Runs the scenario to its end on `service` (started with Config(), backend() and clock(), on an empty
  // store), handing each decision line to `line` as it is made.
  Status Run(Service& service, const std::function<void(const std::string&)>& line);

  // InstantSource.
  size_t Waiting() const override { return service_->WaitingJobs(); }
  bool Arrive(int64_t now) override;
  int ReleaseBacklog(int64_t now) override;
  bool backlog() const override { return backlog_; }
  int Cycle(int64_t now) override { return 0; }  // the service runs its own

 private:
  Replay() = default;
  Status Submit(const TraceJob& j, int64_t now);
  // The trace's cancellations due at `now`, through the service's cancel; returns whether any job changed.
  bool CancelDue(int64_t now);
  bool Over(int32_t index) const;
  Status Setup(const Catalog& catalog);

  Scenario scenario_;
  uint64_t seed_ = 0;
  std::vector<TraceJob> jobs_;
  std::vector<int32_t> order_;  // arrival order
  size_t next_ = 0;
  bool backlog_ = false;
  TenancyConfig tenancy_;
  bool tenancy_cycle_ = false;
  std::shared_ptr<const Policy> policy_;
  LoopSetup setup_;
  std::unique_ptr<SimulatedCluster> backend_;
  std::vector<const TraceJob*> by_slot_;  // the loop's slot -> its trace job
  std::vector<int64_t> ids_;              // trace index -> the service's job id (-1 = not submitted)
  TraceCancels cancels_;                  // the trace's cancel_s, due after each arrival
  VirtualClock clock_;
  Service* service_ = nullptr;
  Status error_;
};

}  // namespace tessera
