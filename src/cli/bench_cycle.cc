#include "cli/bench_cycle.h"

namespace tessera::cli {
void RegisterBenchCycle(CLI::App& bench, int* exit_code) {}
}  // namespace tessera::cli
