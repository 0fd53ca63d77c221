#pragma once
// Test helper: a minimal RFC 4180 reader for checking CSV exports (quoted fields, doubled quotes, CRLF rows).
#include <string>
#include <vector>

namespace tessera::testing {

// Rows of fields; a final line break adds no empty row.
inline std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false;
  bool row_has_content = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (quoted) {
      if (ch == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (ch == '"') {
        quoted = false;
      } else {
        field += ch;
      }
    } else if (ch == '"') {
      quoted = true;
      row_has_content = true;
    } else if (ch == ',') {
      rows.back().push_back(field);
      field.clear();
      row_has_content = true;
    } else if (ch == '\r' || ch == '\n') {
      if (ch == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      rows.back().push_back(field);
      field.clear();
      rows.emplace_back();
      row_has_content = false;
    } else {
      field += ch;
      row_has_content = true;
    }
  }
  if (row_has_content) rows.back().push_back(field);
  if (rows.back().empty()) rows.pop_back();
  return rows;
}

}  // namespace tessera::testing
