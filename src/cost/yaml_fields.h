#pragma once
// Internal to src/cost: reads the fields of one YAML map with errors that name the source, the line and
// the field path ("prices.yaml:12: pools[2].reclaim_notice_s: must be >= 0"). Unknown keys are errors
// (they are usually typos). Callers must check `status()` after reading.

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tessera::cost_internal {

// A number with the source it came from. In YAML either a plain number or `{value: N, source: "..."}`.
struct Sourced {
  double value = 0;
  std::string source;
};

class FieldReader {
 public:
  FieldReader(const YAML::Node& node, std::string_view source, std::string path);

  bool Has(const char* key) const;
  // Each reader leaves `*out` untouched when the key is absent and not required.
  void Double(const char* key, double* out, bool required, double min, double max);
  void Int(const char* key, int64_t* out, bool required, int64_t min, int64_t max);
  void String(const char* key, std::string* out, bool required);
  void SourcedNumber(const char* key, Sourced* out, bool required, double min, double max);
  // The child node (map or sequence) under `key`, or an undefined node when absent.
  YAML::Node Child(const char* key);

  // Records an error about this node (first error wins).
  void Fail(std::string_view field, std::string_view message);
  // Checks for keys that were never read. Call last.
  Status Finish();
  const Status& status() const { return status_; }
  std::string Where(std::string_view field) const;
  std::string Where(const YAML::Node& node, std::string_view field) const;

 private:
  YAML::Node node_;
  std::string source_;
  std::string path_;
  std::set<std::string> seen_;
  Status status_;
};

// Location prefix "source:line: path" for a node.
std::string NodeWhere(std::string_view source, const YAML::Node& node, std::string_view path);

}  // namespace tessera::cost_internal
