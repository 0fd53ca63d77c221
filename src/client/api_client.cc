#include "client/api_client.h"

#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tessera::client {
namespace {

// The value of `key` in the config file, "" when absent.
Result<std::string> ConfigValue(const YAML::Node& file, const std::string& key, const std::string& path) {
  if (!file || !file.IsMap() || !file[key]) return std::string();
  if (!file[key].IsScalar()) return Status::Error(fmt::format("{}: field '{}': expected a string", path, key));
  return file[key].Scalar();
}

std::string ErrorMessage(const httplib::Result& r) {
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].contains("message") &&
      j["error"]["message"].is_string())
    return j["error"]["message"].get<std::string>();
  return fmt::format("HTTP {}{}{}", r->status, r->body.empty() ? "" : ": ", r->body.substr(0, 200));
}

}  // namespace

std::string DefaultConfigPath(const EnvLookup& env) {
  const std::string home = env("HOME");
  return home.empty() ? "" : home + "/.config/tessera/config.yaml";
}

Result<ClientConfig> ResolveConfig(const std::string& flag_server, const std::string& flag_token, const EnvLookup& env,
                                   const std::string& config_path) {
  YAML::Node file;
  if (!config_path.empty() && std::filesystem::exists(config_path)) {
    try {
      file = YAML::LoadFile(config_path);
    } catch (const YAML::Exception& e) {
      return Status::Error(fmt::format("{}: {}", config_path, e.what()));
    }
  }
  ClientConfig c;
  for (auto [out, flag, var, key] : {std::tuple{&c.server, &flag_server, "TESSERA_SERVER", "server"},
                                     std::tuple{&c.token, &flag_token, "TESSERA_TOKEN", "token"}}) {
    *out = !flag->empty() ? *flag : env(var);
    if (!out->empty()) continue;
    auto v = ConfigValue(file, key, config_path);
    if (!v.ok()) return v.status();
    *out = v.value();
  }
  if (c.server.empty()) c.server = "http://127.0.0.1:8080";
  while (!c.server.empty() && c.server.back() == '/') c.server.pop_back();
  if (c.token.empty())
    return Status::Error("no API token: pass --token, set TESSERA_TOKEN, or put 'token:' in " +
                         (config_path.empty() ? std::string("~/.config/tessera/config.yaml") : config_path));
  return c;
}

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') out += static_cast<char>(ch);
    else out += fmt::format("%{:02X}", ch);
  }
  return out;
}

ApiClient::ApiClient(ClientConfig config) : config_(std::move(config)) {}

// A replica that does not lead answers a write 503 with `Tessera-Leader: URL` (or, while none is known,
// `Retry-After`): the call goes to the leader (which later calls keep using), or is tried again after the
// wait, a few times.
ApiResponse ApiClient::Call(const std::string& method, const std::string& path, const std::string& body,
                            const std::string& idempotency_key) {
  ApiResponse out;
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::string leader;
    bool retry = false;
    out = CallOnce(method, path, body, idempotency_key, &leader, &retry);
    if (out.status != 503 || (!retry && leader.empty())) return out;
    if (!leader.empty() && leader != config_.server &&
        (leader.starts_with("http://") || leader.starts_with("https://"))) {
      config_.server = leader;
      continue;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));  // Retry-After: 1 while no leader is known
  }
  return out;
}

ApiResponse ApiClient::CallOnce(const std::string& method, const std::string& path, const std::string& body,
                                const std::string& idempotency_key, std::string* leader, bool* retry) {
  ApiResponse out;
  std::unique_ptr<httplib::Client> cli;
  try {
    cli = std::make_unique<httplib::Client>(config_.server);
  } catch (const std::exception& e) {
    out.error = fmt::format("bad server URL '{}': {}", config_.server, e.what());
    return out;
  }
  if (!cli->is_valid()) {
    out.error = fmt::format("bad server URL '{}'", config_.server);
    return out;
  }
  cli->set_connection_timeout(10);
  cli->set_read_timeout(60);
  httplib::Headers h = {{"Authorization", "Bearer " + config_.token}};
  if (!idempotency_key.empty()) h.emplace("Idempotency-Key", idempotency_key);
  httplib::Result r = method == "GET"      ? cli->Get(path, h)
                      : method == "POST"   ? cli->Post(path, h, body, "application/json")
                      : method == "DELETE" ? cli->Delete(path, h)
                                           : cli->Patch(path, h, body, "application/json");
  if (!r) {
    out.error = fmt::format("cannot reach {}: {}", config_.server, httplib::to_string(r.error()));
    return out;
  }
  out.status = r->status;
  *leader = r->get_header_value("Tessera-Leader");
  *retry = r->get_header_value("Retry-After") == "1";
  if (r->status < 200 || r->status >= 300) {
    out.kind = ApiResponse::Kind::kRefused;
    out.error = ErrorMessage(r);
    return out;
  }
  out.kind = ApiResponse::Kind::kOk;
  out.text = r->body;
  if (r->get_header_value("Content-Type").starts_with("application/json")) {
    out.body = nlohmann::json::parse(r->body, nullptr, false);
    if (out.body.is_discarded()) {
      out.kind = ApiResponse::Kind::kUnreachable;
      out.error = "the server answered malformed JSON";
    }
  }
  return out;
}

