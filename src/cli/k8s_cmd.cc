// `tessera k8s ...`: Tessera on Kubernetes (docs/kubernetes.md). `k8s extender` answers kube-scheduler's
// extender calls (src/k8s/extender/extender.h).
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <thread>
#include <tuple>
#include <utility>

#include "base/allocator.h"
#include "cli/commands.h"
#include "cli/process.h"
#include "k8s/extender/extender.h"
#include "k8s/extender/extender_server.h"
#include "k8s/mig/mig_config.h"
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
  std::string tls_cert, tls_key, client_ca, token_file;
  int64_t min_runtime_s = 300;
};

// The extender listener's options from its flags; an error line for the user (exit 2). `flag` names the
// listen flag in errors.
Result<ExtenderServerOptions> ListenerOf(const ExtenderArgs& a, const std::string& flag) {
  const size_t colon = a.listen.rfind(':');
  const std::string port_text = colon == std::string::npos ? "" : a.listen.substr(colon + 1);
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != std::string::npos || std::stoi(port_text) > 65535)
    return Status::Error(fmt::format("{}: '{}' is not HOST:PORT", flag, a.listen));
  std::string prefix = a.prefix;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (!prefix.empty() && prefix.front() != '/') prefix = "/" + prefix;
  ExtenderServerOptions o;
  o.host = a.listen.substr(0, colon);
  o.port = std::stoi(port_text);
  o.prefix = prefix;
  o.tls = {a.tls_cert, a.tls_key, a.client_ca};
  if (!a.token_file.empty()) {
    auto token = ReadTokenFile(a.token_file);
    if (!token.ok()) return token.status();
    if (a.tls_cert.empty())
      return Status::Error(
          "a token file needs a TLS certificate and key: a bearer token is not sent in the clear");
    o.token = *token;
  }
  return o;
}

int RunExtender(const ExtenderArgs& a) {
  auto o = ListenerOf(a, "--listen");
  if (!o.ok()) return fmt::print(stderr, "{}\n", o.error()), 2;
  ExtenderOptions eo{&Catalog::Default(), a.leaf_label, a.spine_label};
  eo.min_runtime_s = a.min_runtime_s;
  eo.now_s = [] { return static_cast<int64_t>(std::time(nullptr)); };
  Extender extender(std::move(eo));
  return RunExtenderServer(extender, *o);
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
  std::string kubeconfig, listen, team_namespaces, admin_token_file;
  ExtenderArgs extender{""};  // its listener only: --extender-listen, -prefix, -tls-cert, ...
  SchedulerOptions options;
};

void LogLine(const std::string& line) {
  const time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  fmt::print(stderr, "{:02}:{:02}:{:02} tessera k8s scheduler: {}\n", tm.tm_hour, tm.tm_min, tm.tm_sec, line);
}

// HOST:PORT of --listen (host 127.0.0.1 and port 0 when absent).
std::pair<std::string, int> HostPort(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return {"127.0.0.1", 0};
  return {listen.substr(0, colon), std::atoi(listen.c_str() + colon + 1)};
}

// Serves the API and portal of the scheduler's service on --listen; returns null without it.
std::unique_ptr<ApiServer> ServeApi(Service& svc, const std::string& listen, std::thread* http, int* rc) {
  if (listen.empty()) return nullptr;
  ServerOptions so;
  std::tie(so.host, so.port) = HostPort(listen);
  auto server = std::make_unique<ApiServer>(&svc, so);
  Status st = server->Bind();
  for (int i = 0; i < 20 && !st.ok(); ++i) {  // the standby listener's port may take a moment to free
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    st = server->Bind();
  }
  if (!st.ok()) return fmt::print(stderr, "--listen: {}\n", st.message()), *rc = 1, nullptr;
  *http = std::thread([s = server.get()] { s->Serve(); });
  LogLine(fmt::format("API and portal on http://{}:{}", so.host, server->port()));
  return server;
}

// SIGTERM or SIGINT (blocked in every thread), noticed by a thread of its own.
class SignalWatch {
 public:
  explicit SignalWatch(sigset_t sigs) : sigs_(sigs), thread_([this] { Watch(); }) {}
  ~SignalWatch() {
    done_ = true;
    thread_.join();
  }
  bool signalled() const { return signalled_.load(); }

 private:
  // Also hands the allocator's free memory back every kAllocatorTrimSeconds (WaitForShutdownSignal).
  void Watch() {
    const timespec tick{0, 100 * 1000 * 1000};
    for (int ticks = 1; !done_.load(); ++ticks) {
      if (sigtimedwait(&sigs_, nullptr, &tick) > 0) signalled_ = true;
      if (ticks % (kAllocatorTrimSeconds * 10) == 0) AllocatorReleaseFree();
    }
  }
  sigset_t sigs_;
  std::atomic<bool> signalled_{false}, done_{false};
  std::thread thread_;
};

