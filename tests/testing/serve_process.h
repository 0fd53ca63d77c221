#pragma once
// A real `tessera serve` process (TESSERA_BINARY) on a free loopback port with a SQLite file `t.db` in `dir`,
// over HTTP or HTTPS: for the server and CLI client tests. Without a `cluster.yaml` in `dir`, Start writes a
// 4 x 8 H100 cluster there.
#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>
#include "testing/paths.h"

extern char** environ;

namespace tessera::testing {

// A loopback port nobody listens on (bound and released).
inline int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

class ServeProcess {
 public:
  // `extra`: further `tessera serve` arguments; `tls`: the server is given a certificate (clients skip
  // verification: it is self-signed).
  explicit ServeProcess(std::filesystem::path dir, std::vector<std::string> extra = {}, bool tls = false)
      : dir_(std::move(dir)), extra_(std::move(extra)), tls_(tls) {}
  ~ServeProcess() { Kill(); }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  // Starts the server; true once /readyz answers 200 (a replica with --store: /healthz) within 30 s.
  bool Start() {
    if (!std::filesystem::exists(dir_ / "cluster.yaml"))
      std::ofstream(dir_ / "cluster.yaml")
          << "name: t\ndefaults: {gpu: h100-80gb, gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch, "
             "spine: s, tier: reserved}\nnodes:\n  - {name: node, count: 4, leaf: leaf-0}\n";
    port_ = FreePort();
    // With --store (a replica on PostgreSQL) there is no SQLite file, and a follower is never ready: it is
    // up once /healthz answers.
    const bool replica = std::find(extra_.begin(), extra_.end(), "--store") != extra_.end();
    std::vector<std::string> args = {::tessera::testing::TesseraBinary(), "serve", "--listen",
                                     "127.0.0.1:" + std::to_string(port_), "--cluster", (dir_ / "cluster.yaml").string()};
    if (!replica) args.insert(args.begin() + 2, {"--db", (dir_ / "t.db").string()});
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    const std::string log = (dir_ / "serve.log").string();
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    const int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return false;
    for (int i = 0; i < 300; ++i) {
      auto r = Get(replica ? "/healthz" : "/readyz", "");
      if (r && r->status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  std::string Url() const { return (tls_ ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port_); }
  std::unique_ptr<httplib::Client> Client() const {
    auto c = std::make_unique<httplib::Client>(Url());
    if (tls_) c->enable_server_certificate_verification(false);
    c->set_connection_timeout(5);
    c->set_read_timeout(10);
    return c;
  }
  // GET / POST with a bearer token (none when empty) and an optional Idempotency-Key.
  httplib::Result Get(const std::string& path, const std::string& token) const {
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    return Client()->Get(path, h);
  }
  httplib::Result Post(const std::string& path, const nlohmann::json& body, const std::string& token,
                       const std::string& key = "") const {
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    if (!key.empty()) h.emplace("Idempotency-Key", key);
    return Client()->Post(path, h, body.dump(), "application/json");
  }
  pid_t pid() const { return pid_; }
  std::string AdminToken() const {
    std::ifstream f(dir_ / "t.db.admin-token");
    std::string t;
    f >> t;
    return t;
  }
  // POST with the admin token; the answer's JSON (null when the call failed).
  nlohmann::json AdminPost(const std::string& path, const nlohmann::json& body) const {
    auto r = Post(path, body, AdminToken());
    return r ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
  }
  // Sends `sig` and waits: the exit status, or minus the signal that ended it.
  int Stop(int sig) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }
  void Kill() {
    if (pid_ > 0) Stop(SIGKILL);
  }

 private:
  std::filesystem::path dir_;
  std::vector<std::string> extra_;
  bool tls_ = false;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace tessera::testing
