#include "k8s/dra/dra_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "k8s/dra/dra_allocator.h"
#include "k8s/dra/dra_nvidia.h"
#include "model/catalog.h"

namespace tessera {
namespace {

using json = nlohmann::json;

struct Event {
  bool arrive = true;
  int id = 0;    // claim id
  int spec = 0;  // index into Scenario::specs (arrivals)
};

struct Scenario {
  std::string name;
  std::vector<DraClaimSpec> specs;  // small specs, by index
  std::vector<Event> events;        // small claims coming and going
  std::vector<int> kept;            // small claims still running at the end (spec indices)
  std::vector<DraClaimSpec> large;
};

DraClaimSpec MigSpec(const std::string& profile) {
  const std::string expr = fmt::format("device.attributes[\"gpu.nvidia.com\"].profile == \"{}\"", profile);
  json req = {{"name", "mig"},
              {"exactly",
               {{"deviceClassName", "mig.nvidia.com"}, {"selectors", {{{"cel", {{"expression", expr}}}}}}}}};
  return *ParseDraClaimSpec({{"devices", {{"requests", {req}}}}}, "bench");
}

DraClaimSpec GpuSpec(int count) {
  json req = {{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}, {"count", count}}}};
  return *ParseDraClaimSpec({{"devices", {{"requests", {req}}}}}, "bench");
}

// Profiles by compute slices: small (at most half a GPU's compute) and large.
std::vector<const MigProfile*> Profiles(const GpuKind& kind, bool large) {
  std::vector<const MigProfile*> out;
  for (const MigProfile& p : kind.profiles)
    if (!p.media && (p.compute_slices * 2 > kind.mig_compute_slices) == large) out.push_back(&p);
  return out;
}

std::vector<DraClaimSpec> LargeSpecs(const GpuKind& kind, bool check_sequence) {
  const auto big = Profiles(kind, true);  // e.g. 4g.40gb, 7g.80gb
  std::vector<DraClaimSpec> out;
  if (check_sequence) {
    out = {MigSpec(big.front()->name),
           MigSpec(big.back()->name),
           MigSpec(big.back()->name),
           GpuSpec(1),
           GpuSpec(1),
           GpuSpec(1),
           GpuSpec(2)};
    return out;
  }
  out = {MigSpec(big.front()->name),
         MigSpec(big.back()->name),
         MigSpec(big.front()->name),
         GpuSpec(1),
         MigSpec(big.back()->name),
         GpuSpec(1),
         GpuSpec(2),
         GpuSpec(1)};
  return out;
}

Scenario CheckPhase2(const GpuKind& kind) {
  const auto small = Profiles(kind, false);  // 1g first, 2g after
  auto find = [&](int slices, int compute) {
    for (const MigProfile* p : small)
      if (p->memory_slices == slices && p->compute_slices == compute) return p->name;
    return small.front()->name;
  };
  Scenario s{"check-phase2", {MigSpec(find(2, 2)), MigSpec(find(1, 1))}, {}, {0, 1}, LargeSpecs(kind, true)};
  s.events = {{true, 0, 0}, {true, 1, 1}};
  for (int i = 0; i < 7; ++i) s.events.push_back({true, 2 + i, 1});
  for (int i = 0; i < 7; ++i) s.events.push_back({false, 2 + i, 1});
  return s;
}

