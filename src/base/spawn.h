#pragma once
// Starting a child process with its output appended to a log file.

#include <sys/types.h>

#include <string>
#include <vector>

namespace tessera {

// Spawns `args` (args[0] looked up in PATH) with stdout and stderr appended to `log` (created 0644 if
// missing), the environment inherited; the child's pid, or -1 when it could not be started.
pid_t SpawnLogged(const std::vector<std::string>& args, const std::string& log);

}  // namespace tessera
