// Pods with our schedulerName become jobs: a PodGroup's members one gang, any other pod its own job.
#include "k8s/pod_jobs.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "service/workload_json.h"

namespace tessera {
namespace {

using json = nlohmann::json;

json RequestPod(const std::string& name, json requests, json labels = json::object()) {
  return {{"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", "u-" + name}, {"labels", labels}}},
          {"spec", {{"schedulerName", "tessera"}, {"containers", {{{"name", "c"}, {"resources", {{"requests", requests}}}}}}}},
          {"status", {{"phase", "Pending"}}}};
}

TEST(PodJobs, KeysAndWaiting) {
  json p = RequestPod("w-0", {{"nvidia.com/gpu", "8"}}, {{"scheduling.x-k8s.io/pod-group", "train"}});
  EXPECT_TRUE(PodIsOurs(p, "tessera"));
  EXPECT_FALSE(PodIsOurs(p, "default-scheduler"));
  EXPECT_EQ(JobKeyOf(p).str(), "podgroup/ml/train");
  EXPECT_TRUE(PodWaiting(p));
  json bound = p;
  bound["spec"]["nodeName"] = "n1";
  EXPECT_FALSE(PodWaiting(bound));
  json volcano = RequestPod("v", {{"nvidia.com/gpu", "1"}});
  volcano["metadata"]["annotations"] = {{"scheduling.k8s.io/group-name", "vg"}};
  EXPECT_EQ(JobKeyOf(volcano).str(), "podgroup/ml/vg");
  EXPECT_EQ(JobKeyOf(RequestPod("solo", {{"nvidia.com/gpu", "1"}})).str(), "pod/ml/solo");
  EXPECT_EQ(MinMemberOf({{"spec", {{"minMember", 4}}}}), 4);
  EXPECT_EQ(MinMemberOf({{"spec", {{"minMember", "4"}}}}), -1);
  json kai = RequestPod("k", {{"nvidia.com/gpu", "1"}});
  kai["metadata"]["annotations"] = {{"pod-group-name", "pg-k"}};
  EXPECT_EQ(JobKeyOf(kai).str(), "podgroup/ml/pg-k");
}

TEST(PodJobs, AJobRecordNamesItsKeyWhateverItsTeam) {
  const JobKey key{"podgroup", "ml", "train"};
  EXPECT_EQ(ProjectOfKey(key), "podgroup/ml");
  EXPECT_EQ(KeyOfJob(ProjectOfKey(key), "research-queue", "train"), key);
  EXPECT_EQ(KeyOfJob("pod", "ml", "solo"), (JobKey{"pod", "ml", "solo"}));  // records of earlier versions
  EXPECT_FALSE(KeyOfJob("vision", "ml", "x").has_value());
  EXPECT_FALSE(KeyOfJob("pod/", "ml", "x").has_value());
}

TEST(PodJobs, AGatedPodDoesNotWaitUntilEveryGateIsRemoved) {
  json p = RequestPod("q", {{"nvidia.com/gpu", "1"}});
  p["spec"]["schedulingGates"] = {{{"name", "kueue.x-k8s.io/admission"}}, {{"name", "example.com/quota"}}};
  EXPECT_TRUE(PodGated(p));
  EXPECT_FALSE(PodWaiting(p));
  p["spec"]["schedulingGates"] = {{{"name", "example.com/quota"}}};
  EXPECT_FALSE(PodWaiting(p));
  p["spec"]["schedulingGates"] = json::array();
  EXPECT_FALSE(PodGated(p));
  EXPECT_TRUE(PodWaiting(p));
}

// The typed job is what a restart reads back from its stored body: ParseJobSpec(body) gives the same
// workload, field for field.
void ExpectBodyReadsBack(const JobSpec& spec) {
  auto parsed = ParseJobSpec(spec.body);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message << " in " << spec.body.dump();
  EXPECT_TRUE(parsed.value().workload == spec.workload) << spec.body.dump();
  EXPECT_EQ(parsed.value().mig_profile, spec.mig_profile);
}

