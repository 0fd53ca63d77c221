#include "base/random.h"

#include "base/status.h"

namespace tessera {

uint64_t SeededRng::Below(uint64_t n) {
  TESSERA_CHECK(n > 0, "SeededRng::Below(0)");
  const uint64_t threshold = (0 - n) % n;  // 2^64 mod n: values below it would bias the modulo
  for (;;) {
    uint64_t r = Next();
    if (r >= threshold) return r % n;
  }
}

}  // namespace tessera
