// Pods with ResourceClaims as jobs of the loop (dra_jobs.h): whole-GPU claims give a GPU count (and the node
// claims already allocated name), MIG slices by CEL, firstAvailable and allocationMode All stay on the DRA
// path, missing claims wait; a DRA node's GPUs for the loop exclude those DRA-path claims hold.
#include "k8s/dra/dra_jobs.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "k8s/dra/dra_nvidia.h"
#include "k8s/dra/dra_objects.h"

namespace tessera {
namespace {

using json = nlohmann::json;

struct JobsWorld {
  DraModel model;
  DraClassMap classes;
  std::map<std::string, json> claims;
  std::map<std::string, bool> cache;
};

JobsWorld MakeJobsWorld() {
  JobsWorld w;
  const GpuKind& a100 = Catalog::Default().kind(Catalog::Default().Find("a100-80gb"));
  std::vector<DraSlice> slices;
  NvidiaSliceOptions o;
  o.gpus = 4;
  for (const std::string n : {"n0", "n1"})
    for (const json& j : NvidiaDynamicMigSlices(a100, n, o)) slices.push_back(*ParseResourceSlice(j));
  std::vector<std::string> notes;
  w.model = BuildDraModel(BuildDraPools(slices, &notes), Catalog::Default());
  for (const json& dc : NvidiaDeviceClasses()) {
    DraDeviceClass c = *ParseDeviceClass(dc);
    w.classes[c.name] = c;
  }
  return w;
}

json JobsRequest(const std::string& cls, int count, const std::string& expr = "") {
  json ex = {{"deviceClassName", cls}, {"allocationMode", "ExactCount"}, {"count", count}};
  if (!expr.empty()) ex["selectors"] = {{{"cel", {{"expression", expr}}}}};
  return {{"name", "r"}, {"exactly", ex}};
}

void AddJobsClaim(JobsWorld* w, const std::string& name, const std::vector<json>& requests) {
  w->claims["ml/" + name] = {{"apiVersion", "resource.k8s.io/v1"},
                             {"kind", "ResourceClaim"},
                             {"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", "c-" + name}}},
                             {"spec", {{"devices", {{"requests", json(requests)}}}}}};
}

// Allocates claim `name` to `devices` of `node` and reserves it for pod uid `pod_uid`.
void AllocateJobsClaim(JobsWorld* w, const std::string& name, const std::string& node,
                       const std::vector<std::string>& devices, const std::string& pod_uid) {
  std::vector<DraDeviceResult> results;
  for (const std::string& d : devices) results.push_back({"r", kNvidiaDraDriver, node, d});
  const json alloc = DraAllocationJson(results, node);
  json& c = w->claims["ml/" + name];
  c["status"] = DraClaimStatusJson(json::object(), &alloc, "p", pod_uid);
}

json JobsPod(const std::string& name, const std::vector<std::string>& claims) {
  json rc = json::array();
  for (size_t i = 0; i < claims.size(); ++i)
    rc.push_back({{"name", "c" + std::to_string(i)}, {"resourceClaimName", claims[i]}});
  return {{"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", "u-" + name}}},
          {"spec", {{"schedulerName", "tessera"}, {"resourceClaims", rc}}}};
}

DraJobDemand DemandOf(JobsWorld& w, const json& pod) {
  return DraJobDemandOf(pod, w.claims, w.classes, w.model, &w.cache);
}

TEST(DraJobs, WholeGpuClaimsAreAGpuCount) {
  JobsWorld w = MakeJobsWorld();
  AddJobsClaim(&w, "two", {JobsRequest("gpu.nvidia.com", 2)});
  AddJobsClaim(&w, "one", {JobsRequest("gpu.nvidia.com", 1)});
  const DraJobDemand d = DemandOf(w, JobsPod("p", {"two", "one"}));
  EXPECT_EQ(d.kind, DraJobDemand::Kind::kWholeGpus) << d.why;
  EXPECT_EQ(d.gpus, 3);
  EXPECT_EQ(d.node, "");
  AllocateJobsClaim(&w, "one", "n1", {"gpu-2"}, "u-p");
  EXPECT_EQ(DemandOf(w, JobsPod("p", {"two", "one"})).node, "n1");
}

