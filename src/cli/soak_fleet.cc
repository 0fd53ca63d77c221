// SoakReplica (soak_fleet.h).
#include "cli/soak_fleet.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/spawn.h"

namespace tessera::cli {

int SoakFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

SoakReplica::SoakReplica(std::vector<std::string> args, int port, std::string log)
    : args_(std::move(args)), port_(port), log_(std::move(log)) {}

Status SoakReplica::Start() {
  if (pid_ > 0) return Status::Ok();
  pid_ = SpawnLogged(args_, log_);
  return pid_ > 0 ? Status::Ok() : Status::Error("cannot start " + args_[0]);
}

void SoakReplica::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void SoakReplica::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  Kill();
}

int SoakReplica::Probe(const std::string& path, double timeout_s) const {
  if (pid_ <= 0) return 0;
  httplib::Client c(url());
  const auto us = static_cast<time_t>(timeout_s * 1e6);
  c.set_connection_timeout(us / 1000000, us % 1000000);
  c.set_read_timeout(us / 1000000, us % 1000000);
  auto r = c.Get(path);
  return r ? r->status : 0;
}

int64_t SoakReplica::RssKib() const {
  if (pid_ <= 0) return 0;
  std::ifstream f(fmt::format("/proc/{}/status", pid_));
  std::string key;
  while (f >> key) {
    if (key == "VmRSS:") {
      int64_t kib = 0;
      f >> kib;
      return kib;
    }
    f.ignore(1 << 16, '\n');
  }
  return 0;
}

double SoakReplica::CpuSeconds() const {
  if (pid_ <= 0) return 0;
  std::ifstream f(fmt::format("/proc/{}/stat", pid_));
  std::string line;
  std::getline(f, line);
  const size_t close = line.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i)
    if (i == 14 || i == 15) ticks += std::atof(field.c_str());  // utime, stime
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace tessera::cli
