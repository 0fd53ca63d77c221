// `tessera demo`: the main job on an embedded default. It packs a mixed inference + training demand onto
// the embedded mixed cluster with each policy and prints how much fits and how busy the GPUs would be.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>

#include "cli/commands.h"
#include "cli/embedded_demo.h"
#include "sim/report.h"
#include "sim/scenario.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "model/workload.h"
#include "sched/cluster_state.h"
#include "sched/policy.h"
#include "sched/requests.h"

namespace tessera::cli {
namespace {

constexpr const char* kCluster = R"(
name: embedded-mixed
defaults: {cpu: 128, memory_gib: 1024, spine: spine-0, tier: reserved}
nodes:
  - {name: a100, count: 4, gpu: a100-80gb, gpus: 8, interconnect: nvswitch, leaf: leaf-0}
  - {name: h100, count: 4, gpu: h100-80gb, gpus: 8, interconnect: nvswitch, leaf: leaf-1}
)";

// One round of demand; the demo repeats it until nothing more fits.
constexpr const char* kWorkloads = R"(
- {name: chat-8b-fp8, class: inference, replicas: 4, gpu_fraction: 0.12, memory: {params_billion: 8, precision: fp8, kv_cache_gib: 4}}
- {name: embed-1b, class: inference, replicas: 4, gpu_fraction: 0.06, memory: {params_billion: 1, kv_cache_gib: 1}}
- {name: code-34b-int4, class: inference, replicas: 2, gpu_fraction: 0.35, memory: {params_billion: 34, precision: int4, kv_cache_gib: 8}}
- {name: llama-70b-fp8, class: inference, replicas: 1, gpu_fraction: 0.5, memory: {params_billion: 70, precision: fp8, kv_cache_gib: 4, tensor_parallel: 2}, gpus_per_worker: 2}
- {name: finetune-7b, class: training, workers: 1, gpus_per_worker: 2, memory_gib: 60}
- {name: pretrain-13b, class: training, workers: 2, gpus_per_worker: 8, memory_gib: 70}
)";

int RunDemo() {
  const Catalog& catalog = Catalog::Default();
  auto cluster = LoadClusterYaml(kCluster, "embedded cluster", catalog);
  auto workloads = LoadWorkloadsYaml(kWorkloads, "embedded workloads");
  if (!cluster.ok() || !workloads.ok())
    return fmt::print(stderr, "error: {}{}\n", cluster.ok() ? "" : cluster.error(), workloads.ok() ? "" : workloads.error()), 1;
  fmt::print("Tessera demo: a mixed inference + training demand, repeated until the cluster is full,\n"
             "on {} GPUs ({} nodes of A100-80GB and H100-80GB). Utilisation counts the compute each\n"
             "replica really uses (a replica using 12% of a GPU counts 0.12 wherever it sits).\n\n",
             cluster->TotalGpus(), cluster->nodes.size());
  fmt::print("{:<12} {:>10} {:>10} {:>12} {:>12} {:>11}\n", "policy", "replicas", "train GPUs", "allocation",
             "utilisation", "MIG GPUs");
  for (const char* name : {"k8s-default", "static-mig", "tessera"}) {
    Cluster c = *cluster;
    if (std::string(name) == "static-mig")
      for (Node& n : c.nodes) {  // half the nodes carry NVIDIA's all-balanced layout
        if (n.name.find("001") != std::string::npos || n.name.find("003") != std::string::npos) {
          n.mig_enabled = true;
          n.mig_config = "all-balanced";
        }
      }
    auto state = ClusterState::Build(c, catalog);
    auto policy = MakePolicy(name);
    if (!state.ok() || !policy.ok()) return 1;
    int replicas = 0, train_gpus = 0;
    double used_milli = 0;
    JobId id = 1;
    bool progress = true;
    while (progress) {
      progress = false;
      for (const Workload& w : *workloads) {
        auto reqs = ToRequests(w, catalog, id);
        if (!reqs.ok()) return 1;
        id += static_cast<JobId>(reqs->size());
        for (const Request& r : *reqs) {
          if (!PlaceAndApply(*state, **policy, r).ok) continue;
          progress = true;
          if (r.cls == WorkloadClass::kTraining) {
            train_gpus += r.TotalGpus();
            used_milli += 900.0 * r.TotalGpus();  // training keeps ~90% of each GPU busy
          } else {
            ++replicas;
            used_milli += static_cast<double>(r.gpu_milli) * r.GpusPerTask();
          }
        }
      }
    }
    int mig = 0;
    for (const auto& n : state->nodes()) mig += n.mig_gpus;
    const double cap = 1000.0 * state->num_gpus();
    fmt::print("{:<12} {:>10} {:>10} {:>11.1f}% {:>11.1f}% {:>11}\n", name, replicas, train_gpus,
               100.0 * state->AllocatedMilli() / cap, 100.0 * used_milli / cap, mig);
  }
  // The headline simulation: the shipped mixed inference + training scenario (compiled in), 3 seeds.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("tessera-demo-{}", static_cast<long>(::getpid()));
  fs::create_directories(dir / "clusters");
  fs::create_directories(dir / "scenarios");
  std::ofstream(dir / "clusters" / "mixed-h100-a100-256.yaml") << kDemoCluster;
  const std::string text = std::regex_replace(kDemoScenario, std::regex("\nseeds: *[0-9]+"), "\nseeds: 3");
  auto sc = ParseScenario(text, "embedded mixed-inference-training.yaml", (dir / "scenarios").string(), catalog);
  if (!sc.ok()) return fmt::print(stderr, "error: {}\n", sc.error()), 1;
  fmt::print("\nHeadline simulation (examples/scenarios/mixed-inference-training.yaml, 3 seeds; the full\n"
             "10-seed run: tessera simulate run --scenario examples/scenarios/mixed-inference-training.yaml):\n\n");
  std::fflush(stdout);
  auto out = RunScenario(*sc, sc->policies, catalog);
  fs::remove_all(dir);
  if (!out.ok()) return fmt::print(stderr, "error: {}\n", out.error()), 1;
  std::cout << TextSummary(*out, sc->is_sweep) << std::flush;
  fmt::print("\nTry: tessera place --cluster examples/clusters/mixed-a100-h100-l40s.yaml "
             "--workload examples/workloads/mixed.yaml --policy tessera\n");
  return 0;
}

}  // namespace

void RegisterDemo(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("demo", "Run Tessera's main job on an embedded default");
  cmd->callback([exit_code] { *exit_code = RunDemo(); });
}

}  // namespace tessera::cli
