// The kube-scheduler extender's verbs on payloads built from the extender v1 types, Kubernetes quantities,
// and node models from GPU Feature Discovery labels.
#include "k8s/extender/extender.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/utc_time.h"
#include "k8s/api/objects.h"
#include "k8s/api/quantity.h"

namespace tessera {
namespace {

using json = nlohmann::json;

TEST(Quantity, ParsesTheApiServersForms) {
  EXPECT_EQ(*ParseQuantityMilli("8"), 8000);
  EXPECT_EQ(*ParseQuantityMilli("500m"), 500);
  EXPECT_EQ(*ParseQuantityMilli("1.5"), 1500);
  EXPECT_EQ(*ParseQuantityMilli("64Gi"), (int64_t{64} << 30) * 1000);
  EXPECT_EQ(*ParseQuantityMilli("2e3"), 2000000);
  EXPECT_EQ(*ParseQuantityMilli("100M"), int64_t{100000000} * 1000);
  EXPECT_EQ(*ParseQuantityMilli("2112998564Ki"), int64_t{2112998564} * 1024 * 1000);
  EXPECT_EQ(*ParseQuantityMilli("1n"), 1);  // a fraction of the smallest unit rounds up
  EXPECT_EQ(*ParseQuantityCount("3"), 3);
  for (const char* bad : {"", "one", "eight", "1.2.3", "5Zi", "e3", "1e", "99999999999999999999", "8E"})
    EXPECT_FALSE(ParseQuantityMilli(bad).ok()) << bad;
  EXPECT_FALSE(ParseQuantityCount("1.5").ok());
}

json ExtenderNode(const std::string& name, json alloc, json labels) {
  labels["nvidia.com/gpu.present"] = "true";
  alloc["cpu"] = "223500m";
  alloc["memory"] = "2112998564Ki";
  return {{"metadata", {{"name", name}, {"labels", labels}}},
          {"status", {{"allocatable", alloc}, {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

json ExtenderPod(const std::string& name, const std::string& resource, const std::string& count,
                 int priority = 0) {
  return {{"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name}}},
          {"spec",
           {{"priority", priority},
            {"containers",
             {{{"name", "main"},
               {"resources",
                {{"limits", {{resource, count}}}, {"requests", {{resource, count}, {"cpu", "8"}}}}}}}}}}};
}

const json kH100 = {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}, {"nvidia.com/gpu.count", "8"}};
const json kA100 = {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}, {"nvidia.com/gpu.count", "8"}};

Extender Make() { return Extender({&Catalog::Default(), "tessera.io/leaf", ""}); }

std::vector<std::string> Names(const json& result) {
  std::vector<std::string> out;
  for (const json& n : result["Nodes"]["items"]) out.push_back(n["metadata"]["name"]);
  return out;
}

TEST(Extender, FilterKeepsNodesThatHoldThePodAndSaysWhyNotForTheOthers) {
  const json nodes = {ExtenderNode("gpu-8", {{"nvidia.com/gpu", "8"}}, kH100),
                      ExtenderNode("gpu-4", {{"nvidia.com/gpu", "4"}}, kH100),
                      ExtenderNode("cpu-0", {{"nvidia.com/gpu", "0"}}, json::object())};
  const json args = {{"Pod", ExtenderPod("train-0", "nvidia.com/gpu", "8")},
                     {"Nodes", {{"items", nodes}}},
                     {"NodeNames", nullptr}};
  const ExtenderAnswer a = Make().Filter(args.dump());
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(a.body["Error"], "");
  EXPECT_EQ(Names(a.body), std::vector<std::string>{"gpu-8"});
  EXPECT_NE(a.body["FailedNodes"]["gpu-4"].get<std::string>().find("has 4 allocatable"), std::string::npos);
  EXPECT_TRUE(a.body["FailedNodes"].contains("cpu-0"));
  // Keys are matched as Go does: lower case works too.
  const json lower = {{"pod", ExtenderPod("train-0", "nvidia.com/gpu", "8")}, {"nodes", {{"items", nodes}}}};
  EXPECT_EQ(Names(Make().Filter(lower.dump()).body), std::vector<std::string>{"gpu-8"});
}

TEST(Extender, FilterReadsMigSlicesByProfile) {
  json bal = ExtenderNode("a100-balanced",
                          {{"nvidia.com/mig-1g.10gb", "16"}, {"nvidia.com/mig-3g.40gb", "8"}}, kA100);
  json one = ExtenderNode("a100-1g", {{"nvidia.com/mig-1g.10gb", "56"}}, kA100);
  const json args = {{"Pod", ExtenderPod("infer", "nvidia.com/mig-3g.40gb", "1")},
                     {"Nodes", {{"items", {bal, one}}}}};
  const ExtenderAnswer a = Make().Filter(args.dump());
  EXPECT_EQ(Names(a.body), std::vector<std::string>{"a100-balanced"});
  EXPECT_NE(a.body["FailedNodes"]["a100-1g"].get<std::string>().find("3g.40gb"), std::string::npos);
}

TEST(Extender, MalformedInputIsRefusedNeverThrown) {
  const Extender e = Make();
  for (const char* body :
       {"", "{\"Pod\": ", "[1,2]", "hello", "{\"Pod\": \"x\", \"Nodes\": 5}", "{\"Pod\": null}"})
    EXPECT_EQ(e.Filter(body).status, 400) << body;
  const json args = {{"Pod", ExtenderPod("bad", "nvidia.com/gpu", "eight")},
                     {"Nodes", {{"items", {ExtenderNode("gpu-8", {{"nvidia.com/gpu", "8"}}, kH100)}}}}};
  const ExtenderAnswer a = e.Filter(args.dump());
  EXPECT_EQ(a.status, 200);
  EXPECT_NE(a.body["Error"].get<std::string>().find("eight"), std::string::npos);
  EXPECT_TRUE(a.body["Nodes"]["items"].empty());
  EXPECT_EQ(e.Prioritize("{").status, 400);
  EXPECT_EQ(e.Preempt("[]").status, 400);
}

TEST(Extender, PrioritizeScoresEveryNodeZeroToTenFullestFirst) {
  json full = ExtenderNode("full", {{"nvidia.com/gpu", "8"}}, kH100);
  json bigger = ExtenderNode("bigger", {{"nvidia.com/gpu", "16"}}, kH100);
  json none = ExtenderNode("none", {{"nvidia.com/gpu", "0"}}, json::object());
  const json args = {{"Pod", ExtenderPod("p", "nvidia.com/gpu", "8")},
                     {"Nodes", {{"items", {full, bigger, none}}}}};
  const ExtenderAnswer a = Make().Prioritize(args.dump());
  ASSERT_TRUE(a.body.is_array());
  ASSERT_EQ(a.body.size(), 3u);
  std::map<std::string, int> score;
  for (const json& h : a.body) score[h["Host"]] = h["Score"];
  EXPECT_EQ(score["full"], 10);
  EXPECT_LT(score["bigger"], score["full"]);
  EXPECT_EQ(score["none"], 0);
}

// Served by the scheduler, /filter and /prioritize answer from the loop's view for GPU pods (its fits, its
// reasons, its policy's order); a pod without GPUs and the standalone extender keep the node-only rules; the
// view's error fails the verb.
TEST(Extender, TheLoopsViewDecidesForGpuPods) {
  std::vector<std::string> asked;
  std::string fail;
  ExtenderOptions o{&Catalog::Default(), "tessera.io/leaf", ""};
  o.loop_view = [&](const json& pod, const std::vector<std::string>& nodes) -> Result<std::vector<LoopFit>> {
    asked = nodes;
    if (!fail.empty()) return Status::Error(fail);
    EXPECT_EQ(pod["metadata"]["name"], "p");
    return std::vector<LoopFit>{
        {"a", true, 1, ""}, {"b", true, 0, ""}, {"c", false, -1, "node c: 8 GPUs held"}, {"d", true, -1, ""}};
  };
  const Extender e(o);
  json nodes = json::array();
  for (const char* n : {"a", "b", "c", "d"})
    nodes.push_back(ExtenderNode(n, {{"nvidia.com/gpu", "8"}}, kH100));
  const json args = {{"Pod", ExtenderPod("p", "nvidia.com/gpu", "2")}, {"Nodes", {{"items", nodes}}}};
  const ExtenderAnswer f = e.Filter(args.dump());
  ASSERT_EQ(f.status, 200);
  EXPECT_EQ(asked, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(Names(f.body), (std::vector<std::string>{"a", "b", "d"}))
      << "node c has room by allocatable alone";
  EXPECT_EQ(f.body["FailedNodes"]["c"], "tessera: node c: 8 GPUs held");
  const ExtenderAnswer p = e.Prioritize(args.dump());
  ASSERT_TRUE(p.body.is_array());
  std::map<std::string, int> score;
  for (const json& h : p.body) score[h["Host"]] = h["Score"];
  EXPECT_EQ(score, (std::map<std::string, int>{{"a", 9}, {"b", 10}, {"c", 0}, {"d", 1}}));
  // A pod without GPUs is not the loop's to judge.
  asked.clear();
  const json cpu = {{"Pod", ExtenderPod("p", "cpu", "2")}, {"Nodes", {{"items", nodes}}}};
  EXPECT_EQ(Names(e.Filter(cpu.dump()).body).size(), 4u);
  EXPECT_TRUE(asked.empty());
  fail = "the spec does not parse";
  const ExtenderAnswer bad = e.Filter(args.dump());
  EXPECT_EQ(bad.status, 200);
  EXPECT_EQ(bad.body["Error"], "tessera: the spec does not parse");
  EXPECT_TRUE(bad.body["Nodes"]["items"].empty());
  EXPECT_EQ(e.Prioritize(args.dump()).status, 500);
}

TEST(Extender, PreemptTakesTheFewestLowestPriorityVictims) {
  json p1 = ExtenderPod("batch-0", "nvidia.com/gpu", "4", 0),
       p2 = ExtenderPod("batch-1", "nvidia.com/gpu", "4", 5),
       p3 = ExtenderPod("batch-2", "nvidia.com/gpu", "8", 10);
  const json args = {{"Pod", ExtenderPod("train", "nvidia.com/gpu", "4", 1000)},
                     {"NodeNameToVictims",
                      {{"gpu-8", {{"Pods", {p2, p1}}, {"NumPDBViolations", 0}}},
                       {"gpu-8b", {{"Pods", {p3}}, {"NumPDBViolations", 1}}}}}};
  const ExtenderAnswer a = Make().Preempt(args.dump());
  ASSERT_EQ(a.status, 200);
  const json& m = a.body["NodeNameToMetaVictims"];
  ASSERT_EQ(m["gpu-8"]["Pods"].size(), 1u);
  EXPECT_EQ(m["gpu-8"]["Pods"][0]["UID"], "uid-batch-0");  // 4 GPUs suffice: the lower priority goes
  EXPECT_EQ(m["gpu-8b"]["NumPDBViolations"], 1);
}

// The cycle's victim rules (sched/preemption.h): never a victim of the pod's priority or above, nor one
// younger than the minimum run time; cheapest first (lower priority, then less work lost since it started);
// released victims that are not needed are spared.
TEST(Extender, PreemptChoosesVictimsByTheCyclesRules) {
  const int64_t now = 1'800'000'000;  // 2027-01-15
  auto started = [&](json p, int64_t ago) {
    p["status"]["startTime"] = FormatIsoUtc(now - ago);
    return p;
  };
  ExtenderOptions o{&Catalog::Default(), "tessera.io/leaf", ""};
  o.min_runtime_s = 300;
  o.now_s = [now] { return now; };
  const Extender e(o);
  auto victims_of = [&](const json& pods, const json& pod) {
    const json args = {{"Pod", pod},
                       {"NodeNameToVictims", {{"n", {{"Pods", pods}, {"NumPDBViolations", 0}}}}}};
    const ExtenderAnswer a = e.Preempt(args.dump());
    EXPECT_EQ(a.status, 200) << a.body.dump();
    std::vector<std::string> uids;
    if (a.body["NodeNameToMetaVictims"].contains("n"))
      for (const json& v : a.body["NodeNameToMetaVictims"]["n"]["Pods"]) uids.push_back(v["UID"]);
    return uids;
  };
  const json pod = ExtenderPod("serve", "nvidia.com/gpu", "4", 1000);
  // Same priority: less work lost first (started an hour ago against a day ago).
  const json young = started(ExtenderPod("hour", "nvidia.com/gpu", "4", 10), 3600);
  const json old = started(ExtenderPod("day", "nvidia.com/gpu", "4", 10), 86400);
  EXPECT_EQ(victims_of({old, young}, pod), std::vector<std::string>{"uid-hour"});
  // Too young to be preempted (under 300 s), and the pod's own priority: never victims.
  const json fresh = started(ExtenderPod("fresh", "nvidia.com/gpu", "4", 0), 60);
  const json peer = started(ExtenderPod("peer", "nvidia.com/gpu", "4", 1000), 86400);
  EXPECT_EQ(victims_of({fresh, peer, old}, pod), std::vector<std::string>{"uid-day"});
  EXPECT_TRUE(victims_of({fresh, peer}, pod).empty());  // none may be taken: no candidate
  // Released in cost order until they free 4 GPUs (1 + 1 + 4), then the first two are spared.
  const json a1 = started(ExtenderPod("a1", "nvidia.com/gpu", "1", 1), 86400);
  const json a2 = started(ExtenderPod("a2", "nvidia.com/gpu", "1", 2), 86400);
  const json a4 = started(ExtenderPod("a4", "nvidia.com/gpu", "4", 3), 86400);
  EXPECT_EQ(victims_of({a4, a2, a1}, pod), std::vector<std::string>{"uid-a4"});
  // Even all of them free less than asked (kube-scheduler also counts what is free there): all are taken.
  EXPECT_EQ(victims_of({a2, a1}, pod), (std::vector<std::string>{"uid-a1", "uid-a2"}));
}

// Every verb refuses a body nested past the limit with a 400 naming it, before any parser recurses, and
// filters correctly afterwards.
TEST(Extender, DeepBodiesAreRefusedBeforeParsing) {
  const Extender e = Make();
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const std::string in_annotation =
      R"({"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[{"metadata":{"name":"n","annotations":{"x":)" +
      deep + "}}}]}}";
  for (auto verb : {&Extender::Filter, &Extender::Prioritize, &Extender::Preempt, &Extender::Bind}) {
    const ExtenderAnswer a = (e.*verb)(in_annotation);
    EXPECT_EQ(a.status, 400);
    EXPECT_NE(a.body.dump().find("nested deeper than 64"), std::string::npos) << a.body.dump();
  }
}

}  // namespace
}  // namespace tessera
