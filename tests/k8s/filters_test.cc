#include "k8s/filters.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace tessera {
namespace {

using json = nlohmann::json;

json FNode(const std::string& name, json labels, json extra_spec = json::object(), json alloc = json::object()) {
  json a = {{"cpu", "64"}, {"memory", "512Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "8"}};
  for (const auto& [k, v] : alloc.items()) a[k] = v;
  return {{"metadata", {{"name", name}, {"labels", labels}}}, {"spec", extra_spec}, {"status", {{"allocatable", a}}}};
}

json FPod(const std::string& name, json spec = json::object(), json labels = json::object(), const std::string& node = "",
          const std::string& cpu = "1") {
  json s = {{"containers", {{{"name", "c"}, {"resources", {{"requests", {{"cpu", cpu}, {"nvidia.com/gpu", "1"}}}}}}}}};
  for (const auto& [k, v] : spec.items()) s[k] = v;
  if (!node.empty()) s["nodeName"] = node;
  return {{"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", name + "-uid"}, {"labels", labels}}},
          {"spec", s},
          {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
}

class FiltersTest : public ::testing::Test {
 protected:
  void AddNode(const json& n) { nodes_[n["metadata"]["name"].get<std::string>()] = n; }
  void AddPod(const json& p) { pods_["ml/" + p["metadata"]["name"].get<std::string>()] = p; }
  FilterWorld World() const { return FilterWorld(nodes_, pods_); }
  std::map<std::string, json> nodes_, pods_;
  std::unique_ptr<ObjectMap> last_;
};

TEST_F(FiltersTest, NodeSelectorAndEveryAffinityOperator) {
  AddNode(FNode("a", {{"pool", "a"}, {"rack", "1"}, {"rdma", "true"}}));
  AddNode(FNode("b", {{"pool", "b"}, {"rack", "9"}}));
  const FilterWorld w = World();
  auto only = [&](json spec) { return w.Passing(FPod("p", spec)); };
  auto req = [](const std::string& key, const std::string& op, json values) {
    json e = {{"key", key}, {"operator", op}};
    if (!values.is_null()) e["values"] = values;
    return json{{"affinity", {{"nodeAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution",
                                                {{"nodeSelectorTerms", {{{"matchExpressions", {e}}}}}}}}}}}};
  };
  EXPECT_EQ(only({{"nodeSelector", {{"pool", "b"}}}}), std::set<std::string>{"b"});
  EXPECT_TRUE(only({{"nodeSelector", {{"pool", "none"}}}}).empty());
  EXPECT_EQ(only(req("pool", "In", {"a"})), std::set<std::string>{"a"});
  EXPECT_EQ(only(req("pool", "NotIn", {"a"})), std::set<std::string>{"b"});
  EXPECT_EQ(only(req("rdma", "Exists", nullptr)), std::set<std::string>{"a"});
  EXPECT_EQ(only(req("rdma", "DoesNotExist", nullptr)), std::set<std::string>{"b"});
  EXPECT_EQ(only(req("rack", "Gt", {"8"})), std::set<std::string>{"b"});
  EXPECT_EQ(only(req("rack", "Lt", {"2"})), std::set<std::string>{"a"});
  EXPECT_TRUE(only(req("rack", "Gt", {"x"})).empty());  // not an integer: matches nothing
  std::map<std::string, int> why;
  w.Passing(FPod("p", {{"nodeSelector", {{"pool", "none"}}}}), &why);
  EXPECT_EQ(UnschedulableMessage(2, why), "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.");
}

TEST_F(FiltersTest, TaintsTolerationsAndCordons) {
  AddNode(FNode("ns", {}, {{"taints", {{{"key", "dedicated"}, {"value", "infer"}, {"effect", "NoSchedule"}}}}}));
  AddNode(FNode("ne", {}, {{"taints", {{{"key", "maint"}, {"value", "true"}, {"effect", "NoExecute"}}}}}));
  AddNode(FNode("pref", {}, {{"taints", {{{"key", "spot"}, {"value", "true"}, {"effect", "PreferNoSchedule"}}}}}));
  AddNode(FNode("cordoned", {}, {{"unschedulable", true}}));
  const FilterWorld w = World();
  std::map<std::string, int> why;
  EXPECT_EQ(w.Passing(FPod("p"), &why), std::set<std::string>{"pref"});
  EXPECT_EQ(UnschedulableMessage(4, why),
            "0/4 nodes are available: 1 node(s) had untolerated taint {dedicated: infer}, 1 node(s) had untolerated "
            "taint {maint: true}, 1 node(s) were unschedulable.");
  json tol = {{"tolerations", {{{"key", "dedicated"}, {"operator", "Equal"}, {"value", "infer"}, {"effect", "NoSchedule"}},
                               {{"key", "maint"}, {"operator", "Exists"}}}}};
  EXPECT_EQ(w.Passing(FPod("p", tol)), (std::set<std::string>{"ne", "ns", "pref"}));
  json wrong = {{"tolerations", {{{"key", "dedicated"}, {"value", "train"}, {"effect", "NoSchedule"}}}}};
  EXPECT_FALSE(w.Judge(FPod("p", wrong), "ns").ok());
  json all = {{"tolerations", {{{"operator", "Exists"}}}}};  // tolerates every taint, the cordon's too
  EXPECT_EQ(w.Passing(FPod("p", all)).size(), 4u);
}

TEST_F(FiltersTest, ResourcesCountEveryBoundPodAndAssumedOnes) {
  AddNode(FNode("n", {}, json::object(), {{"pods", "2"}, {"cpu", "4"}}));
  AddPod(FPod("other", json::object(), json::object(), "n", "2"));
  AddPod(FPod("done", json::object(), json::object(), "n", "2"));
  pods_["ml/done"]["status"]["phase"] = "Succeeded";  // done pods hold nothing
  FilterWorld w = World();
  EXPECT_TRUE(w.Judge(FPod("p", json::object(), json::object(), "", "2"), "n").ok());
  FilterVerdict v = w.Judge(FPod("p", json::object(), json::object(), "", "3"), "n");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.plugin, "NodeResourcesFit");
  EXPECT_EQ(v.reasons, std::vector<std::string>{"Insufficient cpu"});
  w.Assume(FPod("mine", json::object(), json::object(), "", "1"), "n");
  w.Assume(FPod("mine", json::object(), json::object(), "", "1"), "n");  // counted once
  v = w.Judge(FPod("p", json::object(), json::object(), "", "1"), "n");
  EXPECT_EQ(v.reasons, std::vector<std::string>{"Too many pods"});
  json big = FPod("big");
  big["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "9";
  big["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/mig-1g.10gb"] = "1";
  v = w.Judge(big, "n");
  EXPECT_NE(std::find(v.reasons.begin(), v.reasons.end(), "Insufficient nvidia.com/gpu"), v.reasons.end());
  EXPECT_NE(std::find(v.reasons.begin(), v.reasons.end(), "Insufficient nvidia.com/mig-1g.10gb"), v.reasons.end());
}

TEST_F(FiltersTest, HostPortsConflictByProtocolAndPort) {
  AddNode(FNode("a", {}));
  AddNode(FNode("b", {}));
  json ports = {{"containers", {{{"name", "c"}, {"ports", {{{"containerPort", 9000}, {"hostPort", 9000}}}}}}}};
  AddPod(FPod("web", ports, json::object(), "a"));
  const FilterWorld w = World();
  EXPECT_EQ(w.Passing(FPod("p", ports)), std::set<std::string>{"b"});
  json udp = ports;
  udp["containers"][0]["ports"][0]["protocol"] = "UDP";
  EXPECT_EQ(w.Passing(FPod("p", udp)).size(), 2u);
  EXPECT_EQ(w.Judge(FPod("p", ports), "a").reasons[0], "node(s) didn't have free ports for the requested pod ports");
}

TEST_F(FiltersTest, PodAntiAffinityAndAffinityBothWays) {
  AddNode(FNode("a", {{"kubernetes.io/hostname", "a"}, {"zone", "z1"}}));
  AddNode(FNode("b", {{"kubernetes.io/hostname", "b"}, {"zone", "z1"}}));
  AddNode(FNode("c", {{"kubernetes.io/hostname", "c"}, {"zone", "z2"}}));
  json anti = {{"affinity", {{"podAntiAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution",
                                                  {{{"labelSelector", {{"matchLabels", {{"app", "x"}}}}},
                                                    {"topologyKey", "kubernetes.io/hostname"}}}}}}}}};
  AddPod(FPod("x-0", anti, {{"app", "x"}}, "a"));
  FilterWorld w = World();
  EXPECT_EQ(w.Passing(FPod("x-1", anti, {{"app", "x"}})), (std::set<std::string>{"b", "c"}));
  // The existing pod's anti-affinity keeps a matching pod without terms of its own off its node.
  EXPECT_EQ(w.Judge(FPod("y", json::object(), {{"app", "x"}}), "a").reasons[0],
            "node(s) didn't satisfy existing pods anti-affinity rules");
  EXPECT_TRUE(w.Judge(FPod("z", json::object(), {{"app", "z"}}), "a").ok());
  json aff = {{"affinity", {{"podAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution",
                                            {{{"labelSelector", {{"matchLabels", {{"app", "x"}}}}},
                                              {"topologyKey", "zone"}}}}}}}}};
  EXPECT_EQ(w.Passing(FPod("near", aff, {{"app", "near"}})), (std::set<std::string>{"a", "b"}));
  // The first pod of a self-matching affinity group passes anywhere.
  json self = aff;
  self["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"]["matchLabels"]["app"] = "s";
  EXPECT_EQ(w.Passing(FPod("s-0", self, {{"app", "s"}})).size(), 3u);
  EXPECT_TRUE(w.Passing(FPod("t-0", self, {{"app", "t"}})).empty());
  w.Assume(FPod("x-1", anti, {{"app", "x"}}), "b");
  EXPECT_EQ(w.Passing(FPod("x-2", anti, {{"app", "x"}})), std::set<std::string>{"c"});
}

