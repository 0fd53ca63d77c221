// Parsing DRA objects as NVIDIA's driver and the API server write them (both slice layouts), pools of the
// newest generation, errors naming the field, and the JSON Tessera writes for an allocation.
#include "k8s/dra/dra_objects.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "k8s/dra/dra_cel.h"
#include "k8s/dra/dra_model.h"
#include "k8s/dra/dra_nvidia.h"
#include "testing/paths.h"

namespace tessera {
namespace {

using json = nlohmann::json;

NvidiaSliceOptions Slices(int gpus, bool split = true, int64_t generation = 1, std::vector<int> minors = {}) {
  NvidiaSliceOptions o;
  o.gpus = gpus;
  o.split_layout = split;
  o.generation = generation;
  o.minors = std::move(minors);
  return o;
}

// A 1.34 slice exactly as the driver (v25.12.0, DynamicMIG) publishes it, cut to two devices.
const char* kCombinedSlice = R"({
  "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
  "metadata": {"name": "a100-0-gpu.nvidia.com-x7k2p", "generateName": "a100-0-gpu.nvidia.com-"},
  "spec": {"driver": "gpu.nvidia.com", "nodeName": "a100-0",
    "pool": {"name": "a100-0", "generation": 1, "resourceSliceCount": 1},
    "sharedCounters": [{"name": "gpu-0-counter-set", "counters": {
      "multiprocessors": {"value": "98"}, "copy-engines": {"value": "7"}, "decoders": {"value": "5"},
      "memory": {"value": "81152Mi"}, "memory-slice-0": {"value": "1"}, "memory-slice-1": {"value": "1"},
      "memory-slice-2": {"value": "1"}, "memory-slice-3": {"value": "1"}, "memory-slice-4": {"value": "1"},
      "memory-slice-5": {"value": "1"}, "memory-slice-6": {"value": "1"}, "memory-slice-7": {"value": "1"}}}],
    "devices": [
      {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-4f2c1a9e-1b2c-4d5e-8f90-123456789abc"},
         "productName": {"string": "NVIDIA A100-SXM4-80GB"}, "cudaComputeCapability": {"version": "8.0.0"},
         "driverVersion": {"version": "580.126.20"}, "resource.kubernetes.io/pciBusID": {"string": "0000:07:00.0"}},
       "capacity": {"multiprocessors": {"value": "98"}, "memory": {"value": "81152Mi"}},
       "consumesCounters": [{"counterSet": "gpu-0-counter-set", "counters": {"multiprocessors": {"value": "98"},
         "memory": {"value": "81152Mi"}, "memory-slice-0": {"value": "1"}, "memory-slice-1": {"value": "1"},
         "memory-slice-2": {"value": "1"}, "memory-slice-3": {"value": "1"}, "memory-slice-4": {"value": "1"},
         "memory-slice-5": {"value": "1"}, "memory-slice-6": {"value": "1"}, "memory-slice-7": {"value": "1"}}}]},
      {"name": "gpu-0-mig-3g40gb-9-4", "attributes": {"type": {"string": "mig"}, "profile": {"string": "3g.40gb"},
         "parentUUID": {"string": "GPU-4f2c1a9e-1b2c-4d5e-8f90-123456789abc"},
         "productName": {"string": "NVIDIA A100-SXM4-80GB"}},
       "capacity": {"multiprocessors": {"value": "42"}, "memory": {"value": "40192Mi"}},
       "consumesCounters": [{"counterSet": "gpu-0-counter-set", "counters": {"multiprocessors": {"value": "42"},
         "copy-engines": {"value": "3"}, "memory": {"value": "40192Mi"}, "memory-slice-4": {"value": "1"},
         "memory-slice-5": {"value": "1"}, "memory-slice-6": {"value": "1"}, "memory-slice-7": {"value": "1"}}}]}
    ]}})";

