#include "base/text.h"

#include <cstdint>

namespace tessera {
namespace {

// Unicode's bidirectional formatting characters (ALM, LRM, RLM, LRE..RLO, LRI..PDI): they reorder what a
// terminal shows ("evil\u202Etxt.exe" prints as "evilexe.txt").
bool BidiControl(uint32_t cp) {
  return cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

bool CleanText(std::string_view s, bool allow_tab) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if ((c < 0x20 && !(allow_tab && c == '\t')) || c == 0x7f) return false;
      ++i;
      continue;
    }
    int n;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) n = 1, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) n = 2, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) n = 3, cp = c & 0x07;
    else return false;
    if (i + n >= s.size()) return false;
    for (int k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    // Overlong forms, surrogates, beyond U+10FFFF, C1 controls.
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff) ||
        (cp >= 0x80 && cp <= 0x9f) || BidiControl(cp))
      return false;
    i += n + 1;
  }
  return true;
}

}  // namespace tessera
