#pragma once
// Each command group registers its subcommands on the root app. A command sets `*exit_code` and prints
// its own output; the CLI holds no scheduling logic of its own.

#include <CLI/CLI.hpp>

#include <string>

namespace tessera::cli {

void RegisterMig(CLI::App& app, int* exit_code);
void RegisterPlace(CLI::App& app, int* exit_code);
void RegisterBench(CLI::App& app, int* exit_code);
void RegisterSimulate(CLI::App& app, int* exit_code);
void RegisterCost(CLI::App& app, int* exit_code);
void RegisterDemo(CLI::App& app, int* exit_code);
void RegisterServe(CLI::App& app, int* exit_code);
void RegisterClient(CLI::App& app, int* exit_code);  // job, queue, usage
void RegisterAdminClient(CLI::App& app, int* exit_code);  // team, user, cluster
void RegisterNode(CLI::App& app, int* exit_code);  // node list|add|cordon|uncordon|drain|remove
void RegisterBenchApi(CLI::App& bench, int* exit_code);  // bench api
void RegisterBenchSoak(CLI::App& bench, int* exit_code);  // bench soak
void RegisterK8s(CLI::App& app, int* exit_code);  // k8s extender
// Subcommands of `simulate` (each in its own simulate_*_cmd.cc).
void RegisterFgdHarness(CLI::App& simulate, int* exit_code);
void RegisterSimulateRun(CLI::App& simulate, int* exit_code);  // run, generate, report
// Runs the FGD harness on an openb trace folder (GPU node list, default pod list) and writes the curves CSV,
// one point per 1% of arrived load (for `simulate report`). Returns the fgd-harness exit code.
int WriteFgdCurves(const std::string& trace_dir, const std::string& policies, const std::string& seeds,
                   const std::string& curves_path);

}  // namespace tessera::cli
