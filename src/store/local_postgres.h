#pragma once
// LocalPostgres: a private PostgreSQL server for tests and `tessera bench soak`: initdb into a new temporary
// folder (as the unprivileged `postgres` user when run as root), listening on a Unix socket there only;
// stopped (immediate) and the folder removed when it is destroyed. Missing server binaries are an error that
// says how to install them.

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace tessera {

struct LocalPostgresOptions {
  // false: fsync, synchronous_commit and full_page_writes off (tests, whose data need not outlive a crash).
  bool durable = true;
  std::string folder_prefix = "tessera-pg";  // /tmp/<prefix>-XXXXXX
  int max_connections = 200;
};

class LocalPostgres {
 public:
  static Result<std::unique_ptr<LocalPostgres>> Start(const LocalPostgresOptions& options = {});
  ~LocalPostgres();
  LocalPostgres(const LocalPostgres&) = delete;
  LocalPostgres& operator=(const LocalPostgres&) = delete;

  // A libpq URI of database `db` as the superuser `tessera`, over the Unix socket.
  std::string Uri(const std::string& db) const;
  // Runs one statement on database `db` (not in a transaction: CREATE DATABASE may run).
  Status Sql(const std::string& sql, const std::string& db = "postgres") const;
  const std::string& folder() const { return dir_; }

 private:
  LocalPostgres() = default;
  // Runs a server binary (as `postgres` when root), its output appended to setup.log.
  Status Run(std::vector<std::string> argv) const;
  std::string bin_, dir_, sock_;
  bool root_ = false, started_ = false;
};

}  // namespace tessera