TEST_F(FiltersTest, TopologySpreadKeepsTheSkewAndNeedsTheKey) {
  AddNode(FNode("d", {{"room", "r1"}}));
  AddNode(FNode("e", {{"room", "r2"}}));
  AddNode(FNode("f", {}));
  AddPod(FPod("old-0", json::object(), {{"app", "s"}}, "d"));
  AddPod(FPod("old-1", json::object(), {{"app", "s"}}, "d"));
  json spread = {{"topologySpreadConstraints", {{{"maxSkew", 1}, {"topologyKey", "room"}, {"whenUnsatisfiable", "DoNotSchedule"},
                                                 {"labelSelector", {{"matchLabels", {{"app", "s"}}}}}}}}};
  FilterWorld w = World();
  std::map<std::string, int> why;
  EXPECT_EQ(w.Passing(FPod("s-0", spread, {{"app", "s"}}), &why), std::set<std::string>{"e"});
  EXPECT_EQ(why["node(s) didn't match pod topology spread constraints (missing required label)"], 1);
  EXPECT_EQ(why["node(s) didn't match pod topology spread constraints"], 1);
  w.Assume(FPod("s-0", spread, {{"app", "s"}}), "e");
  w.Assume(FPod("s-1", spread, {{"app", "s"}}), "e");
  EXPECT_EQ(w.Passing(FPod("s-2", spread, {{"app", "s"}})), (std::set<std::string>{"d", "e"}));
  json anyway = spread;
  anyway["topologySpreadConstraints"][0]["whenUnsatisfiable"] = "ScheduleAnyway";  // a score only
  EXPECT_EQ(w.Passing(FPod("s-3", anyway, {{"app", "s"}})).size(), 3u);
}

