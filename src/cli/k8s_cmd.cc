// `tessera k8s ...`: Tessera on Kubernetes (docs/kubernetes.md). `k8s extender` answers kube-scheduler's
// extender calls (src/k8s/extender.h).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <ctime>
#include <thread>

#include "cli/commands.h"
#include "cli/process.h"
#include "k8s/extender.h"
#include "k8s/mig_config.h"
#include "k8s/scheduler.h"
#include "k8s/team_namespaces.h"
#include "model/catalog.h"
#include "server/http_server.h"
#include "server/standby_health.h"

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

struct SchedulerArgs {
  std::string kubeconfig, listen, team_namespaces;
  SchedulerOptions options;
};

void LogLine(const std::string& line) {
  const time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  fmt::print(stderr, "{:02}:{:02}:{:02} tessera k8s scheduler: {}\n", tm.tm_hour, tm.tm_min, tm.tm_sec, line);
}

// Serves the API and portal of the scheduler's service on --listen; returns null without it.
std::unique_ptr<ApiServer> ServeApi(Service& svc, const std::string& listen, std::thread* http, int* rc) {
  if (listen.empty()) return nullptr;
  const size_t colon = listen.rfind(':');
  ServerOptions so;
  so.host = colon == std::string::npos ? "127.0.0.1" : listen.substr(0, colon);
  so.port = colon == std::string::npos ? 0 : std::atoi(listen.c_str() + colon + 1);
  auto server = std::make_unique<ApiServer>(&svc, so);
  if (Status st = server->Bind(); !st.ok()) return fmt::print(stderr, "--listen: {}\n", st.message()), *rc = 1, nullptr;
  *http = std::thread([s = server.get()] { s->Serve(); });
  LogLine(fmt::format("API and portal on http://{}:{}", so.host, server->port()));
  return server;
}

int RunScheduler(SchedulerArgs a) {
  const sigset_t sigs = BlockShutdownSignals();
  auto kube = a.kubeconfig.empty() ? InClusterConfig() : LoadKubeconfig(a.kubeconfig);
  if (!kube.ok()) return fmt::print(stderr, "{}\n", kube.error()), 2;
  a.options.log = LogLine;
  if (!a.team_namespaces.empty()) {  // without it, every API job with a container is refused
    auto teams = LoadTeamNamespaces(
        a.team_namespaces, SchedulerNamespaces(a.options.lease_namespace, kube->ns, a.options.mig_config_map));
    if (!teams.ok()) return fmt::print(stderr, "--team-namespaces: {}\n", teams.error()), 2;
    a.options.team_namespaces = *teams;
  }
  auto standby = StandbyHealth::Start(a.listen);  // /healthz 200, /readyz 503 while waiting for the Lease
  if (!standby.ok()) return fmt::print(stderr, "--listen: {}\n", standby.error()), 1;
  auto sched = K8sScheduler::Start(std::move(kube).value(), a.options);
  standby->reset();  // frees the address for the API server
  if (!sched.ok()) return fmt::print(stderr, "tessera k8s scheduler: {}\n", sched.error()), 1;
  Service& svc = (*sched)->service();
  if (auto admin = svc.BootstrapAdmin(); admin.ok() && !admin->empty()) {
    const std::string path = a.options.db + ".admin-token";
    const Status st = WriteSecret(path, *admin);
    LogLine(st.ok() ? "created user admin; its token is in " + path + " (mode 0600)" : st.message());
  }
  int rc = 0;
  std::thread http;
  auto server = ServeApi(svc, a.listen, &http, &rc);
  if (rc != 0) return rc;
  const timespec second{1, 0};
  while (!(*sched)->lost_leadership()) {
    if (sigtimedwait(&sigs, nullptr, &second) > 0) break;
  }
  LogLine((*sched)->lost_leadership() ? "leadership lost; exiting" : "signal; shutting down");
  if (server) server->Stop();
  if (http.joinable()) http.join();
  (*sched)->Stop();
  return (*sched)->lost_leadership() ? 1 : 0;
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
  auto s = std::make_shared<SchedulerArgs>();
  CLI::App* sc = k8s->add_subcommand("scheduler", "Schedule pods with schedulerName tessera: `tessera serve` on Kubernetes");
  sc->add_option("--kubeconfig", s->kubeconfig, "kubeconfig file (default: the in-cluster service account)");
  sc->add_option("--scheduler-name", s->options.scheduler_name, "spec.schedulerName of the pods to place")->capture_default_str();
  sc->add_option("--leaf-label", s->options.leaf_label, "node label naming the leaf switch")->capture_default_str();
  sc->add_option("--spine-label", s->options.spine_label, "node label naming the spine switch");
  sc->add_option("--lease-namespace", s->options.lease_namespace, "namespace of the leader-election Lease (default: the kubeconfig's)");
  sc->add_option("--mig-config-map", s->options.mig_config_map,
                 "NAMESPACE/NAME of the GPU Operator MIG manager's ConfigMap (key config.yaml, from `tessera k8s "
                 "mig-config`): repartition MIG nodes to its configs when waiting pods need it");
  sc->add_option("--min-runtime", s->options.min_runtime_s,
                 "seconds a pod's job runs before a higher priority may preempt it (anti-thrashing)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{30} * 86400));
  sc->add_option("--db", s->options.db, "SQLite store (created if missing)")->capture_default_str();
  sc->add_option("--listen", s->listen, "HOST:PORT: serve Tessera's API and portal there");
  sc->add_option("--team-namespaces", s->team_namespaces,
                 "YAML or JSON file mapping team: namespace for jobs with a container from the API (a team "
                 "without an entry has them refused)");
  sc->callback([s, exit_code] { *exit_code = RunScheduler(*s); });
  auto gpu = std::make_shared<std::string>();
  CLI::App* mig = k8s->add_subcommand("mig-config", "Print the mig-parted config of every MIG layout Tessera may ask for");
  mig->add_option("--gpu", *gpu, "GPU kind (e.g. a100-80gb)")->required();
  mig->callback([gpu, exit_code] { *exit_code = RunMigConfig(*gpu); });
}

}  // namespace tessera::cli
