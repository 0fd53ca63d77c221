#pragma once
// File helpers for the CLI and other outer layers.
#include <string>

#include "base/status.h"

namespace tessera::cli {

// Reads a whole file; the error names the path.
Result<std::string> ReadFile(const std::string& path);

}  // namespace tessera::cli
