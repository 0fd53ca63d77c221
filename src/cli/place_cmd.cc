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

struct Inputs {
  Catalog catalog;
  Cluster cluster;
  std::vector<Workload> workloads;
};

// The catalog, cluster and workloads the options name; an error names the file.
Result<Inputs> ReadInputs(const PlaceOptions& o) {
  Inputs in{Catalog::Default(), {}, {}};
  for (const std::string& f : o.catalogs) {
    auto text = ReadFile(f);
    if (!text.ok()) return text.status();
    if (Status st = in.catalog.Merge(*text, f); !st.ok()) return st;
  }
  auto ctext = ReadFile(o.cluster);
  if (!ctext.ok()) return ctext.status();
  auto cluster = LoadClusterYaml(*ctext, o.cluster, in.catalog);
  if (!cluster.ok()) return cluster.status();
  in.cluster = std::move(cluster).value();
  auto wtext = ReadFile(o.workload);
  if (!wtext.ok()) return wtext.status();
  auto workloads = LoadWorkloadsYaml(*wtext, o.workload);
  if (!workloads.ok()) return workloads.status();
  in.workloads = std::move(workloads).value();
  return in;
}

nlohmann::json TasksJson(const ClusterState& state, const Cluster& cluster, const std::vector<TaskPlacement>& tasks) {
  nlohmann::json out = nlohmann::json::array();
  for (const TaskPlacement& t : tasks) {
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuGrant& g : t.gpus) {
      nlohmann::json gj = {{"gpu", g.gpu - state.node(t.node).first_gpu}, {"milli", g.milli}, {"memory_mib", g.memory_mib}};
      if (g.mig_profile >= 0) {
        gj["mig_profile"] = state.kind_of_gpu(g.gpu).profiles[g.mig_profile].name;
        gj["mig_start"] = g.mig_start;
        gj["created"] = g.create_instance;
      }
      gpus.push_back(gj);
    }
    out.push_back({{"node", cluster.nodes[t.node].name}, {"gpus", gpus}});
  }
  return out;
}

nlohmann::json LayoutsJson(const ClusterState& state, const Cluster& cluster) {
  nlohmann::json layouts = nlohmann::json::array();
  for (GpuId g = 0; g < state.num_gpus(); ++g) {
    const GpuState& gs = state.gpu(g);
    if (!gs.mig_enabled) continue;
    nlohmann::json inst = nlohmann::json::array();
    for (int i = 0; i < gs.n_instances; ++i)
      inst.push_back({{"profile", state.kind_of_gpu(g).profiles[gs.instances[i].profile].name},
                      {"start", gs.instances[i].start},
                      {"busy", gs.instances[i].busy}});
    layouts.push_back({{"node", cluster.nodes[gs.node].name}, {"gpu", g - state.node(gs.node).first_gpu}, {"instances", inst}});
  }
  return layouts;
}

void PrintText(const nlohmann::json& out, const std::string& policy, const std::string& cluster) {
  fmt::print("policy {} on {}: {} placed, {} not placed\n", policy, cluster, out["placed"].get<int>(),
             out["not_placed"].get<int>());
  for (const auto& j : out["placements"])
    fmt::print("  {:<20} #{:<3} {:<7} {}\n", j["workload"].get<std::string>(), j["index"].get<int>(),
               j["placed"].get<bool>() ? "placed" : "WAITS", j["reason"].get<std::string>());
  if (out["mig_layouts"].empty()) return;
  fmt::print("MIG layouts:\n");
  for (const auto& l : out["mig_layouts"]) {
    std::string s;
    for (const auto& i : l["instances"])
      s += fmt::format(" {}@{}{}", i["profile"].get<std::string>(), i["start"].get<int>(), i["busy"].get<bool>() ? "*" : "");
    fmt::print("  {} GPU {}:{}\n", l["node"].get<std::string>(), l["gpu"].get<int>(), s);
  }
  fmt::print("  (* = busy)\n");
}

int RunPlace(const PlaceOptions& o) {
  auto in = ReadInputs(o);
  if (!in.ok()) return fmt::print(stderr, "error: {}\n", in.error()), 2;
  // Every workload's requests, in order; they are also the typical tasks (fgd's measure, tessera's score).
  std::vector<Request> all;
  std::vector<std::pair<const Workload*, int>> origin;  // per request: its workload and index there
  for (const Workload& w : in->workloads) {
    auto reqs = ToRequests(w, in->catalog, static_cast<JobId>(all.size() + 1));
    if (!reqs.ok()) return fmt::print(stderr, "error: {}\n", reqs.error()), 2;
    for (size_t i = 0; i < reqs->size(); ++i) origin.push_back({&w, static_cast<int>(i)});
    all.insert(all.end(), reqs->begin(), reqs->end());
  }
  PolicyOptions popt;
  popt.typical = TaskShapeDistribution::FromRequests(all);
  auto policy = MakePolicy(o.policy, popt);
  if (!policy.ok()) return fmt::print(stderr, "error: {}\n", policy.error()), 2;
  // Policies that model GPU compute shares only (the harness baselines) are asked without GPU memory.
  bool compute_only = false;
  for (const PolicyInfo& info : Policies())
    if (info.name == o.policy) compute_only = !info.gpu_memory && !info.memory_blind;
  auto state = ClusterState::Build(in->cluster, in->catalog);
  if (!state.ok()) return fmt::print(stderr, "error: {}\n", state.error()), 2;
  nlohmann::json out = {{"policy", o.policy}, {"cluster", in->cluster.name}, {"placements", nlohmann::json::array()}};
  int placed = 0;
  for (size_t k = 0; k < all.size(); ++k) {
    const Request& r = all[k];
    Request asked = r;
    if (compute_only) asked.gpu_memory_mib = 0;
    const PlaceResult res = PlaceAndApply(*state, **policy, asked);
    nlohmann::json j = {{"workload", origin[k].first->name}, {"index", origin[k].second},
                        {"class", WorkloadClassName(r.cls)},  {"memory_mib_per_gpu", r.gpu_memory_mib},
                        {"placed", res.ok},                   {"reason", res.reason}};
    if (res.ok) {
      ++placed;
      j["span"] = SpanName(res.span);
      j["tasks"] = TasksJson(*state, in->cluster, res.tasks);
    } else {
      j["code"] = NoFitCodeName(res.code);
    }
    out["placements"].push_back(j);
  }
  out["mig_layouts"] = LayoutsJson(*state, in->cluster);
  out["placed"] = placed;
  out["not_placed"] = static_cast<int>(all.size()) - placed;
  if (o.json) fmt::print("{}\n", out.dump(2));
  else PrintText(out, o.policy, in->cluster.name);
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
