#pragma once
// Checks of text that came from outside (names, paths, headers).

#include <string_view>

namespace tessera {

// Valid UTF-8 (no overlong forms or surrogates) with no C0 control character, DEL, C1 control or
// bidirectional formatting character (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069) (a tab too
// unless `allow_tab`).
bool CleanText(std::string_view s, bool allow_tab = false);

}  // namespace tessera
