#include "base/json_depth.h"

#include <fmt/format.h>

namespace tessera {

int JsonNestingDepth(std::string_view text, int stop_at) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest > stop_at) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

Status CheckJsonDepth(std::string_view text, int max_depth) {
  if (JsonNestingDepth(text, max_depth) <= max_depth) return Status::Ok();
  return Status::Error(fmt::format("JSON nested deeper than {} levels (the limit)", max_depth));
}

}  // namespace tessera
