#pragma once
// PgArrayRows: rows of one table gathered column by column as PostgreSQL array literals, so that a commit
// group's rows of that table go to the database in one statement
// (INSERT ... SELECT ... FROM unnest($1::bigint[], $2::text[], ...)) instead of one statement per row.

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class PgArrayRows {
 public:
  explicit PgArrayRows(size_t columns);
  // One row: exactly `columns` values (extra ones are ignored, missing ones are ""), each in the text form
  // PostgreSQL reads for its column's element type ("42", "t", "1.5", any text).
  void Add(std::initializer_list<std::string_view> values);
  size_t rows() const { return rows_; }
  // One array literal per column ("{"a","b\"c"}"): every element double-quoted, '"' and '\' escaped.
  std::vector<std::string> Literals() const;

 private:
  std::vector<std::string> columns_;  // each an open literal: "{" and the elements so far
  size_t rows_ = 0;
};

}  // namespace tessera
