#include "cli/process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/allocator.h"

namespace tessera::cli {

sigset_t BlockShutdownSignals() {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return sigs;
}

int WaitForShutdownSignal(const sigset_t& sigs) {
  const timespec tick{kAllocatorTrimSeconds, 0};
  for (;;) {
    const int sig = sigtimedwait(&sigs, nullptr, &tick);
    if (sig > 0) return sig;
    AllocatorReleaseFree();  // the wait timed out (or was interrupted by another signal)
  }
}

Status WriteSecret(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return Status::Error(fmt::format("{}: cannot write the admin token", path));
  fchmod(fd, 0600);
  const std::string line = text + "\n";
  const bool ok = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && fsync(fd) == 0;
  close(fd);
  return ok ? Status::Ok() : Status::Error(fmt::format("{}: cannot write the admin token", path));
}

}  // namespace tessera::cli
