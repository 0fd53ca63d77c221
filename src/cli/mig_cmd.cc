#include "cli/commands.h"

namespace tessera::cli {

void RegisterMig(CLI::App& app, int* exit_code) {}

}  // namespace tessera::cli
