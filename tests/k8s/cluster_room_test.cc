// What a MIG repartition is planned for, from the loop's last cycle (cluster_room.h MigWaitingOf).
#include "k8s/cluster_room.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace tessera {
namespace {

QueueEntry Waiting(const std::string& name, const std::string& mig_profile, int replicas,
                   std::string_view code, const std::string& priority_class = "batch") {
  auto j = std::make_shared<JobRecord>();
  j->name = name;
  j->team = "ml";
  j->mig_profile = mig_profile;
  j->replicas = replicas;
  j->priority_class = priority_class;
  if (!mig_profile.empty()) j->request.gpus_per_task = 0;
  QueueEntry e;
  e.job = j;
  e.info.code = code;
  return e;
}

// Jobs of MIG slices (Waiting's request: one whole GPU unless it names a profile; here each names one).
TEST(MigWaitingOf, TheLoopsWaitingSliceJobsInItsOrderOneSliceEachReplica) {
  Snapshot snap;
  snap.queue = {Waiting("first", "1g.10gb", 2, "MigProfileUnavailable"),
                Waiting("capped", "3g.40gb", 1, "ExceedsQueueLimit"),       // its limit holds it
                Waiting("borrowing", "3g.40gb", 1, "BorrowLimit"),          // likewise
                Waiting("held", "3g.40gb", 1, "Held"),                      // held by a user
                Waiting("behind", "7g.80gb", 1, "Priority", "production"),  // waits its turn: counts
                Waiting("unnamed", "2g.20gb", 1, "FairShare", "unknown")};  // no key, no class
  const std::vector<PriorityClass> classes = {{"batch", 100}, {"production", 100000}};
  auto keys = [](const JobRecord& j) -> std::vector<std::string> {
    if (j.name == "first") return {"pod/serving/first-0", "pod/serving/first-1"};
    if (j.name == "behind") return {"pod/prod/behind"};
    return {};
  };
  const std::vector<WaitingPod> w = MigWaitingOf(snap, classes, keys);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[0].ns + "/" + w[0].name, "serving/first-0");
  EXPECT_EQ(w[1].ns + "/" + w[1].name, "serving/first-1");
  for (int i : {0, 1}) {
    EXPECT_EQ(w[i].priority, 100);
    EXPECT_EQ(w[i].requests, (Devices{{"nvidia.com/mig-1g.10gb", 1}}));
  }
  EXPECT_EQ(w[2].ns + "/" + w[2].name, "prod/behind");
  EXPECT_EQ(w[2].priority, 100000);
  EXPECT_EQ(w[2].requests, (Devices{{"nvidia.com/mig-7g.80gb", 1}}));
  EXPECT_EQ(w[3].ns + "/" + w[3].name, "ml/unnamed-0");
  EXPECT_EQ(w[3].priority, 0);
  EXPECT_EQ(w[3].requests, (Devices{{"nvidia.com/mig-2g.20gb", 1}}));
}

TEST(MigWaitingOf, AWholeGpuGangIsOneWaitingPodPerMemberAndAShareIsNone) {
  Snapshot snap;
  QueueEntry gang = Waiting("train", "", 1, "GangIncomplete");
  auto g = std::make_shared<JobRecord>(*gang.job);
  g->request.tasks = 3;
  g->request.gpus_per_task = 8;
  gang.job = g;
  QueueEntry share = Waiting("notebook", "", 1, "Resources");
  auto f = std::make_shared<JobRecord>(*share.job);
  f->request.gpus_per_task = 0;  // a fractional share of a GPU: no MIG layout is made for it
  f->request.gpu_milli = 250;
  share.job = f;
  snap.queue = {share, gang};
  const std::vector<WaitingPod> w = MigWaitingOf(snap, {{"batch", 100}}, [](const JobRecord&) {
    return std::vector<std::string>{"podgroup/research/train"};
  });
  ASSERT_EQ(w.size(), 3u);
  for (const WaitingPod& p : w) {
    EXPECT_EQ(p.ns + "/" + p.name, "research/train");
    EXPECT_EQ(p.requests, (Devices{{"nvidia.com/gpu", 8}}));
    EXPECT_EQ(p.priority, 100);
  }
}

TEST(MigWaitingOf, NothingWaitsWithAnEmptyQueue) {
  EXPECT_TRUE(
      MigWaitingOf(Snapshot{}, {}, [](const JobRecord&) { return std::vector<std::string>{}; }).empty());
}

}  // namespace
}  // namespace tessera
