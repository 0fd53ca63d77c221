#pragma once
// SimulatedCluster: the physics of a simulated cluster behind the backend seam (control/backend.h). The
// simulator drives its runs through it, and `tessera serve --replay` uses the same one, so a scenario's runs
// behave the same under both drivers:
//  - a launch whose grants hold less memory than a task needs fails for good (out of memory at start);
//  - a run progresses at its placement's step-time efficiency (sched/step_time.h; 1 for work without step
//    inputs) times the tiers hook's factor (periodic checkpoint overhead), and ends when its work is done;
//  - with failures injected (a GPU mean time between failures), a run is interrupted at an exponential time
//    (drawn from a hash of the job, its run and the seed) and goes back to the queue;
//  - a replica's real demand is its declared demand times DemandFactor (per demand epoch), and every shared
//    unit (a shared MIG instance or GPU with two or more replicas) reports its summed real / summed declared
//    demand per epoch as a kDemand event, the measurement a real cluster's GPU metrics would give.
// Events are reported synchronously (launches are never in flight). Deterministic.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "control/backend.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "sched/cluster_state.h"
#include "sched/step_time.h"
#include "sim/event_queue.h"
#include "sim/trace.h"

namespace tessera {

class SimHook;

// A uniform draw in [0, 1) from (a, b, seed): splitmix64 of their mix. Deterministic, no shared state (the
// simulator's per-job draws: time limits, failures, demand).
double HashUniform(uint64_t a, uint64_t b, uint64_t seed);

// A replica's real demand over demand epoch `epoch` relative to its declared demand: lognormal with mean 1
// and log-sd `sigma` (0: exactly 1), drawn from a hash of the job's slot, the epoch and `seed`.
double DemandFactor(JobSlot j, int64_t epoch, double sigma, uint64_t seed);

struct PhysicsOptions {
  FabricParams fabric;   // leaf oversubscription already resolved
  double demand_sigma = 0;  // real demand (DemandFactor); kDemand events report it
  int64_t demand_epoch_s = 300;
  uint64_t demand_seed = 0;
  double gpu_mtbf_h = 0;  // 0 = no injected failures
  uint64_t failure_seed = 0;
  SimHook* hook = nullptr;  // the tiers hook's progress factor (may be null)
};

class SimulatedCluster final : public Backend {
 public:
  // `spec_of` names the trace job of a slot (null = none: it runs as asked, without step inputs).
  static Result<std::unique_ptr<SimulatedCluster>> Make(const Cluster& cluster, const Catalog& catalog,
                                                        std::function<const TraceJob*(JobSlot)> spec_of,
                                                        PhysicsOptions options);

  LaunchAck Launch(const LaunchSpec& spec, int64_t now) override;
  // Its events go stale; it leaves the shared units it was in.
  void Stop(JobSlot slot, uint32_t run, int64_t, std::string_view, int64_t now) override;
  std::vector<BackendEvent> Poll(int64_t now) override;
  int64_t NextEventS() const override { return events_.empty() ? -1 : events_.top().time_s; }

  // The step-time efficiency of a gang on `tasks` (1 without step inputs).
  double EfficiencyOf(const TraceJob& job, const std::vector<TaskPlacement>& tasks) const;

 private:
  SimulatedCluster(const Cluster& cluster, ClusterState layout, std::function<const TraceJob*(JobSlot)> spec_of,
                   PhysicsOptions options);
  int64_t GrantMemory(const GpuGrant& g) const;
  // Demand samples of every epoch that ended by `t` into samples_ (each unit with its members as of the last
  // change before `t`: an epoch counts the members the unit has when it ends).
  void SampleUntil(int64_t t);
  void Leave(JobSlot slot, uint32_t run);
  struct Member {
    JobSlot slot = kNoSlot;
    uint32_t run = 0;
    double declared = 0;
    bool sensitive = false;
  };

  const Cluster& cluster_;
  ClusterState layout_;  // static lookups only: kinds, nodes, leaves, spines
  std::function<const TraceJob*(JobSlot)> spec_of_;
  PhysicsOptions opt_;
  EventQueue events_;     // completions and failures of runs
  std::set<JobSlot> oom_;  // jobs that ran out of memory at a start (they fail at every start)
  std::map<std::pair<GpuId, int>, std::vector<Member>> units_;  // (GPU, MIG start or -1) -> its sharers
  int64_t sampled_until_ = 0;         // every demand epoch ending by then is sampled
  std::vector<BackendEvent> samples_;  // kDemand events not yet polled
};

}  // namespace tessera
