// `tessera job ...`, `tessera queue`, `tessera usage`: the REST API's client. Parse, call src/client, print
// (exit codes: cli/client_common.h). Teams, users and the cluster: admin_cmd.cc.
#include <chrono>
#include <fmt/format.h>
#include <random>
#include <nlohmann/json.hpp>

#include "cli/client_common.h"
#include "cli/commands.h"
#include "client/api_client.h"
#include "client/format.h"

namespace tessera::cli {
namespace {

using client::ApiClient;
using client::ApiResponse;

int64_t NowUnix() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string NewIdempotencyKey() {
  std::random_device rd;
  return fmt::format("cli-{:016x}{:016x}", (uint64_t{rd()} << 32) | rd(), (uint64_t{rd()} << 32) | rd());
}

void RegisterJob(CLI::App& app, int* exit_code) {
  CLI::App* job = app.add_subcommand("job", "Submit, list, inspect, cancel and reprioritise jobs");
  job->require_subcommand(1);
  static ClientArgs a;
  static std::string file, id, priority, key;
  static bool all = false;

  CLI::App* submit = job->add_subcommand("submit", "Submit one workload entry (YAML or JSON file)");
  submit->add_option("-f,--file", file, "workload file")->required();
  submit->add_option("--idempotency-key", key, "retry-safe key (default: a random one)");
  AddClientOptions(submit, &a);
  submit->callback([exit_code] {
    auto workload = client::ReadWorkloadFile(file);
    if (!workload.ok()) return void(*exit_code = (fmt::print(stderr, "error: {}\n", workload.error()), 2));
    const std::string k = key.empty() ? NewIdempotencyKey() : key;
    *exit_code = RunClient(a, [&](ApiClient& c) { return c.SubmitJob(workload.value(), k); },
                     [](const ApiResponse& r) { return fmt::format("submitted job {}\n", r.body.value("id", "?")); });
  });

  CLI::App* list = job->add_subcommand("list", "Pending and running jobs (--all: finished ones too)");
  list->add_flag("--all", all, "include finished jobs");
  AddClientOptions(list, &a);
  list->callback([exit_code] {
    *exit_code = RunClient(a, [](ApiClient& c) { return c.ListJobs(all); },
                     [](const ApiResponse& r) { return client::JobsTable(r.body, NowUnix()); });
  });

  CLI::App* get = job->add_subcommand("get", "One job: state, reason, placements");
  get->add_option("id", id, "job id")->required();
  AddClientOptions(get, &a);
  get->callback([exit_code] {
    *exit_code = RunClient(a, [](ApiClient& c) { return c.GetJob(id); },
                     [](const ApiResponse& r) { return client::JobDetail(r.body); });
  });

  CLI::App* cancel = job->add_subcommand("cancel", "Cancel a job");
  cancel->add_option("id", id, "job id")->required();
  AddClientOptions(cancel, &a);
  cancel->callback([exit_code] {
    *exit_code = RunClient(a, [](ApiClient& c) { return c.CancelJob(id); }, [](const ApiResponse& r) {
      return fmt::format("job {} {}\n", r.body.value("id", "?"), r.body.value("state", "?"));
    });
  });

  CLI::App* prio = job->add_subcommand("priority", "Change a job's priority class");
  prio->add_option("id", id, "job id")->required();
  prio->add_option("class", priority, "priority class")->required();
  AddClientOptions(prio, &a);
  prio->callback([exit_code] {
    *exit_code = RunClient(a, [](ApiClient& c) { return c.SetPriority(id, priority); }, [](const ApiResponse& r) {
      return fmt::format("job {} priority {}\n", r.body.value("id", "?"), r.body.value("priority_class", "?"));
    });
  });

  CLI::App* whatif = job->add_subcommand("whatif", "Earliest start with all, half or a quarter of its GPUs");
  whatif->add_option("id", id, "pending job id")->required();
  AddClientOptions(whatif, &a);
  whatif->callback([exit_code] {
    *exit_code = RunClient(a, [](ApiClient& c) { return c.WhatIf(id); },
                           [](const ApiResponse& r) { return client::WhatIfTable(r.body); });
  });
}

}  // namespace

void RegisterClient(CLI::App& app, int* exit_code) {
  RegisterJob(app, exit_code);
  static ClientArgs qa, ua;
  static std::string from, to;
  static bool csv = false, focus = false;
  CLI::App* queue = app.add_subcommand("queue", "Pending jobs in order, with reason and estimated start");
  AddClientOptions(queue, &qa);
  queue->callback([exit_code] {
    *exit_code = RunClient(qa, [](ApiClient& c) { return c.Queue(); },
                     [](const ApiResponse& r) { return client::QueueTable(r.body); });
  });
  CLI::App* usage = app.add_subcommand("usage", "GPU-hours and cost by team, project and tier");
  usage->add_option("--from", from, "start, ISO 8601 UTC or Unix seconds (default: start of the ledger)");
  usage->add_option("--to", to, "end (default: now on the service's clock)");
  usage->add_flag("--csv", csv, "print the API's CSV");
  usage->add_flag("--focus", focus, "print the FinOps FOCUS 1.1 CSV export")->excludes("--csv");
  AddClientOptions(usage, &ua);
  usage->callback([exit_code] {
    const std::string format = focus ? "focus" : csv ? "csv" : "json";
    *exit_code = RunClient(ua, [format](ApiClient& c) { return c.Usage(from, to, format); },
                           [](const ApiResponse& r) { return csv || focus ? r.text : client::UsageTable(r.body); });
  });
}

}  // namespace tessera::cli
