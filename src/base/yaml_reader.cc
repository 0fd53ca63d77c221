#include "base/yaml_reader.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <system_error>

namespace tessera {
namespace {

constexpr int64_t kMinInt = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();
constexpr double kLowest = std::numeric_limits<double>::lowest();

// The node's kind, or its quoted text (control bytes replaced, long values cut), for "got ..." messages.
std::string Got(const YAML::Node& n) {
  if (!n.IsDefined()) return "nothing";
  if (n.IsNull()) return "null";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a map";
  return QuoteValue(n.Scalar());
}

// Decimal or 0x-hexadecimal integer, optionally signed; false when not an integer or out of int64 range.
bool ParseInt(std::string_view s, int64_t* out) {
  bool neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  }
  if (s.empty()) return false;
  uint64_t u = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), u, base);
  if (ec != std::errc() || p != s.data() + s.size()) return false;
  if (!neg && u > static_cast<uint64_t>(kMaxInt)) return false;
  if (neg && u > static_cast<uint64_t>(kMaxInt) + 1) return false;
  *out = neg ? static_cast<int64_t>(0 - u) : static_cast<int64_t>(u);
  return true;
}

// A finite decimal number (YAML's .inf and .nan are not); false otherwise.
bool ParseDouble(std::string_view s, double* out) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty() || s[0] == '+') return false;
  double d = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), d, std::chars_format::general);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(d)) return false;
  *out = d;
  return true;
}

}  // namespace

std::string IntRangeText(int64_t min, int64_t max) {
  if (min == kMinInt && max == kMaxInt) return "an integer";
  if (max == kMaxInt) return fmt::format("an integer >= {}", min);
  if (min == kMinInt) return fmt::format("an integer <= {}", max);
  return fmt::format("an integer in [{}, {}]", min, max);
}

std::string DoubleRangeText(double min, double max) {
  const bool no_min = min <= kLowest, no_max = max >= FieldReader::kMaxDouble;
  if (no_min && no_max) return "a number";
  if (no_max) return fmt::format("a number >= {}", min);
  if (no_min) return fmt::format("a number <= {}", max);
  return fmt::format("a number in [{}, {}]", min, max);
}

std::string QuoteValue(std::string_view text) {
  std::string s;
  for (unsigned char c : text) {
    if (s.size() >= 40) {
      s += "...";
      break;
    }
    s += c < 0x20 || c >= 0x7f || c == '"' ? '?' : static_cast<char>(c);
  }
  return "\"" + s + "\"";
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& k : names) list += (list.empty() ? "" : ", ") + k;
  return list;
}

Result<YAML::Node> ParseYaml(std::string_view text, std::string_view source) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    const int line = e.mark.line >= 0 ? e.mark.line + 1 : 1;
    return Status::Error(fmt::format("{}:{}: YAML syntax error: {}", source, line, e.msg));
  } catch (const std::exception& e) {
    return Status::Error(fmt::format("{}: cannot read YAML: {}", source, e.what()));
  }
}

std::string YamlWhere(std::string_view source, const YAML::Node& node, std::string_view path) {
  int line = -1;
  if (node.IsDefined()) line = node.Mark().line;
  std::string where = line >= 0 ? fmt::format("{}:{}", source, line + 1) : std::string(source);
  if (!path.empty()) where += fmt::format(": {}", path);
  return where;
}

std::string JoinYamlPath(std::string_view path, std::string_view key) {
  if (path.empty()) return std::string(key);
  return fmt::format("{}.{}", path, key);
}

Result<int64_t> YamlInt(const YAML::Node& node, std::string_view source, std::string_view path, int64_t min,
                        int64_t max) {
  int64_t v = 0;
  if (!node.IsScalar() || !ParseInt(node.Scalar(), &v) || v < min || v > max)
    return Status::Error(fmt::format("{}: expected {}, got {}", YamlWhere(source, node, path), IntRangeText(min, max),
                                     Got(node)));
  return v;
}

Result<double> YamlDouble(const YAML::Node& node, std::string_view source, std::string_view path, double min,
                          double max) {
  double v = 0;
  if (!node.IsScalar() || !ParseDouble(node.Scalar(), &v) || v < min || v > max)
    return Status::Error(fmt::format("{}: expected {}, got {}", YamlWhere(source, node, path),
                                     DoubleRangeText(min, max), Got(node)));
  return v;
}

Result<bool> YamlBool(const YAML::Node& node, std::string_view source, std::string_view path) {
  bool v = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, v))
    return Status::Error(fmt::format("{}: expected true or false, got {}", YamlWhere(source, node, path), Got(node)));
  return v;
}

