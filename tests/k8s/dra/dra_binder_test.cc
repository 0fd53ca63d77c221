// The DRA binder on its own (no network): what PlanDraPod decides for pods with template and shared claims,
// refusals with reasons, and the writes ExecuteDraPlan makes through a recording fake of the API server
// (finalizer update, then one status update, then the binding; 409 re-read and retry; a claim allocated
// meanwhile ends the attempt unbound). Also the claim overlay and the usage read back from allocations.
#include "k8s/dra/dra_binder.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "k8s/dra/dra_nvidia.h"
#include "k8s/dra/dra_sync.h"

namespace tessera {
namespace {

using json = nlohmann::json;

struct World {
  DraModel model;
  DraClassMap classes;
  std::map<std::string, json> claims;
  std::unique_ptr<DraUsage> usage;
  DraWorld Get() {
    if (!usage) usage = std::make_unique<DraUsage>(model);
    return DraWorld{&model, &classes, usage.get(), &claims, {"n0", "n1"}, DraPolicy::kTessera};
  }
};

void MakeWorld(World* w, int gpus = 2) {
  const GpuKind& a100 = Catalog::Default().kind(Catalog::Default().Find("a100-80gb"));
  std::vector<DraSlice> slices;
  NvidiaSliceOptions o;
  o.gpus = gpus;
  for (const std::string n : {"n0", "n1"})
    for (const json& j : NvidiaDynamicMigSlices(a100, n, o)) slices.push_back(*ParseResourceSlice(j));
  std::vector<std::string> notes;
  w->model = BuildDraModel(BuildDraPools(slices, &notes), Catalog::Default());
  for (const json& dc : NvidiaDeviceClasses()) {
    DraDeviceClass c = *ParseDeviceClass(dc);
    w->classes[c.name] = c;
  }
}

json Exact(const std::string& cls, const std::string& expr, int count = 1) {
  json ex = {{"deviceClassName", cls}, {"count", count}};
  if (!expr.empty()) ex["selectors"] = {{{"cel", {{"expression", expr}}}}};
  return ex;
}

json MigExact(const std::string& profile) {
  return Exact("mig.nvidia.com", "device.attributes[\"gpu.nvidia.com\"].profile == \"" + profile + "\"");
}

json Claim(const std::string& name, const json& exactly, const std::string& rv = "10") {
  return {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name}, {"resourceVersion", rv}}},
      {"spec", {{"devices", {{"requests", {{{"name", "r"}, {"exactly", exactly}}}}}}}}};
}

// A pod with one claim: by name (`shared`) or from a template, named in status once created (`generated`).
json ClaimPod(const std::string& name, const std::string& claim, bool shared, bool generated = true) {
  json pc = {{"name", "dev"}};
  pc[shared ? "resourceClaimName" : "resourceClaimTemplateName"] = claim;
  json pod = {{"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", "pod-" + name}}},
              {"spec", {{"schedulerName", "tessera"}, {"resourceClaims", {pc}}}},
              {"status", {{"phase", "Pending"}}}};
  if (!shared && generated)
    pod["status"]["resourceClaimStatuses"] = {{{"name", "dev"}, {"resourceClaimName", claim}}};
  return pod;
}