Scenario Mixed(const GpuKind& kind, uint32_t seed, int arrivals) {
  std::mt19937 rng(seed);
  const auto small = Profiles(kind, false);
  Scenario s{fmt::format("mixed-{}", seed), {}, {}, {}, LargeSpecs(kind, false)};
  std::vector<int> weights;
  for (const MigProfile* p : small) {
    s.specs.push_back(MigSpec(p->name));
    weights.push_back(kind.mig_memory_slices / p->memory_slices);  // small ones more often
  }
  std::discrete_distribution<int> pick(weights.begin(), weights.end());
  std::vector<std::pair<int, int>> transient;  // (id, spec)
  for (int id = 0; id < arrivals; ++id) {
    for (size_t i = 0; i < transient.size();) {
      if (rng() % 100 < 35) {
        s.events.push_back({false, transient[i].first, transient[i].second});
        transient.erase(transient.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
    const int spec = pick(rng);
    s.events.push_back({true, id, spec});
    if (rng() % 100 < 25)
      s.kept.push_back(spec);
    else
      transient.emplace_back(id, spec);
  }
  for (const auto& [id, spec] : transient) s.events.push_back({false, id, spec});
  return s;
}

// Replays the scenario with one policy: (small claims refused, large claims placed).
std::pair<int, int> Replay(const DraModel& model, const DraClassMap& classes, const Scenario& s,
                           DraPolicy policy) {
  DraUsage usage(model);
  std::map<int, std::vector<DraDeviceResult>> live;
  int refused = 0, placed = 0;
  auto allocate = [&](const DraClaimSpec& spec) {
    DraAllocateOptions options;
    options.policy = policy;
    DraDecision d = AllocateDra(model, classes, usage, {{"bench/claim", &spec}}, options);
    if (d.fits) CommitDra(d, &usage);
    return d;
  };
  for (const Event& e : s.events) {
    if (!e.arrive) {
      usage.RemoveResults(live[e.id]);
      live.erase(e.id);
      continue;
    }
    DraDecision d = allocate(s.specs[static_cast<size_t>(e.spec)]);
    if (d.fits)
      live[e.id] = d.claims[0].results;
    else
      ++refused;
  }
  for (const DraClaimSpec& spec : s.large) placed += allocate(spec).fits;
  return {refused, placed};
}

}  // namespace

std::vector<DraReplayResult> RunDraBench(const DraBenchOptions& o, std::string* error) {
  const KindId id = Catalog::Default().Find(o.gpu);
  if (id == kNone || !Catalog::Default().kind(id).mig_capable) {
    *error = fmt::format("GPU kind '{}' is not a MIG-capable kind of the catalog ({})", o.gpu,
                         Catalog::Default().KnownIds());
    return {};
  }
  const GpuKind& kind = Catalog::Default().kind(id);
  std::vector<DraSlice> slices;
  NvidiaSliceOptions slice_options;
  slice_options.gpus = o.gpus;
  for (const json& j : NvidiaDynamicMigSlices(kind, "node-0", slice_options))
    slices.push_back(*ParseResourceSlice(j));
  const DraModel model = BuildDraModel(BuildDraPools(slices, nullptr), Catalog::Default());
  DraClassMap classes;
  for (const json& dc : NvidiaDeviceClasses()) {
    DraDeviceClass c = *ParseDeviceClass(dc);
    classes[c.name] = c;
  }
  std::vector<Scenario> scenarios = {CheckPhase2(kind)};
  for (int i = 0; i < o.seeds; ++i)
    scenarios.push_back(Mixed(kind, o.first_seed + static_cast<uint32_t>(i), o.arrivals));
  std::vector<DraReplayResult> out;
  for (const Scenario& s : scenarios) {
    DraReplayResult r{s.name, static_cast<int>(s.large.size()), static_cast<int>(s.kept.size())};
    std::tie(r.small_refused_tessera, r.tessera) = Replay(model, classes, s, DraPolicy::kTessera);
    std::tie(r.small_refused_first_fit, r.first_fit) = Replay(model, classes, s, DraPolicy::kFirstFit);
    std::vector<DraClaimSpec> musts;
    std::vector<int> kept = s.kept;
    std::sort(kept.begin(), kept.end());  // specs come largest-last; place the largest musts first
    for (auto it = kept.rbegin(); it != kept.rend(); ++it) musts.push_back(s.specs[static_cast<size_t>(*it)]);
    const DraPackingBound b = DraBestPacking(model, classes, DraUsage(model), musts, s.large, o.bound_budget);
    r.bound = b.placed;
    r.bound_exhaustive = b.exhaustive;
    out.push_back(r);
  }
  return out;
}

}  // namespace tessera