TEST(PodJobs, AGangIsOneTrainingJob) {
  std::vector<PodDemand> members;
  for (int i = 0; i < 4; ++i)
    members.push_back(*ReadPodDemand(
        RequestPod("w-" + std::to_string(i), {{"nvidia.com/gpu", "8"}, {"cpu", "96"}, {"memory", "1Ti"}})));
  auto spec = JobSpecFor({"podgroup", "ml", "train"}, members, 4, "training", "vision");
  ASSERT_TRUE(spec.ok()) << spec.error();
  EXPECT_EQ(spec->workload.cls, WorkloadClass::kTraining);
  EXPECT_EQ(spec->workload.workers, 4);
  EXPECT_EQ(spec->workload.gpus_per_worker, 8);
  EXPECT_EQ(spec->workload.cpu_milli, 96000);
  EXPECT_EQ(spec->workload.host_memory_mib, 1 << 20);
  EXPECT_EQ(spec->workload.team, "vision");
  EXPECT_EQ(spec->workload.project, "podgroup/ml");
  EXPECT_EQ(spec->body["team"], "vision");
  ExpectBodyReadsBack(*spec);
  // Odd quantities (millicores, bytes that are no whole MiB) read back the same.
  auto odd = JobSpecFor({"pod", "ml", "odd"},
                        {*ReadPodDemand(RequestPod(
                            "odd", {{"nvidia.com/gpu", "1"}, {"cpu", "1250m"}, {"memory", "1000000001"}}))},
                        1, "kubernetes-default", "ml");
  ASSERT_TRUE(odd.ok()) << odd.error();
  EXPECT_EQ(odd->workload.cpu_milli, 1250);
  EXPECT_EQ(odd->workload.host_memory_mib, 954) << "1,000,000,001 bytes, rounded up to MiB";
  ExpectBodyReadsBack(*odd);
}

TEST(PodJobs, MigPodsAndRefusals) {
  auto mig =
      JobSpecFor({"pod", "s", "e"}, {*ReadPodDemand(RequestPod("e", {{"nvidia.com/mig-1g.10gb", "1"}}))}, 1,
                 "inference", "s");
  ASSERT_TRUE(mig.ok()) << mig.error();
  EXPECT_EQ(mig->mig_profile, "1g.10gb");
  EXPECT_EQ(mig->workload.cls, WorkloadClass::kInference);
  ExpectBodyReadsBack(*mig);
  EXPECT_FALSE(
      JobSpecFor({"pod", "s", "c"}, {*ReadPodDemand(RequestPod("c", {{"cpu", "1"}}))}, 1, "x", "s").ok());
  auto two = JobSpecFor({"pod", "s", "t"},
                        {*ReadPodDemand(RequestPod("t", {{"nvidia.com/mig-1g.10gb", "2"}}))}, 1, "x", "s");
  EXPECT_FALSE(two.ok());
  std::vector<PodDemand> mixed = {*ReadPodDemand(RequestPod("a", {{"nvidia.com/gpu", "8"}})),
                                  *ReadPodDemand(RequestPod("b", {{"nvidia.com/gpu", "4"}}))};
  auto m = JobSpecFor({"podgroup", "ml", "g"}, mixed, 2, "x", "ml");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().find("different GPUs"), std::string::npos);
  // A name longer than a job's (a pod's may have 253 bytes) is refused as a submission's would be.
  const std::string long_name(200, 'a');
  auto named = JobSpecFor({"pod", "s", long_name},
                          {*ReadPodDemand(RequestPod(long_name, {{"nvidia.com/gpu", "1"}}))}, 1, "x", "s");
  ASSERT_FALSE(named.ok());
  EXPECT_NE(named.error().find("at most 128"), std::string::npos) << named.error();
  // Malformed: a reason, no job.
  EXPECT_FALSE(ReadPodDemand(RequestPod("bad", {{"nvidia.com/gpu", "one"}})).ok());
}

