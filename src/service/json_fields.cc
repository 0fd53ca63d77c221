#include "service/json_fields.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "base/yaml_reader.h"

namespace tessera {
namespace {

// The value's kind, or its quoted text (control bytes replaced, long values cut), as the YAML reader says it.
std::string Got(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  if (v.is_array()) return "a list";
  if (v.is_object()) return "a map";
  return QuoteValue(v.is_string() ? v.get_ref<const std::string&>() : v.dump());
}

}  // namespace

JsonFieldReader::JsonFieldReader(const nlohmann::json* node, std::string source, std::string path)
    : node_(node), source_(std::move(source)), path_(std::move(path)) {
  const std::string where = path_.empty() ? source_ : fmt::format("{}: {}", source_, path_);
  if (node_ == nullptr)
    status_ = Status::Error(where + ": required");
  else if (!node_->is_object())
    status_ = Status::Error(fmt::format("{}: expected a map, got {}", where, Got(*node_)));
}

std::string JsonFieldReader::PathOf(std::string_view key) const { return JoinYamlPath(path_, key); }

const nlohmann::json* JsonFieldReader::Find(std::string_view key) const {
  if (node_ == nullptr || !node_->is_object()) return nullptr;
  auto it = node_->find(key);
  return it == node_->end() ? nullptr : &*it;
}

const nlohmann::json* JsonFieldReader::Get(std::string_view key, bool required) {
  seen_.emplace(key);
  if (!status_.ok()) return nullptr;
  const nlohmann::json* v = Find(key);
  if (v == nullptr && required)
    status_ = Status::Error(fmt::format("{}: {}: required", source_, PathOf(key)));
  return v;
}

void JsonFieldReader::Fail(std::string_view key, std::string_view message) {
  if (status_.ok()) status_ = Status::Error(fmt::format("{}: {}: {}", source_, PathOf(key), message));
}

void JsonFieldReader::FailValue(std::string_view key, std::string_view expected, const nlohmann::json& got) {
  Fail(key, fmt::format("expected {}, got {}", expected, Got(got)));
}

void JsonFieldReader::Int(std::string_view key, int64_t* out, bool required, int64_t min, int64_t max) {
  const nlohmann::json* v = Get(key, required);
  if (v == nullptr) return;
  // A JSON integer within int64 (nlohmann keeps larger ones unsigned or as floats).
  const bool integer =
      v->is_number_integer() && (!v->is_number_unsigned() || v->get<uint64_t>() <= INT64_MAX);
  const int64_t x = integer ? v->get<int64_t>() : 0;
  if (!integer || x < min || x > max) return FailValue(key, IntRangeText(min, max), *v);
  *out = x;
}

void JsonFieldReader::Int(std::string_view key, int* out, bool required, int min, int max) {
  int64_t v = *out;
  Int(key, &v, required, min, max);
  if (ok()) *out = static_cast<int>(v);  // within [min, max], both ints
}

void JsonFieldReader::Double(std::string_view key, double* out, bool required, double min, double max) {
  const nlohmann::json* v = Get(key, required);
  if (v == nullptr) return;
  const double x = v->is_number() ? v->get<double>() : std::nan("");
  if (!std::isfinite(x) || x < min || x > max) return FailValue(key, DoubleRangeText(min, max), *v);
  *out = x;
}

void JsonFieldReader::Bool(std::string_view key, bool* out, bool required) {
  const nlohmann::json* v = Get(key, required);
  if (v == nullptr) return;
  if (!v->is_boolean()) return FailValue(key, "true or false", *v);
  *out = v->get<bool>();
}

void JsonFieldReader::String(std::string_view key, std::string* out, bool required) {
  const nlohmann::json* v = Get(key, required);
  if (v == nullptr) return;
  if (!v->is_string()) return FailValue(key, "a string", *v);
  *out = v->get<std::string>();
}

void JsonFieldReader::StringList(std::string_view key, std::vector<std::string>* out, bool required,
                                 size_t min_size) {
  const nlohmann::json* v = Get(key, required);
  if (v == nullptr) return;
  if (!v->is_array() || v->size() < min_size)
    return FailValue(key, min_size > 0 ? fmt::format("a list of at least {} item(s)", min_size) : "a list",
                     *v);
  std::vector<std::string> items;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) return FailValue(fmt::format("{}[{}]", key, i), "a string", (*v)[i]);
    items.push_back((*v)[i].get<std::string>());
  }
  *out = std::move(items);
}

JsonFieldReader JsonFieldReader::Sub(std::string_view key) {
  const nlohmann::json* v = Get(key, false);
  JsonFieldReader sub(v, source_, PathOf(key));
  if (!status_.ok()) sub.status_ = status_;
  return sub;
}

Status JsonFieldReader::Finish() {
  if (!status_.ok() || node_ == nullptr || !node_->is_object()) return status_;
  for (const auto& [k, v] : node_->items()) {
    if (seen_.count(k)) continue;
    std::vector<std::string> known(seen_.begin(), seen_.end());
    return Status::Error(
        fmt::format("{}: {}: unknown field (known: {})", source_, PathOf(k), JoinNames(known)));
  }
  return status_;
}

}  // namespace tessera
