#pragma once
// A real `tessera serve` process on a free loopback port with a SQLite file in `dir`, for the client tests.
#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace tessera::testing {

class ServeProcess {
 public:
  explicit ServeProcess(std::filesystem::path dir) : dir_(std::move(dir)) {}
  ~ServeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // Starts the server on a 4 x 8 H100 cluster; true once /readyz answers 200.
  bool Start() {
    std::ofstream(dir_ / "cluster.yaml")
        << "name: t\ndefaults: {gpu: h100-80gb, gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch, "
           "spine: s, tier: reserved}\nnodes:\n  - {name: node, count: 4, leaf: leaf-0}\n";
    port_ = FreePort();
    std::vector<std::string> args = {TESSERA_BINARY, "serve", "--db", (dir_ / "t.db").string(), "--listen",
                                     "127.0.0.1:" + std::to_string(port_), "--cluster", (dir_ / "cluster.yaml").string()};
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
      auto r = httplib::Client(Url()).Get("/readyz");
      if (r && r->status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string AdminToken() const {
    std::ifstream f(dir_ / "t.db.admin-token");
    std::string t;
    f >> t;
    return t;
  }
  // POST with the admin token; the answer's JSON (null when the call failed).
  nlohmann::json AdminPost(const std::string& path, const nlohmann::json& body) const {
    auto r = httplib::Client(Url()).Post(path, {{"Authorization", "Bearer " + AdminToken()}}, body.dump(),
                                         "application/json");
    return r ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
  }

 private:
  static int FreePort() {
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
  std::filesystem::path dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace tessera::testing
