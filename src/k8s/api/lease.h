#pragma once
// Leader election with a coordination.k8s.io/v1 Lease, as client-go's leaderelection does: a candidate
// takes the Lease when it is free or its holder let it expire (leaseDurationSeconds past renewTime), and
// the holder renews it every `renew_s`; every write carries the Lease's resourceVersion, so two
// candidates never both succeed (optimistic concurrency). The margins are client-go's: lease duration
// (15 s) > renew deadline (10 s) > retry period (2 s). A holder leads only until its last successful renew
// plus the renew deadline (IsLeader checks the time, so a renew that hangs cannot extend it), which ends
// well before another candidate may take the Lease. Release (on shutdown, as client-go's ReleaseOnCancel)
// clears holderIdentity and sets leaseDurationSeconds 1, so a standby takes over at its next retry.
// Requests should carry short timeouts (ApiClient::set_timeouts): a renew must not outlast the deadline.
//
// Thread safety: TryAcquireOrRenew and Release are called from one thread at a time; the rest from any.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "k8s/api/api_client.h"

namespace tessera {

struct LeaseOptions {
  std::string ns = "kube-system";
  std::string name = "tessera-scheduler";
  std::string identity;       // this candidate (hostname_uuid)
  int duration_s = 15;        // leaseDurationSeconds
  int renew_deadline_s = 10;  // leading ends this long after the last successful renew
  int renew_s = 2;            // retry period: renew (or try to acquire) this often
};

// What to fix when the Lease cannot be read or written: a sentence naming the cause (a missing namespace,
// RBAC verb and resource, credentials, TLS), or empty when the answer is no configuration problem (ok,
// 409 conflict). `verb`: get, create or update.
std::string LeaseProblem(const ApiResponse& r, const std::string& verb, const LeaseOptions& options);

// A MicroTime ("2006-01-02T15:04:05.000000Z") of a Unix time in microseconds, and back (-1 = unreadable).
std::string MicroTime(int64_t unix_us);
int64_t ParseMicroTime(const std::string& s);

// Whether a Lease (its spec) can be taken by `identity` at `now_us`: free, ours, or expired.
bool LeaseAvailable(const nlohmann::json& spec, const std::string& identity, int64_t now_us);

class LeaderElector {
 public:
  LeaderElector(const ApiClient* api, LeaseOptions options);
  // One round at `now_us` (Unix microseconds): read the Lease, create, take over or renew it. Returns
  // IsLeader(now_us) afterwards.
  bool TryAcquireOrRenew(int64_t now_us);
  // Whether this candidate leads at `now_us`: it holds the Lease and renewed it (a write that started at
  // or before the renewTime it wrote) less than renew_deadline_s ago. IsLeader() uses the wall clock.
  bool IsLeader(int64_t now_us) const;
  bool IsLeader() const;
  // Stops leading and, if this candidate holds the Lease, writes it released (holderIdentity cleared,
  // leaseDurationSeconds 1). Returns whether the release was written (or nothing was held).
  bool Release(int64_t now_us);
  // Unix microseconds of the last successful renew (0 = never).
  int64_t last_renew_us() const { return last_renew_us_.load(); }
  // The configuration problem of the last round (LeaseProblem), empty when none.
  std::string problem() const;
  const LeaseOptions& options() const { return options_; }

 private:
  std::string Base() const;
  void Note(const ApiResponse& r, const std::string& verb);

  const ApiClient* api_;
  LeaseOptions options_;
  std::atomic<bool> leader_{false};
  std::atomic<int64_t> last_renew_us_{0};
  mutable std::mutex mu_;
  std::string problem_;
};

}  // namespace tessera
