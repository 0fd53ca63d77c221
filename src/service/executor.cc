#include "service/executor.h"

namespace tessera {

void SimulatedExecutor::Start(int64_t job, int64_t start_s, int64_t duration_s) {
  Stop(job);
  if (duration_s <= 0) {
    by_job_[job] = -1;
    return;
  }
  ExecutorEvent e{job, start_s + duration_s, false, ""};
  if (failure_probability_ > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < failure_probability_) {
    e.at = start_s + std::uniform_int_distribution<int64_t>(0, duration_s - 1)(rng_);
    e.failed = true;
    e.message = "the simulated executor injected a failure";
  }
  by_job_[job] = e.at;
  by_end_.emplace(e.at, e);
}

void SimulatedExecutor::Stop(int64_t job) {
  auto it = by_job_.find(job);
  if (it == by_job_.end()) return;
  auto [lo, hi] = by_end_.equal_range(it->second);
  for (auto e = lo; e != hi; ++e)
    if (e->second.job == job) {
      by_end_.erase(e);
      break;
    }
  by_job_.erase(it);
}

std::vector<ExecutorEvent> SimulatedExecutor::Poll(int64_t now_s) {
  std::vector<ExecutorEvent> out;
  while (!by_end_.empty() && by_end_.begin()->first <= now_s) {
    out.push_back(by_end_.begin()->second);
    by_job_.erase(out.back().job);
    by_end_.erase(by_end_.begin());
  }
  return out;
}

int64_t SimulatedExecutor::NextEventS() const { return by_end_.empty() ? -1 : by_end_.begin()->first; }

}  // namespace tessera