ApiResponse ApiClient::SubmitJob(const nlohmann::json& workload, const std::string& idempotency_key) {
  return Call("POST", "/api/v1/jobs", workload.dump(), idempotency_key);
}

ApiResponse ApiClient::ListJobs(bool all) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const std::string& state : all ? std::vector<std::string>{""} : std::vector<std::string>{"Pending", "Running"}) {
    std::string token;
    do {
      std::string path = "/api/v1/jobs?page_size=1000&page_token=" + UrlEncode(token);
      if (!state.empty()) path += "&state=" + state;
      ApiResponse r = Call("GET", path, "");
      if (r.kind != ApiResponse::Kind::kOk) return r;
      if (!r.body.is_object() || !r.body.contains("jobs") || !r.body["jobs"].is_array()) {
        r.kind = ApiResponse::Kind::kUnreachable;
        r.error = "the server's job list has no 'jobs' array";
        return r;
      }
      for (auto& j : r.body["jobs"]) jobs.push_back(std::move(j));
      token = r.body.value("next_page_token", std::string());
    } while (!token.empty());
  }
  ApiResponse out;
  out.kind = ApiResponse::Kind::kOk;
  out.status = 200;
  out.body = {{"jobs", std::move(jobs)}};
  return out;
}

ApiResponse ApiClient::GetJob(const std::string& id) { return Call("GET", "/api/v1/jobs/" + UrlEncode(id), ""); }

ApiResponse ApiClient::CancelJob(const std::string& id) {
  return Call("POST", "/api/v1/jobs/" + UrlEncode(id) + ":cancel", "{}");
}

ApiResponse ApiClient::SetPriority(const std::string& id, const std::string& priority_class) {
  return Call("PATCH", "/api/v1/jobs/" + UrlEncode(id), nlohmann::json{{"priority_class", priority_class}}.dump());
}

ApiResponse ApiClient::Queue() { return Call("GET", "/api/v1/queue", ""); }

ApiResponse ApiClient::WhatIf(const std::string& id) {
  return Call("GET", "/api/v1/jobs/" + UrlEncode(id) + "/whatif", "");
}

ApiResponse ApiClient::Usage(const std::string& from, const std::string& to, const std::string& format) {
  std::string path = "/api/v1/usage?format=" + UrlEncode(format);
  if (!from.empty()) path += "&from=" + UrlEncode(from);
  if (!to.empty()) path += "&to=" + UrlEncode(to);
  return Call("GET", path, "");
}

ApiResponse ApiClient::Cluster() { return Call("GET", "/api/v1/cluster", ""); }

ApiResponse ApiClient::Teams() { return Call("GET", "/api/v1/teams", ""); }

ApiResponse ApiClient::CreateTeam(const nlohmann::json& team) { return Call("POST", "/api/v1/teams", team.dump()); }

ApiResponse ApiClient::UpdateTeam(const std::string& name, const nlohmann::json& quota) {
  return Call("PATCH", "/api/v1/teams/" + UrlEncode(name), quota.dump());
}

ApiResponse ApiClient::Users() { return Call("GET", "/api/v1/users", ""); }

ApiResponse ApiClient::CreateUser(const nlohmann::json& user) { return Call("POST", "/api/v1/users", user.dump()); }

ApiResponse ApiClient::ReplaceToken(const std::string& user, bool revoke) {
  return Call(revoke ? "DELETE" : "POST", "/api/v1/users/" + UrlEncode(user) + "/token", revoke ? "" : "{}");
}

ApiResponse ApiClient::Nodes() { return Call("GET", "/api/v1/nodes", ""); }

ApiResponse ApiClient::AddNode(const nlohmann::json& node) { return Call("POST", "/api/v1/nodes", node.dump()); }

ApiResponse ApiClient::NodeAction(const std::string& name, const std::string& action) {
  return Call("POST", "/api/v1/nodes/" + UrlEncode(name) + ":" + UrlEncode(action), "{}");
}

ApiResponse ApiClient::RemoveNode(const std::string& name) {
  return Call("DELETE", "/api/v1/nodes/" + UrlEncode(name), "");
}

}  // namespace tessera::client
