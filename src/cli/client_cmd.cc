// `tessera job ...`, `tessera queue`, `tessera usage`: the REST API's client. Parse, call src/client, print.
// Exit 0 on success, 1 when the API refuses (its message on stderr), 2 for usage or connection errors.
#include <chrono>
#include <cstdlib>
#include <fmt/format.h>
#include <random>

#include "cli/commands.h"
#include "client/api_client.h"
#include "client/format.h"

namespace tessera::cli {
namespace {

using client::ApiClient;
using client::ApiResponse;

struct ClientArgs {
  std::string server, token;
  bool json = false;
};

void AddClientOptions(CLI::App* cmd, ClientArgs* a) {
  cmd->add_option("--server", a->server, "API base URL (else TESSERA_SERVER, else ~/.config/tessera/config.yaml)");
  cmd->add_option("--token", a->token, "bearer token (else TESSERA_TOKEN, else the config file)");
  cmd->add_flag("--json", a->json, "print the API's JSON");
}

std::string Env(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  return v == nullptr ? "" : v;
}

int64_t NowUnix() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Resolves the config, runs `call`, prints its answer with `format` (or as JSON) and returns the exit code.
template <typename Call, typename Format>
int Run(const ClientArgs& a, Call call, Format format) {
  auto config = client::ResolveConfig(a.server, a.token, Env, client::DefaultConfigPath(Env));
  if (!config.ok()) return fmt::print(stderr, "error: {}\n", config.error()), 2;
  ApiClient api(config.value());
  const ApiResponse r = call(api);
  if (r.kind == ApiResponse::Kind::kUnreachable) return fmt::print(stderr, "error: {}\n", r.error), 2;
  if (r.kind == ApiResponse::Kind::kRefused) return fmt::print(stderr, "error: {}\n", r.error), 1;
  fmt::print("{}", a.json ? r.body.dump(2) + "\n" : format(r));
  return 0;
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
    *exit_code = Run(a, [&](ApiClient& c) { return c.SubmitJob(workload.value(), k); },
                     [](const ApiResponse& r) { return fmt::format("submitted job {}\n", r.body.value("id", "?")); });
  });

  CLI::App* list = job->add_subcommand("list", "Pending and running jobs (--all: finished ones too)");
  list->add_flag("--all", all, "include finished jobs");
  AddClientOptions(list, &a);
  list->callback([exit_code] {
    *exit_code = Run(a, [](ApiClient& c) { return c.ListJobs(all); },
                     [](const ApiResponse& r) { return client::JobsTable(r.body, NowUnix()); });
  });

  CLI::App* get = job->add_subcommand("get", "One job: state, reason, placements");
  get->add_option("id", id, "job id")->required();
  AddClientOptions(get, &a);
  get->callback([exit_code] {
    *exit_code = Run(a, [](ApiClient& c) { return c.GetJob(id); },
                     [](const ApiResponse& r) { return client::JobDetail(r.body); });
  });

  CLI::App* cancel = job->add_subcommand("cancel", "Cancel a job");
  cancel->add_option("id", id, "job id")->required();
  AddClientOptions(cancel, &a);
  cancel->callback([exit_code] {
    *exit_code = Run(a, [](ApiClient& c) { return c.CancelJob(id); }, [](const ApiResponse& r) {
      return fmt::format("job {} {}\n", r.body.value("id", "?"), r.body.value("state", "?"));
    });
  });

  CLI::App* prio = job->add_subcommand("priority", "Change a job's priority class");
  prio->add_option("id", id, "job id")->required();
  prio->add_option("class", priority, "priority class")->required();
  AddClientOptions(prio, &a);
  prio->callback([exit_code] {
    *exit_code = Run(a, [](ApiClient& c) { return c.SetPriority(id, priority); }, [](const ApiResponse& r) {
      return fmt::format("job {} priority {}\n", r.body.value("id", "?"), r.body.value("priority_class", "?"));
    });
  });
}

}  // namespace

void RegisterClient(CLI::App& app, int* exit_code) {
  RegisterJob(app, exit_code);
  static ClientArgs qa, ua;
  static std::string from, to;
  static bool csv = false;
  CLI::App* queue = app.add_subcommand("queue", "Pending jobs in order, with reason and estimated start");
  AddClientOptions(queue, &qa);
  queue->callback([exit_code] {
    *exit_code = Run(qa, [](ApiClient& c) { return c.Queue(); },
                     [](const ApiResponse& r) { return client::QueueTable(r.body); });
  });
  CLI::App* usage = app.add_subcommand("usage", "GPU-hours and cost by team, project and tier");
  usage->add_option("--from", from, "start, ISO 8601 UTC or Unix seconds (default: start of the ledger)");
  usage->add_option("--to", to, "end (default: now on the service's clock)");
  usage->add_flag("--csv", csv, "print the API's CSV");
  AddClientOptions(usage, &ua);
  usage->callback([exit_code] {
    *exit_code = Run(ua, [](ApiClient& c) { return c.Usage(from, to, csv); }, [](const ApiResponse& r) {
      return csv ? r.text : client::UsageTable(r.body);
    });
  });
}

}  // namespace tessera::cli
