#pragma once
// The PostgreSQL store and the leader lease that several replicas on one database share.
//
// PostgresStore: the Store contract (store.h) on a PostgreSQL database named by a libpq connection URI
// (`postgresql://USER@HOST:PORT/DB`, `?host=/dir` for a Unix socket). Its schema is created and migrated by
// Tessera (table schema_migrations; one migration at a time under an advisory lock, so replicas starting
// together on an empty database settle who creates it); a database whose schema is newer than this binary
// is refused. A writer thread group-commits queued batches in one transaction, each in its own savepoint.
//
// Fencing: with Fence(epoch), every transaction of the writer first reads the lease's epoch with a share
// lock (FOR SHARE, held to the commit, so no takeover commits in between) and is refused unless it is
// `epoch`: once another replica took the lease, this store's writes fail ("fenced ...") and `on_fenced`
// runs (once). The epoch only grows.
//
// LeaderLease: the lease row on its own connection. Times are the database's (clock_timestamp()), so the
// replicas' clocks need not agree.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "store/store.h"

namespace tessera {

class PostgresStore : public Store {
 public:
  // From now on, a transaction commits only while the lease's epoch is `epoch`; `on_fenced` runs once, on
  // the writer thread, when one was refused for another epoch, before the refused writers are answered.
  virtual void Fence(int64_t epoch, std::function<void()> on_fenced) = 0;
};

// Connects, creates or migrates the schema. The error names the database (the URI without a password)
// and the problem; a schema newer than this binary is an error.
Result<std::unique_ptr<PostgresStore>> OpenPostgresStore(const std::string& uri);

// The URI with any password removed, for messages.
std::string RedactUri(const std::string& uri);

struct LeaseState {
  std::string holder;  // the holder's instance id ("" = never held)
  std::string url;     // the holder's advertised URL
  int64_t epoch = 0;   // +1 on every acquisition
  bool live = false;   // not yet expired by the database's clock
};

class LeaderLease {
 public:
  // `uri` must name a database whose schema OpenPostgresStore created. `id` names this replica (unique per
  // process), `url` is what it advertises.
  static Result<std::unique_ptr<LeaderLease>> Open(const std::string& uri, std::string id, std::string url);
  virtual ~LeaderLease() = default;
  virtual Result<LeaseState> Read() = 0;
  // Takes the lease for `seconds` when it is free or expired (the epoch + 1): the new epoch, or 0 when
  // another replica holds it.
  virtual Result<int64_t> TryAcquire(double seconds) = 0;
  // Extends the lease held at `epoch` by `seconds` from now: false when it is no longer ours.
  virtual Result<bool> Renew(int64_t epoch, double seconds) = 0;
  // Lets the lease expire now (a clean shutdown), if still held at `epoch`.
  virtual Status Release(int64_t epoch) = 0;
};

}  // namespace tessera
