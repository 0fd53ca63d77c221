#pragma once
// The client side of `tessera bench soak`: mixed API load from many clients against replicas that come and
// go (reads to any replica, writes follow `Tessera-Leader`), the ledger of what the API acknowledged, and
// the verdict on the final state. Starting and killing the replicas is the caller's (cli/).

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace tessera::client {

struct SoakLoadOptions {
  std::vector<std::string> urls;  // every replica's base URL
  std::string token;              // a team lead's bearer token
  int clients = 16;
  double ops_per_second = 40;  // all clients together; each paces itself (exponential gaps, seeded)
  uint64_t seed = 1;
  std::string key_prefix;  // job names and Idempotency-Keys: key_prefix + client + "-" + number
  double write_deadline_s =
      30;  // a write is resent (same key and body) this long before it counts as unanswered
  bool usage_reads = true;  // false: the tenth of operations that reads usage lists the jobs instead
};

// What the API acknowledged (2xx). A job with a change that went unanswered (it may or may not have landed)
// is `ambiguous`: its priority and end are not judged.
struct SoakLedger {
  std::map<std::string, std::string> acked;  // Idempotency-Key -> job id
  std::set<std::string> unacked_keys;        // submissions never acknowledged within the deadline
  std::map<std::string, std::string>
      priority;                              // job id -> priority class its last acknowledged change answered
  std::map<std::string, std::string> ended;  // job id -> the ended state an acknowledged write answered
  std::set<std::string> ambiguous;
};

// Per operation (submit, list, get, cancel, priority, usage).
struct SoakOpStats {
  int64_t sent = 0, acked = 0, refused = 0, unanswered = 0;
  std::vector<double> ms;     // latency of acknowledged ones, resends and redirects included
  std::string first_refused;  // the first refusal's status and body
};
struct SoakCounts {
  std::map<std::string, SoakOpStats> ops;
  int64_t redirects = 0;  // writes sent on to the replica a 503 named
  int64_t resends = 0;    // writes sent again after no answer, a 5xx or a 503 without a leader
};

class SoakLoad {
 public:
  explicit SoakLoad(SoakLoadOptions options);
  ~SoakLoad();
  SoakLoad(const SoakLoad&) = delete;
  SoakLoad& operator=(const SoakLoad&) = delete;

  void Start();
  // Each client ends its operation in flight (a write until acknowledged or its deadline), then stops.
  void Stop();
  SoakLedger ledger() const;
  SoakCounts counts() const;
  int64_t acked_submissions() const;

 private:
  friend class SoakClient;
  SoakLoadOptions o_;
  mutable std::mutex mu_;  // ledger_ and counts_
  SoakLedger ledger_;
  SoakCounts counts_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// The end state as the leader answers it.
struct SoakFinalState {
  std::vector<nlohmann::json> jobs;            // every job (GET /api/v1/jobs, all pages)
  std::map<std::string, int64_t> milli_gpu_s;  // job id -> usage up to `to` (GET /api/v1/usage?group_by=job)
  int64_t to = 0;                              // Unix seconds (the service's clock) the usage runs to
};

struct SoakVerdict {
  std::vector<std::string> failures;  // one line each (at most 20, then a count)
  int64_t acked_checked = 0, changes_checked = 0, usage_checked = 0;
  int64_t preempted = 0;               // jobs whose usage spans several runs: bounded, not reconciled exactly
  int64_t max_usage_diff_milli_s = 0;  // the largest |usage - gpus x run interval| among reconciled jobs
};

// Every acknowledged submission is present exactly once under its id, no name of this run has two jobs,
// each acknowledged priority and end holds, and each job's usage equals its GPUs times its run interval
// (clipped at `to`).
SoakVerdict VerifySoak(const SoakLedger& ledger, const std::string& key_prefix,
                       const SoakFinalState& final_state);

}  // namespace tessera::client
