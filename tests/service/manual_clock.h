#pragma once
// A clock the service tests move by hand: now_ only moves when a test (or NotBefore) moves it; a wait for a
// time still ahead lasts an hour of wall time (the test moves now_ instead of waiting).
#include <algorithm>

#include "service/clock.h"

namespace tessera::testing {

class ManualClock final : public Clock {
 public:
  double Now() const override { return now_; }
  double WallSecondsUntil(double t) const override { return t > now_ ? 3600 : 0; }
  void NotBefore(double t) override { now_ = std::max(now_, t); }
  double now_ = 1.7e9;
};

}  // namespace tessera::testing
