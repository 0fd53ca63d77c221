#pragma once
// Runs the built `tessera` binary (TESSERA_BINARY) with arguments and captures its output and exit code.
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include "testing/paths.h"

namespace tessera::testing {

struct CliRun {
  int code = -1;
  std::string out;  // stdout, or stdout + stderr when asked
};

// `env` is prepended to the shell command line, e.g. "HOME=/tmp/x TESSERA_TOKEN=t".
inline CliRun Tessera(const std::string& args, bool with_stderr = false, const std::string& env = "") {
  const std::string cmd =
      env + (env.empty() ? "'" : " '") + ::tessera::testing::TesseraBinary() + "' " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace tessera::testing
