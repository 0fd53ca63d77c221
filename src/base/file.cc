#include "base/file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace tessera {

Result<std::string> ReadFile(const std::string& path) {
  auto fail = [&](const char* what, int err) {
    return Status::Error(std::string(what) + " " + path + ": " + std::strerror(err));
  };
  errno = 0;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return fail("cannot open", errno);
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const size_t n = std::fread(buf, 1, sizeof buf, f.get());
    text.append(buf, n);
    if (n < sizeof buf) break;
  }
  if (std::ferror(f.get())) return fail("cannot read", errno != 0 ? errno : EIO);
  return text;
}

bool LineReader::Next(std::string_view* line) {
  if (pos_ >= text_.size()) return false;
  size_t end = text_.find('\n', pos_);
  if (end == std::string_view::npos) end = text_.size();
  *line = text_.substr(pos_, end - pos_);
  if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
  pos_ = end + 1;
  ++line_no_;
  return true;
}

}  // namespace tessera
