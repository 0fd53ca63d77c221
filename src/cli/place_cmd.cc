#include "cli/commands.h"

namespace tessera::cli {

void RegisterPlace(CLI::App& app, int* exit_code) {}

}  // namespace tessera::cli
