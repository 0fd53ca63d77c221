// `tessera serve`: the control plane over HTTP(S). Parses options, wires store, service, backend and
// server together, writes the bootstrap admin token, and exits 0 on SIGTERM after in-flight requests and
// queued writes finish. With --replay it runs a scenario through the service instead (replay/replay.h)
// and exits when the scenario ends.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <limits>
#include <thread>

#include "base/allocator.h"
#include "base/file.h"
#include "cli/commands.h"
#include "cli/embedded_demo.h"
#include "cli/process.h"
#include "cost/pricebook.h"
#include "replay/replay.h"
#include "server/http_server.h"
#include "server/replica.h"
#include "service/demo.h"
#include "service/service.h"
#include "service/simulated_backend.h"
#include "store/postgres_store.h"

namespace tessera::cli {
namespace {

struct ServeArgs {
  std::string db = "tessera.db";
  std::string store;      // --store postgresql://...: replicas on one PostgreSQL database
  std::string advertise;  // this replica's URL for the others (default http(s)://--listen)
  double lease_s = 10;
  int64_t retain_ended = ServiceConfig{}.retain_ended_jobs;
  std::string listen = "127.0.0.1:8080";
  std::string cluster, tenancy, admin_token_file, tls_cert, tls_key;
  bool demo = false;
  double speed = 1;
  double backend_latency_s = 0, backend_failures = 0;
  std::string replay, decisions;
  uint64_t seed = 0;
  bool db_given = false, listen_given = false;
  double request_deadline_s = 10;
  int max_connections_per_address = ConnectionLimits{}.max_per_address;
  double rate_limit = 0;
  double sign_in_limit = 20;
  std::vector<std::string> trusted_proxies;  // CIDRs
  int max_sessions_per_user = 32;
  std::vector<std::string> prices;  // price books; none = the default (2024) and the 2025 book
};

// The books usage is priced with: each --prices file, else the two shipped books.
Result<std::vector<PriceBook>> ServeBooks(const std::vector<std::string>& files) {
  std::vector<PriceBook> books;
  if (files.empty()) {
    books.push_back(PriceBook::Default());
    auto current = PriceBook::FromYaml(kPrices2025, "examples/cost/prices-2025.yaml (compiled in)");
    if (!current.ok()) return current.status();
    books.push_back(std::move(current).value());
  }
  for (const std::string& f : files) {
    auto text = ReadFile(f);
    if (!text.ok()) return text.status();
    auto book = PriceBook::FromYaml(*text, f);
    if (!book.ok()) return book.status();
    books.push_back(std::move(book).value());
  }
  return books;
}

// HOST:PORT -> port, or -1.
int PortOf(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon != std::string::npos && colon + 1 < listen.size() && listen.size() - colon <= 6 &&
      listen.find_first_not_of("0123456789", colon + 1) == std::string::npos) {
    const int port = std::stoi(listen.substr(colon + 1));
    return port <= 65535 ? port : -1;
  }
  return -1;
}

// `--replay`: the scenario through the service's submission path on a virtual clock; exits when it ends.
int ServeReplay(const ServeArgs& a) {
  auto replay = Replay::Prepare(a.replay, a.seed, Catalog::Default());
  if (!replay.ok()) return fmt::print(stderr, "{}\n", replay.error()), 2;
  ServiceConfig cfg = (*replay)->Config();
  cfg.catalog = &Catalog::Default();
  std::string db = a.db, tmp;
  if (!a.db_given) {
    char dir[] = "/tmp/tessera-replay-XXXXXX";
    if (mkdtemp(dir) == nullptr) return fmt::print(stderr, "--replay: cannot create a temporary directory\n"), 1;
    tmp = dir;
    db = tmp + "/replay.db";
  }
  auto store = OpenSqliteStore(db);
  if (!store.ok()) return fmt::print(stderr, "{}\n", store.error()), 1;
  auto service = Service::Start(std::move(cfg), std::move(store).value(), (*replay)->clock(), (*replay)->backend());
  if (!service.ok()) return fmt::print(stderr, "{}\n", service.error()), 1;
  Service& svc = **service;
  if (auto admin = svc.BootstrapAdmin(); !admin.ok()) return fmt::print(stderr, "{}\n", admin.error()), 1;
  std::unique_ptr<ApiServer> server;
  std::thread http;
  if (a.listen_given) {
    ServerOptions so;
    so.host = a.listen.substr(0, a.listen.rfind(':'));
    so.port = PortOf(a.listen);
    server = std::make_unique<ApiServer>(&svc, so);
    if (Status st = server->Bind(); !st.ok()) return fmt::print(stderr, "{}\n", st.message()), 1;
    http = std::thread([&] { server->Serve(); });
  }
  std::FILE* out = a.decisions.empty() ? nullptr : std::fopen(a.decisions.c_str(), "w");
  if (!a.decisions.empty() && out == nullptr) return fmt::print(stderr, "--decisions: cannot write {}\n", a.decisions), 1;
  fmt::print("tessera serve --replay {}: seed {}, {} jobs\n", a.replay, (*replay)->seed(), (*replay)->jobs());
  std::fflush(stdout);
  size_t lines = 0;
  const Status st = (*replay)->Run(svc, [&](const std::string& l) {
    ++lines;
    if (out) std::fprintf(out, "%s\n", l.c_str());
  });
  const bool written = out == nullptr || (std::fflush(out) == 0 && std::fclose(out) == 0);
  if (server) server->Stop();
  if (http.joinable()) http.join();
  svc.Stop();
  if (!tmp.empty()) std::filesystem::remove_all(tmp);
  if (!st.ok()) return fmt::print(stderr, "{}\n", st.message()), 1;
  if (!written) return fmt::print(stderr, "--decisions: cannot write {}\n", a.decisions), 1;
  fmt::print("tessera serve --replay: {} decisions; the scenario ended\n", lines);
  return 0;
}

// The service's configuration from --cluster (or the demo cluster), --prices and --tenancy.
Result<ServiceConfig> LoadServiceConfig(const ServeArgs& a) {
  ServiceConfig cfg;
  cfg.catalog = &Catalog::Default();
  std::string cluster_text = DemoClusterYaml(), cluster_source = "demo cluster";
  if (!a.cluster.empty()) {
    auto t = ReadFile(a.cluster);
    if (!t.ok()) return t.status();
    cluster_text = *t;
    cluster_source = a.cluster;
  }
  auto cluster = LoadClusterYaml(cluster_text, cluster_source, *cfg.catalog);
  if (!cluster.ok()) return cluster.status();
  cfg.cluster = std::move(cluster).value();
  cfg.log = [](const std::string& line) { fmt::print(stderr, "tessera serve: {}\n", line); };
  cfg.retain_ended_jobs = a.retain_ended;
  auto books = ServeBooks(a.prices);
  if (!books.ok()) return books.status();
  cfg.price_books = std::move(books).value();
  if (a.tenancy.empty()) return cfg;
  auto t = ReadFile(a.tenancy);
  if (!t.ok()) return t.status();
  auto ten = ParseTenancyYaml(*t, a.tenancy, *cfg.catalog);
  if (!ten.ok()) return ten.status();
  cfg.tenancy = std::move(ten).value();
  return cfg;
}

ServerOptions ServerOptionsOf(const ServeArgs& a, int port) {
  ServerOptions so;
  so.host = a.listen.substr(0, a.listen.rfind(':'));
  so.port = port;
  so.tls_cert = a.tls_cert;
  so.tls_key = a.tls_key;
  so.clock_speed = a.speed;
  so.limits.request_deadline_s = a.request_deadline_s;
  so.limits.max_per_address = a.max_connections_per_address;
  so.rate_limit_per_min = a.rate_limit;
  so.sign_in_failures_per_min = a.sign_in_limit;
  so.trusted_proxies = a.trusted_proxies;
  so.sessions.max_per_user = static_cast<size_t>(a.max_sessions_per_user);
  return so;
}

// Creates the bootstrap admin on the first start and writes its token (mode 0600); the token file's path.
Result<std::string> BootstrapAdmin(const ServeArgs& a, Service& svc) {
  auto admin = svc.BootstrapAdmin();
  if (!admin.ok()) return admin.status();
  const std::string token_file = a.admin_token_file.empty() ? a.db + ".admin-token" : a.admin_token_file;
  if (admin->empty()) return token_file;
  if (Status st = WriteSecret(token_file, *admin); !st.ok()) return st;
  fmt::print("created user admin; its token is in {} (mode 0600)\n", token_file);
  return token_file;
}

// Sets up the demo's teams and users, prints how to use them, and starts its job stream.
Result<std::unique_ptr<DemoStream>> StartDemo(const ServeArgs& a, Service& svc, const std::string& url,
                                              const std::string& token_file) {
  auto users = SetUpDemo(svc);
  if (!users.ok()) return users.status();
  fmt::print("Tessera demo: {} GPUs ({}), simulated clock x{}\n", svc.cluster().TotalGpus(), svc.cluster().name, a.speed);
  fmt::print("  API:     {}/api/v1   (metrics: {}/metrics)\n", url, url);
  fmt::print("  portal:  {}/   (sign in with a token below)\n", url);
  fmt::print("  admin token: in {}\n", token_file);
  for (const DemoUser& u : users.value())
    fmt::print("  {:<18} {:<10} {:<10} {}\n", u.name, u.team, u.role, u.token.empty() ? "(token shown at first start)" : u.token);
  fmt::print("  try:     TESSERA_SERVER={} TESSERA_TOKEN=$(cat {}) tessera job list\n", url, token_file);
  fmt::print("           curl -H \"Authorization: Bearer $(cat {})\" {}/api/v1/queue\n", token_file, url);
  return std::make_unique<DemoStream>(&svc, static_cast<uint64_t>(std::time(nullptr)));
}

// Serves until SIGTERM or SIGINT (blocked in `sigs`), then stops HTTP, then what `stop_rest` stops.
int ServeUntilSignal(ApiServer& server, const sigset_t& sigs, const std::function<void()>& stop_rest) {
  std::thread http([&] { server.Serve(); });
  const int sig = WaitForShutdownSignal(sigs);
  fmt::print("tessera serve: signal {}, shutting down\n", sig);
  server.Stop();
  http.join();
  stop_rest();
  std::fflush(stdout);
  return 0;
}

// `--store`: one of several replicas on a PostgreSQL database (server/replica.h). Each leadership term and
// each follower view is a service of its own, with its own clock and simulated backend.
int ServeReplicated(const ServeArgs& a, ServiceConfig base, int port, const sigset_t& sigs) {
  const std::string scheme = a.tls_cert.empty() ? "http" : "https";
  const std::string self = !a.advertise.empty() ? a.advertise : fmt::format("{}://{}", scheme, a.listen);
  if (a.advertise.empty() && port == 0)
    return fmt::print(stderr, "--store with --listen port 0: give --advertise URL\n"), 2;
  ReplicaOptions ro;
  ro.store_uri = a.store;
  ro.self_url = self;
  ro.lease_s = a.lease_s;
  ro.log = [](const std::string& line) { fmt::print(stderr, "tessera serve: {}\n", line); };
  ro.make_service = [&a, base](std::unique_ptr<Store> store, bool view) -> Result<std::shared_ptr<Service>> {
    ServiceConfig cfg = base;
    cfg.view_only = view;
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    auto clock = std::make_shared<ScaledClock>(now, a.speed);
    auto backend = std::make_shared<SimulatedBackend>(clock.get(), a.backend_latency_s, a.backend_failures,
                                                      static_cast<uint64_t>(std::time(nullptr)));
    auto svc = Service::Start(std::move(cfg), std::move(store), clock.get(), backend.get());
    if (!svc.ok()) return svc.status();
    return std::shared_ptr<Service>(svc.value().release(), [clock, backend](Service* s) { delete s; });
  };
  ro.on_lead = [&a](Service& svc) {
    auto admin = svc.BootstrapAdmin();
    if (!admin.ok()) return (void)fmt::print(stderr, "tessera serve: bootstrap admin: {}\n", admin.error());
    if (admin->empty()) return;
    const std::string token_file = a.admin_token_file.empty() ? "tessera.admin-token" : a.admin_token_file;
    if (Status st = WriteSecret(token_file, *admin); !st.ok())
      return (void)fmt::print(stderr, "tessera serve: {}\n", st.message());
    fmt::print("created user admin; its token is in {} (mode 0600)\n", token_file);
    std::fflush(stdout);
  };
  auto replica = Replica::Start(std::move(ro));
  if (!replica.ok()) return fmt::print(stderr, "{}\n", replica.error()), 1;
  ServerOptions so = ServerOptionsOf(a, port);
  so.replica = replica->get();
  ApiServer server((*replica)->slot(), so);
  if (Status st = server.Bind(); !st.ok()) return fmt::print(stderr, "{}\n", st.message()), 1;
  fmt::print("tessera serve: listening on {}://{}:{} as {} (database {}, lease {} s)\n", scheme,
             a.listen.substr(0, a.listen.rfind(':')), server.port(), self, RedactUri(a.store), a.lease_s);
  std::fflush(stdout);
  return ServeUntilSignal(server, sigs, [&] { (*replica)->Stop(); });
}

int Serve(const ServeArgs& a) {
  // Taken by WaitForShutdownSignal; blocked before any thread starts.
  const sigset_t sigs = BlockShutdownSignals();
  AllocatorCapThreadCaches(kThreadCacheBytes);
  const int port = PortOf(a.listen);
  if (port < 0) return fmt::print(stderr, "--listen: '{}' is not HOST:PORT\n", a.listen), 2;
  if (auto proxies = TrustedProxies::Parse(a.trusted_proxies); !proxies.ok())
    return fmt::print(stderr, "{}\n", proxies.error()), 2;
  if (!a.store.empty() && (a.db_given || a.demo || !a.replay.empty()))
    return fmt::print(stderr, "--store: not with --db, --demo or --replay (they use a local SQLite file)\n"), 2;
  if (!a.store.empty() && a.store.rfind("postgresql://", 0) != 0 && a.store.rfind("postgres://", 0) != 0)
    return fmt::print(stderr, "--store: expected a postgresql:// connection URI\n"), 2;
  if (!a.replay.empty()) return ServeReplay(a);
  if (!a.store.empty()) {
    auto cfg = LoadServiceConfig(a);
    if (!cfg.ok()) return fmt::print(stderr, "{}\n", cfg.error()), 1;
    return ServeReplicated(a, std::move(cfg).value(), port, sigs);
  }
  auto cfg = LoadServiceConfig(a);
  if (!cfg.ok()) return fmt::print(stderr, "{}\n", cfg.error()), 1;
  auto store = OpenSqliteStore(a.db);
  if (!store.ok()) return fmt::print(stderr, "{}\n", store.error()), 1;
  ScaledClock clock(static_cast<double>(std::time(nullptr)), a.speed);
  SimulatedBackend backend(&clock, a.backend_latency_s, a.backend_failures, static_cast<uint64_t>(std::time(nullptr)));
  auto service = Service::Start(std::move(cfg).value(), std::move(store).value(), &clock, &backend);
  if (!service.ok()) return fmt::print(stderr, "{}\n", service.error()), 1;
  Service& svc = **service;
  auto token_file = BootstrapAdmin(a, svc);
  if (!token_file.ok()) return fmt::print(stderr, "{}\n", token_file.error()), 1;
  ApiServer server(&svc, ServerOptionsOf(a, port));
  if (Status st = server.Bind(); !st.ok()) return fmt::print(stderr, "{}\n", st.message()), 1;
  const std::string host = a.listen.substr(0, a.listen.rfind(':'));
  const std::string url = fmt::format("{}://{}:{}", a.tls_cert.empty() ? "http" : "https", host, server.port());
  std::unique_ptr<DemoStream> stream;
  if (a.demo) {
    auto started = StartDemo(a, svc, url, *token_file);
    if (!started.ok()) return fmt::print(stderr, "{}\n", started.error()), 1;
    stream = std::move(started).value();
  }
  fmt::print("tessera serve: listening on {} (database {})\n", url, a.db);
  std::fflush(stdout);
  return ServeUntilSignal(server, sigs, [&] {  // the demo, then the service
    if (stream) stream->Stop();
    svc.Stop();
  });
}

}  // namespace

