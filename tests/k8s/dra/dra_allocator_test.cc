// The DRA allocator on NVIDIA-shaped DynamicMIG nodes (8 x A100-80GB): MIG profiles, whole GPUs, All,
// firstAvailable, refusals with reasons, counters never oversubscribed (seeded random property test), and
// the check's phase-2 fragmentation sequence where first-fit in device-name order strands slices.
#include "k8s/dra/dra_allocator.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "k8s/dra/dra_nvidia.h"

namespace tessera {
namespace {

using json = nlohmann::json;

struct DraCluster {
  DraModel model;
  DraClassMap classes;
};

NvidiaSliceOptions SliceOptions(int gpus) {
  NvidiaSliceOptions o;
  o.gpus = gpus;
  return o;
}

DraCluster MakeCluster(const std::vector<std::string>& nodes, int gpus = 8) {
  const GpuKind& a100 = Catalog::Default().kind(Catalog::Default().Find("a100-80gb"));
  std::vector<DraSlice> slices;
  for (const std::string& n : nodes)
    for (const json& j : NvidiaDynamicMigSlices(a100, n, SliceOptions(gpus)))
      slices.push_back(*ParseResourceSlice(j));
  std::vector<std::string> notes;
  DraCluster c{BuildDraModel(BuildDraPools(slices, &notes), Catalog::Default()), {}};
  for (const json& dc : NvidiaDeviceClasses()) {
    DraDeviceClass cls = *ParseDeviceClass(dc);
    c.classes[cls.name] = cls;
  }
  return c;
}

json MigRequest(const std::string& profile, const std::string& name = "mig") {
  return {
      {"name", name},
      {"exactly",
       {{"deviceClassName", "mig.nvidia.com"},
        {"selectors",
         {{{"cel",
            {{"expression", "device.attributes[\"gpu.nvidia.com\"].profile == \"" + profile + "\""}}}}}}}}};
}

json GpuRequest(int count, bool all = false) {
  json ex = {{"deviceClassName", "gpu.nvidia.com"}};
  if (all)
    ex["allocationMode"] = "All";
  else
    ex["count"] = count;
  return {{"name", "gpu"}, {"exactly", ex}};
}

DraClaimSpec Spec(std::vector<json> requests) {
  auto s = ParseDraClaimSpec({{"devices", {{"requests", requests}}}}, "test");
  EXPECT_TRUE(s.ok()) << s.error();
  return *s;
}

DraDecision Allocate(const DraCluster& c, DraUsage* usage, const std::vector<const DraClaimSpec*>& specs,
                     DraPolicy policy = DraPolicy::kTessera) {
  std::vector<DraClaimRef> refs;
  for (const DraClaimSpec* s : specs) refs.push_back({"ml/claim-" + std::to_string(refs.size()), s});
  DraAllocateOptions options;
  options.policy = policy;
  DraDecision d = AllocateDra(c.model, c.classes, *usage, refs, options);
  if (d.fits) CommitDra(d, usage);
  return d;
}

// Independent audit: every counter of every set within capacity, no device twice.
void ExpectWithinCounters(const DraCluster& c, const std::vector<DraDeviceResult>& all) {
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  std::map<std::pair<int, int>, std::map<int, int64_t>> used;
  for (const DraDeviceResult& r : all) {
    ASSERT_TRUE(seen.insert({r.driver, r.pool, r.device}).second) << r.device << " allocated twice";
    auto at = c.model.Find(r.driver, r.pool, r.device);
    ASSERT_TRUE(at.has_value());
    for (const DraModelConsumption& con : c.model.nodes[at->first].devices[at->second].consumes)
      for (const auto& [counter, amount] : con.counters) used[{at->first, con.set}][counter] += amount;
  }
  for (const auto& [key, counters] : used)
    for (const auto& [counter, amount] : counters)
      EXPECT_LE(amount, c.model.nodes[key.first].sets[key.second].capacity[counter])
          << c.model.nodes[key.first].sets[key.second].name << "/"
          << c.model.nodes[key.first].sets[key.second].counters[counter];
}

TEST(DraAllocator, MigProfilesAndWholeGpusMatchTheirSelectors) {
  DraCluster c = MakeCluster({"a100-0"});
  DraUsage usage(c.model);
  DraClaimSpec mig = Spec({MigRequest("3g.40gb")}), gpu = Spec({GpuRequest(2)});
  DraDecision d = Allocate(c, &usage, {&mig, &gpu});
  ASSERT_TRUE(d.fits) << d.reason;
  EXPECT_EQ(d.node, "a100-0");
  ASSERT_EQ(d.claims.size(), 2u);
  ASSERT_EQ(d.claims[0].results.size(), 1u);
  EXPECT_NE(d.claims[0].results[0].device.find("-mig-3g40gb-9-"), std::string::npos);
  EXPECT_EQ(d.claims[0].results[0].request, "mig");
  ASSERT_EQ(d.claims[1].results.size(), 2u);
  for (const DraDeviceResult& r : d.claims[1].results)
    EXPECT_EQ(r.device.find("-mig-"), std::string::npos) << r.device;
  // The whole GPUs avoid the GPU the 3g.40gb is on.
  const std::string mig_gpu =
      d.claims[0].results[0].device.substr(0, d.claims[0].results[0].device.find("-mig-"));
  for (const DraDeviceResult& r : d.claims[1].results) EXPECT_NE(r.device, mig_gpu);
}

TEST(DraAllocator, CountBeyondTheNodeIsRefusedWithAReason) {
  DraCluster c = MakeCluster({"a100-0", "a100-1"});
  DraUsage usage(c.model);
  DraClaimSpec nine = Spec({GpuRequest(9)});
  DraDecision d = Allocate(c, &usage, {&nine});
  ASSERT_FALSE(d.fits);
  EXPECT_FALSE(d.unsupported);
  EXPECT_NE(d.reason.find("0/2 nodes"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("needs 9 devices of class gpu.nvidia.com; 8 match, 8 free"), std::string::npos)
      << d.reason;
}

TEST(DraAllocator, AllocationModeAllTakesEveryMatchingDeviceOfAFreeNode) {
  DraCluster c = MakeCluster({"a100-0", "a100-1"});
  DraUsage usage(c.model);
  DraClaimSpec small = Spec({MigRequest("1g.10gb")}), all = Spec({GpuRequest(0, true)});
  ASSERT_TRUE(Allocate(c, &usage, {&small}).fits);
  DraDecision d = Allocate(c, &usage, {&all});
  ASSERT_TRUE(d.fits) << d.reason;
  EXPECT_EQ(d.claims[0].results.size(), 8u);
  // The other node holds a MIG device: All cannot be met there, nor anywhere now.
  DraDecision again = Allocate(c, &usage, {&all});
  ASSERT_FALSE(again.fits);
  EXPECT_NE(again.reason.find("needs all devices of class gpu.nvidia.com"), std::string::npos)
      << again.reason;
}

TEST(DraAllocator, FirstAvailableTakesTheFirstSubrequestThatFits) {
  DraCluster c = MakeCluster({"a100-0"}, 1);
  DraUsage usage(c.model);
  json fa = {{"name", "mig"},
             {"firstAvailable",
              {{{"name", "g3"},
                {"deviceClassName", "mig.nvidia.com"},
                {"selectors", MigRequest("3g.40gb")["exactly"]["selectors"]}},
               {{"name", "g2x2"},
                {"deviceClassName", "mig.nvidia.com"},
                {"count", 2},
                {"selectors", MigRequest("2g.20gb")["exactly"]["selectors"]}}}}};
  DraClaimSpec spec = Spec({fa});
  DraDecision first = Allocate(c, &usage, {&spec});
  ASSERT_TRUE(first.fits) << first.reason;
  ASSERT_EQ(first.claims[0].results.size(), 1u);
  EXPECT_EQ(first.claims[0].results[0].request, "mig/g3");
  // One GPU holds two 3g.40gb.
  DraDecision second = Allocate(c, &usage, {&spec});
  ASSERT_TRUE(second.fits) << second.reason;
  EXPECT_EQ(second.claims[0].results[0].request, "mig/g3");
  // Now the GPU is full: neither subrequest fits.
  DraDecision third = Allocate(c, &usage, {&spec});
  EXPECT_FALSE(third.fits);
  // 1g.10gb at slices 2 and 6 block both 3g.40gb starts (0 and 4) but leave 2g.20gb at 0 and at 4.
  DraUsage fresh(c.model);
  ASSERT_TRUE(fresh
                  .AddResults({{"", "gpu.nvidia.com", "a100-0", "gpu-0-mig-1g10gb-19-2"},
                               {"", "gpu.nvidia.com", "a100-0", "gpu-0-mig-1g10gb-19-6"}})
                  .empty());
  DraDecision fallback = Allocate(c, &fresh, {&spec});
  ASSERT_TRUE(fallback.fits) << fallback.reason;
  ASSERT_EQ(fallback.claims[0].results.size(), 2u);
  EXPECT_EQ(fallback.claims[0].results[0].request, "mig/g2x2");
  EXPECT_EQ(fallback.claims[0].results[1].request, "mig/g2x2");
}

TEST(DraAllocator, UnsupportedSelectorsAndMissingClassesRefuseWithTheExpression) {
  DraCluster c = MakeCluster({"a100-0"});
  DraUsage usage(c.model);
  json req = MigRequest("1g.10gb");
  req["exactly"]["selectors"][0]["cel"]["expression"] =
      "device.attributes['gpu.nvidia.com'].profile.matches('^1g')";
  DraClaimSpec spec = Spec({req});
  DraDecision d = Allocate(c, &usage, {&spec});
  ASSERT_FALSE(d.fits);
  EXPECT_TRUE(d.unsupported);
  EXPECT_NE(d.reason.find("claim ml/claim-0 request mig"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("profile.matches('^1g')"), std::string::npos) << d.reason;
  json missing = GpuRequest(1);
  missing["exactly"]["deviceClassName"] = "tpu.example.com";
  DraClaimSpec none = Spec({missing});
  EXPECT_NE(Allocate(c, &usage, {&none}).reason.find("DeviceClass tpu.example.com does not exist"),
            std::string::npos);
}

TEST(DraAllocator, RuntimeErrorFailsTheRequestOnTheNode) {
  DraCluster c = MakeCluster({"a100-0"});
  DraUsage usage(c.model);
  json req = GpuRequest(1);
  req["exactly"]["selectors"] = {
      {{"cel", {{"expression", "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}}}};
  DraClaimSpec spec = Spec({req});  // full GPUs have no profile attribute: an error, not a skip
  DraDecision d = Allocate(c, &usage, {&spec});
  ASSERT_FALSE(d.fits);
  EXPECT_NE(d.reason.find("no such key: profile"), std::string::npos) << d.reason;
}

TEST(DraAllocator, QuantitySelectorPicksOnlyTheProfilesWithEnoughMemory) {
  DraCluster c = MakeCluster({"a100-0"});
  DraUsage usage(c.model);
  json req = MigRequest("x");
  req["exactly"]["selectors"][0]["cel"]["expression"] =
      "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0";
  DraClaimSpec spec = Spec({req});
  DraDecision d = Allocate(c, &usage, {&spec});
  ASSERT_TRUE(d.fits) << d.reason;
  EXPECT_NE(d.claims[0].results[0].device.find("-mig-7g80gb-0-0"), std::string::npos)
      << d.claims[0].results[0].device;
}

// Seeded random arrivals and departures of mixed claims on two nodes: whatever the allocator grants, the
// shared counters are never oversubscribed and no device is held twice (audited independently).
TEST(DraAllocator, CountersAreNeverOversubscribed) {
  DraCluster c = MakeCluster({"n0", "n1"}, 4);
  const std::vector<std::string> profiles = {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb",
                                             "3g.40gb", "4g.40gb",    "7g.80gb"};
  for (DraPolicy policy : {DraPolicy::kTessera, DraPolicy::kFirstFit}) {
    std::mt19937 rng(27);
    DraUsage usage(c.model);
    std::vector<std::vector<DraDeviceResult>> live;
    std::vector<DraClaimSpec> specs;
    int granted = 0, refused = 0;
    for (int step = 0; step < 400; ++step) {
      if (!live.empty() && rng() % 3 == 0) {
        const size_t k = rng() % live.size();
        usage.RemoveResults(live[k]);
        live.erase(live.begin() + static_cast<long>(k));
        continue;
      }
      const int kind = static_cast<int>(rng() % 9);
      DraClaimSpec spec =
          kind < 7 ? Spec({MigRequest(profiles[kind])}) : Spec({GpuRequest(1 + static_cast<int>(rng() % 3))});
      DraDecision d = Allocate(c, &usage, {&spec}, policy);
      if (!d.fits) {
        ++refused;
        EXPECT_FALSE(d.reason.empty());
        continue;
      }
      ++granted;
      live.push_back(d.claims[0].results);
      std::vector<DraDeviceResult> all;
      for (const auto& l : live) all.insert(all.end(), l.begin(), l.end());
      ExpectWithinCounters(c, all);
      if (HasFailure()) return;
    }
    EXPECT_GT(granted, 50);
    EXPECT_GT(refused, 0);
  }
}

// The check's phase 2: on a node of 8 free A100-80GB, keep-a 2g.20gb, keep-b 1g.10gb and 7 tmp 1g.10gb arrive
// one at a time, the tmp ones finish, then 4g.40gb, 2 x 7g.80gb, 3 x 1 GPU and 1 x 2 GPUs arrive one at a
// time.
int LargePlaced(DraPolicy policy, int* bound) {
  DraCluster c = MakeCluster({"a100-3"});
  DraUsage usage(c.model);
  DraClaimSpec two = Spec({MigRequest("2g.20gb")}), one = Spec({MigRequest("1g.10gb")});
  std::vector<std::vector<DraDeviceResult>> kept, tmp;
  for (const DraClaimSpec* s : {&two, &one})
    kept.push_back(Allocate(c, &usage, {s}, policy).claims.at(0).results);
  for (int i = 0; i < 7; ++i) tmp.push_back(Allocate(c, &usage, {&one}, policy).claims.at(0).results);
  for (const auto& t : tmp) usage.RemoveResults(t);
  std::vector<DraClaimSpec> large = {Spec({MigRequest("4g.40gb")}), Spec({MigRequest("7g.80gb")}),
                                     Spec({MigRequest("7g.80gb")}), Spec({GpuRequest(1)}),
                                     Spec({GpuRequest(1)}),         Spec({GpuRequest(1)}),
                                     Spec({GpuRequest(2)})};
  if (bound != nullptr) {
    DraUsage empty(c.model);
    DraPackingBound b = DraBestPacking(c.model, c.classes, empty, {two, one}, large);
    EXPECT_TRUE(b.exhaustive);
    *bound = b.placed;
  }
  int placed = 0;
  for (const DraClaimSpec& s : large) placed += Allocate(c, &usage, {&s}, policy).fits;
  return placed;
}

TEST(DraAllocator, FragmentationSequencePlacesEveryLargeRequestWhereFirstFitStrandsSlices) {
  int bound = 0;
  const int tessera = LargePlaced(DraPolicy::kTessera, &bound);
  const int first_fit = LargePlaced(DraPolicy::kFirstFit, nullptr);
  EXPECT_EQ(bound, 7);
  EXPECT_EQ(tessera, bound);
  EXPECT_EQ(first_fit, 6);  // keep-a at start 0, keep-b at 2: the 4g.40gb takes a clean GPU
}

TEST(DraAllocator, TesseraPacksMigOntoGpusInUseAndKeepsRoomForLargeProfiles) {
  DraCluster c = MakeCluster({"a100-0"});
  DraUsage usage(c.model);
  DraClaimSpec two = Spec({MigRequest("2g.20gb")}), one = Spec({MigRequest("1g.10gb")});
  DraDecision a = Allocate(c, &usage, {&two});
  DraDecision b = Allocate(c, &usage, {&one});
  EXPECT_EQ(a.claims[0].results[0].device, "gpu-0-mig-2g20gb-14-4");
  EXPECT_EQ(b.claims[0].results[0].device, "gpu-0-mig-1g10gb-19-6");
  DraUsage ff(c.model);
  EXPECT_EQ(Allocate(c, &ff, {&two}, DraPolicy::kFirstFit).claims[0].results[0].device,
            "gpu-0-mig-2g20gb-14-0");
}

TEST(DraAllocator, ExistingAllocationsAreRespectedAndNamedWhenUnknown) {
  DraCluster c = MakeCluster({"a100-0"}, 1);
  DraUsage usage(c.model);
  auto notes = usage.AddResults({{"gpu", "gpu.nvidia.com", "a100-0", "gpu-0"},
                                 {"gpu", "gpu.nvidia.com", "a100-0", "gpu-0"},
                                 {"gpu", "gpu.nvidia.com", "a100-0", "gpu-5"}});
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("allocated twice"), std::string::npos);
  EXPECT_NE(notes[1].find("gpu-5"), std::string::npos);
  DraClaimSpec one = Spec({MigRequest("1g.10gb")});
  EXPECT_FALSE(Allocate(c, &usage, {&one}).fits);
}

}  // namespace
}  // namespace tessera
