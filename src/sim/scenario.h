#pragma once
// Scenario files (docs/simulator.md "Scenario format"): a cluster, a workload (generator settings, a
// Tessera trace, the Alibaba DLRM trace, or per-team arrival streams with a tenancy), simulator options,
// the policies to compare, seeds and an optional sweep over generator settings. One reader (ParseScenario)
// reads every kind. RunScenario runs every (variant, policy, seed) in a small thread pool; each run is
// independent and deterministic. Multi-tenant scenarios (IsMultiTenant) run with RunMultiTenantScenario
// (sim/multi_tenant.h), which reports fairness and borrowing figures instead.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "sched/policy.h"
#include "sched/tenancy.h"
#include "sim/bound.h"
#include "sim/generator.h"
#include "sim/multi_tenant.h"
#include "sim/simulator.h"
#include "sim/spot.h"
#include "sim/trace.h"

namespace tessera {

struct StaticMigSetup {
  double share = 0.5;  // fraction of MIG-capable nodes set to MIG mode for static-mig
  std::string layout = "all-balanced";
};

// A named variant of a registered policy (`policy_variants:`): static-mig with its own MIG share and layout,
// or an engine policy with features turned off (the ablation of tessera against bestfit).
struct PolicyVariant {
  std::string base;                  // a registered policy
  bool has_static_mig = false;       // base static-mig: this share and layout instead of the scenario's
  StaticMigSetup static_mig;
  std::vector<std::string> off;  // engine policies: features off (sched/policy.h EngineFeatures), and
                                 // for tessera `harvest` (the simulator's opportunistic tier)
  bool harvest = false;          // base tessera: `harvest: true` runs it with the opportunistic tier
};

// The feature name that turns tessera's opportunistic tier off in a variant (`off: [harvest]`).
inline constexpr const char* kHarvestFeature = "harvest";

// One point of a sweep (or the only variant of a plain scenario).
struct ScenarioVariant {
  std::string label;  // "" for a plain scenario, e.g. "inference_share=0.5 traffic=mixed"
  double inference_share = -1;
  std::string traffic;
  GeneratorConfig generator;
};

struct Scenario {
  std::string name;
  std::string source;  // path of the scenario file
  std::string cluster_path;
  Cluster cluster;
  // Configuration the run does not use, one line each naming the file and field (printed by the CLI): a
  // cluster file's price_per_gpu_hour without `tiers:` (a tiered run refuses it instead).
  std::vector<std::string> warnings;
  std::vector<uint64_t> seeds;
  int threads = 2;
  std::vector<std::string> policies;
  std::map<std::string, PolicyVariant> policy_variants;  // by name (usable in `policies` and --policy)
  SimOptions sim;
  StaticMigSetup static_mig;
  // Workload: exactly one of these.
  bool use_generator = false;
  ArrivalConfig arrivals;
  // The largest GPU memory of the cluster's kinds, at least 80 GiB (a backlog's least footprints).
  int64_t largest_gpu_memory_mib = 80 * 1024;
  std::vector<ScenarioVariant> variants;  // generator scenarios: one or more (sweep)
  std::vector<TraceJob> trace_jobs;       // trace / dlrm scenarios
  bool is_sweep = false;
  // The cycle every policy gets (`cycle: full | greedy`): full = gang reservations, backfill and time limits
  // (SimOptions::gang_backfill); greedy = first fit in queue order, as kube-scheduler does.
  bool gang_backfill = true;
  // An asymmetric run (`asymmetric_cycle: true` with `gang_backfill: [...]`): only these policies get the
  // full cycle, the others the greedy one; results say so in their "cycle".
  bool asymmetric_cycle = false;
  std::vector<std::string> gang_backfill_policies;
  std::shared_ptr<const TierConfig> tiers;  // issue 5: `tiers:` section (capacity tiers, spot); null = none
  // Multi-tenant workload (`tenancy` + `teams_workload`, sim/multi_tenant.h); tenancy null = none.
  std::shared_ptr<const TenancyConfig> tenancy;
  std::vector<TeamStream> team_streams;  // with one (empty) entry in `variants`
  int64_t cycle_every_s = 10;  // a cycle at least this often while jobs wait