// Standby until it leads (health on --listen all along), then the Service and its API; a signal or a lost
// Lease ends it: writing stops and the Lease is released first, then the API, then the rest.
int RunScheduler(SchedulerArgs a) {
  const sigset_t sigs = BlockShutdownSignals();
  AllocatorCapThreadCaches(kThreadCacheBytes);
  auto kube = a.kubeconfig.empty() ? InClusterConfig() : LoadKubeconfig(a.kubeconfig);
  if (!kube.ok()) return fmt::print(stderr, "{}\n", kube.error()), 2;
  if (!a.extender.listen.empty()) {
    auto listener = ListenerOf(a.extender, "--extender-listen");
    if (!listener.ok()) return fmt::print(stderr, "{}\n", listener.error()), 2;
    a.options.extender = *listener;
  }
  SignalWatch signals(sigs);
  a.options.log = LogLine;
  if (!a.team_namespaces.empty()) {  // without it, each team's own namespace, never a system one
    auto teams = LoadTeamNamespaces(
        a.team_namespaces, SchedulerNamespaces(a.options.lease_namespace, kube->ns, a.options.mig_config_map));
    if (!teams.ok()) return fmt::print(stderr, "--team-namespaces: {}\n", teams.error()), 2;
    a.options.team_namespaces = *teams;
  }
  // /healthz 200, /readyz 503 while it waits for the Lease or lists the cluster; the API takes the port over.
  auto standby = StandbyHealth::Start(a.listen);
  if (!standby.ok()) return fmt::print(stderr, "--listen: {}\n", standby.error()), 1;
  a.options.cancelled = [&signals] { return signals.signalled(); };
  auto sched = K8sScheduler::Start(std::move(kube).value(), a.options);
  if (!sched.ok() && signals.signalled()) return LogLine("signal; exiting (not leading)"), 0;
  if (!sched.ok()) return fmt::print(stderr, "tessera k8s scheduler: {}\n", sched.error()), 1;
  Service& svc = (*sched)->service();
  if (auto admin = svc.BootstrapAdmin(); admin.ok() && !admin->empty()) {
    const std::string path = a.admin_token_file.empty() ? a.options.db + ".admin-token" : a.admin_token_file;
    const Status st = WriteSecret(path, *admin);
    LogLine(st.ok() ? "created user admin; its token is in " + path + " (mode 0600)" : st.message());
  }
  int rc = 0;
  std::thread http;
  if (*standby) (*standby)->Stop();
  auto server = ServeApi(svc, a.listen, &http, &rc);
  if (rc != 0) return rc;
  while (!(*sched)->lost_leadership() && !signals.signalled())
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const bool lost = (*sched)->lost_leadership();
  LogLine(lost ? "leadership lost; exiting" : "signal; shutting down");
  (*sched)->StopScheduling();
  if (server) server->Stop();
  if (http.joinable()) http.join();
  (*sched)->Stop();
  return lost ? 1 : 0;
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
  ext->add_option("--tls-cert", a->tls_cert, "serve HTTPS with this PEM certificate chain (kube-scheduler: enableHTTPS)");
  ext->add_option("--tls-key", a->tls_key, "the PEM private key of --tls-cert");
  ext->add_option("--client-ca", a->client_ca,
                  "PEM CA: the verbs need a client certificate it signed (kube-scheduler: tlsConfig certFile/keyFile)");
  ext->add_option("--token-file", a->token_file,
                  "file whose first line is a bearer token the verbs need (Authorization: Bearer; needs --tls-cert)");
  ext->add_option(
         "--min-runtime", a->min_runtime_s,
         "seconds a pod must have run before /preempt names it a victim (as the scheduler's --min-runtime)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
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
  sc->add_option("--mig-drain-timeout", s->options.mig_drain_timeout_s,
                 "seconds a MIG repartition's drain may take; then it is abandoned and reported (Event and log)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{86400}));
  sc->add_option("--min-runtime", s->options.min_runtime_s,
                 "seconds a pod's job runs before a higher priority may preempt it (anti-thrashing)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{30} * 86400));
  sc->add_option("--kube-api-qps", s->options.kube_api_qps,
                 "requests per second to the API server at most, as client-go's (watches and the Lease's "
                 "renewals apart); 0: no limit")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100000.0));
  sc->add_option("--kube-api-burst", s->options.kube_api_burst,
                 "requests at once above --kube-api-qps (0: twice the qps)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  sc->add_option("--db", s->options.db, "SQLite store (created if missing)")->capture_default_str();
  sc->add_option("--store", s->options.store,
                 "PostgreSQL connection URI instead of --db: replicas share the database, whose lease follows "
                 "the Kubernetes Lease and fences every write (docs/high-availability.md)")
      ->type_name("URI");
  sc->add_option("--admin-token-file", s->admin_token_file,
                 "where the bootstrap admin token goes (default <db>.admin-token)");
  sc->add_option("--listen", s->listen, "HOST:PORT: serve Tessera's API and portal there");
  sc->add_option("--team-namespaces", s->team_namespaces,
                 "YAML or JSON file mapping team: namespace for jobs with a container from the API (a team "
                 "without an entry has them refused); without it, a team's own namespace unless it is a system one");
  sc->add_option("--extender-listen", s->extender.listen,
                 "HOST:PORT: also serve kube-scheduler's extender verbs there, answered from the loop's view "
                 "(its allocation and policy) for the pods kube-scheduler places");
  sc->add_option("--extender-prefix", s->extender.prefix, "URL prefix of those verbs (urlPrefix)");
  sc->add_option("--extender-tls-cert", s->extender.tls_cert,
                 "serve the verbs over HTTPS with this PEM chain");
  sc->add_option("--extender-tls-key", s->extender.tls_key, "the PEM private key of --extender-tls-cert");
  sc->add_option("--extender-client-ca", s->extender.client_ca,
                 "PEM CA whose client certificates the verbs need");
  sc->add_option("--extender-token-file", s->extender.token_file,
                 "file whose first line is a bearer token the verbs need (needs --extender-tls-cert)");
  sc->callback([s, exit_code] { *exit_code = RunScheduler(*s); });
  auto gpu = std::make_shared<std::string>();
  CLI::App* mig = k8s->add_subcommand("mig-config", "Print the mig-parted config of every MIG layout Tessera may ask for");
  mig->add_option("--gpu", *gpu, "GPU kind (e.g. a100-80gb)")->required();
  mig->callback([gpu, exit_code] { *exit_code = RunMigConfig(*gpu); });
}

}  // namespace tessera::cli
