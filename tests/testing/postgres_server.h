#pragma once
// A real PostgreSQL server for tests (store/local_postgres.h: initdb into a temporary folder, a Unix socket
// there only, fsync off), one per test process (Shared), stopped and removed when the process ends; each test
// takes a database of its own (NewDatabase). Missing server binaries are an error that says so: no test
// passes without a server.
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>

#include "store/local_postgres.h"

namespace tessera::testing {

class PostgresServer {
 public:
  // Empty when the server runs, else why not.
  const std::string& error() const { return error_; }

  // A libpq URI of a new, empty database (owned by the superuser `tessera`), or "" with error() set.
  std::string NewDatabase() {
    if (!error_.empty()) return "";
    static std::atomic<int> next{0};
    const std::string name = "t" + std::to_string(getpid()) + "_" + std::to_string(next++);
    if (Status st = server_->Sql("CREATE DATABASE " + name); !st.ok()) {
      error_ = "CREATE DATABASE: " + st.message();
      return "";
    }
    return server_->Uri(name);
  }
  std::string Uri(const std::string& db) const { return server_ ? server_->Uri(db) : ""; }
  // Runs `sql` on database `db`; the error text, or "".
  std::string Sql(const std::string& sql, const std::string& db = "postgres") const {
    if (!server_) return error_;
    Status st = server_->Sql(sql, db);
    return st.ok() ? "" : st.message();
  }

  static PostgresServer& Shared() {
    static PostgresServer server;
    return server;
  }

 private:
  PostgresServer() {
    LocalPostgresOptions o;
    o.durable = false;
    auto s = LocalPostgres::Start(o);
    if (s.ok())
      server_ = std::move(s).value();
    else
      error_ = s.error();
  }

  std::unique_ptr<LocalPostgres> server_;
  std::string error_;
};

}  // namespace tessera::testing
