#pragma once
// The one way Tessera reads YAML: parse errors and field errors become Status values whose message names
// the source, the line and the field path, e.g.
//   clusters/x.yaml:12: nodes[3].gpus: expected an integer in [0, 64], got "three"
// Numbers are range-checked as text-parsed values before any cast, so `1e30`, `.nan`, `.inf` or
// 9223372036854775808 are errors, never undefined behaviour. Nothing here throws: every yaml-cpp call
// that can throw is guarded, and callers never need `.as<T>()`.
//
// Typical use: FieldReader r(node, source, "nodes[3]"); r.Int("gpus", &n, false, 0, 64); ...;
// if (Status st = r.Finish(); !st.ok()) return st;  // Finish also rejects unknown keys.

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera {

// Parses YAML text. Syntax errors, bad bytes and nesting deeper than yaml-cpp allows become
// "source:line: YAML syntax error: ...". An empty document is a null node.
Result<YAML::Node> ParseYaml(std::string_view text, std::string_view source);

// "source:line: path" for a node (its 1-based line), or "source: path" when the node has no position.
std::string YamlWhere(std::string_view source, const YAML::Node& node, std::string_view path);

// Scalar conversions of one node (list elements, values under data-named keys). `path` names the node.
Result<int64_t> YamlInt(const YAML::Node& node, std::string_view source, std::string_view path, int64_t min,
                        int64_t max);
Result<double> YamlDouble(const YAML::Node& node, std::string_view source, std::string_view path, double min,
                          double max);
Result<bool> YamlBool(const YAML::Node& node, std::string_view source, std::string_view path);
// Any scalar (not null, not a list or map).
Result<std::string> YamlString(const YAML::Node& node, std::string_view source, std::string_view path);

// "path.key" (or "key" at the top level).
std::string JoinYamlPath(std::string_view path, std::string_view key);

// What a range check expects, in the words of the field readers' messages: "an integer in [0, 64]",
// "a number >= 0", "an integer" (no bound), ...
std::string IntRangeText(int64_t min, int64_t max);
std::string DoubleRangeText(double min, double max);
// A value's text as messages quote it: in double quotes, control bytes and quotes replaced by '?', cut
// after 40 characters.
std::string QuoteValue(std::string_view text);
// "value (known: a, b)" lists for unknown-field messages.
std::string JoinNames(const std::vector<std::string>& names);

// A number with the source it came from. In YAML either a plain number or `{value: N, source: "..."}`.
struct SourcedNumber {
  double value = 0;
  std::string source;
};

// Reads the fields of one YAML map. The first error wins and is kept in status(); later reads are no-ops.
// Each reader leaves `*out` untouched when the key is absent (an error when `required`).
class FieldReader {
 public:
  static constexpr double kMaxDouble = std::numeric_limits<double>::max();

  // A node that is not a map is an error ("expected a map"), unless it is absent or null and
  // `absent_ok` (an optional section written as `key:` with nothing under it).
  FieldReader(const YAML::Node& node, std::string_view source, std::string path, bool absent_ok = false);

  bool Has(std::string_view key) const;
  void Int(std::string_view key, int64_t* out, bool required, int64_t min, int64_t max);
  void Int(std::string_view key, int* out, bool required, int min, int max);
  void Double(std::string_view key, double* out, bool required, double min, double max);
  void Bool(std::string_view key, bool* out, bool required = false);
  void String(std::string_view key, std::string* out, bool required);
  // A string that must be one of `choices`.
  void Choice(std::string_view key, std::string* out, bool required, std::initializer_list<const char*> choices);
  // `[low, high]` with min <= low <= high <= max.
  void Range(std::string_view key, double* lo, double* hi, bool required, double min, double max);
  // A list of scalars; `min_size` elements at least.
  void StringList(std::string_view key, std::vector<std::string>* out, bool required, size_t min_size = 0);
  void DoubleList(std::string_view key, std::vector<double>* out, bool required, double min, double max,
                  size_t min_size = 0);
  void SourcedDouble(std::string_view key, SourcedNumber* out, bool required, double min, double max);

  // The child under `key` if it is a map (or a sequence), else an error; an undefined node when absent
  // (an error when `required`). Marks the key as read.
  YAML::Node Map(std::string_view key, bool required = false);
  YAML::Node Seq(std::string_view key, bool required = false);
  // Any child node (undefined when absent). Marks the key as read.
  YAML::Node Child(std::string_view key);
  // The reader of the map under `key` (an error when it is not a map; "required" when absent). Marks the
  // key as read; errors stay in the returned reader.
  FieldReader Sub(std::string_view key) { return FieldReader(Child(key), source_, PathOf(key)); }
  // Marks a key as known without reading it.
  void Allow(std::string_view key) { seen_.emplace(key); }

  // Records an error at `key`'s line (or the map's line when absent). First error wins.
  void Fail(std::string_view key, std::string_view message);
  // Records an error about any node, `path` being its full path.
  void FailAt(const YAML::Node& node, std::string_view path, std::string_view message);
  // The first error, or an unknown-key error ("path.key: unknown field (known: a, b)"). Call last.
  Status Finish();

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  const std::string& source() const { return source_; }
  const std::string& path() const { return path_; }
  std::string PathOf(std::string_view key) const { return JoinYamlPath(path_, key); }
  // "source:line: path.key", the line of the key's value (of the map when the key is absent).
  std::string Where(std::string_view key) const;

 private:
  // The value under `key` when the reader is fine and the key is present; marks the key as read.
  bool Get(std::string_view key, bool required, YAML::Node* value);
  YAML::Node Find(std::string_view key) const;  // undefined when absent
  void Adopt(const Status& st);

  // The map's entries, read once (yaml-cpp builds a node pair per step of an iteration).
  struct Entry {
    YAML::Node key;
    YAML::Node value;
    std::string name;  // the key's text when it is a scalar
  };

  YAML::Node node_;
  bool is_map_ = false;
  std::vector<Entry> entries_;
  std::string source_;
  std::string path_;
  std::set<std::string, std::less<>> seen_;
  Status status_;
};

}  // namespace tessera
