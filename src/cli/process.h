#pragma once
// What the long-running commands (serve, k8s scheduler) share about their process: the shutdown signals and
// the admin token file.

#include <csignal>
#include <cstddef>
#include <string>

#include "base/status.h"

namespace tessera::cli {

// Blocks SIGTERM and SIGINT in this thread (call before any thread starts, so that every thread inherits the
// mask and the signals wait for sigwait/sigtimedwait on the returned set) and ignores SIGPIPE.
sigset_t BlockShutdownSignals();

// Waits for one of `sigs` (blocked by BlockShutdownSignals) and returns it. Meanwhile, every
// kAllocatorTrimSeconds, hands the memory the allocator keeps free back to the system (base/allocator.h):
// a process that serves for months keeps the resident memory of what it holds.
int WaitForShutdownSignal(const sigset_t& sigs);
inline constexpr int kAllocatorTrimSeconds = 5;
// What the threads' allocator caches may hold together in a long-running process (AllocatorCapThreadCaches):
// with tcmalloc's 32 MiB a replica's resident memory crept up about 1 MiB a minute for half an hour.
inline constexpr size_t kThreadCacheBytes = size_t{8} << 20;

// Writes `text` and a newline to `path` with mode 0600 and fsyncs it; an error names the file.
Status WriteSecret(const std::string& path, const std::string& text);

}  // namespace tessera::cli
