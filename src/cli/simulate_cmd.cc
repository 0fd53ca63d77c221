#include "cli/commands.h"

namespace tessera::cli {

void RegisterSimulate(CLI::App& app, int* exit_code) {}

}  // namespace tessera::cli