Result<std::string> YamlString(const YAML::Node& node, std::string_view source, std::string_view path) {
  if (!node.IsScalar())
    return Status::Error(fmt::format("{}: expected text, got {}", YamlWhere(source, node, path), Got(node)));
  return node.Scalar();
}

FieldReader::FieldReader(const YAML::Node& node, std::string_view source, std::string path, bool absent_ok)
    : node_(node), source_(source), path_(std::move(path)) {
  if (!node_.IsDefined() || (absent_ok && node_.IsNull())) {
    if (!absent_ok) status_ = Status::Error(YamlWhere(source_, node_, path_) + ": required");
    return;
  }
  is_map_ = node_.IsMap();
  if (!is_map_) {
    status_ = Status::Error(fmt::format("{}: expected a map, got {}", YamlWhere(source_, node_, path_), Got(node_)));
    return;
  }
  entries_.reserve(node_.size());
  for (auto it = node_.begin(); it != node_.end(); ++it)
    entries_.push_back({it->first, it->second, it->first.IsScalar() ? it->first.Scalar() : std::string()});
}

std::string FieldReader::Where(std::string_view key) const {
  const YAML::Node at = Find(key);
  return YamlWhere(source_, at.IsDefined() ? at : node_, PathOf(key));
}

bool FieldReader::Has(std::string_view key) const { return Find(key).IsDefined(); }

bool FieldReader::Get(std::string_view key, bool required, YAML::Node* value) {
  seen_.emplace(key);
  if (!status_.ok() || !is_map_) return false;
  YAML::Node v = Find(key);
  if (v.IsDefined()) {
    value->reset(v);  // rebinds (operator= would write through to the document)
    return true;
  }
  if (required) status_ = Status::Error(Where(key) + ": required");
  return false;
}

void FieldReader::Adopt(const Status& st) {
  if (status_.ok() && !st.ok()) status_ = st;
}

YAML::Node FieldReader::Find(std::string_view key) const {
  for (const Entry& e : entries_)
    if (e.name == key && e.key.IsScalar()) return e.value;
  return YAML::Node(YAML::NodeType::Undefined);
}

void FieldReader::Fail(std::string_view key, std::string_view message) {
  if (!status_.ok()) return;
  status_ = Status::Error(fmt::format("{}: {}", Where(key), message));
}

void FieldReader::FailAt(const YAML::Node& node, std::string_view path, std::string_view message) {
  if (!status_.ok()) return;
  status_ = Status::Error(fmt::format("{}: {}", YamlWhere(source_, node, path), message));
}

void FieldReader::Int(std::string_view key, int64_t* out, bool required, int64_t min, int64_t max) {
  YAML::Node v;
  if (!Get(key, required, &v)) return;
  auto r = YamlInt(v, source_, PathOf(key), min, max);
  if (r.ok()) *out = *r;
  Adopt(r.status());
}

void FieldReader::Int(std::string_view key, int* out, bool required, int min, int max) {
  int64_t v = *out;
  Int(key, &v, required, min, max);
  if (ok()) *out = static_cast<int>(v);  // within [min, max], both ints
}

void FieldReader::Double(std::string_view key, double* out, bool required, double min, double max) {
  YAML::Node v;
  if (!Get(key, required, &v)) return;
  auto r = YamlDouble(v, source_, PathOf(key), min, max);
  if (r.ok()) *out = *r;
  Adopt(r.status());
}

void FieldReader::Bool(std::string_view key, bool* out, bool required) {
  YAML::Node v;
  if (!Get(key, required, &v)) return;
  auto r = YamlBool(v, source_, PathOf(key));
  if (r.ok()) *out = *r;
  Adopt(r.status());
}

void FieldReader::String(std::string_view key, std::string* out, bool required) {
  YAML::Node v;
  if (!Get(key, required, &v)) return;
  auto r = YamlString(v, source_, PathOf(key));
  if (r.ok()) *out = *r;
  Adopt(r.status());
}

void FieldReader::Choice(std::string_view key, std::string* out, bool required,
                         std::initializer_list<const char*> choices) {
  YAML::Node v;
  if (!Get(key, required, &v)) return;
  auto r = YamlString(v, source_, PathOf(key));
  if (!r.ok()) return Adopt(r.status());
  std::vector<std::string> names;
  for (const char* c : choices) {
    if (*r == c) {
      *out = *r;
      return;
    }
    names.emplace_back(c);
  }
  FailAt(v, PathOf(key), fmt::format("expected one of {}, got {}", JoinNames(names), Got(v)));
}

