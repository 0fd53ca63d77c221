#pragma once
// The submission load generator of `tessera bench api`: client side only.

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::client {

struct LoadOptions {
  std::string url, token;
  int requests = 1000;
  int concurrency = 8;
  std::string key_prefix;  // Idempotency-Keys are key_prefix + request number: distinct within and across runs
};

struct LoadResult {
  double submissions_per_second = 0;  // acknowledged (2xx) submissions / wall time of the whole run
  double p50_ms = 0, p99_ms = 0;      // latency of acknowledged submissions, nearest rank
  int64_t errors = 0;                 // non-2xx answers and transport failures
  double wall_s = 0;
  std::string first_error;  // the first failure's HTTP status and body, or transport error
  // Each acknowledged submission in the order answered: when it was sent (ms after the run's start) and
  // its latency (ms). The run started at start_unix_ms (the system clock, to line samples up with logs).
  struct Sample {
    double sent_ms, latency_ms;
  };
  std::vector<Sample> samples;
  double start_unix_ms = 0;
};

// `concurrency` keep-alive connections (libcurl's multi interface, one thread) POST training jobs to
// /api/v1/jobs in a closed loop, each sending its next request once its last is answered, until `requests`
// have been answered; the wall time spans the first request sent to the last answer.
LoadResult RunSubmitLoad(const LoadOptions& o);

// Nearest-rank percentile (q in [0, 1]) of unsorted samples; 0 for none.
double Percentile(std::vector<double> samples, double q);

}  // namespace tessera::client
