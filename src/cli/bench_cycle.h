#pragma once
#include <CLI/CLI.hpp>

namespace tessera::cli {
// `tessera bench cycle` (scheduling-cycle speed); defined in bench_cycle.cc.
void RegisterBenchCycle(CLI::App& bench, int* exit_code);
// `tessera bench dra` (DRA claims after MIG churn); defined in bench_dra.cc.
void RegisterBenchDra(CLI::App& bench, int* exit_code);
// `tessera bench rank-nodes` (the extender's question from the loop's view); defined in bench_rank.cc.
void RegisterBenchRank(CLI::App& bench, int* exit_code);
}  // namespace tessera::cli
