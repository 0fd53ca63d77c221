#pragma once
// Comma-separated command-line lists shared by the commands.
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tessera::cli {

// The non-empty items of "a,b,,c".
std::vector<std::string> SplitCommas(const std::string& s);
// Seeds: "42-51", "42", "42,45,50-51"; at most `max_seeds` in all, else an error naming --seeds.
Result<std::vector<uint64_t>> ParseSeeds(const std::string& text, uint64_t max_seeds);

}  // namespace tessera::cli
