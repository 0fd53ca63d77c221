#pragma once
// Seeded pseudo-randomness that gives the same numbers on every platform and standard library (the std
// distributions do not). Callers inject the seed; nothing here reads a clock or global state.
#include <cstdint>

namespace tessera {

// SplitMix64 (Steele, Lea and Flood, 2014): the output function, a bijective mix of 64 bits.
constexpr uint64_t SplitMix64Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
// SplitMix64's state increment (the golden-ratio gamma).
inline constexpr uint64_t kSplitMix64Gamma = 0x9e3779b97f4a7c15ULL;

// A double uniform in [0, 1) from the top 53 bits of `bits`.
constexpr double UnitInterval(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// The SplitMix64 generator: state += gamma, output SplitMix64Mix(state).
class SeededRng {
 public:
  explicit SeededRng(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return SplitMix64Mix(state_ += kSplitMix64Gamma); }
  // Uniform in [0, n). REQUIRES: n > 0. Rejection sampling, no modulo bias.
  uint64_t Below(uint64_t n);

 private:
  uint64_t state_;
};

}  // namespace tessera
