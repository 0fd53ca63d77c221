#pragma once
// Leader election with a coordination.k8s.io/v1 Lease, as client-go's leaderelection does: a candidate
// takes the Lease when it is free or its holder let it expire (leaseDurationSeconds past renewTime), and
// the holder renews it every `renew_s`; every write carries the Lease's resourceVersion, so two
// candidates never both succeed (optimistic concurrency). A holder that cannot renew for the lease's
// duration stops being the leader. Only the leader binds.
//
// Thread safety: TryAcquireOrRenew is called from one thread; IsLeader from any.

#include <atomic>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "k8s/api_client.h"

namespace tessera {

struct LeaseOptions {
  std::string ns = "kube-system";
  std::string name = "tessera-scheduler";
  std::string identity;           // this candidate (hostname_uuid)
  int duration_s = 15;
  int renew_s = 2;
};

// A MicroTime ("2006-01-02T15:04:05.000000Z") of a Unix time in microseconds, and back (-1 = unreadable).
std::string MicroTime(int64_t unix_us);
int64_t ParseMicroTime(const std::string& s);

// Whether a Lease (its spec) can be taken by `identity` at `now_us`: free, ours, or expired.
bool LeaseAvailable(const nlohmann::json& spec, const std::string& identity, int64_t now_us);

class LeaderElector {
 public:
  LeaderElector(const ApiClient* api, LeaseOptions options);
  // One round at `now_us` (Unix microseconds): read the Lease, create, take over or renew it. Returns
  // whether this candidate holds it afterwards.
  bool TryAcquireOrRenew(int64_t now_us);
  bool IsLeader() const { return leader_.load(); }
  const LeaseOptions& options() const { return options_; }

 private:
  const ApiClient* api_;
  LeaseOptions options_;
  std::atomic<bool> leader_{false};
  int64_t last_renew_us_ = 0;
};

}  // namespace tessera
