// `tessera place`: places workloads on a cluster with one policy and prints placements and MIG layouts.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/file.h"
#include "cli/commands.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "model/workload.h"
#include "sched/cluster_state.h"
#include "sched/fgd_policy.h"
#include "sched/policy.h"
#include "sched/requests.h"

namespace tessera::cli {
namespace {

struct PlaceOptions {
  std::string cluster, workload, policy = "tessera";
  std::vector<std::string> catalogs;
  bool json = false;
};

int RunPlace(const PlaceOptions& o) {
  Catalog catalog = Catalog::Default();
  for (const std::string& f : o.catalogs) {
    auto text = ReadFile(f);
    if (!text.ok()) return fmt::print(stderr, "error: {}\n", text.error()), 2;
    if (Status st = catalog.Merge(*text, f); !st.ok()) return fmt::print(stderr, "error: {}\n", st.message()), 2;
  }
  auto ctext = ReadFile(o.cluster);
  if (!ctext.ok()) return fmt::print(stderr, "error: {}\n", ctext.error()), 2;
  auto cluster = LoadClusterYaml(*ctext, o.cluster, catalog);
  if (!cluster.ok()) return fmt::print(stderr, "error: {}\n", cluster.error()), 2;
  auto wtext = ReadFile(o.workload);
  if (!wtext.ok()) return fmt::print(stderr, "error: {}\n", wtext.error()), 2;
  auto workloads = LoadWorkloadsYaml(*wtext, o.workload);
  if (!workloads.ok()) return fmt::print(stderr, "error: {}\n", workloads.error()), 2;
  // The typical tasks (fgd's measure, tessera's node score) are this workload's requests.
  std::vector<Request> all;
  JobId id = 1;
  for (const Workload& w : *workloads) {
    auto reqs = ToRequests(w, catalog, id);
    if (!reqs.ok()) return fmt::print(stderr, "error: {}\n", reqs.error()), 2;
    id += static_cast<JobId>(reqs->size());
    all.insert(all.end(), reqs->begin(), reqs->end());
  }
  PolicyOptions popt;
  popt.typical = TaskShapeDistribution::FromRequests(all);
  auto policy = MakePolicy(o.policy, popt);
  // Policies that model GPU compute shares only (the harness baselines) are asked without GPU memory.
  bool compute_only = false;
  for (const PolicyInfo& info : Policies())
    if (info.name == o.policy) compute_only = !info.gpu_memory && !info.memory_blind;
  if (!policy.ok()) return fmt::print(stderr, "error: {}\n", policy.error()), 2;
  auto state = ClusterState::Build(*cluster, catalog);
  if (!state.ok()) return fmt::print(stderr, "error: {}\n", state.error()), 2;

  nlohmann::json out = {{"policy", o.policy}, {"cluster", cluster->name}, {"placements", nlohmann::json::array()}};
  JobId next_id = 1;
  int placed = 0, failed = 0;
  for (const Workload& w : *workloads) {
    auto reqs = ToRequests(w, catalog, next_id);
    if (!reqs.ok()) return fmt::print(stderr, "error: {}\n", reqs.error()), 2;
    next_id += static_cast<JobId>(reqs->size());
    int idx = 0;
    for (const Request& r : *reqs) {
      Request asked = r;
      if (compute_only) asked.gpu_memory_mib = 0;
      PlaceResult res = (*policy)->Place(*state, asked);
      nlohmann::json j = {{"workload", w.name},
                          {"index", idx++},
                          {"class", WorkloadClassName(w.cls)},
                          {"memory_mib_per_gpu", r.gpu_memory_mib},
                          {"placed", res.ok},
                          {"reason", res.reason}};
      if (res.ok) {
        state->Apply(res.tasks, r.cpu_milli, r.host_memory_mib, r.cls != WorkloadClass::kTraining);
        ++placed;
        j["span"] = SpanName(res.span);
        nlohmann::json tasks = nlohmann::json::array();
        for (const TaskPlacement& t : res.tasks) {
          nlohmann::json gpus = nlohmann::json::array();
          for (const GpuGrant& g : t.gpus) {
            const NodeState& ns = state->node(t.node);
            nlohmann::json gj = {{"gpu", g.gpu - ns.first_gpu}, {"milli", g.milli}, {"memory_mib", g.memory_mib}};
            if (g.mig_profile >= 0) {
              gj["mig_profile"] = state->kind_of_gpu(g.gpu).profiles[g.mig_profile].name;
              gj["mig_start"] = g.mig_start;
              gj["created"] = g.create_instance;
            }
            gpus.push_back(gj);
          }
          tasks.push_back({{"node", cluster->nodes[t.node].name}, {"gpus", gpus}});
        }
        j["tasks"] = tasks;
      } else {
        ++failed;
        j["code"] = NoFitCodeName(res.code);
      }
      out["placements"].push_back(j);
    }
  }
  nlohmann::json layouts = nlohmann::json::array();
  for (GpuId g = 0; g < state->num_gpus(); ++g) {
    const GpuState& gs = state->gpu(g);
    if (!gs.mig_enabled) continue;
    nlohmann::json inst = nlohmann::json::array();
    for (int i = 0; i < gs.n_instances; ++i)
      inst.push_back({{"profile", state->kind_of_gpu(g).profiles[gs.instances[i].profile].name},
                      {"start", gs.instances[i].start},
                      {"busy", gs.instances[i].busy}});
    layouts.push_back({{"node", cluster->nodes[gs.node].name}, {"gpu", g - state->node(gs.node).first_gpu}, {"instances", inst}});
  }
  out["mig_layouts"] = layouts;
  out["placed"] = placed;
  out["not_placed"] = failed;
  if (o.json) {
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print("policy {} on {}: {} placed, {} not placed\n", o.policy, cluster->name, placed, failed);
  for (const auto& j : out["placements"])
    fmt::print("  {:<20} #{:<3} {:<7} {}\n", j["workload"].get<std::string>(), j["index"].get<int>(),
               j["placed"].get<bool>() ? "placed" : "WAITS", j["reason"].get<std::string>());
  if (!layouts.empty()) {
    fmt::print("MIG layouts:\n");
    for (const auto& l : layouts) {
      std::string s;
      for (const auto& i : l["instances"])
        s += fmt::format(" {}@{}{}", i["profile"].get<std::string>(), i["start"].get<int>(), i["busy"].get<bool>() ? "*" : "");
      fmt::print("  {} GPU {}:{}\n", l["node"].get<std::string>(), l["gpu"].get<int>(), s);
    }
    fmt::print("  (* = busy)\n");
  }
  return 0;
}

}  // namespace

void RegisterPlace(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<PlaceOptions>();
  CLI::App* cmd = app.add_subcommand("place", "Place workloads on a cluster with one policy");
  cmd->add_option("--cluster", o->cluster, "cluster YAML")->required();
  cmd->add_option("--workload", o->workload, "workload YAML")->required();
  cmd->add_option("--policy", o->policy, "tessera, k8s-default, bestfit, static-mig, fgd, random, dotprod, gpuclustering, gpupacking");
  cmd->add_option("--catalog", o->catalogs, "extra GPU catalog YAML (repeatable)");
  cmd->add_flag("--json", o->json, "JSON output");
  cmd->callback([o, exit_code] { *exit_code = RunPlace(*o); });
}

}  // namespace tessera::cli
