#pragma once
// The replica processes of `tessera bench soak`: `tessera serve` on a private PostgreSQL server
// (store/local_postgres.h), each started, killed and started again on its own port.

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace tessera::cli {

// One `tessera serve --store` replica on a fixed loopback port, its output appended to `log`.
class SoakReplica {
 public:
  SoakReplica(std::vector<std::string> args, int port, std::string log);
  ~SoakReplica() { Stop(); }
  SoakReplica(const SoakReplica&) = delete;
  SoakReplica& operator=(const SoakReplica&) = delete;

  Status Start();
  void Kill();  // SIGKILL, reaped
  void Stop();  // SIGTERM, reaped (SIGKILL after 10 s)
  bool alive() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // HTTP status of GET `path` (0: no answer within `timeout_s`).
  int Probe(const std::string& path, double timeout_s = 1) const;
  // Resident set size in KiB from /proc (0 when not running).
  int64_t RssKib() const;
  // CPU seconds (user + system) the process has used, from /proc (0 when not running).
  double CpuSeconds() const;

 private:
  std::vector<std::string> args_;
  int port_;
  std::string log_;
  pid_t pid_ = -1;
};

// A loopback TCP port that nobody listened on a moment ago.
int SoakFreePort();

}  // namespace tessera::cli