TEST(DraObjects, ParsesTheCombinedLayoutOfKubernetes134) {
  auto s = ParseResourceSlice(json::parse(kCombinedSlice));
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->driver, "gpu.nvidia.com");
  EXPECT_EQ(s->node_name, "a100-0");
  ASSERT_EQ(s->devices.size(), 2u);
  ASSERT_EQ(s->counter_sets.size(), 1u);
  EXPECT_EQ(s->counter_sets[0].counters_milli.at("memory"), int64_t{81152} * 1048576 * 1000);
  EXPECT_EQ(std::get<std::string>(s->devices[1].attributes.at("profile")), "3g.40gb");
  EXPECT_EQ(std::get<DraVersion>(s->devices[0].attributes.at("driverVersion")),
            (DraVersion{580, 126, 20, ""}));
  EXPECT_EQ(s->devices[1].consumes[0].counters_milli.at("memory-slice-7"), 1000);

  std::vector<std::string> notes;
  DraModel m = BuildDraModel(BuildDraPools({*s}, &notes), Catalog::Default());
  ASSERT_EQ(m.nodes.size(), 1u);
  EXPECT_TRUE(m.problems.empty()) << m.problems[0];
  const DraModelNode& n = m.nodes[0];
  ASSERT_EQ(n.gpus.size(), 1u);
  EXPECT_EQ(Catalog::Default().kind(n.gpus[0].kind).id, "a100-80gb");
  EXPECT_EQ(n.devices[1].role, DraDeviceRole::kMig);
  EXPECT_EQ(n.devices[1].start, 4);
  EXPECT_EQ(n.devices[1].slice_mask, 0xF0);
  EXPECT_EQ(Catalog::Default().kind(n.gpus[0].kind).profiles[n.devices[1].profile].name, "3g.40gb");
  // The full GPU and the 3g.40gb share memory slices: one excludes the other through the counters.
  DraUsage u(m);
  u.Add(0, 1);
  EXPECT_FALSE(u.Fits(0, 0));
  u.Remove(0, 1);
  EXPECT_TRUE(u.Fits(0, 0));
}

TEST(DraObjects, BothLayoutsGiveTheSameModel) {
  const GpuKind& a100 = Catalog::Default().kind(Catalog::Default().Find("a100-80gb"));
  auto model_of = [&](bool split) {
    std::vector<DraSlice> slices;
    for (const json& j : NvidiaDynamicMigSlices(a100, "a100-0", Slices(2, split))) {
      auto s = ParseResourceSlice(j);
      EXPECT_TRUE(s.ok()) << s.error();
      if (split) {
        EXPECT_TRUE(s->devices.empty() || s->counter_sets.empty());
      }
      slices.push_back(*s);
    }
    std::vector<std::string> notes;
    DraModel m = BuildDraModel(BuildDraPools(slices, &notes), Catalog::Default());
    EXPECT_TRUE(notes.empty());
    EXPECT_TRUE(m.problems.empty()) << m.problems[0];
    return m;
  };
  DraModel split = model_of(true), combined = model_of(false);
  ASSERT_EQ(split.nodes.size(), 1u);
  ASSERT_EQ(split.nodes[0].devices.size(), combined.nodes[0].devices.size());
  // Per GPU: the full GPU and 7 (1g.10gb) + 7 (+me) + 4 + 3 + 2 + 1 + 1 = 25 MIG placements.
  EXPECT_EQ(split.nodes[0].devices.size(), 2u * 26u);
  for (size_t i = 0; i < split.nodes[0].devices.size(); ++i) {
    EXPECT_EQ(split.nodes[0].devices[i].device.name, combined.nodes[0].devices[i].device.name);
    EXPECT_EQ(split.nodes[0].devices[i].slice_mask, combined.nodes[0].devices[i].slice_mask);
    EXPECT_EQ(split.nodes[0].devices[i].profile, combined.nodes[0].devices[i].profile);
  }
  EXPECT_TRUE(split.Find("gpu.nvidia.com", "a100-0", "gpu-1-mig-1g10gb-me-20-3").has_value());
}

TEST(DraObjects, OnlyTheNewestGenerationCountsAndIncompletePoolsAreNoted) {
  const GpuKind& a100 = Catalog::Default().kind(Catalog::Default().Find("a100-80gb"));
  std::vector<DraSlice> slices;
  for (const json& j : NvidiaDynamicMigSlices(a100, "n", Slices(2))) slices.push_back(*ParseResourceSlice(j));
  // Generation 2 without gpu-0 (a lost GPU), one of its slices not yet seen.
  auto gen2 = NvidiaDynamicMigSlices(a100, "n", Slices(0, true, 2, {1}));
  slices.push_back(*ParseResourceSlice(gen2[1]));
  std::vector<std::string> notes;
  auto pools = BuildDraPools(slices, &notes);
  ASSERT_EQ(pools.size(), 1u);
  EXPECT_EQ(pools[0].generation, 2);
  EXPECT_FALSE(pools[0].complete());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("incomplete"), std::string::npos);
  DraModel m = BuildDraModel(pools, Catalog::Default());
  EXPECT_FALSE(m.Find("gpu.nvidia.com", "n", "gpu-0").has_value());
  EXPECT_TRUE(m.nodes[0].incomplete);
}

