#include "sim/static_mig_best.h"

#include <fmt/format.h>

#include "sched/cluster_state.h"
#include "sched/policy.h"
#include "sim/simulator.h"

namespace tessera {

Result<StaticMigChoice> BestStaticMig(const Scenario& s, const Catalog& catalog, const std::vector<TraceJob>& jobs,
                                      uint64_t seed) {
  static const double kShares[] = {0.125, 0.25, 0.5, 0.75, 1.0};
  static const char* kLayouts[] = {"all-balanced", "all-1g.10gb", "all-2g.20gb", "all-3g.40gb", "all-7g.80gb"};
  auto policy = MakePolicy("static-mig");
  if (!policy.ok()) return policy.status();
  SimOptions o = s.sim;
  o.horizon_s = std::min<int64_t>(s.sim.horizon_s > 0 ? s.sim.horizon_s : 86400, 86400);  // the first day
  o.warmup_s = 0;
  o.time_limit_seed = o.demand_seed = o.failure_seed = seed;
  o.sharing = SharingFor("static-mig", o.sharing);
  o.record_decisions = false;
  o.hook = nullptr;
  StaticMigChoice best;
  best.first_day_utilization = -1;
  for (const char* layout : kLayouts)
    for (double share : kShares) {
      const StaticMigSetup setup{share, layout};
      const Cluster c = ClusterForPolicy(s.cluster, catalog, "static-mig", setup);
      if (!ClusterState::Build(c, catalog).ok()) continue;  // a kind without this profile
      auto r = Simulate(c, catalog, jobs, **policy, o);
      if (!r.ok()) return Status::Error(fmt::format("static-mig-best: {} on {}: {}", layout, share, r.error()));
      ++best.candidates;
      if (r->gpu_utilization > best.first_day_utilization + 1e-12) {
        best.setup = setup;
        best.first_day_utilization = r->gpu_utilization;
      }
    }
  if (best.candidates == 0) return Status::Error("static-mig-best: no named layout fits the cluster's GPU kinds");
  return best;
}

}  // namespace tessera
