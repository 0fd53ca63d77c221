// The `tessera` command.
#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Tessera: a GPU cluster orchestrator for AI workloads"};
  app.require_subcommand(1);
  int exit_code = 0;
  tessera::cli::RegisterMig(app, &exit_code);
  tessera::cli::RegisterPlace(app, &exit_code);
  tessera::cli::RegisterBench(app, &exit_code);
  tessera::cli::RegisterSimulate(app, &exit_code);
  tessera::cli::RegisterCost(app, &exit_code);
  tessera::cli::RegisterDemo(app, &exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
