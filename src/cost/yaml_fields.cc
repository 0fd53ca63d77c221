#include "cost/yaml_fields.h"

#include <cmath>
#include <fmt/format.h>

namespace tessera::cost_internal {

std::string NodeWhere(std::string_view source, const YAML::Node& node, std::string_view path) {
  const YAML::Mark mark = node.Mark();
  if (mark.line >= 0) return fmt::format("{}:{}: {}", source, mark.line + 1, path);
  return fmt::format("{}: {}", source, path);
}

FieldReader::FieldReader(const YAML::Node& node, std::string_view source, std::string path)
    : node_(node), source_(source), path_(std::move(path)) {
  if (!node_.IsMap()) status_ = Status::Error(NodeWhere(source_, node_, path_) + ": expected a map");
}

std::string FieldReader::Where(std::string_view field) const { return Where(node_, field); }

std::string FieldReader::Where(const YAML::Node& node, std::string_view field) const {
  std::string p = path_.empty() ? std::string(field) : path_ + "." + std::string(field);
  return NodeWhere(source_, node, p);
}

void FieldReader::Fail(std::string_view field, std::string_view message) {
  if (!status_.ok()) return;
  YAML::Node n = node_.IsMap() && node_[std::string(field)] ? node_[std::string(field)] : node_;
  status_ = Status::Error(Where(n, field) + ": " + std::string(message));
}

bool FieldReader::Has(const char* key) const { return node_.IsMap() && node_[key]; }

YAML::Node FieldReader::Child(const char* key) {
  seen_.insert(key);
  if (!node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  return node_[key];
}

void FieldReader::Double(const char* key, double* out, bool required, double min, double max) {
  seen_.insert(key);
  if (!status_.ok()) return;
  YAML::Node v = node_[key];
  if (!v) {
    if (required) Fail(key, "missing (required)");
    return;
  }
  double d = 0;
  if (!v.IsScalar() || !YAML::convert<double>::decode(v, d) || !std::isfinite(d)) {
    Fail(key, "expected a number");
    return;
  }
  if (d < min || d > max) {
    Fail(key, fmt::format("{} is out of range [{}, {}]", d, min, max));
    return;
  }
  *out = d;
}

void FieldReader::Int(const char* key, int64_t* out, bool required, int64_t min, int64_t max) {
  seen_.insert(key);
  if (!status_.ok()) return;
  YAML::Node v = node_[key];
  if (!v) {
    if (required) Fail(key, "missing (required)");
    return;
  }
  int64_t i = 0;
  if (!v.IsScalar() || !YAML::convert<int64_t>::decode(v, i)) {
    Fail(key, "expected an integer");
    return;
  }
  if (i < min || i > max) {
    Fail(key, fmt::format("{} is out of range [{}, {}]", i, min, max));
    return;
  }
  *out = i;
}

void FieldReader::String(const char* key, std::string* out, bool required) {
  seen_.insert(key);
  if (!status_.ok()) return;
  YAML::Node v = node_[key];
  if (!v) {
    if (required) Fail(key, "missing (required)");
    return;
  }
  if (!v.IsScalar()) {
    Fail(key, "expected a string");
    return;
  }
  *out = v.Scalar();
}

void FieldReader::SourcedNumber(const char* key, Sourced* out, bool required, double min, double max) {
  seen_.insert(key);
  if (!status_.ok()) return;
  YAML::Node v = node_[key];
  if (!v) {
    if (required) Fail(key, "missing (required)");
    return;
  }
  if (v.IsScalar()) {
    Double(key, &out->value, required, min, max);
    return;
  }
  FieldReader sub(v, source_, path_.empty() ? std::string(key) : path_ + "." + key);
  Sourced s = *out;
  sub.Double("value", &s.value, true, min, max);
  sub.String("source", &s.source, false);
  Status st = sub.Finish();
  if (!st.ok()) {
    status_ = st;
    return;
  }
  *out = s;
}

Status FieldReader::Finish() {
  if (!status_.ok()) return status_;
  for (const auto& kv : node_) {
    std::string k = kv.first.IsScalar() ? kv.first.Scalar() : std::string("?");
    if (!seen_.count(k)) {
      return Status::Error(Where(kv.first, k) + ": unknown field");
    }
  }
  return Status::Ok();
}

}  // namespace tessera::cost_internal
