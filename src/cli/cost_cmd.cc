#include "cli/commands.h"

namespace tessera::cli {

void RegisterCost(CLI::App& app, int* exit_code) {}

}  // namespace tessera::cli