// Answers claim reads and writes from its own copy (resourceVersion + 1 on each write) and bindings with
// 201; records every call; `conflicts` status writes answer 409 first; `meddle` runs on each GET.
struct FakeApi {
  std::map<std::string, json> claims;  // path -> claim
  std::vector<std::string> calls;      // "METHOD path"
  std::vector<json> bodies;
  int conflicts = 0;
  std::function<void(json*)> meddle;
  DraCall Call() {
    return [this](const std::string& m, const std::string& path, const json& body) {
      calls.push_back(m + " " + path);
      bodies.push_back(body);
      ApiResponse r;
      if (m == "POST") return ApiResponse{201, body, ""};
      const bool status = path.size() > 7 && path.substr(path.size() - 7) == "/status";
      json& stored = claims[status ? path.substr(0, path.size() - 7) : path];
      if (m == "GET") {
        if (meddle) meddle(&stored);
        return ApiResponse{200, stored, ""};
      }
      if (status && conflicts > 0) {
        --conflicts;
        stored["metadata"]["resourceVersion"] =
            std::to_string(std::stoi(stored["metadata"]["resourceVersion"].get<std::string>()) + 1);
        return ApiResponse{409, nullptr, "the object has been modified"};
      }
      json next = body;
      next["metadata"]["resourceVersion"] =
          std::to_string(std::stoi(stored["metadata"]["resourceVersion"].get<std::string>()) + 1);
      if (!status) next["status"] = stored.value("status", json::object());
      stored = next;
      return ApiResponse{200, stored, ""};
    };
  }
};

constexpr const char* kPath = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/";

TEST(DraBinder, WaitsForATemplateClaimNotYetCreated) {
  World w;
  MakeWorld(&w);
  EXPECT_EQ(PlanDraPod(ClaimPod("p", "p-dev", false, false), w.Get()).kind, DraPodPlan::Kind::kWait);
  EXPECT_EQ(PlanDraPod(ClaimPod("p", "p-dev", false, true), w.Get()).kind,
            DraPodPlan::Kind::kWait);  // not listed yet
  EXPECT_EQ(PodClaimKeys(ClaimPod("p", "p-dev", false, true)), std::vector<std::string>{"ml/p-dev"});
}