// A world built with a cache judges as one built without, across worlds: a pod replaced (a new object under
// its key) or gone is read anew, one unchanged is read once; the cache holds only what is still shared.
TEST_F(FiltersTest, CachedWorldsJudgeAsFreshOnes) {
  AddNode(FNode("n", {{"kubernetes.io/hostname", "n"}}, json::object(), {{"cpu", "4"}}));
  AddNode(FNode("m", {{"kubernetes.io/hostname", "m"}}, json::object(), {{"cpu", "4"}}));
  AddPod(FPod("a", json::object(), json::object(), "n", "3"));
  AddPod(FPod("b", json::object(), json::object(), "", "1"));  // waiting: not counted
  FilterCache cache;
  const json probe = FPod("p", json::object(), json::object(), "", "2");
  for (int round = 0; round < 4; ++round) {
    auto objects = std::make_unique<ObjectMap>(pods_);  // new shared values only where pods_ changed
    if (round > 0) {
      ObjectMap kept;  // the unchanged pods keep their objects from the last round
      for (auto it = last_->begin(); it != last_->end(); ++it)
        if (pods_.count(it->first) && pods_.at(it->first) == it->second) kept.Put(it->first, it.ptr());
      for (const auto& [k, v] : pods_)
        if (!kept.count(k)) kept.Put(k, v);
      objects = std::make_unique<ObjectMap>(kept);
    }
    const FilterWorld cached(ObjectMap(nodes_), *objects, &cache);
    const FilterWorld fresh(ObjectMap(nodes_), *objects);
    EXPECT_EQ(cached.Passing(probe), fresh.Passing(probe)) << "round " << round;
    // What the last round's objects alone held leaves at the next build after they are let go.
    EXPECT_LE(cache.size(), objects->size() + (last_ ? last_->size() : 0)) << "round " << round;
    last_ = std::move(objects);
    if (round == 0) pods_["ml/a"] = FPod("a", json::object(), json::object(), "m", "3");  // moved: n frees
    if (round == 1) pods_.erase("ml/a");                                                   // gone
    if (round == 2) pods_["ml/b"] = FPod("b", json::object(), json::object(), "n", "3");   // bound
  }
  const FilterWorld final_world(ObjectMap(nodes_), *last_, &cache);
  EXPECT_EQ(final_world.Passing(probe), std::set<std::string>{"m"});
  EXPECT_EQ(cache.size(), last_->size());
}

