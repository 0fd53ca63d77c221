#pragma once
// Reading whole files.
#include <string>

#include "base/status.h"

namespace tessera {

// The whole content of the file at `path`, bytes as they are. Any failure (missing, unreadable, a
// directory, a read error) is an error naming the path and the operating system's reason:
// "cannot open x.yaml: No such file or directory", "cannot read dir: Is a directory".
Result<std::string> ReadFile(const std::string& path);

}  // namespace tessera
