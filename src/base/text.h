#pragma once
// Checks of text that came from outside (names, paths, headers).

#include <string_view>

namespace tessera {

// Valid UTF-8 (no overlong forms or surrogates) with no C0 control character, DEL or C1 control (a tab
// too unless `allow_tab`).
bool CleanText(std::string_view s, bool allow_tab = false);

}  // namespace tessera
