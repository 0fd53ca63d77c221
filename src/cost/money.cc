#include "cost/money.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace tessera {

int64_t CentsHalfUp(Int128 atoms) {
  const bool neg = atoms < 0;
  const Int128 a = neg ? -atoms : atoms;
  const Int128 c = (a + kAtomsPerCent / 2) / kAtomsPerCent;
  return static_cast<int64_t>(neg ? -c : c);
}

std::vector<int64_t> LargestRemainder(int64_t total, const std::vector<Int128>& weights) {
  const size_t n = weights.size();
  std::vector<int64_t> parts(n, 0);
  if (n == 0) return parts;
  std::vector<Int128> w = weights;
  Int128 sum = 0;
  for (Int128& x : w) {
    if (x < 0) x = 0;
    sum += x;
  }
  if (sum == 0) {
    std::fill(w.begin(), w.end(), Int128{1});
    sum = static_cast<Int128>(n);
  }
  const bool neg = total < 0;
  const Int128 t = neg ? -Int128{total} : Int128{total};
  std::vector<Int128> rem(n);
  Int128 given = 0;
  for (size_t i = 0; i < n; ++i) {
    const Int128 q = t * w[i];
    parts[i] = static_cast<int64_t>(q / sum);
    rem[i] = q % sum;
    given += parts[i];
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rem[a] > rem[b]; });
  for (size_t k = 0; given < t; ++k, ++given) ++parts[order[k % n]];
  if (neg)
    for (int64_t& p : parts) p = -p;
  return parts;
}

std::string FormatCents(int64_t cents) {
  const int64_t a = cents < 0 ? -cents : cents;
  return fmt::format("{}{}.{:02d}", cents < 0 ? "-" : "", a / 100, a % 100);
}

}  // namespace tessera