void RegisterServe(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* c = app.add_subcommand("serve", "Run the control plane: REST API, SQLite store, scheduling cycles");
  c->add_option("--db", a->db, "SQLite database file (created if missing)")->capture_default_str();
  c->add_option("--store", a->store,
                "PostgreSQL connection URI (postgresql://USER@HOST:PORT/DB, ?host=/dir for a Unix socket): "
                "several replicas share it, one leads (docs/high-availability.md); default: --db")
      ->type_name("URI");
  c->add_option("--advertise", a->advertise,
                "with --store: this replica's URL, which followers name to clients in Tessera-Leader "
                "(default http(s)://--listen)")
      ->type_name("URL");
  c->add_option("--lease-seconds", a->lease_s,
                "with --store: the leader's lease; a follower takes over this long after the leader stopped "
                "renewing it")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  c->add_option("--retain-ended", a->retain_ended,
                "ended jobs kept in memory (the most recently ended); the others are read from the database "
                "when asked for; -1 = all")
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()))
      ->capture_default_str();
  c->add_option("--listen", a->listen, "HOST:PORT to listen on")->capture_default_str();
  c->add_option("--cluster", a->cluster,
                "cluster YAML; it seeds an empty database, whose nodes are used afterwards (tessera node ...) "
                "(default: the embedded demo cluster)");
  c->add_option("--prices", a->prices,
                "price book YAML, repeatable: usage is priced with the book valid at its time (default: the "
                "compiled-in 2024 book and examples/cost/prices-2025.yaml)")
      ->check(CLI::ExistingFile);
  c->add_option("--tenancy", a->tenancy, "tenancy YAML: teams, queues, priority classes");
  c->add_flag("--demo", a->demo, "demo teams, users and a stream of jobs on the simulated backend");
  c->add_option("--backend-latency", a->backend_latency_s,
                "every call to the simulated backend completes this many seconds later (tests, demos)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--backend-failures", a->backend_failures,
                "probability that a launch or a MIG reconfiguration of the simulated backend fails")
      ->check(CLI::Range(0.0, 1.0));
  c->add_option("--replay", a->replay,
                "run this scenario through the service (its first seed, the tessera policy) and exit when it ends");
  c->add_option("--seed", a->seed, "with --replay: the seed to run (default: the scenario's first)");
  c->add_option("--decisions", a->decisions, "with --replay: write the decisions as JSON lines to this file");
  c->add_option("--speed", a->speed, "simulated clock speed (service seconds per wall second)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c->add_option("--admin-token-file", a->admin_token_file, "where the bootstrap admin token goes (default <db>.admin-token)");
  c->add_option("--tls-cert", a->tls_cert, "PEM certificate: serve HTTPS")->check(CLI::ExistingFile);
  c->add_option("--tls-key", a->tls_key, "PEM private key for --tls-cert")->check(CLI::ExistingFile);
  c->add_option("--request-deadline", a->request_deadline_s,
                 "seconds a client has to send one request's headers and body (plain HTTP)")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  c->add_option("--max-connections-per-address", a->max_connections_per_address,
                "open connections one client address may hold")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  c->add_option("--rate-limit", a->rate_limit, "requests per minute per token and per client address (0 = none)")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  c->add_option("--sign-in-limit", a->sign_in_limit,
                "wrong credentials (sign-ins, bearer tokens, session cookies) per minute per client address "
                "answered 401 before 429 (docs/security.md)")
      ->check(CLI::Range(1.0, 1e9))
      ->capture_default_str();
  c->add_option("--trusted-proxy", a->trusted_proxies,
                "CIDR of a reverse proxy (repeatable; IPv4 or IPv6, e.g. 10.0.0.0/8): a request from it is "
                "counted and audited as the rightmost X-Forwarded-For address outside every trusted CIDR")
      ->type_name("CIDR");
  c->add_option("--max-sessions-per-user", a->max_sessions_per_user,
                "portal sessions one user may hold; a sign-in beyond ends that user's least recently used one")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  c->callback([a, c, exit_code] {
    a->db_given = c->count("--db") > 0;
    a->listen_given = c->count("--listen") > 0;
    *exit_code = Serve(*a);
  });
}

}  // namespace tessera::cli
