// `tessera k8s ...`: Tessera on Kubernetes (docs/kubernetes.md). `k8s extender` answers kube-scheduler's
// extender calls (src/k8s/extender.h).
#include <fmt/format.h>

#include "cli/commands.h"
#include "k8s/extender.h"
#include "k8s/mig_config.h"
#include "model/catalog.h"

namespace tessera::cli {
namespace {

struct ExtenderArgs {
  std::string listen = "127.0.0.1:8888";
  std::string prefix;
  std::string leaf_label = "tessera.io/leaf";
  std::string spine_label;
};

int RunExtender(const ExtenderArgs& a) {
  const size_t colon = a.listen.rfind(':');
  const std::string port_text = colon == std::string::npos ? "" : a.listen.substr(colon + 1);
  if (port_text.empty() || port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port_text) > 65535) {
    fmt::print(stderr, "--listen: '{}' is not HOST:PORT\n", a.listen);
    return 2;
  }
  std::string prefix = a.prefix;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (!prefix.empty() && prefix.front() != '/') prefix = "/" + prefix;
  Extender extender({&Catalog::Default(), a.leaf_label, a.spine_label});
  return RunExtenderServer(extender, a.listen.substr(0, colon), std::stoi(port_text), prefix);
}

int RunMigConfig(const std::string& gpu) {
  const Catalog& catalog = Catalog::Default();
  const KindId k = catalog.Find(gpu);
  if (k == kNone) return fmt::print(stderr, "--gpu: unknown GPU kind '{}'\n", gpu), 2;
  auto configs = MigConfigsFor(catalog.kind(k));
  if (!configs.ok()) return fmt::print(stderr, "--gpu: {}\n", configs.error()), 2;
  fmt::print("{}", MigPartedYaml(*configs));
  return 0;
}

}  // namespace

void RegisterK8s(CLI::App& app, int* exit_code) {
  CLI::App* k8s = app.add_subcommand("k8s", "Tessera on Kubernetes");
  k8s->require_subcommand(1);
  auto a = std::make_shared<ExtenderArgs>();
  CLI::App* ext = k8s->add_subcommand("extender", "Serve kube-scheduler's extender verbs (filter, prioritize, preempt, bind)");
  ext->add_option("--listen", a->listen, "HOST:PORT to listen on")->capture_default_str();
  ext->add_option("--prefix", a->prefix, "URL prefix of the verbs (the urlPrefix of the KubeSchedulerConfiguration)");
  ext->add_option("--leaf-label", a->leaf_label, "node label naming the leaf switch")->capture_default_str();
  ext->add_option("--spine-label", a->spine_label, "node label naming the spine switch");
  ext->callback([a, exit_code] { *exit_code = RunExtender(*a); });
  auto gpu = std::make_shared<std::string>();
  CLI::App* mig = k8s->add_subcommand("mig-config", "Print the mig-parted config of every MIG layout Tessera may ask for");
  mig->add_option("--gpu", *gpu, "GPU kind (e.g. a100-80gb)")->required();
  mig->callback([gpu, exit_code] { *exit_code = RunMigConfig(*gpu); });
}

}  // namespace tessera::cli
