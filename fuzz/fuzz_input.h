#pragma once
// Shared helpers of the fuzz targets: the input as text, and a check that a reader's error names its source.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace tessera::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// Readers promise errors that name the file; a message without `source` is a finding (abort).
inline void ExpectNamesSource(const std::string& error, std::string_view source) {
  if (error.find(source) == std::string::npos) {
    std::fprintf(stderr, "error does not name '%.*s': %s\n", static_cast<int>(source.size()), source.data(),
                 error.c_str());
    std::abort();
  }
}

}  // namespace tessera::fuzz
