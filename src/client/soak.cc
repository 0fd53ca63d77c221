// SoakLoad and VerifySoak (soak.h).
#include "client/soak.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>

#include "base/utc_time.h"

namespace tessera::client {

namespace {

using SoakClock = std::chrono::steady_clock;

struct SoakAnswer {
  int status = 0;  // 0: no answer
  std::string body, leader;
  nlohmann::json Json() const { return nlohmann::json::parse(body, nullptr, false); }
};

bool IsEndedState(const std::string& s) { return s == "Succeeded" || s == "Failed" || s == "Cancelled"; }

double MsSince(SoakClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(SoakClock::now() - t0).count();
}

}  // namespace

// One client: its own connections, random stream and jobs; records into the load's ledger.
class SoakClient {
 public:
  SoakClient(SoakLoad& load, int index)
      : load_(load), o_(load.o_), index_(index), rng_(o_.seed * 1000003 + index) {}

  void Run() {
    const double mean_gap_s = o_.clients / std::max(0.01, o_.ops_per_second);
    std::exponential_distribution<double> gap(1 / mean_gap_s);
    while (!load_.stop_.load()) {
      OneOperation();
      std::unique_lock<std::mutex> lock(load_.stop_mu_);
      load_.stop_cv_.wait_for(lock, std::chrono::duration<double>(gap(rng_)),
                              [&] { return load_.stop_.load(); });
    }
  }

 private:
  void OneOperation() {
    const int x = std::uniform_int_distribution<int>(0, 99)(rng_);
    if (x < 30 || own_.empty()) return Submit();
    if (x < 50 || !o_.usage_reads) return Read("list", "/api/v1/jobs?state=active&page_size=100");
    if (x < 65) return Read("get", "/api/v1/jobs/" + PickOwn());
    if (x < 75) return Cancel();
    if (x < 90) return ChangePriority();
    Read("usage", "/api/v1/usage?group_by=team");
  }

  std::string PickOwn() { return own_[std::uniform_int_distribution<size_t>(0, own_.size() - 1)(rng_)]; }

  void Submit() {
    const std::string key = fmt::format("{}{}-{}", o_.key_prefix, index_, next_++);
    const nlohmann::json body = {{"name", key},
                                 {"class", "training"},
                                 {"workers", 1},
                                 {"gpus_per_worker", std::uniform_int_distribution<int>(1, 2)(rng_)},
                                 {"memory_gib", 40},
                                 {"project", "soak"},
                                 {"duration_s", std::uniform_int_distribution<int>(2, 20)(rng_)}};
    bool ambiguous = false;
    const SoakAnswer a = Write("submit", "POST", "/api/v1/jobs", body.dump(), key, &ambiguous);
    const nlohmann::json j = a.Json();
    std::lock_guard<std::mutex> lock(load_.mu_);
    if (a.status / 100 == 2 && j.is_object() && j.contains("id") && j["id"].is_string()) {
      load_.ledger_.acked[key] = j["id"].get<std::string>();
      own_.push_back(j["id"].get<std::string>());
    } else {
      load_.ledger_.unacked_keys.insert(key);
    }
  }

  void Cancel() {
    const size_t i = std::uniform_int_distribution<size_t>(0, own_.size() - 1)(rng_);
    const std::string id = own_[i];
    own_.erase(own_.begin() + static_cast<std::ptrdiff_t>(i));  // never changed again
    bool ambiguous = false;
    Record(id, Write("cancel", "POST", "/api/v1/jobs/" + id + ":cancel", "", "", &ambiguous), ambiguous);
  }

  void ChangePriority() {
    static const char* const kClasses[] = {"training", "training-high", "best-effort"};
    const std::string id = PickOwn();
    const nlohmann::json body = {
        {"priority_class", kClasses[std::uniform_int_distribution<int>(0, 2)(rng_)]}};
    bool ambiguous = false;
    Record(id, Write("priority", "PATCH", "/api/v1/jobs/" + id, body.dump(), "", &ambiguous), ambiguous);
  }

  // The job an acknowledged change answered: its priority and, once ended, its state.
  void Record(const std::string& id, const SoakAnswer& a, bool ambiguous) {
    std::lock_guard<std::mutex> lock(load_.mu_);
    if (ambiguous) load_.ledger_.ambiguous.insert(id);
    if (a.status / 100 != 2) return;
    const nlohmann::json j = a.Json();
    if (!j.is_object()) return;
    if (j.contains("priority_class") && j["priority_class"].is_string())
      load_.ledger_.priority[id] = j["priority_class"].get<std::string>();
    if (j.contains("state") && j["state"].is_string() && IsEndedState(j["state"].get<std::string>()))
      load_.ledger_.ended[id] = j["state"].get<std::string>();
  }

