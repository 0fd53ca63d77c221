#include "cli/list_args.h"

#include <fmt/format.h>

#include <stdexcept>

namespace tessera::cli {

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t c = s.find(',', pos);
    std::string item = s.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
    if (!item.empty()) out.push_back(item);
    pos = c == std::string::npos ? s.size() + 1 : c + 1;
  }
  return out;
}

Result<std::vector<uint64_t>> ParseSeeds(const std::string& text, uint64_t max_seeds) {
  std::vector<uint64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? text.size() + 1 : comma + 1;
    try {
      size_t dash = item.find('-');
      size_t used = 0;
      if (dash == std::string::npos) {
        uint64_t v = std::stoull(item, &used);
        if (used != item.size()) throw std::invalid_argument(item);
        out.push_back(v);
      } else {
        uint64_t a = std::stoull(item.substr(0, dash), &used);
        if (used != dash) throw std::invalid_argument(item);
        uint64_t b = std::stoull(item.substr(dash + 1), &used);
        if (used != item.size() - dash - 1 || b < a || b - a >= max_seeds) throw std::invalid_argument(item);
        for (uint64_t s = a; s <= b; ++s) out.push_back(s);
      }
    } catch (const std::exception&) {
      return Status::Error(fmt::format("--seeds: '{}' is not a seed or range like 42-51", item));
    }
    if (out.size() > max_seeds) return Status::Error(fmt::format("--seeds: at most {} seeds", max_seeds));
  }
  if (out.empty()) return Status::Error("--seeds: no seeds");
  return out;
}

}  // namespace tessera::cli