TEST(DraObjects, ErrorsNameTheObjectAndTheField) {
  json bad = json::parse(kCombinedSlice);
  bad["spec"]["devices"][1]["capacity"]["memory"]["value"] = "lots";
  auto s = ParseResourceSlice(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("a100-0-gpu.nvidia.com-x7k2p"), std::string::npos) << s.error();
  EXPECT_NE(s.error().find("spec.devices[1] (gpu-0-mig-3g40gb-9-4).capacity[memory].value"),
            std::string::npos)
      << s.error();
  bad = json::parse(kCombinedSlice);
  bad["spec"]["devices"][0]["attributes"]["type"] = {{"string", "gpu"}, {"int", 1}};
  EXPECT_NE(ParseResourceSlice(bad).error().find("exactly one of"), std::string::npos);
  bad["spec"].erase("pool");
  EXPECT_NE(ParseResourceSlice(bad).error().find("spec.pool.name"), std::string::npos);

  json claim = {
      {"metadata", {{"name", "c"}, {"namespace", "ml"}}},
      {"spec",
       {{"devices",
         {{"requests",
           {{{"name", "gpu"},
             {"exactly", {{"deviceClassName", "gpu.nvidia.com"}, {"allocationMode", "Some"}}}}}}}}}}};
  auto c = ParseResourceClaim(claim);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().find("ResourceClaim ml/c: spec.devices.requests[0] (gpu).exactly.allocationMode"),
            std::string::npos)
      << c.error();
  claim["spec"]["devices"]["requests"][0]["firstAvailable"] = json::array();
  EXPECT_NE(ParseResourceClaim(claim).error().find("exactly one of exactly, firstAvailable"),
            std::string::npos);
  EXPECT_FALSE(ParseDeviceClass(json::object()).ok());
  EXPECT_FALSE(ParseResourceClaimTemplate({{"metadata", {{"name", "t"}}}, {"spec", json::object()}}).ok());
}

TEST(DraObjects, ClaimsTemplatesAndClassesWithTheirDefaults) {
  json claim = json::parse(R"({"metadata": {"name": "first-avail-mig-x2", "namespace": "ml", "uid": "u1",
    "resourceVersion": "17", "finalizers": ["resource.kubernetes.io/delete-protection"]},
    "spec": {"devices": {"requests": [
      {"name": "mig", "firstAvailable": [
        {"name": "g3", "deviceClassName": "mig.nvidia.com", "selectors": [{"cel": {"expression": "device.attributes[\"gpu.nvidia.com\"].profile == \"3g.40gb\""}}]},
        {"name": "g2x2", "deviceClassName": "mig.nvidia.com", "allocationMode": "ExactCount", "count": 2}]},
      {"name": "all", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}]}},
    "status": {"allocation": {"devices": {"results": [{"request": "mig/g3", "driver": "gpu.nvidia.com", "pool": "a100-1", "device": "gpu-0-mig-3g40gb-9-0"}]},
      "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a100-1"]}]}]}},
      "reservedFor": [{"resource": "pods", "name": "p", "uid": "pod-1"}]}})");
  auto c = ParseResourceClaim(claim);
  ASSERT_TRUE(c.ok()) << c.error();
  ASSERT_EQ(c->spec.requests.size(), 2u);
  const DraRequest& fa = c->spec.requests[0];
  EXPECT_TRUE(fa.first_available);
  ASSERT_EQ(fa.alternatives.size(), 2u);
  EXPECT_EQ(fa.alternatives[0].count, 1);  // defaulted
  EXPECT_EQ(fa.alternatives[1].count, 2);
  EXPECT_EQ(fa.ResultName(1), "mig/g2x2");
  EXPECT_EQ(c->spec.requests[1].alternatives[0].mode, DraAllocationMode::kAll);
  EXPECT_EQ(c->spec.requests[1].ResultName(0), "all");
  ASSERT_TRUE(c->allocation.has_value());
  EXPECT_EQ(c->allocation->nodes, std::vector<std::string>{"a100-1"});
  EXPECT_EQ(c->allocation->results[0].device, "gpu-0-mig-3g40gb-9-0");
  EXPECT_TRUE(c->HasFinalizer());
  EXPECT_TRUE(c->ReservedFor("pod-1"));
  EXPECT_FALSE(c->ReservedFor("pod-2"));

  json tmpl = {{"metadata", {{"name", "mig-1g10gb"}, {"namespace", "ml"}}},
               {"spec", {{"spec", claim["spec"]}}}};
  auto t = ParseResourceClaimTemplate(tmpl);
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_EQ(t->spec.requests.size(), 2u);
  EXPECT_EQ(t->spec_json, claim["spec"]);
  for (const json& dc : NvidiaDeviceClasses()) {
    auto cls = ParseDeviceClass(dc);
    ASSERT_TRUE(cls.ok()) << cls.error();
    EXPECT_EQ(cls->selectors.size(), 1u);
  }
}

