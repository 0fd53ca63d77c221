// `tessera bench api`: durable submissions per second and latency against a running `tessera serve`.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "client/load.h"

namespace tessera::cli {
namespace {

bool WriteLatencies(const std::string& path, const client::LoadResult& r) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  fmt::print(f, "sent_unix_ms,latency_ms\n");
  for (const auto& s : r.samples) fmt::print(f, "{:.3f},{:.3f}\n", r.start_unix_ms + s.sent_ms, s.latency_ms);
  return std::fclose(f) == 0;
}

}  // namespace

void RegisterBenchApi(CLI::App& bench, int* exit_code) {
  static client::LoadOptions o;
  static bool json = false;
  static std::string latencies;
  CLI::App* api = bench.add_subcommand("api", "Job submissions per second and latency against a server");
  api->add_option("--url", o.url, "server base URL")->required();
  api->add_option("--token", o.token, "bearer token of a user who may submit")->required();
  api->add_option("--requests", o.requests, "submissions in all")->check(CLI::Range(1, 10000000));
  api->add_option("--concurrency", o.concurrency, "connections in flight")->check(CLI::Range(1, 4096));
  api->add_flag("--json", json, "print JSON");
  api->add_option("--latencies", latencies,
                  "write each acknowledged submission as CSV (sent_unix_ms, latency_ms)");
  api->callback([exit_code] {
    // Keys distinct across runs against the same database: the run's start time is part of them.
    o.key_prefix = fmt::format("bench-{}-", std::chrono::system_clock::now().time_since_epoch().count());
    const client::LoadResult r = client::RunSubmitLoad(o);
    if (!latencies.empty() && !WriteLatencies(latencies, r)) {
      fmt::print(stderr, "--latencies: cannot write {}\n", latencies);
      *exit_code = 2;
      return;
    }
    if (json) {
      nlohmann::json j = {{"submissions_per_second", r.submissions_per_second}, {"p50_ms", r.p50_ms},
                          {"p99_ms", r.p99_ms}, {"errors", r.errors}, {"requests", o.requests},
                          {"concurrency", o.concurrency}, {"wall_s", r.wall_s}};
      fmt::print("{}\n", j.dump(2));
    } else {
      fmt::print("{} submissions, concurrency {}: {:.0f}/s, p50 {:.2f} ms, p99 {:.2f} ms, {} errors\n", o.requests,
                 o.concurrency, r.submissions_per_second, r.p50_ms, r.p99_ms, r.errors);
    }
    if (r.errors > 0) fmt::print(stderr, "first error: {}\n", r.first_error);
    *exit_code = r.errors == 0 ? 0 : 1;
  });
}

}  // namespace tessera::cli
