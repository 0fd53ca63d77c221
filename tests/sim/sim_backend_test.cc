// The simulated cluster's demand measurements: every shared unit with two or more replicas reports, per
// demand epoch that has ended, its summed real demand over its summed declared demand (kDemand; the members
// it has when the epoch ends), from the
// same DemandFactor the simulator's SLO figures use; a replica that stops or ends leaves its unit.
#include "sim/sim_backend.h"

#include <gtest/gtest.h>

#include "model/catalog.h"
#include "model/cluster.h"
#include "sched/test_util.h"

namespace tessera {
namespace {

Cluster OneH100() { return testing::MakeCluster(1, 1, "h100-80gb"); }

LaunchSpec SharedReplica(int slot, int milli) {
  LaunchSpec s;
  s.slot = JobSlot(slot);
  s.run = 1;
  TaskPlacement t;
  GpuGrant g;
  g.gpu = 0;
  g.mig_profile = 5;
  g.mig_start = 0;
  g.shared = true;
  g.milli = milli;
  g.memory_mib = 1024;
  t.gpus.push_back(g);
  s.tasks.push_back(t);
  return s;
}

std::vector<BackendEvent> DemandOf(std::vector<BackendEvent> events) {
  std::vector<BackendEvent> out;
  for (BackendEvent& e : events)
    if (e.kind == BackendEventKind::kDemand) out.push_back(std::move(e));
  return out;
}

TEST(SimulatedClusterDemand, SharedUnitsReportRealOverDeclaredPerEpoch) {
  const Cluster c = OneH100();
  PhysicsOptions o;
  o.demand_sigma = 0.3;
  o.demand_epoch_s = 100;
  o.demand_seed = 9;
  auto sim = SimulatedCluster::Make(c, Catalog::Default(), nullptr, o);
  ASSERT_TRUE(sim.ok()) << sim.error();
  SimulatedCluster& b = **sim;
  ASSERT_FALSE(b.Launch(SharedReplica(0, 100), 0).failed);
  EXPECT_TRUE(DemandOf(b.Poll(150)).empty()) << "one replica alone is no shared unit";
  ASSERT_FALSE(b.Launch(SharedReplica(1, 300), 150).failed);
  std::vector<BackendEvent> d = DemandOf(b.Poll(420));
  // Epoch 0 ended with one replica; epochs 1-3 ended with both (an epoch counts the members at its end).
  ASSERT_EQ(d.size(), 3u);
  for (size_t i = 0; i < d.size(); ++i) {
    const int64_t e = 1 + static_cast<int64_t>(i);
    const double want =
        (100 * DemandFactor(JobSlot(0), e, 0.3, 9) + 300 * DemandFactor(JobSlot(1), e, 0.3, 9)) / 400;
    EXPECT_NEAR(d[i].demand_ratio, want, 1e-12);
    EXPECT_EQ(d[i].at, (e + 1) * 100);
    EXPECT_FALSE(d[i].sensitive);
    EXPECT_NE(d[i].demand_ratio, 1.0);
  }
  b.Stop(JobSlot(1), 1, 0, "test", 450);
  EXPECT_TRUE(DemandOf(b.Poll(1000)).empty()) << "alone again after the stop";
  EXPECT_EQ(DemandFactor(JobSlot(3), 7, 0, 1), 1.0) << "sigma 0: exactly the declared demand";
}

}  // namespace
}  // namespace tessera