void FieldReader::Range(std::string_view key, double* lo, double* hi, bool required, double min, double max) {
  YAML::Node v;
  if (!Get(key, required, &v)) return;
  const std::string path = PathOf(key);
  if (!v.IsSequence() || v.size() != 2)
    return FailAt(v, path, fmt::format("expected [low, high] ({} each), got {}", DoubleRangeText(min, max), Got(v)));
  auto a = YamlDouble(v[0], source_, path + "[0]", min, max);
  auto b = YamlDouble(v[1], source_, path + "[1]", min, max);
  if (!a.ok()) return Adopt(a.status());
  if (!b.ok()) return Adopt(b.status());
  if (*b < *a) return FailAt(v, path, fmt::format("high {} is below low {}", *b, *a));
  *lo = *a;
  *hi = *b;
}

void FieldReader::StringList(std::string_view key, std::vector<std::string>* out, bool required,
                             size_t min_size) {
  YAML::Node v;
  if (!Get(key, required, &v)) return;
  const std::string path = PathOf(key);
  if (!v.IsSequence() || v.size() < min_size)
    return FailAt(v, path,
                  fmt::format("expected a list{}, got {}",
                              min_size > 0 ? fmt::format(" of at least {} item(s)", min_size) : "", Got(v)));
  std::vector<std::string> items;
  for (size_t i = 0; i < v.size(); ++i) {
    auto s = YamlString(v[i], source_, fmt::format("{}[{}]", path, i));
    if (!s.ok()) return Adopt(s.status());
    items.push_back(*s);
  }
  *out = std::move(items);
}

void FieldReader::DoubleList(std::string_view key, std::vector<double>* out, bool required, double min,
                             double max, size_t min_size) {
  YAML::Node v;
  if (!Get(key, required, &v)) return;
  const std::string path = PathOf(key);
  if (!v.IsSequence() || v.size() < min_size)
    return FailAt(v, path,
                  fmt::format("expected a list{} of {}, got {}",
                              min_size > 0 ? fmt::format(" (at least {})", min_size) : "", DoubleRangeText(min, max),
                              Got(v)));
  std::vector<double> items;
  for (size_t i = 0; i < v.size(); ++i) {
    auto d = YamlDouble(v[i], source_, fmt::format("{}[{}]", path, i), min, max);
    if (!d.ok()) return Adopt(d.status());
    items.push_back(*d);
  }
  *out = std::move(items);
}

void FieldReader::SourcedDouble(std::string_view key, SourcedNumber* out, bool required, double min, double max) {
  YAML::Node v;
  if (!Get(key, required, &v)) return;
  if (!v.IsMap()) return Double(key, &out->value, required, min, max);
  FieldReader sub(v, source_, PathOf(key));
  SourcedNumber s = *out;
  sub.Double("value", &s.value, true, min, max);
  sub.String("source", &s.source, false);
  Status st = sub.Finish();
  if (st.ok()) *out = s;
  Adopt(st);
}

YAML::Node FieldReader::Map(std::string_view key, bool required) {
  YAML::Node v;
  if (!Get(key, required, &v)) return YAML::Node(YAML::NodeType::Undefined);
  if (!v.IsMap()) {
    FailAt(v, PathOf(key), fmt::format("expected a map, got {}", Got(v)));
    return YAML::Node(YAML::NodeType::Undefined);
  }
  return v;
}

YAML::Node FieldReader::Seq(std::string_view key, bool required) {
  YAML::Node v;
  if (!Get(key, required, &v)) return YAML::Node(YAML::NodeType::Undefined);
  if (!v.IsSequence()) {
    FailAt(v, PathOf(key), fmt::format("expected a list, got {}", Got(v)));
    return YAML::Node(YAML::NodeType::Undefined);
  }
  return v;
}

YAML::Node FieldReader::Child(std::string_view key) {
  YAML::Node v;
  if (!Get(key, false, &v)) return YAML::Node(YAML::NodeType::Undefined);
  return v;
}

Status FieldReader::Finish() {
  if (!status_.ok() || !is_map_) return status_;
  for (const Entry& e : entries_) {
    if (!e.key.IsScalar())
      return Status::Error(fmt::format("{}: expected a field name, got {}", YamlWhere(source_, e.key, path_),
                                       Got(e.key)));
    if (!seen_.count(e.name)) {
      std::vector<std::string> known(seen_.begin(), seen_.end());
      return Status::Error(fmt::format("{}: unknown field (known: {})", YamlWhere(source_, e.key, PathOf(e.name)),
                                       JoinNames(known)));
    }
  }
  return status_;
}

}  // namespace tessera