  void Read(const std::string& op, const std::string& path) {
    const auto t0 = SoakClock::now();
    const std::string& url = o_.urls[std::uniform_int_distribution<size_t>(0, o_.urls.size() - 1)(rng_)];
    const SoakAnswer a = Send(url, "GET", path, "", "");
    std::lock_guard<std::mutex> lock(load_.mu_);
    SoakOpStats& s = load_.counts_.ops[op];
    ++s.sent;
    if (a.status == 200) {
      ++s.acked;
      s.ms.push_back(MsSince(t0));
    } else if (a.status == 0 || a.status == 503) {
      ++s.unanswered;
    } else {
      ++s.refused;
      if (s.first_refused.empty()) s.first_refused = fmt::format("{} {}", a.status, a.body.substr(0, 160));
    }
  }

  // A write: to the last known leader (else the replicas in turn), following `Tessera-Leader`, resent
  // after no answer, a 5xx or a 503 naming no leader until acknowledged, refused (4xx) or past the deadline.
  // `ambiguous`: some attempt went unanswered and none was acknowledged, so it may or may not have landed.
  SoakAnswer Write(const std::string& op, const std::string& method, const std::string& path,
                   const std::string& body, const std::string& key, bool* ambiguous) {
    const auto t0 = SoakClock::now();
    const auto deadline = t0 + std::chrono::duration<double>(o_.write_deadline_s);
    bool unanswered = false;
    int64_t redirects = 0, resends = 0;
    SoakAnswer a;
    for (int attempt = 0; SoakClock::now() < deadline; ++attempt) {
      if (leader_.empty()) leader_ = o_.urls[static_cast<size_t>(turn_++) % o_.urls.size()];
      a = Send(leader_, method, path, body, key);
      if (a.status / 100 == 2 || (a.status / 100 == 4)) break;
      if (a.status == 503 && !a.leader.empty() && a.leader != leader_) {
        leader_ = a.leader;
        ++redirects;
        continue;
      }
      unanswered = unanswered || a.status != 503;
      ++resends;
      leader_.clear();
      std::this_thread::sleep_for(std::chrono::milliseconds(a.status == 503 ? 300 : 100));
    }
    *ambiguous = unanswered && a.status / 100 != 2;
    std::lock_guard<std::mutex> lock(load_.mu_);
    SoakOpStats& s = load_.counts_.ops[op];
    ++s.sent;
    load_.counts_.redirects += redirects;
    load_.counts_.resends += resends;
    if (a.status / 100 == 2) {
      ++s.acked;
      s.ms.push_back(MsSince(t0));
    } else if (a.status / 100 == 4) {
      ++s.refused;
      if (s.first_refused.empty()) s.first_refused = fmt::format("{} {}", a.status, a.body.substr(0, 160));
    } else {
      ++s.unanswered;
    }
    return a;
  }

  SoakAnswer Send(const std::string& url, const std::string& method, const std::string& path,
                  const std::string& body, const std::string& key) {
    std::unique_ptr<httplib::Client>& c = conns_[url];
    if (!c) {
      c = std::make_unique<httplib::Client>(url);
      c->set_connection_timeout(2);
      c->set_read_timeout(10);
      c->set_keep_alive(true);
    }
    httplib::Headers h = {{"Authorization", "Bearer " + o_.token}};
    if (!key.empty()) h.emplace("Idempotency-Key", key);
    httplib::Result r = method == "GET"    ? c->Get(path, h)
                        : method == "POST" ? c->Post(path, h, body, "application/json")
                                           : c->Patch(path, h, body, "application/json");
    SoakAnswer a;
    if (!r) {
      c.reset();  // a fresh connection next time
      return a;
    }
    a.status = r->status;
    a.body = r->body;
    a.leader = r->get_header_value("Tessera-Leader");
    return a;
  }

  SoakLoad& load_;
  const SoakLoadOptions& o_;
  int index_;
  std::mt19937_64 rng_;
  int64_t next_ = 0;
  int turn_ = 0;
  std::string leader_;
  std::vector<std::string> own_;  // this client's acknowledged jobs it has not cancelled
  std::map<std::string, std::unique_ptr<httplib::Client>> conns_;
};

SoakLoad::SoakLoad(SoakLoadOptions options) : o_(std::move(options)) {}

SoakLoad::~SoakLoad() { Stop(); }

void SoakLoad::Start() {
  if (o_.urls.empty()) return;
  for (int i = 0; i < o_.clients; ++i)
    threads_.emplace_back([this, i] {
      SoakClient client(*this, i);
      client.Run();
    });
}

void SoakLoad::Stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_.store(true);
    stop_cv_.notify_all();
  }
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

SoakLedger SoakLoad::ledger() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ledger_;
}

int64_t SoakLoad::acked_submissions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(ledger_.acked.size());
}

SoakCounts SoakLoad::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

// ----------------------------------------------------------------------------------------------- verdict

