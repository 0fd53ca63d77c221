#pragma once
// Reading whole files, and walking a text line by line.
#include <string>
#include <string_view>

#include "base/status.h"

namespace tessera {

// The whole content of the file at `path`, bytes as they are. Any failure (missing, unreadable, a
// directory, a read error) is an error naming the path and the operating system's reason:
// "cannot open x.yaml: No such file or directory", "cannot read dir: Is a directory".
Result<std::string> ReadFile(const std::string& path);

// The lines of a text, each without its '\n' and without one trailing '\r', numbered from 1; a final line
// without '\n' counts, an empty text has none. The text must outlive the reader.
class LineReader {
 public:
  explicit LineReader(std::string_view text) : text_(text) {}
  // Sets `line` to the next line (possibly empty); false once the text is used up.
  bool Next(std::string_view* line);
  int line_no() const { return line_no_; }  // the number of the line Next returned last

 private:
  std::string_view text_;
  size_t pos_ = 0;
  int line_no_ = 0;
};

}  // namespace tessera
