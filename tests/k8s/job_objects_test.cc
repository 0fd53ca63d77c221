// Jobs from the API with a container: the pods (and the gang's PodGroup) they become.
#include "k8s/job_objects.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "k8s/pod_jobs.h"
#include "service/service.h"

namespace tessera {
namespace {

using json = nlohmann::json;

const TeamNamespaces kNamespaces = {{"vision", "ml-vision"}};

JobRecord Job(int64_t id, json body, WorkloadClass cls, int replicas = 1, const std::string& mig = "") {
  JobRecord j;
  j.id = id;
  j.user = "ana";
  j.team = "vision";
  j.project = "detector";
  j.name = body.value("name", "j");
  j.priority_class = "training";
  j.cls = cls;
  j.replicas = replicas;
  j.mig_profile = mig;
  j.spec_json = body.dump();
  return j;
}

TEST(JobObjects, ATrainingGangIsAPodGroupAndOnePodPerWorker) {
  const json body = {
      {"name", "train"},
      {"class", "training"},
      {"workers", 2},
      {"gpus_per_worker", 8},
      {"cpu", 16},
      {"host_memory_gib", 64},
      {"container", {{"image", "trainer:1"}, {"command", {"python", "t.py"}}, {"env", {{"A", "1"}}}}}};
  auto o = ObjectsForJob(Job(7, body, WorkloadClass::kTraining), "tessera", "training", kNamespaces);
  ASSERT_TRUE(o.ok()) << o.error();
  EXPECT_EQ(o->ns, "ml-vision") << "the mapped namespace, not the team's name";
  ASSERT_TRUE(o->pod_group.has_value());
  EXPECT_EQ((*o->pod_group)["metadata"]["name"], "tessera-7");
  EXPECT_EQ((*o->pod_group)["spec"]["minMember"], 2);
  ASSERT_EQ(o->pods.size(), 2u);
  ASSERT_EQ(o->keys.size(), 1u);
  EXPECT_EQ(o->keys[0], (JobKey{"podgroup", "ml-vision", "tessera-7"}));
  EXPECT_EQ((*o->pod_group)["metadata"]["namespace"], "ml-vision");
  for (int i = 0; i < 2; ++i) {
    const json& p = o->pods[i];
    EXPECT_EQ(p["metadata"]["name"], "tessera-7-" + std::to_string(i));
    EXPECT_EQ(p["metadata"]["namespace"], "ml-vision");
    EXPECT_EQ(p["metadata"]["labels"]["tessera.io/team"], "vision");
    EXPECT_EQ(JobKeyOf(p), o->keys[0]) << "the pods are the PodGroup's members";
    EXPECT_EQ(JobIdOfPod(p), 7);
    EXPECT_EQ(p["spec"]["schedulerName"], "tessera");
    EXPECT_EQ(p["spec"]["priorityClassName"], "training");
    EXPECT_EQ(p["spec"]["restartPolicy"], "Never");
    const json& c = p["spec"]["containers"][0];
    EXPECT_EQ(c["image"], "trainer:1");
    EXPECT_EQ(c["command"], json({"python", "t.py"}));
    EXPECT_EQ(c["env"], json::parse(R"([{"name":"A","value":"1"}])"));
    EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], "8");
    EXPECT_EQ(c["resources"]["requests"]["nvidia.com/gpu"], "8");
    EXPECT_EQ(c["resources"]["requests"]["cpu"], "16000m");
    EXPECT_EQ(c["resources"]["requests"]["memory"], "65536Mi");
  }
}

TEST(JobObjects, InferenceReplicasAreOnePodEachWithTheirMigSlice) {
  const json body = {{"name", "embed"},
                     {"mig_profile", "1g.10gb"},
                     {"gpu_fraction", 0.1},
                     {"replicas", 3},
                     {"container", {{"image", "server:2"}}}};
  auto o = ObjectsForJob(Job(9, body, WorkloadClass::kInference, 3, "1g.10gb"), "tessera", "", kNamespaces);
  ASSERT_TRUE(o.ok()) << o.error();
  EXPECT_FALSE(o->pod_group.has_value());
  ASSERT_EQ(o->pods.size(), 3u);
  ASSERT_EQ(o->keys.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    const json& p = o->pods[r];
    EXPECT_EQ(JobKeyOf(p), o->keys[r]);
    EXPECT_EQ(o->keys[r], (JobKey{"pod", "ml-vision", "tessera-9-" + std::to_string(r)}));
    EXPECT_FALSE(p["spec"].contains("priorityClassName"));
    EXPECT_EQ(p["spec"]["containers"][0]["resources"]["limits"], json({{"nvidia.com/mig-1g.10gb", "1"}}));
  }
}

