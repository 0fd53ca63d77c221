#include "cli/commands.h"

namespace tessera::cli {

void RegisterDemo(CLI::App& app, int* exit_code) {}

}  // namespace tessera::cli
