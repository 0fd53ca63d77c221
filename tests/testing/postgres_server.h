#pragma once
// A real PostgreSQL server for tests: initdb into a temporary directory (as the unprivileged `postgres`
// user when the test runs as root), listening on a Unix socket there only, fsync off; stopped and removed
// when the process ends. One per test process (SharedPostgres); each test takes a database of its own
// (NewDatabase). Missing server binaries are an error that says so: no test passes without a server.
#include <libpq-fe.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace tessera::testing {

class PostgresServer {
 public:
  ~PostgresServer() { Stop(); }

  // Empty when the server runs, else why not.
  const std::string& error() const { return error_; }

  // A libpq URI of a new, empty database (owned by the superuser `tessera`), or "" with error() set.
  std::string NewDatabase() {
    if (!error_.empty()) return "";
    static std::atomic<int> next{0};
    const std::string name = "t" + std::to_string(getpid()) + "_" + std::to_string(next++);
    if (std::string e = Sql("CREATE DATABASE " + name); !e.empty()) {
      error_ = "CREATE DATABASE: " + e;
      return "";
    }
    return Uri(name);
  }
  std::string Uri(const std::string& db) const {
    return "postgresql://tessera@localhost/" + db + "?host=" + sock_;
  }
  // Runs `sql` on database `db`; the error text, or "".
  std::string Sql(const std::string& sql, const std::string& db = "postgres") const {
    PGconn* c = PQconnectdb(Uri(db).c_str());
    std::string e;
    if (PQstatus(c) != CONNECTION_OK) {
      e = PQerrorMessage(c);
    } else {
      PGresult* r = PQexec(c, sql.c_str());
      if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        e = PQresultErrorMessage(r);
      PQclear(r);
    }
    PQfinish(c);
    return e;
  }

  static PostgresServer& Shared() {
    static PostgresServer server;
    return server;
  }

 private:
  PostgresServer() { error_ = Start(); }

  // The directory with initdb, pg_ctl and postgres: the newest /usr/lib/postgresql/N/bin, else PATH's.
  static std::string BinDir() {
    std::vector<std::filesystem::path> dirs;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/usr/lib/postgresql", ec))
      if (std::filesystem::exists(e.path() / "bin" / "initdb")) dirs.push_back(e.path() / "bin");
    std::sort(dirs.begin(), dirs.end(), [](const auto& a, const auto& b) {
      return std::atoi(a.parent_path().filename().c_str()) < std::atoi(b.parent_path().filename().c_str());
    });
    if (!dirs.empty()) return dirs.back().string();
    for (const char* d : {"/usr/local/bin", "/usr/bin"})
      if (std::filesystem::exists(std::string(d) + "/initdb") &&
          std::filesystem::exists(std::string(d) + "/pg_ctl"))
        return d;
    return "";
  }

  int Run(const std::string& cmd) const {
    const std::string as = root_ ? "runuser -u postgres -- " : "";
    return std::system((as + cmd + " >>" + dir_ + "/setup.log 2>&1").c_str());
  }

  std::string Start() {
    const std::string bin = BinDir();
    if (bin.empty())
      return "PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's `postgresql` package "
             "(scripts/install-deps.sh)";
    root_ = geteuid() == 0;
    const passwd* pw = root_ ? getpwnam("postgres") : nullptr;
    if (root_ && pw == nullptr)
      return "running as root, but there is no user `postgres` to run the server as";
    char tmpl[] = "/tmp/tessera-pg-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return "cannot create a temporary directory";
    dir_ = tmpl;
    sock_ = dir_ + "/sock";
    std::filesystem::create_directory(sock_);
    std::ofstream(dir_ + "/setup.log").flush();
    if (root_)
      for (const std::string& p : {dir_, sock_, dir_ + "/setup.log"})
        if (chown(p.c_str(), pw->pw_uid, pw->pw_gid) != 0) return "cannot hand " + p + " to user postgres";
    if (Run(bin + "/initdb -D " + dir_ + "/data -U tessera -A trust -E UTF8 --no-sync") != 0)
      return "initdb failed (see " + dir_ + "/setup.log)";
    const std::string opts =
        "-c listen_addresses='' -c unix_socket_directories='" + sock_ +
        "' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200";
    if (Run(bin + "/pg_ctl -D " + dir_ + "/data -l " + dir_ + "/server.log -w -t 60 -o \"" + opts +
            "\" start") != 0)
      return "pg_ctl start failed (see " + dir_ + "/server.log)";
    started_ = bin;
    return "";
  }

  void Stop() {
    if (!started_.empty()) (void)Run(started_ + "/pg_ctl -D " + dir_ + "/data -m immediate -w stop");
    started_.clear();
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
    dir_.clear();
  }

  bool root_ = false;
  std::string dir_, sock_, started_, error_;
};

}  // namespace tessera::testing
