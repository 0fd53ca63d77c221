#pragma once
// Exact money. Prices are integer micro-USD per GPU-hour; a quantity of milli-GPU-seconds times such a
// price is an exact integer of "atoms" (1 cent = 3.6e10 atoms), summed in 128 bits; statements are integer
// cents. An amount is rounded to the cent once (half away from zero); an amount shared out (idle capacity,
// a month's part of a purchase) is split by the largest-remainder method, so the parts sum exactly to it.

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

using Int128 = __int128;

inline constexpr int64_t kMicrosPerUsd = 1'000'000;
inline constexpr Int128 kAtomsPerCent = Int128{36'000'000'000};  // 3.6e6 milli-GPU-s per GPU-h x 1e4 micro/cent

// A price in USD per GPU-hour as integer micro-USD (nearest).
inline int64_t MicrosPerGpuHour(double usd_per_gpu_hour) { return std::llround(usd_per_gpu_hour * 1e6); }

// Exact cost of `milli_gpu_s` at `micros_per_gpu_hour`, in atoms.
inline Int128 CostAtoms(int64_t milli_gpu_s, int64_t micros_per_gpu_hour) {
  return Int128{milli_gpu_s} * Int128{micros_per_gpu_hour};
}

// Nearest cent of an amount in atoms, halves away from zero.
int64_t CentsHalfUp(Int128 atoms);

// Splits `total` (cents, any sign) into parts proportional to `weights` (>= 0; all zero = equal parts) by the
// largest-remainder method: each part is the floor of its quota or one more, ties to the earlier index, and
// the parts sum exactly to `total`. Empty weights: empty result (then total must be 0 to be shared).
std::vector<int64_t> LargestRemainder(int64_t total, const std::vector<Int128>& weights);

// "1234.56", "-0.07": exact decimal text of cents.
std::string FormatCents(int64_t cents);

inline double CentsToUsd(int64_t cents) { return static_cast<double>(cents) / 100.0; }

}  // namespace tessera
