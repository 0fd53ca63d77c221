#pragma once
// What every API client command shares: the --server/--token/--json options and one call-and-print step.
// Exit 0 on success, 1 when the API refuses (its message on stderr), 2 for usage or connection errors.

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "client/api_client.h"

namespace tessera::cli {

struct ClientArgs {
  std::string server, token;
  bool json = false;
};

inline void AddClientOptions(CLI::App* cmd, ClientArgs* a) {
  cmd->add_option("--server", a->server, "API base URL (else TESSERA_SERVER, else ~/.config/tessera/config.yaml)");
  cmd->add_option("--token", a->token, "bearer token (else TESSERA_TOKEN, else the config file)");
  cmd->add_flag("--json", a->json, "print the API's JSON");
}

inline std::string Env(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  return v == nullptr ? "" : v;
}

// Resolves the config, runs `call`, prints its answer with `format` (or as JSON) and returns the exit code.
template <typename Call, typename Format>
int RunClient(const ClientArgs& a, Call call, Format format) {
  using client::ApiResponse;
  auto config = client::ResolveConfig(a.server, a.token, Env, client::DefaultConfigPath(Env));
  if (!config.ok()) return fmt::print(stderr, "error: {}\n", config.error()), 2;
  client::ApiClient api(config.value());
  const ApiResponse r = call(api);
  if (r.kind == ApiResponse::Kind::kUnreachable) return fmt::print(stderr, "error: {}\n", r.error), 2;
  if (r.kind == ApiResponse::Kind::kRefused) return fmt::print(stderr, "error: {}\n", r.error), 1;
  fmt::print("{}", a.json ? r.body.dump(2) + "\n" : format(r));
  return 0;
}

}  // namespace tessera::cli
