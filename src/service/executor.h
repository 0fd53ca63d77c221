#pragma once
// Executor: the seam to where jobs really run. The service starts and stops jobs through it and polls it
// for jobs that ended. SimulatedExecutor runs nothing: a job ends `duration_s` after its start on the
// service's clock (0 = runs until stopped), failing with an injected probability (seeded).
//
// Thread safety: none; the service calls it under its own lock.

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace tessera {

struct ExecutorEvent {
  int64_t job = 0;
  int64_t at = 0;     // when it ended (service time, s)
  bool failed = false;
  std::string message;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual void Start(int64_t job, int64_t start_s, int64_t duration_s) = 0;
  virtual void Stop(int64_t job) = 0;
  // Jobs that ended at or before `now_s`, in order of their end.
  virtual std::vector<ExecutorEvent> Poll(int64_t now_s) = 0;
  // When the next job ends, or -1.
  virtual int64_t NextEventS() const = 0;
};

class SimulatedExecutor final : public Executor {
 public:
  // `failure_probability` in [0, 1]: a started job fails (at a uniform point of its run) with it.
  explicit SimulatedExecutor(double failure_probability = 0, uint64_t seed = 1)
      : failure_probability_(failure_probability), rng_(seed) {}
  void Start(int64_t job, int64_t start_s, int64_t duration_s) override;
  void Stop(int64_t job) override;
  std::vector<ExecutorEvent> Poll(int64_t now_s) override;
  int64_t NextEventS() const override;
  size_t running() const { return by_job_.size(); }

 private:
  double failure_probability_;
  std::mt19937_64 rng_;
  std::multimap<int64_t, ExecutorEvent> by_end_;
  std::map<int64_t, int64_t> by_job_;  // job -> end (for Stop); end -1 = until stopped
};

}  // namespace tessera
