#pragma once
// The service's clock, injected: Now() in seconds since the Unix epoch on the service's time line. Under
// `--speed X` that time line runs X times faster than the wall clock (a simulated cluster).

#include <atomic>
#include <chrono>
#include <functional>

namespace tessera {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual double Now() const = 0;
  // Wall-clock seconds until service time `t` (0 when it has passed).
  virtual double WallSecondsUntil(double t) const = 0;
  // From now on Now() >= t (a restarted service continues its time line). Call before sharing the clock.
  virtual void NotBefore(double t) = 0;
};

// Service time = start + speed * (wall seconds since construction). `wall` returns monotonic seconds.
class ScaledClock final : public Clock {
 public:
  using WallSource = std::function<double()>;
  static double SteadySeconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  ScaledClock(double start, double speed, WallSource wall = SteadySeconds)
      : start_(start), speed_(speed > 0 ? speed : 1), wall_(std::move(wall)), wall0_(wall_()) {}
  double Now() const override { return start_ + speed_ * (wall_() - wall0_); }
  void NotBefore(double t) override {
    if (Now() < t) start_ += t - Now();
  }
  double WallSecondsUntil(double t) const override {
    const double d = (t - Now()) / speed_;
    return d > 0 ? d : 0;
  }

 private:
  double start_;
  double speed_;
  WallSource wall_;
  double wall0_;
};

// A clock its owner sets (a replay's virtual time line): time passes only when Set moves it.
class VirtualClock final : public Clock {
 public:
  explicit VirtualClock(double start = 0) : now_(start) {}
  double Now() const override { return now_.load(); }
  double WallSecondsUntil(double t) const override { return t > Now() ? 3600 : 0; }
  void NotBefore(double t) override {
    if (t > Now()) now_.store(t);
  }
  // REQUIRES: t >= Now() (time never runs backwards).
  void Set(double t) {
    if (t > Now()) now_.store(t);
  }

 private:
  std::atomic<double> now_;
};

}  // namespace tessera
