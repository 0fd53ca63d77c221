#pragma once
// Bearer tokens: 128 random bits from OpenSSL's RAND_bytes, shown once, stored only as a SHA-256 hash.

#include <string>
#include <string_view>

#include "base/status.h"

namespace tessera {

// "tsr_" followed by 32 hex digits (128 bits).
Result<std::string> NewToken();
// Lower-case hex SHA-256 of `text`.
std::string Sha256Hex(std::string_view text);
// Constant-time comparison of two equal-length strings (false when lengths differ).
bool ConstantTimeEqual(std::string_view a, std::string_view b);

}  // namespace tessera
