#include "service/workload_json.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <nlohmann/json.hpp>

#include "base/text.h"
#include "model/workload_fields.h"
#include "service/json_fields.h"

namespace tessera {

const char* ErrorCodeName(ErrorCode c) {
  switch (c) {
    case ErrorCode::kInvalidArgument: return "InvalidArgument";
    case ErrorCode::kUnauthenticated: return "Unauthenticated";
    case ErrorCode::kPermissionDenied: return "PermissionDenied";
    case ErrorCode::kNotFound: return "NotFound";
    case ErrorCode::kAlreadyExists: return "AlreadyExists";
    case ErrorCode::kFailedPrecondition: return "FailedPrecondition";
    case ErrorCode::kIdempotencyMismatch: return "IdempotencyKeyReused";
    case ErrorCode::kPreconditionFailed: return "PreconditionFailed";
    case ErrorCode::kRequestTimeout: return "RequestTimeout";
    case ErrorCode::kPayloadTooLarge: return "PayloadTooLarge";
    case ErrorCode::kUnsupportedMedia: return "UnsupportedMediaType";
    case ErrorCode::kRateLimited: return "RateLimited";
    case ErrorCode::kUnavailable: return "Unavailable";
    case ErrorCode::kInternal: return "Internal";
  }
  return "Internal";
}

int HttpStatusOf(ErrorCode c) {
  switch (c) {
    case ErrorCode::kInvalidArgument: return 400;
    case ErrorCode::kUnauthenticated: return 401;
    case ErrorCode::kPermissionDenied: return 403;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kAlreadyExists: return 409;
    case ErrorCode::kFailedPrecondition: return 409;
    case ErrorCode::kIdempotencyMismatch: return 422;
    case ErrorCode::kPreconditionFailed: return 412;
    case ErrorCode::kRequestTimeout: return 408;
    case ErrorCode::kPayloadTooLarge: return 413;
    case ErrorCode::kUnsupportedMedia: return 415;
    case ErrorCode::kRateLimited: return 429;
    case ErrorCode::kUnavailable: return 503;
    case ErrorCode::kInternal: return 500;
  }
  return 500;
}

namespace {

enum class FieldType { kInteger, kNumber, kString, kBool, kStringList, kObject };

const std::map<std::string, FieldType>& Fields() {
  static const std::map<std::string, FieldType> kFields = {
      {"name", FieldType::kString},           {"class", FieldType::kString},
      {"team", FieldType::kString},           {"project", FieldType::kString},
      {"priority_class", FieldType::kString}, {"mig_profile", FieldType::kString},
      {"replicas", FieldType::kInteger},      {"workers", FieldType::kInteger},
      {"gpus_per_worker", FieldType::kInteger}, {"gpu_milli", FieldType::kInteger},
      {"memory_mib", FieldType::kInteger},    {"checkpoint_interval_s", FieldType::kInteger},
      {"duration_s", FieldType::kInteger},    {"gpu_fraction", FieldType::kNumber},
      {"time_limit_s", FieldType::kInteger},
      {"memory_gib", FieldType::kNumber},     {"cpu", FieldType::kNumber},
      {"host_memory_gib", FieldType::kNumber}, {"latency_sensitive", FieldType::kBool},
      {"checkpointable", FieldType::kBool},   {"gpu_kinds", FieldType::kStringList},
      {"memory", FieldType::kObject},         {"container", FieldType::kObject},
  };
  return kFields;
}

const char* TypeName(FieldType t) {
  switch (t) {
    case FieldType::kInteger: return "an integer";
    case FieldType::kNumber: return "a number";
    case FieldType::kString: return "a string";
    case FieldType::kBool: return "true or false";
    case FieldType::kStringList: return "a list of strings";
    case FieldType::kObject: return "an object";
  }
  return "?";
}

bool HasType(const nlohmann::json& v, FieldType t) {
  switch (t) {
    case FieldType::kInteger: return v.is_number_integer();
    case FieldType::kNumber: return v.is_number();
    case FieldType::kString: return v.is_string();
    case FieldType::kBool: return v.is_boolean();
    case FieldType::kObject: return v.is_object();
    case FieldType::kStringList:
      if (!v.is_array()) return false;
      for (const auto& e : v)
        if (!e.is_string()) return false;
      return true;
  }
  return false;
}

// "request: workloads[0] ('x'): field 'workers': must be >= 1" -> field "workers", message after the prefix.
// Also "request:1: workloads[0].workers: expected ..." (the field path after the entry's index).
ApiError FromModelError(const std::string& msg) {
  std::string field;
  if (size_t f = msg.find("field '"); f != std::string::npos) {
    const size_t b = f + 7, e = msg.find('\'', b);
    if (e != std::string::npos) field = msg.substr(b, e - b);
  } else if (size_t w = msg.find("workloads[0]."); w != std::string::npos) {
    const size_t b = w + 13, e = msg.find_first_of(": ", b);
    field = msg.substr(b, e == std::string::npos ? std::string::npos : e - b);
  }
  std::string text = msg;
  if (size_t p = text.find("): "); p != std::string::npos) text = text.substr(p + 3);
  else if (size_t q = text.find("]: "); q != std::string::npos) text = text.substr(q + 3);
  return Invalid(field, text);
}

std::optional<ApiError> BadString(const std::string& field, const nlohmann::json& v, size_t max_bytes) {
  if (!v.is_string()) return Invalid(field, fmt::format("field '{}': expected a string", field));
  const std::string& s = v.get_ref<const std::string&>();
  if (s.size() > max_bytes) return Invalid(field, fmt::format("field '{}': at most {} bytes", field, max_bytes));
  if (!CleanText(s, true))
    return Invalid(field, fmt::format("field '{}': control characters (bidirectional ones too) are not allowed", field));
  return std::nullopt;
}

// `container`: what a job runs where a cluster runs containers (Kubernetes): image (required), command and
// args (lists of strings), env (string values).
std::optional<ApiError> CheckContainer(const nlohmann::json& c) {
  for (const auto& [k, v] : c.items()) {
    const std::string f = "container." + k;
    if (k == "image") {
      if (auto e = BadString(f, v, 512)) return e;
      if (v.get_ref<const std::string&>().empty()) return Invalid(f, "field 'container.image': must not be empty");
    } else if (k == "command" || k == "args") {
      if (!v.is_array() || v.size() > 256) return Invalid(f, fmt::format("field '{}': a list of at most 256 strings", f));
      for (const auto& e : v)
        if (auto bad = BadString(f, e, 4096)) return bad;
    } else if (k == "env") {
      if (!v.is_object() || v.size() > 256) return Invalid(f, "field 'container.env': an object of at most 256 strings");
      for (const auto& [name, value] : v.items()) {
        if (name.empty() || name.size() > 256 || name.find_first_of("= \t\n") != std::string::npos || !CleanText(name))
          return Invalid(f, fmt::format("field 'container.env': '{}' is not a variable name", name));
        if (auto bad = BadString(f + "." + name, value, 32768)) return bad;
      }
    } else {
      return Invalid(f, fmt::format("unknown field '{}' (image, command, args, env)", f));
    }
  }
  if (!c.contains("image")) return Invalid("container.image", "field 'container.image': required");
  return std::nullopt;
}

}  // namespace

Outcome<JobSpec> ParseJobSpec(const nlohmann::json& body) {
  if (!body.is_object()) return Invalid("", "the request body must be a JSON object (one workload entry)");
  for (const auto& [k, v] : body.items()) {
    auto it = Fields().find(k);
    if (it == Fields().end()) return Invalid(k, fmt::format("unknown field '{}'", k));
    if (!HasType(v, it->second))
      return Invalid(k, fmt::format("field '{}': expected {}, got {}", k, TypeName(it->second), v.type_name()));
  }
  if (!body.contains("name") || body["name"].get<std::string>().empty())
    return Invalid("name", "field 'name': required");
  // Free-text labels: printable (no control characters: they reach terminals and logs), bounded.
  for (const char* k : {"name", "project", "team"}) {
    if (!body.contains(k)) continue;
    const std::string& v = body[k].get_ref<const std::string&>();
    if (v.size() > kMaxLabelBytes)
      return Invalid(k, fmt::format("field '{}': at most {} bytes (got {})", k, kMaxLabelBytes, v.size()));
    if (!CleanText(v)) return Invalid(k, fmt::format("field '{}': control characters are not allowed", k));
  }
  if (auto it = body.find("container"); it != body.end())
    if (auto bad = CheckContainer(*it)) return *bad;
  JobSpec spec;
  if (auto it = body.find("mig_profile"); it != body.end()) {
    spec.mig_profile = it->get<std::string>();
    if (spec.mig_profile.empty()) return Invalid("mig_profile", "field 'mig_profile': must not be empty");
  }
  JsonFieldReader reader(&body, "request", "workloads[0]");  // the workload file's fields (workload_fields.h)
  reader.Allow("mig_profile");
  reader.Allow("container");
  auto parsed = ReadWorkloadFields(reader);
  if (!parsed.ok()) return FromModelError(parsed.error());
  spec.body = body;
  spec.workload = std::move(parsed).value();
  const Workload& w = spec.workload;
  if (w.duration_s < 0 || w.duration_s > int64_t{10} * 365 * 86400)
    return Invalid("duration_s", "field 'duration_s': must be 0..315360000 (0 = runs until cancelled)");
  if (w.checkpoint_interval_s < 0)
    return Invalid("checkpoint_interval_s", "field 'checkpoint_interval_s': must not be negative");
  if (w.replicas > 4096) return Invalid("replicas", "field 'replicas': at most 4096");
  if (w.workers > 4096) return Invalid("workers", "field 'workers': at most 4096");
  if (!spec.mig_profile.empty() && w.workers > 1)
    return Invalid("mig_profile", "field 'mig_profile': a gang (workers > 1) needs whole GPUs");
  return spec;
}

}  // namespace tessera
