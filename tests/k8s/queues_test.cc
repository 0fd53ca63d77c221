#include "k8s/queues.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tessera {
namespace {

using json = nlohmann::json;

json VolcanoQueue(const std::string& name, json spec) {
  return {{"apiVersion", "scheduling.volcano.sh/v1beta1"},
          {"kind", "Queue"},
          {"metadata", {{"name", name}}},
          {"spec", std::move(spec)}};
}

json KaiQueue(const std::string& name, json spec) {
  return {{"apiVersion", "scheduling.run.ai/v2"},
          {"kind", "Queue"},
          {"metadata", {{"name", name}}},
          {"spec", std::move(spec)}};
}

TEST(QueuesTest, VolcanoGuaranteeCapabilityAndWeight) {
  auto q = ReadVolcanoQueue(
      VolcanoQueue("research", {{"weight", 3},
                                {"guarantee", {{"resource", {{"nvidia.com/gpu", "8"}, {"cpu", "64"}}}}},
                                {"capability", {{"nvidia.com/gpu", "32"}}}}));
  ASSERT_TRUE(q.ok()) << q.error();
  EXPECT_EQ(q->name, "research");
  EXPECT_EQ(q->source, "volcano");
  EXPECT_EQ(q->guaranteed_milli, 8000);
  EXPECT_EQ(q->limit_milli, 32000);
  EXPECT_EQ(q->over_quota_weight, 3);
}

TEST(QueuesTest, VolcanoDeservedIsTheFloorWhenNoGuaranteeAndNoCapMeansNone) {
  auto q = ReadVolcanoQueue(VolcanoQueue("a", {{"deserved", {{"nvidia.com/gpu", 4}}}}));
  ASSERT_TRUE(q.ok()) << q.error();
  EXPECT_EQ(q->guaranteed_milli, 4000);
  EXPECT_EQ(q->limit_milli, -1);
  EXPECT_EQ(q->over_quota_weight, 1);
  auto bare = ReadVolcanoQueue(VolcanoQueue("default", json::object()));
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->guaranteed_milli, 0);
}

TEST(QueuesTest, VolcanoErrorsNameTheField) {
  auto w = ReadVolcanoQueue(VolcanoQueue("a", {{"weight", 0}}));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().find("spec.weight"), std::string::npos) << w.error();
  auto cap = ReadVolcanoQueue(VolcanoQueue("a", {{"guarantee", {{"resource", {{"nvidia.com/gpu", "8"}}}}},
                                                 {"capability", {{"nvidia.com/gpu", "4"}}}}));
  ASSERT_FALSE(cap.ok());
  EXPECT_NE(cap.error().find("spec.capability"), std::string::npos) << cap.error();
  auto bad = ReadVolcanoQueue(VolcanoQueue("a", {{"capability", {{"nvidia.com/gpu", "lots"}}}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("spec.capability[nvidia.com/gpu]"), std::string::npos) << bad.error();
  EXPECT_FALSE(ReadVolcanoQueue(json::array()).ok());
  EXPECT_FALSE(ReadVolcanoQueue(json{{"metadata", json::object()}}).ok());
}

TEST(QueuesTest, KaiQuotaLimitAndOverQuotaWeight) {
  auto q = ReadKaiQueue(KaiQueue(
      "team-a",
      {{"resources",
        {{"gpu", {{"quota", 2.5}, {"limit", 16}, {"overQuotaWeight", 2}}}, {"cpu", {{"quota", -1}}}}}}));
  ASSERT_TRUE(q.ok()) << q.error();
  EXPECT_EQ(q->source, "kai");
  EXPECT_EQ(q->guaranteed_milli, 2500);
  EXPECT_EQ(q->limit_milli, 16000);
  EXPECT_EQ(q->over_quota_weight, 2);
  auto unlimited = ReadKaiQueue(KaiQueue("b", {{"resources", {{"gpu", {{"quota", -1}, {"limit", -1}}}}}}));
  ASSERT_TRUE(unlimited.ok()) << unlimited.error();
  EXPECT_EQ(unlimited->guaranteed_milli, 0);
  EXPECT_EQ(unlimited->limit_milli, -1);
  auto bad = ReadKaiQueue(KaiQueue("c", {{"resources", {{"gpu", {{"quota", "four"}}}}}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("spec.resources.gpu.quota"), std::string::npos) << bad.error();
  auto negative = ReadKaiQueue(KaiQueue("d", {{"resources", {{"gpu", {{"limit", -3}}}}}}));
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().find("spec.resources.gpu.limit"), std::string::npos) << negative.error();
}

TEST(QueuesTest, KaiParentsAreNotLeavesAndBadObjectsAreReportedNotFatal) {
  std::map<std::string, json> kai = {
      {"root", KaiQueue("root", json::object())},
      {"leaf", KaiQueue("leaf", {{"parentQueue", "root"}, {"resources", {{"gpu", {{"quota", 4}}}}}})},
      {"broken", KaiQueue("broken", {{"resources", {{"gpu", {{"quota", true}}}}}})}};
  std::map<std::string, json> volcano = {{"v", VolcanoQueue("v", {{"weight", 2}})}};
  std::map<std::string, std::string> errors;
  auto queues = ReadQueues(volcano, kai, &errors);
  ASSERT_EQ(queues.size(), 3u);
  EXPECT_FALSE(queues.at("root").leaf);
  EXPECT_TRUE(queues.at("leaf").leaf);
  EXPECT_EQ(queues.at("leaf").guaranteed_milli, 4000);
  EXPECT_EQ(queues.at("v").over_quota_weight, 2);
  ASSERT_EQ(errors.count("broken"), 1u);
  EXPECT_NE(errors.at("broken").find("quota"), std::string::npos);
}

TEST(QueuesTest, APodNamesItsQueueByLabelAnnotationOrPodGroup) {
  json pod = {{"metadata", {{"name", "p"}, {"namespace", "ns"}}}};
  EXPECT_EQ(QueueOfPod(pod, nullptr), "");
  json group = {{"spec", {{"minMember", 2}, {"queue", "from-group"}}}};
  EXPECT_EQ(QueueOfPod(pod, &group), "from-group");
  pod["metadata"]["annotations"] = {{"scheduling.volcano.sh/queue-name", "from-annotation"}};
  EXPECT_EQ(QueueOfPod(pod, &group), "from-annotation");
  pod["metadata"]["labels"] = {{"kai.scheduler/queue", "from-label"}};
  EXPECT_EQ(QueueOfPod(pod, &group), "from-label");
  EXPECT_TRUE(QueueNameFitsTeam("team-a_1"));
  EXPECT_FALSE(QueueNameFitsTeam("Team.A"));
  EXPECT_FALSE(QueueNameFitsTeam(""));
}

}  // namespace
}  // namespace tessera