namespace {

std::string JsonText(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// Unix seconds of an ISO 8601 UTC time "YYYY-MM-DDTHH:MM:SSZ"; -1 for null or unreadable.
int64_t SoakUnixTime(const nlohmann::json& j, const char* key) {
  auto t = ParseIsoUtc(JsonText(j, key));
  return t.ok() ? *t : -1;
}

class SoakJudge {
 public:
  void Fail(std::string line) {
    if (v.failures.size() < 20) v.failures.push_back(std::move(line));
    ++failed;
  }
  SoakVerdict v;
  int64_t failed = 0;
};

void JudgeWrites(const SoakLedger& ledger, const std::string& prefix, const std::vector<nlohmann::json>& jobs,
                 SoakJudge& judge) {
  std::map<std::string, std::vector<const nlohmann::json*>> by_name;
  std::map<std::string, const nlohmann::json*> by_id;
  for (const nlohmann::json& j : jobs) {
    if (!j.is_object()) continue;
    by_name[JsonText(j, "name")].push_back(&j);
    by_id[JsonText(j, "id")] = &j;
  }
  for (const auto& [key, id] : ledger.acked) {
    ++judge.v.acked_checked;
    auto it = by_name.find(key);
    if (it == by_name.end())
      judge.Fail(fmt::format("acknowledged submission {} (job {}) is missing", key, id));
    else if (it->second.size() == 1 && JsonText(*it->second[0], "id") != id)
      judge.Fail(fmt::format("submission {} was acknowledged as job {} but is job {}", key, id,
                             JsonText(*it->second[0], "id")));
  }
  for (const auto& [name, list] : by_name)
    if (name.starts_with(prefix) && list.size() > 1)
      judge.Fail(fmt::format("{} jobs are named {} (one submission key)", list.size(), name));
  auto check = [&](const std::map<std::string, std::string>& want, const char* field) {
    for (const auto& [id, value] : want) {
      if (ledger.ambiguous.count(id)) continue;
      ++judge.v.changes_checked;
      auto it = by_id.find(id);
      const std::string got = it == by_id.end() ? "(no job)" : JsonText(*it->second, field);
      if (got != value)
        judge.Fail(fmt::format("job {}: {} is {}, an acknowledged write answered {}", id, field, got, value));
    }
  };
  check(ledger.priority, "priority_class");
  check(ledger.ended, "state");
}

// A job's usage against its run interval clipped at `to`: equal within one second per GPU, or, for a job
// that was preempted (several runs; started_at is its last), at most its GPUs times `to` minus its
// submission.
void JudgeUsage(const SoakFinalState& f, const std::string& prefix, SoakJudge& judge) {
  for (const nlohmann::json& j : f.jobs) {
    if (!j.is_object() || !JsonText(j, "name").starts_with(prefix)) continue;
    const std::string id = JsonText(j, "id");
    const int64_t gpus = j.contains("gpus") && j["gpus"].is_number_integer() ? j["gpus"].get<int64_t>() : 0;
    const int64_t start = SoakUnixTime(j, "started_at"), end_at = SoakUnixTime(j, "finished_at");
    auto it = f.milli_gpu_s.find(id);
    const int64_t used = it == f.milli_gpu_s.end() ? 0 : it->second;
    if (JsonText(j, "message").find("preempt") != std::string::npos) {
      ++judge.v.preempted;
      const int64_t bound = gpus * 1000 * std::max<int64_t>(0, f.to - SoakUnixTime(j, "submitted_at"));
      if (used > bound)
        judge.Fail(fmt::format("job {} (preempted) used {} milli-GPU-s, more than {}", id, used, bound));
      continue;
    }
    int64_t want = 0;
    if (start >= 0 && start < f.to)
      want = gpus * 1000 * ((end_at >= 0 ? std::min(end_at, f.to) : f.to) - start);
    const int64_t diff = std::llabs(used - want);
    ++judge.v.usage_checked;
    judge.v.max_usage_diff_milli_s = std::max(judge.v.max_usage_diff_milli_s, diff);
    if (diff > gpus * 1000)
      judge.Fail(fmt::format("job {} ({} GPUs, {} to {}): usage {} milli-GPU-s, its run interval {}", id,
                             gpus, JsonText(j, "started_at"), JsonText(j, "finished_at"), used, want));
  }
}

}  // namespace

SoakVerdict VerifySoak(const SoakLedger& ledger, const std::string& key_prefix,
                       const SoakFinalState& final_state) {
  SoakJudge judge;
  JudgeWrites(ledger, key_prefix, final_state.jobs, judge);
  JudgeUsage(final_state, key_prefix, judge);
  if (judge.failed > static_cast<int64_t>(judge.v.failures.size()))
    judge.v.failures.push_back(fmt::format("... {} failures in all", judge.failed));
  return judge.v;
}

}  // namespace tessera::client
