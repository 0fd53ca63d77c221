// Decayed usage in a simulated run: a team that used more than its share yesterday yields to one that did
// not today, and only because of the history (with history_weight 0 the order is the other way round).
#include <gtest/gtest.h>

#include <memory>

#include "model/catalog.h"
#include "model/cluster.h"
#include "sched/policy.h"
#include "sim/simulator.h"

namespace tessera {
namespace {

constexpr int64_t kDay = 24 * 3600;

Cluster EightGpus() {
  const std::string yaml =
      "name: tiny\ndefaults: {gpus: 8, cpu: 64, memory_gib: 512, interconnect: nvswitch}\n"
      "nodes:\n  - {name: n, count: 1, gpu: h100-80gb, leaf: leaf-0}\n";
  auto c = LoadClusterYaml(yaml, "tiny", Catalog::Default());
  EXPECT_TRUE(c.ok()) << c.error();
  return *c;
}

TraceJob Gang(const std::string& team, int64_t submit_s, int64_t duration_s) {
  TraceJob j;
  j.cls = WorkloadClass::kTraining;
  j.team = team;
  j.priority = 400;
  j.submit_s = submit_s;
  j.tasks = 1;
  j.gpus_per_task = 8;
  j.memory_mib = 40000;
  j.cpu_milli = 8000;
  j.host_memory_mib = 65536;
  j.duration_s = duration_s;
  return j;
}

// Two teams with a guarantee of 4 GPUs each on 8 GPUs. Yesterday `early` held all 8 GPUs for the whole day;
// today both submit the same 8-GPU job at the same second (early's first in the trace). Returns the
// first-bind time of each today-job: {early, late}.
std::pair<int64_t, int64_t> TodayStarts(double history_weight) {
  auto t = std::make_shared<SimOptions::Tenancy>();
  for (const char* name : {"early", "late"}) {
    QueueConfig q;
    q.name = name;
    q.guaranteed_milli = 4000;
    t->queue_of_team[name] = static_cast<int>(t->queues.size());
    t->queues.push_back(q);
  }
  t->cycle.usage_half_life_s = kDay;
  t->cycle.history_weight = history_weight;
  SimOptions o;
  o.tenancy = t;
  o.mig_mode_delay_s = o.mig_instance_delay_s = 0;
  const std::vector<TraceJob> jobs = {Gang("early", 0, kDay), Gang("early", kDay + 60, 3600),
                                      Gang("late", kDay + 60, 3600)};
  auto policy = MakePolicy("tessera");
  EXPECT_TRUE(policy.ok());
  auto r = Simulate(EightGpus(), Catalog::Default(), jobs, **policy, o);
  EXPECT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->jobs_completed, 3);
  EXPECT_EQ(r->job_records[0].first_bind_s, 0);
  return {r->job_records[1].first_bind_s, r->job_records[2].first_bind_s};
}

TEST(FairShareHistory, TeamThatUsedMoreYesterdayYieldsToday) {
  const auto [early, late] = TodayStarts(0.5);
  EXPECT_EQ(late, kDay + 60);
  EXPECT_EQ(early, kDay + 60 + 3600);  // waits for late's job to finish
}

TEST(FairShareHistory, WithoutHistoryTheTieGoesTheOtherWay) {
  const auto [early, late] = TodayStarts(0.0);
  EXPECT_EQ(early, kDay + 60);
  EXPECT_EQ(late, kDay + 60 + 3600);
}

}  // namespace
}  // namespace tessera
