#pragma once
// FieldReader (base/yaml_reader.h) over a JSON object: the reader model/workload_fields.h takes, so a request
// body is read by the same field definitions as a workload file, without building a YAML document. Types
// are strict (an integer field takes a JSON integer, a string field a JSON string); messages have the field
// readers' form, "source: path.key: expected an integer in [0, 64], got \"65\"". The first error wins;
// Finish rejects keys nothing read. The reader points into the JSON value, which must outlive it.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera {

class JsonFieldReader {
 public:
  // `node` null: the map is absent ("required"); a value that is not an object: "expected a map".
  JsonFieldReader(const nlohmann::json* node, std::string source, std::string path);

  bool Has(std::string_view key) const { return Find(key) != nullptr; }
  void Int(std::string_view key, int64_t* out, bool required, int64_t min, int64_t max);
  void Int(std::string_view key, int* out, bool required, int min, int max);
  void Double(std::string_view key, double* out, bool required, double min, double max);
  void Bool(std::string_view key, bool* out, bool required = false);
  void String(std::string_view key, std::string* out, bool required);
  void StringList(std::string_view key, std::vector<std::string>* out, bool required, size_t min_size = 0);
  // The reader of the object under `key`; marks the key as read.
  JsonFieldReader Sub(std::string_view key);
  void Allow(std::string_view key) { seen_.emplace(key); }

  void Fail(std::string_view key, std::string_view message);
  Status Finish();
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  std::string PathOf(std::string_view key) const;

 private:
  const nlohmann::json* Find(std::string_view key) const;
  // The value under `key` when the reader is fine and the key is present; marks the key as read.
  const nlohmann::json* Get(std::string_view key, bool required);
  void FailValue(std::string_view key, std::string_view expected, const nlohmann::json& got);

  const nlohmann::json* node_;
  std::string source_;
  std::string path_;
  std::set<std::string, std::less<>> seen_;
  Status status_;
};

}  // namespace tessera
