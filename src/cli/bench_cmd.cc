#include "cli/commands.h"

namespace tessera::cli {

void RegisterBench(CLI::App& app, int* exit_code) {}

}  // namespace tessera::cli
