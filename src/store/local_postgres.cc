// LocalPostgres (local_postgres.h).
#include "store/local_postgres.h"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/spawn.h"

namespace tessera {
namespace {

// The folder with initdb and pg_ctl: the newest /usr/lib/postgresql/N/bin, else /usr/local/bin or /usr/bin.
std::string PostgresBinDir() {
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

}  // namespace

Status LocalPostgres::Run(std::vector<std::string> argv) const {
  if (root_) argv.insert(argv.begin(), {"runuser", "-u", "postgres", "--"});
  const std::string log = dir_ + "/setup.log";
  const std::string what = argv[root_ ? 4 : 0];
  const pid_t pid = SpawnLogged(argv, log);
  if (pid < 0) return Status::Error("cannot run " + what);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  return Status::Error(fmt::format("{} failed (see {})", what, log));
}

Result<std::unique_ptr<LocalPostgres>> LocalPostgres::Start(const LocalPostgresOptions& o) {
  std::unique_ptr<LocalPostgres> pg(new LocalPostgres());
  pg->bin_ = PostgresBinDir();
  if (pg->bin_.empty())
    return Status::Error(
        "PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's `postgresql` package "
        "(scripts/install-deps.sh)");
  pg->root_ = geteuid() == 0;
  const passwd* pw = pg->root_ ? getpwnam("postgres") : nullptr;
  if (pg->root_ && pw == nullptr) return Status::Error("running as root, but there is no user `postgres`");
  std::string tmpl = "/tmp/" + o.folder_prefix + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return Status::Error("cannot create a temporary folder");
  pg->dir_ = tmpl;
  pg->sock_ = pg->dir_ + "/sock";
  std::filesystem::create_directory(pg->sock_);
  std::ofstream(pg->dir_ + "/setup.log").flush();
  if (pg->root_)
    for (const std::string& p : {pg->dir_, pg->sock_, pg->dir_ + "/setup.log"})
      if (chown(p.c_str(), pw->pw_uid, pw->pw_gid) != 0)
        return Status::Error("cannot hand " + p + " to postgres");
  const std::string data = pg->dir_ + "/data";
  if (Status st = pg->Run(
          {pg->bin_ + "/initdb", "-D", data, "-U", "tessera", "-A", "trust", "-E", "UTF8", "--no-sync"});
      !st.ok())
    return st;
  std::string opts =
      fmt::format("-c listen_addresses='' -c unix_socket_directories='{}' -c max_connections={}", pg->sock_,
                  o.max_connections);
  if (!o.durable) opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off";
  if (Status st = pg->Run({pg->bin_ + "/pg_ctl", "-D", data, "-l", pg->dir_ + "/server.log", "-w", "-t", "60",
                           "-o", opts, "start"});
      !st.ok())
    return Status::Error(st.message() + "; the server's log: " + pg->dir_ + "/server.log");
  pg->started_ = true;
  return pg;
}

LocalPostgres::~LocalPostgres() {
  if (started_) (void)Run({bin_ + "/pg_ctl", "-D", dir_ + "/data", "-m", "immediate", "-w", "stop"});
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

std::string LocalPostgres::Uri(const std::string& db) const {
  return "postgresql://tessera@localhost/" + db + "?host=" + sock_;
}

Status LocalPostgres::Sql(const std::string& sql, const std::string& db) const {
  PGconn* c = PQconnectdb(Uri(db).c_str());
  Status st;
  if (PQstatus(c) != CONNECTION_OK) {
    st = Status::Error(PQerrorMessage(c));
  } else {
    PGresult* r = PQexec(c, sql.c_str());
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
      st = Status::Error(PQresultErrorMessage(r));
    PQclear(r);
  }
  PQfinish(c);
  return st;
}

}  // namespace tessera
