#include "client/load.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <mutex>
#include <thread>

namespace tessera::client {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::string TrainingJob(int i) {
  return fmt::format(R"({{"name":"bench-{}","class":"training","workers":1,"gpus_per_worker":1,)"
                     R"("memory_gib":40,"duration_s":3600}})",
                     i);
}

// One worker: sends request numbers taken from `next` until `total`; appends latencies of successes.
struct Failures {
  std::atomic<int64_t> count{0};
  std::mutex mu;
  std::string first;
  void Add(const std::string& what) {
    if (count.fetch_add(1) == 0) {
      std::lock_guard<std::mutex> l(mu);
      first = what;
    }
  }
};

void Worker(const LoadOptions& o, std::atomic<int>* next, std::vector<double>* latencies_ms, Failures* errors) {
  httplib::Client cli(o.url);
  cli.set_keep_alive(true);
  cli.set_tcp_nodelay(true);  // else Nagle and delayed ACKs hold each request about 40 ms
  cli.set_connection_timeout(10);
  cli.set_read_timeout(60);
  if (!cli.is_valid()) {
    while (next->fetch_add(1) < o.requests) errors->Add("bad URL " + o.url);
    return;
  }
  for (int i = next->fetch_add(1); i < o.requests; i = next->fetch_add(1)) {
    httplib::Headers h = {{"Authorization", "Bearer " + o.token},
                          {"Idempotency-Key", o.key_prefix + std::to_string(i)}};
    const auto t0 = SteadyClock::now();
    auto r = cli.Post("/api/v1/jobs", h, TrainingJob(i), "application/json");
    const double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
    if (r && r->status >= 200 && r->status < 300) latencies_ms->push_back(ms);
    else errors->Add(r ? fmt::format("HTTP {}: {}", r->status, r->body.substr(0, 300)) : httplib::to_string(r.error()));
  }
}

}  // namespace

double Percentile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(samples.size())));
  return samples[std::clamp<size_t>(rank, 1, samples.size()) - 1];
}

LoadResult RunSubmitLoad(const LoadOptions& o) {
  const int threads = std::max(1, std::min(o.concurrency, std::max(1, o.requests)));
  std::vector<std::vector<double>> latencies(threads);
  std::atomic<int> next{0};
  Failures errors;
  const auto start = SteadyClock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(Worker, std::cref(o), &next, &latencies[t], &errors);
  for (auto& th : pool) th.join();
  LoadResult r;
  r.wall_s = std::chrono::duration<double>(SteadyClock::now() - start).count();
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  r.errors = errors.count.load();
  r.first_error = errors.first;
  r.submissions_per_second = r.wall_s > 0 ? static_cast<double>(all.size()) / r.wall_s : 0;
  r.p50_ms = Percentile(all, 0.50);
  r.p99_ms = Percentile(all, 0.99);
  return r;
}

}  // namespace tessera::client