TEST(DraBinder, FinalizerThenOneStatusUpdateThenBinding) {
  World w;
  MakeWorld(&w);
  w.claims["ml/p-dev"] = Claim("p-dev", MigExact("3g.40gb"));
  const json pod = ClaimPod("p", "p-dev", false);
  const DraPodPlan plan = PlanDraPod(pod, w.Get());
  ASSERT_EQ(plan.kind, DraPodPlan::Kind::kBind) << plan.message;
  ASSERT_EQ(plan.claims.size(), 1u);
  EXPECT_TRUE(plan.claims[0].allocate);
  ASSERT_EQ(plan.claims[0].results.size(), 1u);
  EXPECT_NE(plan.claims[0].results[0].device.find("-mig-3g40gb-"), std::string::npos);
  FakeApi api;
  api.claims[std::string(kPath) + "p-dev"] = w.claims["ml/p-dev"];
  const DraBindOutcome out = ExecuteDraPlan(pod, plan, w.claims, api.Call());
  ASSERT_TRUE(out.bound) << out.error;
  ASSERT_EQ(api.calls.size(), 3u);
  EXPECT_EQ(api.calls[0], "PUT " + std::string(kPath) + "p-dev");
  EXPECT_EQ(api.bodies[0]["metadata"]["finalizers"], json({kDraFinalizer}));
  EXPECT_EQ(api.calls[1], "PUT " + std::string(kPath) + "p-dev/status");
  const json& st = api.bodies[1]["status"];
  EXPECT_EQ(st["allocation"]["devices"]["results"][0]["device"], plan.claims[0].results[0].device);
  EXPECT_EQ(st["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0],
            plan.node);
  EXPECT_EQ(st["reservedFor"], json({{{"resource", "pods"}, {"name", "p"}, {"uid", "pod-p"}}}));
  EXPECT_EQ(api.calls[2], "POST /api/v1/namespaces/ml/pods/p/binding");
  EXPECT_EQ(api.bodies[2]["metadata"]["uid"], "pod-p");
  EXPECT_EQ(api.bodies[2]["target"]["name"], plan.node);
  ASSERT_EQ(out.claims_now.size(), 1u);
  EXPECT_EQ(out.claims_now[0]["metadata"]["resourceVersion"], "12");
}

TEST(DraBinder, ASharedClaimIsAllocatedOnceAndReservedForEachPod) {
  World w;
  MakeWorld(&w);
  w.claims["ml/shared"] = Claim("shared", MigExact("2g.20gb"));
  FakeApi api;
  api.claims[std::string(kPath) + "shared"] = w.claims["ml/shared"];
  const json a = ClaimPod("a", "shared", true), b = ClaimPod("b", "shared", true);
  const DraPodPlan pa = PlanDraPod(a, w.Get());
  ASSERT_EQ(pa.kind, DraPodPlan::Kind::kBind) << pa.message;
  const DraBindOutcome oa = ExecuteDraPlan(a, pa, w.claims, api.Call());
  ASSERT_TRUE(oa.bound) << oa.error;
  w.claims["ml/shared"] = oa.claims_now[0];
  const DraPodPlan pb = PlanDraPod(b, w.Get());
  ASSERT_EQ(pb.kind, DraPodPlan::Kind::kBind) << pb.message;
  EXPECT_EQ(pb.node, pa.node);
  EXPECT_FALSE(pb.claims[0].allocate);
  api.calls.clear();
  api.bodies.clear();
  const DraBindOutcome ob = ExecuteDraPlan(b, pb, w.claims, api.Call());
  ASSERT_TRUE(ob.bound) << ob.error;
  ASSERT_EQ(api.calls.size(), 2u);  // the finalizer is there: status, then binding
  EXPECT_EQ(api.calls[0], "PUT " + std::string(kPath) + "shared/status");
  const json& st = api.bodies[0]["status"];
  EXPECT_EQ(st["reservedFor"].size(), 2u);
  EXPECT_EQ(st["allocation"], oa.claims_now[0]["status"]["allocation"]);  // not rewritten
}

TEST(DraBinder, AConflictReReadsAndRetries) {
  World w;
  MakeWorld(&w);
  w.claims["ml/c"] = Claim("c", MigExact("1g.10gb"));
  FakeApi api;
  api.claims[std::string(kPath) + "c"] = w.claims["ml/c"];
  api.conflicts = 1;
  const json pod = ClaimPod("p", "c", false);
  const DraPodPlan plan = PlanDraPod(pod, w.Get());
  const DraBindOutcome out = ExecuteDraPlan(pod, plan, w.claims, api.Call());
  ASSERT_TRUE(out.bound) << out.error;
  const std::vector<std::string> want = {
      "PUT " + std::string(kPath) + "c", "PUT " + std::string(kPath) + "c/status",
      "GET " + std::string(kPath) + "c", "PUT " + std::string(kPath) + "c/status",
      "POST /api/v1/namespaces/ml/pods/p/binding"};
  EXPECT_EQ(api.calls, want);
}

TEST(DraBinder, AClaimAllocatedMeanwhileIsNotOverwrittenAndThePodIsNotBound) {
  World w;
  MakeWorld(&w);
  w.claims["ml/c"] = Claim("c", MigExact("1g.10gb"));
  w.claims["ml/c"]["metadata"]["finalizers"] = {kDraFinalizer};
  FakeApi api;
  api.claims[std::string(kPath) + "c"] = w.claims["ml/c"];
  api.conflicts = 1;
  api.meddle = [](json* c) {
    (*c)["status"]["allocation"] =
        DraAllocationJson({{"r", "gpu.nvidia.com", "n1", "gpu-1-mig-1g10gb-19-6"}}, "n1");
  };
  const json pod = ClaimPod("p", "c", false);
  const DraPodPlan plan = PlanDraPod(pod, w.Get());
  const DraBindOutcome out = ExecuteDraPlan(pod, plan, w.claims, api.Call());
  EXPECT_FALSE(out.bound);
  EXPECT_NE(out.error.find("allocated meanwhile"), std::string::npos) << out.error;
  for (const std::string& c : api.calls) EXPECT_EQ(c.find("binding"), std::string::npos) << c;
}

TEST(DraBinder, RefusalsCarryReasons) {
  World w;
  MakeWorld(&w);
  const std::string fn = "device.attributes[\"gpu.nvidia.com\"].profile.matches(\"^7g\")";
  w.claims["ml/fn"] = Claim("fn", Exact("mig.nvidia.com", fn));
  w.claims["ml/big"] = Claim("big", Exact("gpu.nvidia.com", "", 9));
  const DraPodPlan p1 = PlanDraPod(ClaimPod("p1", "fn", true), w.Get());
  EXPECT_EQ(p1.kind, DraPodPlan::Kind::kRefuse);
  EXPECT_EQ(p1.reason, "Unsupported");
  EXPECT_NE(p1.message.find("matches"), std::string::npos) << p1.message;
  const DraPodPlan p2 = PlanDraPod(ClaimPod("p2", "big", true), w.Get());
  EXPECT_EQ(p2.kind, DraPodPlan::Kind::kRefuse);
  EXPECT_EQ(p2.reason, "Unschedulable");
  EXPECT_FALSE(p2.message.empty());
}

TEST(DraBinder, AllocationsReadBackAreNotGivenTwice) {
  World w;
  MakeWorld(&w, 1);  // one GPU per node
  json held = Claim("held", Exact("gpu.nvidia.com", ""));
  held["status"]["allocation"] = DraAllocationJson({{"r", "gpu.nvidia.com", "n0", "gpu-0"}}, "n0");
  json held1 = Claim("held1", Exact("gpu.nvidia.com", ""));
  held1["status"]["allocation"] = DraAllocationJson({{"r", "gpu.nvidia.com", "n1", "gpu-0"}}, "n1");
  w.claims = {{"ml/held", held}, {"ml/held1", held1}, {"ml/new", Claim("new", MigExact("1g.10gb"))}};
  std::vector<std::string> notes;
  w.usage = std::make_unique<DraUsage>(UsageOfClaims(w.model, w.claims, &notes));
  EXPECT_TRUE(notes.empty());
  const DraPodPlan p = PlanDraPod(ClaimPod("p", "new", true), w.Get());
  EXPECT_EQ(p.kind, DraPodPlan::Kind::kRefuse) << "the whole GPUs are held; no MIG slice is free";
  w.claims.erase("ml/held1");
  w.usage = std::make_unique<DraUsage>(UsageOfClaims(w.model, w.claims, &notes));
  const DraPodPlan q = PlanDraPod(ClaimPod("p", "new", true), w.Get());
  ASSERT_EQ(q.kind, DraPodPlan::Kind::kBind) << q.message;
  EXPECT_EQ(q.node, "n1");
}

TEST(DraSync, OverlayKeepsOurWriteUntilTheWatchCatchesUp) {
  std::map<std::string, DraOverlayEntry> overlay;
  json mine = Claim("c", MigExact("1g.10gb"), "12");
  mine["status"]["allocation"] = DraAllocationJson({{"r", "gpu.nvidia.com", "n0", "gpu-0"}}, "n0");
  overlay["ml/c"] = {mine, 100};
  std::map<std::string, json> watched = {{"ml/c", Claim("c", MigExact("1g.10gb"), "11")}};
  EXPECT_TRUE(OverlayClaims(watched, &overlay, 101).at("ml/c")["status"].contains("allocation"));
  EXPECT_EQ(overlay.size(), 1u);
  watched["ml/c"] = Claim("c", MigExact("1g.10gb"), "13");  // deallocated after our write
  EXPECT_FALSE(OverlayClaims(watched, &overlay, 102).at("ml/c").contains("status"));
  EXPECT_TRUE(overlay.empty());
  overlay["ml/c"] = {mine, 100};
  EXPECT_TRUE(OverlayClaims({}, &overlay, 200).empty());  // never seen for long: gone
  EXPECT_TRUE(overlay.empty());
}

}  // namespace
}  // namespace tessera