TEST(DraObjects, WritesFollowKubeSchedulersShapes) {
  json claim = {{"metadata", {{"name", "c"}, {"finalizers", {"other"}}}}, {"spec", json::object()}};
  json protected_claim = WithDeleteProtection(claim);
  EXPECT_EQ(protected_claim["metadata"]["finalizers"],
            json({"other", "resource.kubernetes.io/delete-protection"}));
  EXPECT_EQ(WithDeleteProtection(protected_claim), protected_claim);  // once

  const json alloc =
      DraAllocationJson({{"mig/g3", "gpu.nvidia.com", "a100-1", "gpu-0-mig-3g40gb-9-0"}}, "a100-1");
  EXPECT_EQ(alloc, json::parse(R"({"devices": {"results": [{"request": "mig/g3", "driver": "gpu.nvidia.com",
    "pool": "a100-1", "device": "gpu-0-mig-3g40gb-9-0"}]}, "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
    {"key": "metadata.name", "operator": "In", "values": ["a100-1"]}]}]}})"));
  json status = DraClaimStatusJson(json(), &alloc, "p", "uid-p");
  EXPECT_EQ(status["allocation"], alloc);
  EXPECT_EQ(status["reservedFor"], json::parse(R"([{"resource": "pods", "name": "p", "uid": "uid-p"}])"));
  // A shared claim keeps its allocation; a second pod is added once.
  const json other = DraAllocationJson({}, "elsewhere");
  json again = DraClaimStatusJson(status, &other, "q", "uid-q");
  EXPECT_EQ(again["allocation"], alloc);
  EXPECT_EQ(again["reservedFor"].size(), 2u);
  EXPECT_EQ(DraClaimStatusJson(again, nullptr, "q", "uid-q")["reservedFor"].size(), 2u);
}

json ToJson(const YAML::Node& n) {
  if (n.IsMap()) {
    json o = json::object();
    for (const auto& kv : n) o[kv.first.as<std::string>()] = ToJson(kv.second);
    return o;
  }
  if (n.IsSequence()) {
    json a = json::array();
    for (const auto& v : n) a.push_back(ToJson(v));
    return a;
  }
  const std::string v = n.as<std::string>();
  if (n.Tag() != "!" && !v.empty() && v.find_first_not_of("0123456789") == std::string::npos)
    return std::stoll(v);
  return v;
}

TEST(DraObjects, ExampleManifestsParseAndUseTheSupportedCelSubset) {
  int objects = 0;
  for (const char* file :
       {"/deploy/kubernetes/dra/device-classes.yaml", "/deploy/kubernetes/dra/claim-templates.yaml"}) {
    for (const YAML::Node& doc : YAML::LoadAllFromFile(std::string(::tessera::testing::SourceDir()) + file)) {
      const json j = ToJson(doc);
      std::vector<std::string> exprs;
      if (j["kind"] == "DeviceClass") {
        auto c = ParseDeviceClass(j);
        ASSERT_TRUE(c.ok()) << c.error();
        exprs = c->selectors;
      } else {
        auto t = ParseResourceClaimTemplate(j);
        ASSERT_TRUE(t.ok()) << t.error();
        for (const DraRequest& r : t->spec.requests)
          for (const DraSubRequest& s : r.alternatives)
            exprs.insert(exprs.end(), s.selectors.begin(), s.selectors.end());
      }
      for (const std::string& e : exprs) EXPECT_TRUE(CelSelector::Compile(e).supported()) << e;
      ++objects;
    }
  }
  EXPECT_EQ(objects, 7);
}

}  // namespace
}  // namespace tessera
