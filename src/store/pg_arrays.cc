#include "store/pg_arrays.h"

namespace tessera {

PgArrayRows::PgArrayRows(size_t columns) : columns_(columns, std::string("{")) {}

void PgArrayRows::Add(std::initializer_list<std::string_view> values) {
  auto v = values.begin();
  for (std::string& col : columns_) {
    const std::string_view text = v != values.end() ? *v++ : std::string_view();
    if (rows_ > 0) col += ',';
    col += '"';
    for (const char c : text) {
      if (c == '"' || c == '\\') col += '\\';
      col += c;
    }
    col += '"';
  }
  ++rows_;
}

std::vector<std::string> PgArrayRows::Literals() const {
  std::vector<std::string> out;
  out.reserve(columns_.size());
  for (const std::string& col : columns_) out.push_back(col + '}');
  return out;
}

}  // namespace tessera
