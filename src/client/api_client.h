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
  // `from`/`to` are ISO-8601 times or "" for the API's defaults; with `csv` the answer is in `text`.
  ApiResponse Usage(const std::string& from, const std::string& to, bool csv);

 private:
  ApiResponse Call(const std::string& method, const std::string& path, const std::string& body,
                   const std::string& idempotency_key = "");
  ClientConfig config_;
};

// Percent-encodes everything but unreserved characters (RFC 3986), for path segments and query values.
std::string UrlEncode(const std::string& s);

}  // namespace tessera::client
