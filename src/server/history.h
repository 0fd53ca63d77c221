#pragma once
// UtilisationHistory: the cluster's allocation over time, sampled from the service's published snapshots
// (what GET /api/v1/cluster/history answers). It keeps the last `capacity` samples in memory, so the
// history starts when the server started.
//
// Thread safety: every method may be called from any thread.

#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace tessera {

struct UtilisationSample {
  int64_t t = 0;                // service time, Unix seconds
  int64_t total_gpus = 0;
  int64_t allocated_milli = 0;  // milli-GPUs granted to tasks (MIG instances by their compute share)
  int64_t busy_gpus = 0;        // GPUs running at least one task
};

class UtilisationHistory {
 public:
  explicit UtilisationHistory(size_t capacity = 100000) : capacity_(capacity) {}

  // Appends a sample; one not later than the last is ignored (time only moves forward).
  void Record(const UtilisationSample& s);
  // Samples with from <= t <= to (from/to < 0: unbounded), thinned to at most `max_points` by keeping
  // the per-bucket mean of equal-width time buckets (never inventing a sample where none was taken).
  std::vector<UtilisationSample> Range(int64_t from, int64_t to, size_t max_points) const;
  size_t Size() const;

 private:
  size_t capacity_;
  mutable std::mutex mu_;
  std::deque<UtilisationSample> samples_;
};

}  // namespace tessera
