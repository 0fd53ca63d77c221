#pragma once
// Replica: one of several `tessera serve` processes on one PostgreSQL database (store/postgres_store.h).
// Exactly one leads: it holds the lease (LeaderLease) and runs the service with cycles, its store fenced by
// the lease's epoch, so that once another replica took the lease every later write of this one is refused
// by the database and it steps down. The others follow: their service is a read-only view of the
// database (ServiceConfig::view_only over ReadOnlyView), rebuilt every `view_refresh_s`, and they try to
// take the lease whenever the database says it expired.
//
// Timing: the leader renews every `tick_s` (at most lease/5); it counts its term from before the renewal
// it sent, so its own deadline comes before the database's expiry, and Leading() is false past it (a
// process stopped past its lease answers no write when it resumes, before it learns it lost the lease).
// A follower sees an expired lease within tick_s and takes it: a takeover after a crash takes at most the
// lease plus tick_s plus the new leader's load of the database.
//
// Each leadership term builds a new service from the database (make_service), so a new leader starts
// from everything acknowledged before it took the lease, and a deposed one keeps nothing of its term.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "server/replica_role.h"
#include "server/service_slot.h"
#include "store/postgres_store.h"

namespace tessera {

struct ReplicaOptions {
  std::string store_uri;  // libpq URI
  std::string self_url;   // --advertise: what the others send writes to
  double lease_s = 10;
  double view_refresh_s = 1;
  // A service on `store`: with `view`, a follower's read-only view (no cycles, view_only); else the
  // leader's. The shared_ptr's deleter stops it (and frees what it alone uses, e.g. its backend).
  std::function<Result<std::shared_ptr<Service>>(std::unique_ptr<Store> store, bool view)> make_service;
  // Runs once this replica leads, with its new service (e.g. the bootstrap admin of an empty database).
  std::function<void(Service&)> on_lead;
  std::function<void(const std::string&)> log;
};

class Replica final : public ReplicaRole {
 public:
  // Connects (migrating the schema), builds the first view and starts the lease loop.
  static Result<std::unique_ptr<Replica>> Start(ReplicaOptions options);
  ~Replica() override;
  // Stops the loop; a leader lets its lease expire now (a follower takes over at once) and stops its service.
  void Stop();

  ServiceSlot* slot() { return slot_.get(); }
  bool Leading() const override;
  LeaderInfo Info() const override;

 private:
  explicit Replica(ReplicaOptions options);
  void Loop();
  void LeaderTick();
  void FollowerTick();
  // Takes the lease's epoch `epoch` (acquired at steady time `t0`): the leader's service replaces the view.
  void Lead(int64_t epoch, double t0);
  void StepDown(const std::string& why);
  Status RefreshView();
  void Log(const std::string& line) const;

  ReplicaOptions o_;
  double tick_s_;
  std::unique_ptr<PostgresStore> reader_;  // the followers' views read through it
  std::unique_ptr<LeaderLease> lease_;
  std::unique_ptr<ServiceSlot> slot_;
  std::shared_ptr<Service> leader_service_;  // while leading (the loop thread's)

  mutable std::mutex mu_;  // what Info() reports
  std::string leader_url_;
  int64_t epoch_ = 0;
  std::atomic<bool> leading_{false};
  std::atomic<double> deadline_{0};  // steady seconds: the end of this leader's term by its own clock
  std::atomic<bool> fenced_{false};  // the database refused a write of this term
  double next_view_ = 0;

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread loop_;
};

}  // namespace tessera
