#include "k8s/api/quantity.h"

#include <fmt/format.h>

#include <cctype>

namespace tessera {
namespace {

struct Suffix {
  std::string_view text;
  int base;      // 2 or 10
  int exponent;  // power of the base
};
constexpr Suffix kSuffixes[] = {{"Ki", 2, 10}, {"Mi", 2, 20}, {"Gi", 2, 30}, {"Ti", 2, 40}, {"Pi", 2, 50},
                                {"Ei", 2, 60}, {"n", 10, -9}, {"u", 10, -6}, {"m", 10, -3}, {"k", 10, 3},
                                {"M", 10, 6},  {"G", 10, 9},  {"T", 10, 12}, {"P", 10, 15}, {"E", 10, 18}};

Status Bad(std::string_view text, std::string_view why) {
  return Status::Error(fmt::format("quantity '{}': {}", text, why));
}

}  // namespace

Result<int64_t> ParseQuantityMilli(std::string_view text) {
  std::string_view s = text;
  if (s.empty()) return Bad(text, "empty");
  bool negative = false;
  if (s[0] == '+' || s[0] == '-') {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  // Digits with at most one point; then a suffix or a decimal exponent.
  __int128 mantissa = 0;
  int scale = 0, digits = 0;
  bool point = false;
  size_t i = 0;
  for (; i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.'); ++i) {
    if (s[i] == '.') {
      if (point) return Bad(text, "two decimal points");
      point = true;
      continue;
    }
    if (mantissa > (__int128{1} << 100)) return Bad(text, "too many digits");
    mantissa = mantissa * 10 + (s[i] - '0');
    ++digits;
    if (point) --scale;
  }
  if (digits == 0) return Bad(text, "no number (want digits with an optional suffix, e.g. 8, 500m, 64Gi)");
  std::string_view rest = s.substr(i);
  int base = 10, exponent = 0;
  if (!rest.empty() && (rest[0] == 'e' || rest[0] == 'E') && rest.size() > 1) {
    int sign = 1;
    size_t k = 1;
    if (rest[k] == '+' || rest[k] == '-') sign = rest[k++] == '-' ? -1 : 1;
    if (k >= rest.size()) return Bad(text, "an exponent without digits");
    for (; k < rest.size(); ++k) {
      if (!std::isdigit(static_cast<unsigned char>(rest[k]))) return Bad(text, "a malformed exponent");
      exponent = exponent * 10 + (rest[k] - '0');
      if (exponent > 30) return Bad(text, "out of range");
    }
    exponent *= sign;
  } else if (!rest.empty()) {
    bool known = false;
    for (const Suffix& x : kSuffixes)
      if (rest == x.text) base = x.base, exponent = x.exponent, known = true;
    if (!known) return Bad(text, fmt::format("unknown suffix '{}'", rest));
  }
  // value = mantissa * 10^scale * base^exponent, in thousandths.
  __int128 v = mantissa;
  int ten = scale + 3;
  if (base == 2) {
    for (int k = 0; k < exponent; ++k) v *= 2;
  } else {
    ten += exponent;
  }
  for (; ten > 0; --ten) {
    v *= 10;
    if (v > INT64_MAX) return Bad(text, "out of range");
  }
  for (; ten < 0; ++ten) v = (v + 9) / 10;  // the API server rounds fractions of the smallest unit up
  if (v > INT64_MAX) return Bad(text, "out of range");
  return static_cast<int64_t>(negative ? -v : v);
}

Result<int64_t> ParseQuantityCount(std::string_view text) {
  auto m = ParseQuantityMilli(text);
  if (!m.ok()) return m.status();
  if (*m < 0) return Bad(text, "negative");
  if (*m % 1000 != 0) return Bad(text, "not a whole number of devices");
  return *m / 1000;
}

}  // namespace tessera
