// `tessera simulate ...`: the simulator commands. Each subcommand lives in its own file and registers
// itself here (fgd-harness: simulate_fgd_cmd.cc).
#include "cli/commands.h"

namespace tessera::cli {

void RegisterSimulate(CLI::App& app, int* exit_code) {
  CLI::App* simulate = app.add_subcommand("simulate", "Trace-driven simulations and evaluation harnesses");
  simulate->require_subcommand(1);
  RegisterFgdHarness(*simulate, exit_code);
  RegisterSimulateRun(*simulate, exit_code);
}

}  // namespace tessera::cli