  bool IsMultiTenant() const { return tenancy != nullptr; }
};

// Loads a scenario file; relative paths inside it (cluster, trace) resolve against its folder.
Result<Scenario> LoadScenario(const std::string& path, const Catalog& catalog);
// Parses scenario text (`dir` resolves relative paths; `source` names the text in errors).
Result<Scenario> ParseScenario(std::string_view text, const std::string& source, const std::string& dir,
                               const Catalog& catalog);

// Traffic names: light (all light replicas), mixed (half), busy (none).
Result<double> LightFractionOf(std::string_view traffic);

// The policy object of a registered name or of one of the scenario's variants; an unknown name is an error.
Result<std::unique_ptr<Policy>> MakeScenarioPolicy(const Scenario& s, const std::string& name);
// The cluster a policy or variant of `s` runs on (ClusterForPolicy with the variant's base and setup).
Cluster ClusterForScenarioPolicy(const Scenario& s, const Catalog& catalog, const std::string& name);

// The cluster a policy runs on: for "static-mig", `share` of the MIG-capable nodes (spread evenly) start in
// MIG mode with `layout`; every other policy gets the cluster unchanged.
Cluster ClusterForPolicy(const Cluster& cluster, const Catalog& catalog, std::string_view policy,
                         const StaticMigSetup& setup);

// The jobs of one (variant, seed).
std::vector<TraceJob> JobsFor(const Scenario& s, const ScenarioVariant& v, uint64_t seed);

struct VariantOutcome {
  ScenarioVariant variant;
  std::vector<std::vector<RunResult>> runs;  // [policy][seed]
  std::vector<UtilizationBound> bounds;      // [seed]: the job stream's upper bound (sim/bound.h)
};

// The scheduling cycle one policy ran with (reported as "cycle" per result).
struct CycleSpec {
  bool gang_backfill = false;   // reservations, backfill and time limits
  int gang_reservations = 0;    // with gang_backfill
  bool backfill_into_reservations = false;  // with gang_backfill (the scenario's switch)
  double time_limit_factor_min = 1, time_limit_factor_max = 1;
  bool operator==(const CycleSpec&) const = default;
};
struct ScenarioOutcome {
  std::string name;
  std::vector<std::string> policies;
  std::vector<CycleSpec> cycles;  // [policy]
  std::vector<std::string> bases;  // [policy]: the registered policy it runs (a variant's base)
  std::vector<uint64_t> seeds;
  int gpus = 0;
  std::vector<VariantOutcome> variants;
  double wall_s = 0;
};

// The cycle `policy` gets in scenario `s`.
CycleSpec CycleFor(const Scenario& s, std::string_view policy);
// Whether `policy` (a registered policy or a variant) runs with the opportunistic tier (sim/harvest.h), a
// simulator-only feature (the service's replay refuses a scenario whose tessera would harvest): a tessera
// variant with `harvest: true`, or tessera and its variants when the scenario's `harvest: {enabled: true}`;
// never with `off: [harvest]`.
bool HarvestsFor(const Scenario& s, const std::string& policy);
// Whether every policy of `o` ran with the same cycle.
bool SameCycle(const ScenarioOutcome& o);
// The upper bound of one (variant, seed) job stream (sim/bound.h).
UtilizationBound BoundFor(const Scenario& s, const Catalog& catalog, const std::vector<TraceJob>& jobs);

// Runs a scenario that is not multi-tenant (those are refused: see RunMultiTenantScenario).
Result<ScenarioOutcome> RunScenario(const Scenario& s, const std::vector<std::string>& policies,
                                    const Catalog& catalog);

}  // namespace tessera