// A PodGroup's status counts its members as coscheduling and Volcano do.
TEST(PodJobs, PodGroupStatusFromMembers) {
  auto member = [](const std::string& name, const std::string& node, const std::string& phase) {
    json p = RequestPod(name, {{"nvidia.com/gpu", "1"}});
    if (!node.empty()) p["spec"]["nodeName"] = node;
    p["status"]["phase"] = phase;
    return p;
  };
  const std::vector<json> two_bound = {member("a", "n1", "Running"), member("b", "n2", "Pending"),
                                       member("c", "", "Pending")};
  json st = PodGroupStatus(2, two_bound, false, "2026-01-01T00:00:00Z");
  EXPECT_EQ(st["phase"], "Scheduled");
  EXPECT_EQ(st["scheduled"], 2);
  EXPECT_EQ(st["running"], 1);
  EXPECT_EQ(st["conditions"][0]["status"], "True");
  EXPECT_EQ(PodGroupStatus(2, two_bound, true, "t")["phase"], "Running");  // Volcano has no Scheduled phase
  EXPECT_EQ(PodGroupStatus(3, two_bound, false, "t")["phase"], "Pending");
  EXPECT_EQ(PodGroupStatus(3, two_bound, false, "t")["conditions"][0]["reason"], "Unschedulable");
  const std::vector<json> done = {member("a", "n1", "Succeeded"), member("b", "n2", "Succeeded")};
  EXPECT_EQ(PodGroupStatus(2, done, false, "t")["phase"], "Finished");
  EXPECT_EQ(PodGroupStatus(2, done, true, "t")["phase"], "Completed");
  EXPECT_EQ(PodGroupStatus(2, {member("a", "n1", "Failed"), member("b", "", "Pending")}, false, "t")["phase"], "Failed");
}

// One readiness rule for every path (intake and DRA): a gang waits for its PodGroup, then for minMember
// members; a single pod is ready alone.
TEST(PodJobs, AGangIsReadyOnceItsPodGroupAndMinMemberAreThere) {
  const JobKey gang{"podgroup", "ml", "train"};
  GangReadiness r = ReadinessOf(gang, nullptr, 4);
  EXPECT_FALSE(r.ready);
  EXPECT_EQ(r.reason, "PodGroupNotFound");
  EXPECT_NE(r.message.find("ml/train"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("scheduling.run.ai/v2alpha2"), std::string::npos) << r.message;
  const json kai = {{"apiVersion", "scheduling.run.ai/v2alpha2"},
                    {"kind", "PodGroup"},
                    {"metadata", {{"name", "train"}, {"namespace", "ml"}}},
                    {"spec", {{"minMember", 4}}}};
  r = ReadinessOf(gang, &kai, 3);
  EXPECT_FALSE(r.ready);
  EXPECT_EQ(r.reason, "GangIncomplete");
  EXPECT_NE(r.message.find("3 of its 4 members"), std::string::npos) << r.message;
  r = ReadinessOf(gang, &kai, 5);
  EXPECT_TRUE(r.ready);
  EXPECT_EQ(r.tasks, 4u);  // minMember, not every waiting member
  const json unset = {{"metadata", {{"name", "train"}, {"namespace", "ml"}}}, {"spec", json::object()}};
  r = ReadinessOf(gang, &unset, 3);
  EXPECT_TRUE(r.ready);
  EXPECT_EQ(r.tasks, 3u);  // no minMember: every waiting member
  EXPECT_FALSE(ReadinessOf(gang, &unset, 0).ready);
  r = ReadinessOf({"pod", "ml", "infer"}, nullptr, 1);
  EXPECT_TRUE(r.ready);
  EXPECT_EQ(r.tasks, 1u);
}

// A launch names its job by JobKey::str(); the backend reads it back, and nothing else.
TEST(PodJobs, JobKeysReadBack) {
  for (const JobKey& k : {JobKey{"pod", "ml", "train-0"}, JobKey{"podgroup", "team-a", "gang"}}) {
    const std::optional<JobKey> back = ParseJobKey(k.str());
    ASSERT_TRUE(back.has_value()) << k.str();
    EXPECT_EQ(*back, k);
  }
  for (const char* bad : {"", "pod", "pod/ml", "pod//x", "pod/ml/", "job/ml/x", "pod/ml/x/y", "/ml/x"})
    EXPECT_FALSE(ParseJobKey(bad).has_value()) << bad;
}

}  // namespace
}  // namespace tessera
