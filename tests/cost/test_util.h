#pragma once
// Helpers shared by the cost tests.
#include <gtest/gtest.h>

#include <string>

#include "base/file.h"

namespace tessera::testing {

// The bytes of a shipped file (examples/cost/...); an unreadable file fails the test that asked.
inline std::string Slurp(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) ADD_FAILURE() << text.error();
  return text.ok() ? *text : std::string();
}

}  // namespace tessera::testing
