#pragma once
// What the long-running commands (serve, k8s scheduler) share about their process: the shutdown signals and
// the admin token file.

#include <csignal>
#include <string>

#include "base/status.h"

namespace tessera::cli {

// Blocks SIGTERM and SIGINT in this thread (call before any thread starts, so that every thread inherits the
// mask and the signals wait for sigwait/sigtimedwait on the returned set) and ignores SIGPIPE.
sigset_t BlockShutdownSignals();

// Writes `text` and a newline to `path` with mode 0600 and fsyncs it; an error names the file.
Status WriteSecret(const std::string& path, const std::string& text);

}  // namespace tessera::cli
