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
};

// `concurrency` threads, each with its own keep-alive HTTP client, POST training jobs to /api/v1/jobs until
// `requests` have been sent; the wall time spans starting the first thread to joining the last.
LoadResult RunSubmitLoad(const LoadOptions& o);

// Nearest-rank percentile (q in [0, 1]) of unsorted samples; 0 for none.
double Percentile(std::vector<double> samples, double q);

}  // namespace tessera::client
