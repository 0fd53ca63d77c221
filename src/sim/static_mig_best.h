#pragma once
// static-mig-best (docs/evaluation.md "Baselines"): static MIG with the best fixed layout for the workload.
// A platform team sizing a GPU Operator cluster by trial would do the same: every candidate (a share of the
// MIG-capable nodes, spread evenly, set to one mig-parted named layout, the rest whole) runs the first day
// of the job stream with the static-mig placement; the one with the highest utilisation is kept for the
// whole run. Candidates: shares 1/8, 1/4, 1/2, 3/4, all; layouts all-balanced, all-1g.10gb, all-2g.20gb,
// all-3g.40gb, all-7g.80gb (one name for every kind: the shipped fleets' kinds share these profile names; a
// layout a kind lacks is skipped).

#include <string>
#include <vector>

#include "model/catalog.h"
#include "model/cluster.h"
#include "sim/scenario.h"
#include "sim/trace.h"

namespace tessera {

struct StaticMigChoice {
  StaticMigSetup setup;
  double first_day_utilization = 0;
  int candidates = 0;  // tried (buildable) layouts
};

// The best candidate for `jobs` on `s`'s cluster (seed: the run's, for time limits and demand).
Result<StaticMigChoice> BestStaticMig(const Scenario& s, const Catalog& catalog, const std::vector<TraceJob>& jobs,
                                      uint64_t seed);

}  // namespace tessera