TEST(FiltersMessageTest, SortsReasonsAsKubeScheduler) {
  EXPECT_EQ(UnschedulableMessage(12, {{"node(s) had untolerated taint {a: b}", 4}, {"Insufficient nvidia.com/gpu", 8}}),
            "0/12 nodes are available: 4 node(s) had untolerated taint {a: b}, 8 Insufficient nvidia.com/gpu.");
  EXPECT_TRUE(PodHasPlacementConstraints(FPod("p", {{"nodeSelector", {{"a", "b"}}}})));
  EXPECT_FALSE(PodHasPlacementConstraints(FPod("p")));
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Nodes short only of what Tessera's model holds (GPUs, CPU, memory) are where preemption may help; a node
// short of pods or with a taint is not.
TEST(FiltersIfFreedTest, NodesShortOnlyOfModelledResources) {
  std::map<std::string, nlohmann::json> nodes, pods;
  nodes["full"] = FNode("full", {});
  nodes["pods"] = FNode("pods", {}, nlohmann::json::object(), {{"pods", "1"}});
  nodes["taint"] = FNode("taint", {}, {{"taints", {{{"key", "k"}, {"value", "v"}, {"effect", "NoSchedule"}}}}});
  for (const char* n : {"full", "pods"}) {
    nlohmann::json p = FPod(std::string("hog-") + n, nlohmann::json::object(), nlohmann::json::object(), n);
    p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "8";
    pods[std::string("ml/hog-") + n] = p;
  }
  const FilterWorld w(nodes, pods);
  std::set<std::string> if_freed;
  std::map<std::string, int> why;
  EXPECT_TRUE(w.Passing(FPod("p"), &why, &if_freed).empty());
  EXPECT_EQ(if_freed, std::set<std::string>{"full"});
  EXPECT_EQ(why["Insufficient nvidia.com/gpu"], 2);
  EXPECT_EQ(why["Too many pods"], 1);
}

}  // namespace
}  // namespace tessera
