#include "server/refusal_audit.h"

#include <nlohmann/json.hpp>
#include <string_view>

#include "base/json_depth.h"

namespace tessera {
namespace {

// The audit log's name for the resource of a collection: "teams" -> "team"; "" for one it does not name.
std::string_view KindOf(std::string_view collection) {
  if (collection == "teams") return "team";
  if (collection == "users") return "user";
  if (collection == "nodes") return "node";
  if (collection == "jobs") return "job";
  return "";
}

// The body's "name" when it is a JSON object with a string name; else "".
std::string BodyName(const std::string& body) {
  if (body.empty() || !CheckJsonDepth(body).ok()) return "";
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return "";
  return j["name"].get<std::string>();
}

}  // namespace

std::string AuditTargetOf(const httplib::Request& req) {
  std::string_view path = req.path;
  constexpr std::string_view kPrefix = "/api/v1/";
  if (!path.starts_with(kPrefix)) return std::string(path);
  path.remove_prefix(kPrefix.size());
  const size_t slash = path.find('/');
  const std::string_view collection = path.substr(0, std::min(slash, path.find(':')));
  const std::string_view kind = KindOf(collection);
  if (kind.empty()) return std::string(collection);
  if (slash != std::string_view::npos) {
    std::string_view name = path.substr(slash + 1);
    name = name.substr(0, std::min(name.find('/'), name.find(':')));
    if (!name.empty()) return std::string(kind) + ":" + std::string(name);
  }
  if (req.method == "POST" && kind != "job")
    if (const std::string name = BodyName(req.body); !name.empty()) return std::string(kind) + ":" + name;
  return std::string(collection);
}

std::string RefusalJson(const httplib::Request& req, const httplib::Response& res) {
  nlohmann::json reason;
  const nlohmann::json answer = nlohmann::json::parse(res.body, nullptr, false);
  if (answer.is_object() && answer.contains("error") && answer["error"].is_object())
    reason = answer["error"].value("message", "");
  return nlohmann::json{{"refused", req.method + " " + req.path}, {"status", res.status}, {"reason", reason}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tessera
