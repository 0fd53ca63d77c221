// The `tessera` command.
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/commands.h"

namespace {

int Run(int argc, char** argv) {
  // Scheduling cycles and simulations allocate buffers of similar sizes over and over: keep freed heap
  // memory in the process (no mmap/munmap per large vector, no trimming) so it is reused without page faults.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{"Tessera: a GPU cluster orchestrator for AI workloads"};
  app.require_subcommand(1);
  int exit_code = 0;
  tessera::cli::RegisterMig(app, &exit_code);
  tessera::cli::RegisterPlace(app, &exit_code);
  tessera::cli::RegisterBench(app, &exit_code);
  tessera::cli::RegisterSimulate(app, &exit_code);
  tessera::cli::RegisterCost(app, &exit_code);
  tessera::cli::RegisterDemo(app, &exit_code);
  tessera::cli::RegisterServe(app, &exit_code);
  tessera::cli::RegisterClient(app, &exit_code);
  tessera::cli::RegisterAdminClient(app, &exit_code);
  tessera::cli::RegisterK8s(app, &exit_code);
  tessera::cli::RegisterNode(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is a success; any usage error is exit status 2
  }
  return exit_code;
}

}  // namespace

// Readers report bad input as Status errors; an exception that escapes anyway still ends in one line on
// stderr and exit status 2, never in std::terminate.
int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "tessera: error: unexpected failure\n");
  }
  return 2;
}