TEST(JobObjects, WhatKubernetesCannotRunIsAnError) {
  const json fractional = {{"name", "f"}, {"gpu_fraction", 0.25}, {"container", {{"image", "x"}}}};
  auto o = ObjectsForJob(Job(1, fractional, WorkloadClass::kInference), "tessera", "", kNamespaces);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().find("MIG profile"), std::string::npos) << o.error();
  EXPECT_FALSE(ObjectsForJob(Job(2, {{"name", "n"}}, WorkloadClass::kTraining), "tessera", "", kNamespaces).ok());
  JobRecord broken = Job(3, {{"name", "b"}}, WorkloadClass::kTraining);
  broken.spec_json = "{";
  EXPECT_FALSE(ObjectsForJob(broken, "tessera", "", kNamespaces).ok());
  EXPECT_FALSE(HasContainer(broken));
  JobRecord unmapped = Job(4, {{"name", "u"}, {"gpus_per_worker", 1}, {"container", {{"image", "x"}}}},
                           WorkloadClass::kTraining);
  unmapped.team = "kube-system";
  auto refused = ObjectsForJob(unmapped, "tessera", "", kNamespaces);
  ASSERT_FALSE(refused.ok()) << "a team's name is never taken as its namespace";
  EXPECT_NE(refused.error().find("team 'kube-system' has no namespace"), std::string::npos) << refused.error();
  EXPECT_TRUE(ObjectsForJob(unmapped, "tessera", "", {{"kube-system", "ml-ops"}}).ok());
  EXPECT_EQ(JobIdOfPod({{"metadata", {{"labels", {{"tessera.io/job-id", "12x"}}}}}}), -1);
  EXPECT_EQ(JobIdOfPod({{"metadata", {{"name", "p"}}}}), -1);
}

// The keys a launch carries (ServiceConfig::external_keys) are the keys of the objects made later.
TEST(JobObjects, KeysWithoutTheObjectsAreTheObjectsKeys) {
  const json container = {{"image", "x"}};
  const std::vector<JobRecord> jobs = {
      Job(7,
          {{"name", "g"},
           {"class", "training"},
           {"workers", 3},
           {"gpus_per_worker", 2},
           {"container", container}},
          WorkloadClass::kTraining),
      Job(8, {{"name", "one"}, {"class", "training"}, {"gpus_per_worker", 1}, {"container", container}},
          WorkloadClass::kTraining),
      Job(9,
          {{"name", "r"},
           {"mig_profile", "1g.10gb"},
           {"gpu_fraction", 0.1},
           {"replicas", 4},
           {"container", container}},
          WorkloadClass::kInference, 4, "1g.10gb")};
  for (const JobRecord& j : jobs) {
    auto objects = ObjectsForJob(j, "tessera", "", kNamespaces);
    auto keys = ApiJobKeys(j, kNamespaces);
    ASSERT_TRUE(objects.ok() && keys.ok()) << j.name;
    EXPECT_EQ(*keys, objects->keys) << j.name;
  }
  EXPECT_EQ(ApiJobKeys(jobs[0], kNamespaces)->size(), 1u) << "a gang binds through its PodGroup";
  EXPECT_EQ(ApiJobKeys(jobs[2], kNamespaces)->size(), 4u) << "one key per replica";
  EXPECT_FALSE(ApiJobKeys(Job(2, {{"name", "n"}}, WorkloadClass::kTraining), kNamespaces).ok())
      << "no container";
  JobRecord unmapped = jobs[1];
  unmapped.team = "kube-system";
  EXPECT_FALSE(ApiJobKeys(unmapped, kNamespaces).ok()) << "no namespace for its team";
}

}  // namespace
}  // namespace tessera
