#pragma once
// Per-queue decayed usage, the history that fair share blends into a queue's order (docs/scheduling.md
// "Fair share"). Usage is GPU-unit-seconds (thousandths of a GPU times seconds) of what each queue held,
// decayed with a half-life: advancing from t0 to t1 while a queue holds H units gives
//   usage(t1) = usage(t0) * 2^(-(t1 - t0) / half_life) + H * (t1 - t0)            (sched/cycle.h DecayUsage)
// Callers advance it at every change of what a queue holds, so H is constant over each step.

#include <cstdint>
#include <vector>

namespace tessera {

class QueueUsage {
 public:
  QueueUsage() = default;
  // `queues` queues with no usage yet, starting at `now_s` (SetUsage carries history over from a store).
  QueueUsage(int queues, double half_life_s, int64_t now_s);

  // Decays every queue's usage to `now_s` and adds what each held since the last step. A time before the
  // last step changes nothing.
  void AdvanceTo(int64_t now_s);
  // What queue q holds from now on changes by `delta_units`. REQUIRES: AdvanceTo(now) first.
  void AddHeld(int q, int64_t delta_units) { held_[q] += delta_units; }
  void SetUsage(int q, double usage) { usage_[q] = usage; }
  // One more queue, with no usage and nothing held.
  void AddQueue() {
    usage_.push_back(0);
    held_.push_back(0);
  }

  const std::vector<double>& usage() const { return usage_; }
  const std::vector<int64_t>& held() const { return held_; }
  int64_t last_s() const { return last_s_; }

 private:
  double half_life_s_ = 0;
  int64_t last_s_ = 0;
  std::vector<double> usage_;
  std::vector<int64_t> held_;
};

}  // namespace tessera
