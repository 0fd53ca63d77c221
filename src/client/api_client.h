#pragma once
// The REST API seen from a client: where the server and token come from, and one call per endpoint.

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace tessera::client {

struct ClientConfig {
  std::string server;  // base URL, e.g. http://127.0.0.1:8080
  std::string token;   // bearer token
};

// Reads an environment variable (injected so tests need not touch the process environment).
using EnvLookup = std::function<std::string(const std::string& name)>;

// Server and token: each from the flag when given, else TESSERA_SERVER / TESSERA_TOKEN, else the YAML file
// at `config_path` (keys `server` and `token`; a missing file is no error). The server defaults to
// http://127.0.0.1:8080; a missing token is an error saying where to put one.
Result<ClientConfig> ResolveConfig(const std::string& flag_server, const std::string& flag_token, const EnvLookup& env,
                                   const std::string& config_path);
// `$HOME/.config/tessera/config.yaml` ("" without HOME).
std::string DefaultConfigPath(const EnvLookup& env);

// The outcome of one call: kOk (2xx, `body` holds the JSON or `text` the raw body), kRefused (the API said
// no: `status` and `error` hold its code and message), kUnreachable (no HTTP answer: `error` says why).
struct ApiResponse {
  enum class Kind { kOk, kRefused, kUnreachable };
  Kind kind = Kind::kUnreachable;
  int status = 0;
  nlohmann::json body;
  std::string text;
  std::string error;
};

class ApiClient {
 public:
  explicit ApiClient(ClientConfig config);
  ApiResponse SubmitJob(const nlohmann::json& workload, const std::string& idempotency_key);
  // Pending and Running jobs, or every job with `all`, following next_page_token to the end: {"jobs": [...]}.
  ApiResponse ListJobs(bool all);
  ApiResponse GetJob(const std::string& id);
  ApiResponse CancelJob(const std::string& id);
  ApiResponse SetPriority(const std::string& id, const std::string& priority_class);
  ApiResponse Queue();
  // Earliest starts had the pending job asked for all, a half or a quarter of its GPUs.
  ApiResponse WhatIf(const std::string& id);
  // `from`/`to` are ISO-8601 times or "" for the API's defaults; `format` is json, csv or focus (FOCUS 1.1
  // CSV); a CSV answer is in `text`.
  ApiResponse Usage(const std::string& from, const std::string& to, const std::string& format);
  // Nodes, GPUs and MIG layouts as the last cycle left them.
  ApiResponse Cluster();

  // Teams (admin to create or change quotas; everyone may list what their role shows).
  ApiResponse Teams();
  ApiResponse CreateTeam(const nlohmann::json& team);
  // `quota` holds guaranteed_gpus and/or limit_gpus.
  ApiResponse UpdateTeam(const std::string& name, const nlohmann::json& quota);
  // Users and their tokens (admin, or a team lead for its own team).
  ApiResponse Users();
  ApiResponse CreateUser(const nlohmann::json& user);
  // A new token for `user` (the old one stops working), or with `revoke` none at all.
  ApiResponse ReplaceToken(const std::string& user, bool revoke);

  // Nodes (admin): list with states, add one (a node as in the cluster YAML, as JSON), `action` one of
  // cordon, uncordon, drain; remove one (refused while anything runs there).
  ApiResponse Nodes();
  ApiResponse AddNode(const nlohmann::json& node);
  ApiResponse NodeAction(const std::string& name, const std::string& action);
  ApiResponse RemoveNode(const std::string& name);

 private:
  ApiResponse Call(const std::string& method, const std::string& path, const std::string& body,
                   const std::string& idempotency_key = "");
  ApiResponse CallOnce(const std::string& method, const std::string& path, const std::string& body,
                       const std::string& idempotency_key, std::string* leader, bool* retry);
  ClientConfig config_;
};

// Percent-encodes everything but unreserved characters (RFC 3986), for path segments and query values.
std::string UrlEncode(const std::string& s);

}  // namespace tessera::client
