// `tessera bench soak`: replicas of `tessera serve` on one PostgreSQL database under mixed API load while
// the leader is killed (SIGKILL) at random moments and started again; then every acknowledged write is
// checked against the final state, usage against the jobs' run intervals, and each replica's RSS.
#include <fmt/format.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cli/commands.h"
#include "cli/soak_fleet.h"
#include "client/api_client.h"
#include "client/load.h"
#include "client/soak.h"
#include "store/local_postgres.h"

namespace tessera::cli {
namespace {

struct SoakOptions {
  double minutes = 0, seconds = 0;
  int replicas = 2, clients = 16;
  std::string store;
  double rate = 40, kill_every = 60, warmup = 30, lease = 5;
  double rss_limit_pct = 10;
  int64_t retain_ended = 100;  // the replicas' --retain-ended  // RSS at a role's end may be this much above its warm-up value
  uint64_t seed = 1;
  bool json = false, keep = false;
  bool usage_reads = true;
};

// One replica process in one role: its RSS `warmup` seconds into the role, and its last.
struct RssTerm {
  int replica = 0;
  pid_t pid = 0;
  std::string role;
  double start = 0, warm_t = -1, last_t = -1;
  int64_t warm_kib = 0, last_kib = 0;
  double warm_cpu = 0, last_cpu = 0;     // CPU seconds used by then
  int64_t warm_jobs = 0, last_jobs = 0;  // submissions acknowledged by then
};

double SoakNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class SoakRun {
 public:
  explicit SoakRun(SoakOptions o) : o_(std::move(o)), rng_(o_.seed) {}
  ~SoakRun();
  int Go();

 private:
  Status Setup();
  Status StartReplicas(const std::string& uri);
  Status MakeUser();
  void Monitor(double until, double kills_until);
  void Sample(double now);
  void MaybeKill(double now, double kills_until);
  void CloseTerm(int i);
  int Leader(double wait_s);
  httplib::Result Call(const std::string& method, const std::string& path, const nlohmann::json& body,
                       const std::string& token);
  Result<client::SoakFinalState> ReadFinal();
  int Report(const client::SoakVerdict& v, const client::SoakLoad& load, double wall_s);

  SoakOptions o_;
  std::mt19937_64 rng_;
  std::string dir_, admin_, token_, prefix_;
  std::unique_ptr<LocalPostgres> pg_;
  std::vector<std::unique_ptr<SoakReplica>> reps_;
  std::vector<int> roles_;          // last /readyz status per replica (0: no answer)
  std::vector<double> restart_at_;  // steady seconds; 0 = none pending
  std::vector<RssTerm> open_, closed_;
  double kill_t_ = -1, next_kill_ = 0, next_sample_ = 0;
  int64_t acked_now_ = 0;  // submissions acknowledged so far (read once a second)
  client::SoakLoad* load_ = nullptr;
  int killed_ = -1, kills_ = 0;
  std::vector<double> takeovers_;
  std::vector<std::string> failures_;
};

SoakRun::~SoakRun() {
  reps_.clear();  // each stops its process
  pg_.reset();
  std::error_code ec;
  if (!o_.keep && !dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

Status SoakRun::Setup() {
  char tmpl[] = "/tmp/tessera-soak-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return Status::Error("cannot create a temporary folder");
  dir_ = tmpl;
  std::ofstream(dir_ + "/cluster.yaml")
      << "name: soak\ndefaults: {gpu: h100-80gb, gpus: 8, cpu: 192, memory_gib: 2048, interconnect: "
         "nvswitch, spine: s, tier: reserved}\nnodes:\n  - {name: node, count: 32, leaf: leaf-0}\n";
  std::string uri = o_.store;
  if (uri.empty()) {
    LocalPostgresOptions po;
    po.folder_prefix = "tessera-soak-pg";
    auto pg = LocalPostgres::Start(po);
    if (!pg.ok()) return Status::Error(pg.error() + ", or pass --store URI");
    pg_ = std::move(pg).value();
    if (Status st = pg_->Sql("CREATE DATABASE tessera"); !st.ok()) return st;
    uri = pg_->Uri("tessera");
  }
  if (Status st = StartReplicas(uri); !st.ok()) return st;
  if (Leader(60) < 0) return Status::Error("no replica leads within 60 s (logs in " + dir_ + ")");
  std::ifstream(dir_ + "/admin-token") >> admin_;
  if (admin_.empty()) return Status::Error("no admin token was written to " + dir_ + "/admin-token");
  return MakeUser();
}

Status SoakRun::StartReplicas(const std::string& uri) {
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  for (int i = 0; i < o_.replicas; ++i) {
    const int port = SoakFreePort();
    const std::string url = fmt::format("http://127.0.0.1:{}", port);
    std::vector<std::string> args = {self,
                                     "serve",
                                     "--store",
                                     uri,
                                     "--listen",
                                     fmt::format("127.0.0.1:{}", port),
                                     "--advertise",
                                     url,
                                     "--lease-seconds",
                                     fmt::format("{}", o_.lease),
                                     "--retain-ended",
                                     fmt::format("{}", o_.retain_ended),
                                     "--cluster",
                                     dir_ + "/cluster.yaml",
                                     "--admin-token-file",
                                     dir_ + "/admin-token"};
    reps_.push_back(std::make_unique<SoakReplica>(args, port, fmt::format("{}/replica-{}.log", dir_, i)));
    if (Status st = reps_.back()->Start(); !st.ok()) return st;
  }
  roles_.assign(reps_.size(), 0);
  restart_at_.assign(reps_.size(), 0);
  return Status::Ok();
}

// Index of the replica that answers /readyz 200, waiting up to `wait_s`; -1 if none.
int SoakRun::Leader(double wait_s) {
  const double end = SoakNow() + wait_s;
  do {
    for (size_t i = 0; i < reps_.size(); ++i)
      if (reps_[i]->Probe("/readyz") == 200) return static_cast<int>(i);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (SoakNow() < end);
  return -1;
}

// A call to the leader with `token` (following a change of leader for up to 30 s).
httplib::Result SoakRun::Call(const std::string& method, const std::string& path, const nlohmann::json& body,
                              const std::string& token) {
  for (int attempt = 0;; ++attempt) {
    const int l = Leader(o_.lease + 10);
    if (l < 0) return httplib::Result(nullptr, httplib::Error::Connection);
    httplib::Client c(reps_[l]->url());
    c.set_read_timeout(60);
    httplib::Headers h = {{"Authorization", "Bearer " + token}};
    auto r = method == "GET" ? c.Get(path, h) : c.Post(path, h, body.dump(), "application/json");
    if ((r && r->status != 503) || attempt >= 5) return r;
  }
}

Status SoakRun::MakeUser() {
  const int64_t stamp = std::chrono::system_clock::now().time_since_epoch().count() / 1000;
  prefix_ = fmt::format("soak-{}-", stamp);
  auto t = Call("POST", "/api/v1/teams", {{"name", "soak"}, {"guaranteed_gpus", 256}}, admin_);
  if (!t || (t->status != 201 && t->status != 409))
    return Status::Error("cannot create team soak: " + (t ? t->body : std::string("no answer")));
  auto u = Call("POST", "/api/v1/users",
                {{"name", prefix_ + "lead"}, {"team", "soak"}, {"role", "team-lead"}}, admin_);
  const nlohmann::json j = u ? nlohmann::json::parse(u->body, nullptr, false) : nlohmann::json();
  if (!u || u->status != 201 || !j.is_object() || !j.contains("token") || !j["token"].is_string())
    return Status::Error("cannot create the soak user: " + (u ? u->body : std::string("no answer")));
  token_ = j["token"].get<std::string>();
  // Followers know the new user once their view caught up (a second or so). Polled twice a second: each
  // miss is a failed authentication from this address, which the server limits.
  for (const auto& r : reps_) {
    bool known = false;
    for (int k = 0; k < 20 && !known; ++k) {
      httplib::Client c(r->url());
      auto a = c.Get("/api/v1/leader", {{"Authorization", "Bearer " + token_}});
      known = a && a->status == 200;
      if (!known) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (!known) return Status::Error("replica " + r->url() + " does not know the soak user after 10 s");
  }
  return Status::Ok();
}

// Every 0.2 s: each replica's role, its RSS once a second, a takeover seen, restarts and kills due.
void SoakRun::Monitor(double until, double kills_until) {
  while (SoakNow() < until) {
    const double now = SoakNow();
    for (size_t i = 0; i < reps_.size(); ++i) {
      if (restart_at_[i] > 0 && now >= restart_at_[i]) {
        restart_at_[i] = 0;
        if (Status st = reps_[i]->Start(); !st.ok()) failures_.push_back("restart: " + st.message());
      }
      roles_[i] = reps_[i]->Probe("/readyz");
    }
    if (kill_t_ >= 0)
      for (size_t i = 0; i < reps_.size(); ++i)
        if (roles_[i] == 200) {  // a survivor, or the killed one started again and first to take the lease
          takeovers_.push_back(now - kill_t_);
          kill_t_ = -1;
          break;
        }
    if (now >= next_sample_) {
      if (load_ != nullptr) acked_now_ = load_->acked_submissions();
      Sample(now);
      next_sample_ = now + 1;
    }
    MaybeKill(now, kills_until);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// The RSS terms: a replica's (process, role) term continues, or ends and a new one starts.
void SoakRun::Sample(double now) {
  open_.resize(reps_.size());
  for (size_t i = 0; i < reps_.size(); ++i) {
    if (!reps_[i]->alive() || roles_[i] == 0) continue;
    const std::string role = roles_[i] == 200 ? "leader" : "follower";
    RssTerm& t = open_[i];
    if (t.pid != reps_[i]->pid() || t.role != role) {
      CloseTerm(static_cast<int>(i));
      t = RssTerm{static_cast<int>(i), reps_[i]->pid(), role, now};
    }
    const int64_t kib = reps_[i]->RssKib();
    if (kib <= 0) continue;
    const double cpu = reps_[i]->CpuSeconds();
    if (t.warm_t < 0 && now >= t.start + o_.warmup) {
      t.warm_t = now;
      t.warm_kib = kib;
      t.warm_cpu = cpu;
      t.warm_jobs = acked_now_;
    }
    t.last_t = now;
    t.last_kib = kib;
    t.last_cpu = cpu;
    t.last_jobs = acked_now_;
  }
}

void SoakRun::CloseTerm(int i) {
  if (static_cast<size_t>(i) < open_.size() && open_[i].pid > 0) closed_.push_back(open_[i]);
  if (static_cast<size_t>(i) < open_.size()) open_[i] = RssTerm{};
}

// Kills the leader at random moments (gaps uniform in [0.5, 1.5] x --kill-every) once warm-up is over, only
// when every replica runs and the last takeover was seen; the killed one starts again 0.5-2 s later.
void SoakRun::MaybeKill(double now, double kills_until) {
  if (now < next_kill_ || now >= kills_until || kill_t_ >= 0) return;
  int leader = -1, up = 0;
  for (size_t i = 0; i < reps_.size(); ++i) {
    up += roles_[i] != 0 && restart_at_[i] == 0;
    if (roles_[i] == 200) leader = static_cast<int>(i);
  }
  if (leader < 0 || up < static_cast<int>(reps_.size())) return;
  Sample(now);
  CloseTerm(leader);
  reps_[leader]->Kill();
  ++kills_;
  roles_[leader] = 0;
  kill_t_ = now;
  killed_ = leader;
  restart_at_[leader] = now + std::uniform_real_distribution<double>(0.5, 2)(rng_);
  next_kill_ = now + o_.kill_every * std::uniform_real_distribution<double>(0.5, 1.5)(rng_);
}

Result<client::SoakFinalState> SoakRun::ReadFinal() {
  client::SoakFinalState f;
  // A little in the past, so that the service's clock (each replica's own) has passed it.
  f.to = static_cast<int64_t>(std::time(nullptr)) - 5;
  auto u = Call("GET", fmt::format("/api/v1/usage?group_by=job&to={}", f.to), {}, admin_);
  const nlohmann::json uj =
      u && u->status == 200 ? nlohmann::json::parse(u->body, nullptr, false) : nlohmann::json();
  if (!uj.is_object() || !uj.contains("rows") || !uj["rows"].is_array())
    return Status::Error("GET /api/v1/usage: " + (u ? u->body.substr(0, 200) : std::string("no answer")));
  for (const nlohmann::json& row : uj["rows"])
    if (row.is_object() && row.value("idle", false) == false && row.contains("job") &&
        row["job"].is_string() && row.contains("gpu_hours") && row["gpu_hours"].is_number())
      f.milli_gpu_s[row["job"].get<std::string>()] += std::llround(row["gpu_hours"].get<double>() * 3.6e6);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  std::string page;
  for (int n = 0; n < 100000; ++n) {
    auto r = Call(
        "GET", "/api/v1/jobs?page_size=1000" + (page.empty() ? "" : "&page_token=" + client::UrlEncode(page)),
        {}, admin_);
    const nlohmann::json j =
        r && r->status == 200 ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
    if (!j.is_object() || !j.contains("jobs") || !j["jobs"].is_array())
      return Status::Error("GET /api/v1/jobs: " + (r ? r->body.substr(0, 200) : std::string("no answer")));
    for (const nlohmann::json& job : j["jobs"]) f.jobs.push_back(job);
    page = j.value("next_page_token", "");
    if (page.empty()) break;
  }
  return f;
}

int SoakRun::Go() {
  const double length = o_.seconds > 0 ? o_.seconds : o_.minutes * 60;
  if (Status st = Setup(); !st.ok()) {
    fmt::print(stderr, "error: {}\n", st.message());
    return 2;
  }
  client::SoakLoadOptions lo;
  for (const auto& r : reps_) lo.urls.push_back(r->url());
  lo.token = token_;
  lo.clients = o_.clients;
  lo.ops_per_second = o_.rate;
  lo.seed = o_.seed;
  lo.key_prefix = prefix_;
  lo.usage_reads = o_.usage_reads;
  client::SoakLoad load(lo);
  load_ = &load;
  const double t0 = SoakNow();
  load.Start();
  next_kill_ =
      t0 + std::max(o_.warmup, o_.kill_every * std::uniform_real_distribution<double>(0.5, 1.5)(rng_));
  Monitor(t0 + length, t0 + length - o_.lease - 3);
  if (kill_t_ >= 0) Monitor(SoakNow() + o_.lease + 5, 0);  // the last takeover
  for (size_t i = 0; i < reps_.size(); ++i)
    if (restart_at_[i] > 0 && reps_[i]->Start().ok()) restart_at_[i] = 0;
  load.Stop();
  acked_now_ = load.acked_submissions();
  load_ = nullptr;
  Sample(SoakNow());
  for (size_t i = 0; i < open_.size(); ++i) CloseTerm(static_cast<int>(i));
  const double wall = SoakNow() - t0;
  client::SoakVerdict v;
  if (auto f = ReadFinal(); f.ok())
    v = client::VerifySoak(load.ledger(), prefix_, *f);
  else
    failures_.push_back("the final state: " + f.error());
  return Report(v, load, wall);
}

nlohmann::json SoakRssJson(const std::vector<RssTerm>& terms, double warmup, double limit_pct,
                           std::vector<std::string>* failures) {
  nlohmann::json list = nlohmann::json::array();
  double worst = 0;
  for (const RssTerm& t : terms) {
    if (t.warm_t < 0 || t.last_t - t.warm_t < warmup) continue;  // too short to judge
    const double ratio = static_cast<double>(t.last_kib) / static_cast<double>(t.warm_kib);
    worst = std::max(worst, ratio);
    list.push_back({{"replica", t.replica},
                    {"role", t.role},
                    {"seconds", std::round(t.last_t - t.start)},
                    {"warm_mib", t.warm_kib / 1024.0},
                    {"end_mib", t.last_kib / 1024.0},
                    {"ratio", ratio},
                    {"jobs_at_warm", t.warm_jobs},
                    {"jobs_at_end", t.last_jobs},
                    {"cpu_share", (t.last_cpu - t.warm_cpu) / (t.last_t - t.warm_t)}});
    if (ratio > 1 + limit_pct / 100)
      failures->push_back(
          fmt::format("replica {} ({}, {:.0f} s): RSS {:.1f} MiB at the end, {:.1f} MiB after "
                      "warm-up (+{:.1f} %)",
                      t.replica, t.role, t.last_t - t.start, t.last_kib / 1024.0, t.warm_kib / 1024.0,
                      (ratio - 1) * 100));
  }
  if (list.empty())
    failures->push_back("no replica held one role long enough to judge its RSS (2 x warm-up)");
  return {{"terms_judged", list.size()}, {"max_ratio", worst}, {"terms", list}};
}

nlohmann::json SoakOpsJson(const client::SoakCounts& c) {
  nlohmann::json ops = nlohmann::json::object();
  for (const auto& [name, s] : c.ops)
    ops[name] = {{"sent", s.sent},
                 {"acked", s.acked},
                 {"refused", s.refused},
                 {"unanswered", s.unanswered},
                 {"p50_ms", client::Percentile(s.ms, 0.5)},
                 {"p99_ms", client::Percentile(s.ms, 0.99)},
                 {"first_refused", s.first_refused}};
  return ops;
}

int SoakRun::Report(const client::SoakVerdict& v, const client::SoakLoad& load, double wall_s) {
  const client::SoakLedger ledger = load.ledger();
  const client::SoakCounts counts = load.counts();
  for (double t : takeovers_)
    if (t > o_.lease + 2)
      failures_.push_back(fmt::format("a takeover took {:.1f} s, over the lease + 2 s", t));
  if (kill_t_ >= 0) failures_.push_back("the last kill saw no takeover");
  if (!ledger.unacked_keys.empty())
    failures_.push_back(fmt::format("{} submissions were not acknowledged within their deadline (e.g. {})",
                                    ledger.unacked_keys.size(), *ledger.unacked_keys.begin()));
  const nlohmann::json rss = SoakRssJson(closed_, o_.warmup, o_.rss_limit_pct, &failures_);
  failures_.insert(failures_.end(), v.failures.begin(), v.failures.end());
  const double worst_takeover =
      takeovers_.empty() ? 0 : *std::max_element(takeovers_.begin(), takeovers_.end());
  nlohmann::json out = {{"seconds", std::round(wall_s)},
                        {"replicas", o_.replicas},
                        {"clients", o_.clients},
                        {"seed", o_.seed},
                        {"lease_s", o_.lease},
                        {"retain_ended", o_.retain_ended},
                        {"kills", kills_},
                        {"takeover_s", takeovers_},
                        {"takeover_max_s", worst_takeover},
                        {"operations", SoakOpsJson(counts)},
                        {"redirects", counts.redirects},
                        {"resends", counts.resends},
                        {"submissions_acknowledged", ledger.acked.size()},
                        {"changes_unanswered", ledger.ambiguous.size()},
                        {"jobs_checked", v.acked_checked},
                        {"changes_checked", v.changes_checked},
                        {"usage_checked", v.usage_checked},
                        {"preempted", v.preempted},
                        {"max_usage_diff_gpu_s", v.max_usage_diff_milli_s / 1000.0},
                        {"rss", rss},
                        {"failures", failures_},
                        {"ok", failures_.empty()}};
  if (o_.json) {
    fmt::print("{}\n", out.dump(2));
  } else {
    fmt::print(
        "soak: {:.0f} s, {} replicas, {} kills (takeover max {:.1f} s), {} submissions acknowledged, {} "
        "changes checked, usage of {} jobs reconciled (max diff {:.3f} GPU-s), RSS max ratio {:.3f} over {} "
        "terms\n",
        wall_s, o_.replicas, kills_, worst_takeover, ledger.acked.size(), v.changes_checked, v.usage_checked,
        v.max_usage_diff_milli_s / 1000.0, rss["max_ratio"].get<double>(), rss["terms_judged"].get<size_t>());
    for (const auto& [name, s] : out["operations"].items())
      fmt::print(
          "  {:<9} sent {:>7} acked {:>7} refused {:>5} unanswered {:>4} p50 {:.1f} ms p99 {:.1f} ms\n", name,
          s["sent"].get<int64_t>(), s["acked"].get<int64_t>(), s["refused"].get<int64_t>(),
          s["unanswered"].get<int64_t>(), s["p50_ms"].get<double>(), s["p99_ms"].get<double>());
    for (const std::string& f : failures_) fmt::print("FAIL: {}\n", f);
    fmt::print("{}\n", failures_.empty() ? "OK" : "FAILED");
  }
  if (!failures_.empty() && o_.keep) fmt::print(stderr, "logs kept in {}\n", dir_);
  return failures_.empty() ? 0 : 1;
}

}  // namespace

void RegisterBenchSoak(CLI::App& bench, int* exit_code) {
  auto o = std::make_shared<SoakOptions>();
  CLI::App* c =
      bench.add_subcommand("soak", "Replicas on PostgreSQL under mixed load while the leader is killed");
  c->add_option("--minutes", o->minutes, "length of the load")->check(CLI::Range(0.0, 1440.0));
  c->add_option("--seconds", o->seconds, "length of the load in seconds (instead of --minutes)")
      ->check(CLI::Range(0.0, 86400.0));
  c->add_option("--replicas", o->replicas, "tessera serve replicas")
      ->check(CLI::Range(2, 9))
      ->capture_default_str();
  c->add_option("--store", o->store,
                "a PostgreSQL URI to use (default: a private server started for the run)");
  c->add_option("--clients", o->clients, "client threads")->check(CLI::Range(1, 256))->capture_default_str();
  c->add_option("--rate", o->rate, "operations per second, all clients")
      ->check(CLI::Range(0.1, 100000.0))
      ->capture_default_str();
  c->add_option("--kill-every", o->kill_every, "mean seconds between kills of the leader")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  c->add_option("--warmup", o->warmup,
                "seconds before the first kill and into a role before its RSS is taken")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  c->add_option("--lease-seconds", o->lease, "the replicas' --lease-seconds")
      ->check(CLI::Range(1.0, 60.0))
      ->capture_default_str();
  c->add_option("--retain-ended", o->retain_ended,
                "the replicas' --retain-ended: ended jobs each keeps in memory (small, so that its memory is "
                "at its bound within the warm-up)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  c->add_option("--rss-limit", o->rss_limit_pct, "percent RSS may grow from warm-up to the end of a role")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  c->add_option("--seed", o->seed, "random seed (load and kill moments)")->capture_default_str();
  c->add_flag(
      "--no-usage-reads", [o](int64_t) { o->usage_reads = false; },
      "no usage queries: those operations list the jobs instead (to tell their memory from the rest)");
  c->add_flag("--json", o->json, "print JSON");
  c->add_flag("--keep", o->keep, "keep the work folder (replica logs) when something fails");
  c->callback([o, exit_code] {
    if (o->minutes <= 0 && o->seconds <= 0) {
      fmt::print(stderr, "error: give --minutes or --seconds\n");
      *exit_code = 2;
      return;
    }
    SoakRun run(*o);
    *exit_code = run.Go();
  });
}

}  // namespace tessera::cli
