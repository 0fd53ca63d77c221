// Fuzz target: the HTTP layer in process (server/http_server.h): one raw request per input, sent on a
// fresh loopback connection to a real ApiServer over a real Service and SQLite store (routing, the checks
// before routing, authentication, handlers, error bodies). "$ADMIN" and "$MEMBER" in the input become
// those users' tokens, so that the fuzzer reaches the authenticated handlers. Every answer must be an HTTP
// response with a 3-digit status below 500 except 503 (or the connection closed without one), and the
// server must still answer /healthz.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "fuzz_input.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "server/http_server.h"
#include "service/service.h"
#include "service/simulated_backend.h"
#include "store/store.h"

namespace {

using namespace tessera;

struct World {
  std::unique_ptr<ScaledClock> clock;
  std::unique_ptr<SimulatedBackend> backend;
  std::unique_ptr<Service> service;
  std::unique_ptr<ApiServer> server;
  std::thread serving;
  std::string admin, member;
  int port = 0;
};

World* Start() {
  auto* w = new World;
  const std::string dir =
      std::filesystem::temp_directory_path() / ("tessera-fuzz-http-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ServiceConfig cfg;
  cfg.catalog = &Catalog::Default();
  auto cluster = LoadClusterYaml(
      "name: f\ndefaults: {gpu: h100-80gb, gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch, "
      "spine: s, "
      "tier: reserved}\nnodes:\n  - {name: node, count: 2, leaf: leaf-0}\n",
      "fuzz cluster", *cfg.catalog);
  if (!cluster.ok()) std::abort();
  cfg.cluster = std::move(cluster).value();
  cfg.tick_s = 0.2;
  auto store = OpenSqliteStore(dir + "/f.db");
  if (!store.ok()) std::abort();
  w->clock = std::make_unique<ScaledClock>(1.7e9, 1);
  w->backend = std::make_unique<SimulatedBackend>(w->clock.get(), 0.0, 0.0, 1);
  auto svc = Service::Start(std::move(cfg), std::move(store).value(), w->clock.get(), w->backend.get());
  if (!svc.ok()) std::abort();
  w->service = std::move(svc).value();
  w->admin = *w->service->BootstrapAdmin();
  const Caller admin{"admin", "", Role::kAdmin};
  (void)w->service->CreateTeam(admin, TeamRow{"vision", 8000, 16000, 1, 0});
  w->member = w->service->CreateUser(admin, "ana", "vision", "member").value().token;
  ServerOptions so;
  so.port = 0;
  so.threads = 8;
  so.limits.request_deadline_s = 1;
  w->server = std::make_unique<ApiServer>(w->service.get(), so);
  if (!w->server->Bind().ok()) std::abort();
  w->port = w->server->port();
  w->serving = std::thread([w] { w->server->Serve(); });
  return w;
}

// Connects to the server on loopback. libFuzzer's SIGALRM (its -timeout watchdog) interrupts system calls:
// a connect interrupted that way goes on in the background, so it is awaited, not taken as a refusal.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int err = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 ? 0 : errno;
  if (err == EINTR) {
    pollfd p{fd, POLLOUT, 0};
    while (poll(&p, 1, 5000) < 0 && errno == EINTR) {
    }
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  }
  if (err != 0) {
    std::fprintf(stderr, "connect to the server failed: %s\n", std::strerror(err));
    std::abort();
  }
  return fd;
}

// Sends `data`, closes the sending side, reads the answer until the server closes (at most 5 s of silence).
// Interrupted calls (EINTR) are retried.
std::string Exchange(int port, const std::string& data) {
  const int fd = Connect(port);
  for (size_t sent = 0; sent < data.size();) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the server closed early: its answer (if any) is still read
    sent += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);
  std::string out;
  char buf[8192];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, 5000);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

void Replace(std::string& s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
}

// Whether the server answers /healthz with 200. Asked up to five times, 0.1, 0.2, 0.4 and 0.8 s apart: on a
// loaded machine one request can pass the 1 s request deadline (408), or meet the per-address connection cap
// (503) while the server still winds down the fuzz input's connections, although the server is well.
bool Healthy(int port) {
  for (int i = 0; i < 5; ++i) {
    if (Exchange(port, "GET /healthz HTTP/1.1\r\nHost: f\r\nConnection: close\r\n\r\n")
            .rfind("HTTP/1.1 200", 0) == 0)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100 << i));
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* w = Start();
  std::string req(tessera::fuzz::AsText(data, size));
  Replace(req, "$ADMIN", w->admin);
  Replace(req, "$MEMBER", w->member);
  const std::string answer = Exchange(w->port, req);
  if (!answer.empty()) {
    // Pipelined requests may give several answers: each must be a well-formed status line.
    if (answer.rfind("HTTP/1.1 ", 0) != 0 || answer.size() < 12) std::abort();
    const int status = std::atoi(answer.substr(9, 3).c_str());
    if (status < 100 || status > 599 || (status >= 500 && status != 503)) std::abort();
  }
  if (!Healthy(w->port)) std::abort();
  return 0;
}