TEST(DraJobs, WhatTheLoopCannotExpressStaysOnTheDraPath) {
  JobsWorld w = MakeJobsWorld();
  AddJobsClaim(
      &w, "mig",
      {JobsRequest("mig.nvidia.com", 1, "device.attributes[\"gpu.nvidia.com\"].profile == \"3g.40gb\"")});
  AddJobsClaim(&w, "sel",
               {JobsRequest("gpu.nvidia.com", 1, "device.attributes[\"gpu.nvidia.com\"].index == 0")});
  AddJobsClaim(&w, "whole", {JobsRequest("gpu.nvidia.com", 1)});
  json all = JobsRequest("gpu.nvidia.com", 1);
  all["exactly"].erase("count");
  all["exactly"]["allocationMode"] = "All";
  AddJobsClaim(&w, "all", {all});
  AddJobsClaim(
      &w, "first",
      {{{"name", "r"},
        {"firstAvailable", {{{"name", "a"}, {"deviceClassName", "gpu.nvidia.com"}, {"count", 1}}}}}});
  for (const std::string c : {"mig", "sel", "all", "first"}) {
    const DraJobDemand d = DemandOf(w, JobsPod("p", {c}));
    EXPECT_EQ(d.kind, DraJobDemand::Kind::kDraPath) << c;
    EXPECT_FALSE(d.why.empty()) << c;
  }
  // One claim the loop cannot express keeps the whole pod on the DRA path.
  EXPECT_EQ(DemandOf(w, JobsPod("p", {"whole", "mig"})).kind, DraJobDemand::Kind::kDraPath);
  // A claim not made yet (or a template's claim not named yet): neither path takes the pod.
  EXPECT_EQ(DemandOf(w, JobsPod("p", {"whole", "later"})).kind, DraJobDemand::Kind::kNotYet);
  json templated = JobsPod("t", {});
  templated["spec"]["resourceClaims"] = {{{"name", "c0"}, {"resourceClaimTemplateName", "tmpl"}}};
  EXPECT_EQ(DemandOf(w, templated).kind, DraJobDemand::Kind::kNotYet);
}

TEST(DraJobs, ADeviceClassOfMigDevicesIsNotWholeGpus) {
  JobsWorld w = MakeJobsWorld();
  AddJobsClaim(&w, "m", {JobsRequest("mig.nvidia.com", 1)});
  EXPECT_EQ(DemandOf(w, JobsPod("p", {"m"})).kind, DraJobDemand::Kind::kDraPath);
  EXPECT_EQ(w.cache.at("mig.nvidia.com"), false);
  AddJobsClaim(&w, "g", {JobsRequest("gpu.nvidia.com", 1)});
  EXPECT_EQ(DemandOf(w, JobsPod("p", {"g"})).kind, DraJobDemand::Kind::kWholeGpus);
  EXPECT_EQ(w.cache.at("gpu.nvidia.com"), true);
}

TEST(DraJobs, LoopNodesLeaveOutGpusForeignClaimsHold) {
  JobsWorld w = MakeJobsWorld();
  auto nodes = DraLoopNodes(w.model, w.claims, {});
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes["n0"].total, 4);
  EXPECT_EQ(nodes["n0"].free, 4);
  EXPECT_EQ(nodes["n0"].kind, Catalog::Default().Find("a100-80gb"));
  // A MIG slice of a DRA-path pod holds its GPU; a loop pod's whole GPU does not count; a claim reserved for
  // a pod that is gone holds nothing.
  AddJobsClaim(&w, "mig", {JobsRequest("mig.nvidia.com", 1)});
  std::string slice;  // a MIG placement on GPU 1 of n0
  for (const DraModelDevice& d : w.model.nodes[0].devices)
    if (d.role == DraDeviceRole::kMig && d.device.name.rfind("gpu-1-mig-", 0) == 0) slice = d.device.name;
  ASSERT_FALSE(slice.empty());
  AllocateJobsClaim(&w, "mig", "n0", {slice}, "dra-path-pod");
  AddJobsClaim(&w, "loop", {JobsRequest("gpu.nvidia.com", 2)});
  AllocateJobsClaim(&w, "loop", "n0", {"gpu-2", "gpu-3"}, "loop-pod");
  AddJobsClaim(&w, "gone", {JobsRequest("gpu.nvidia.com", 1)});
  AllocateJobsClaim(&w, "gone", "n1", {"gpu-0"}, "gone-pod");
  nodes = DraLoopNodes(w.model, w.claims, {"dra-path-pod"});
  EXPECT_EQ(nodes["n0"].free, 3);
  EXPECT_EQ(nodes["n1"].free, 4);
  nodes = DraLoopNodes(w.model, w.claims, {"dra-path-pod", "loop-pod", "gone-pod"});
  EXPECT_EQ(nodes["n0"].free, 1);
  EXPECT_EQ(nodes["n1"].free, 3);
}

}  // namespace
}  // namespace tessera
