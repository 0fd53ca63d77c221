// `tessera serve` as a real process over real HTTP(S) with a real SQLite file: authentication and errors,
// TLS with a self-signed certificate made here, SIGTERM, and kill -9 during a burst of submissions.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "testing/serve_process.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

using testing::ServeProcess;

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessera-server-" + std::to_string(getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "cluster.yaml")
        << "name: t\ndefaults: {gpu: h100-80gb, gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch, "
           "spine: s, tier: reserved}\nnodes:\n  - {name: node, count: 4, leaf: leaf-0}\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Creates team `vision` and a member; returns the member's token.
  std::string Member(const ServeProcess& s) {
    const std::string admin = s.AdminToken();
    auto t = s.Post("/api/v1/teams", {{"name", "vision"}, {"guaranteed_gpus", 16}}, admin);
    EXPECT_TRUE(t && t->status == 201);
    auto u = s.Post("/api/v1/users", {{"name", "ana"}, {"team", "vision"}, {"role", "member"}}, admin);
    EXPECT_TRUE(u && u->status == 201);
    return u ? nlohmann::json::parse(u->body).value("token", "") : "";
  }
  static nlohmann::json Job(const std::string& name, int gpus = 1) {
    return {{"name", name}, {"class", "training"}, {"gpus_per_worker", gpus}, {"memory_gib", 40}, {"duration_s", 36000}};
  }
  fs::path dir_;
};

// Each thread of a process: its name and nice value (/proc/PID/task/TID/stat, fields 2 and 19).
std::vector<std::pair<std::string, int>> ThreadNices(pid_t pid) {
  std::vector<std::pair<std::string, int>> out;
  for (const auto& t : fs::directory_iterator(fs::path("/proc") / std::to_string(pid) / "task")) {
    std::ifstream f(t.path() / "stat");
    std::string line;
    std::getline(f, line);
    const size_t open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    for (int k = 3; k <= 19 && rest >> field; ++k)
      if (k == 19) out.emplace_back(line.substr(open + 1, close - open - 1), std::stoi(field));
  }
  return out;
}

TEST_F(ServerTest, AuthErrorsAndSigterm) {
  ServeProcess s(dir_, {});
  ASSERT_TRUE(s.Start());
  EXPECT_EQ(fs::status(dir_ / "t.db.admin-token").permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  const std::string tok = Member(s);
  ASSERT_FALSE(tok.empty());
  EXPECT_EQ(s.Get("/healthz", "")->status, 200);
  EXPECT_EQ(s.Post("/api/v1/jobs", Job("a"), "")->status, 401);
  EXPECT_EQ(s.Post("/api/v1/jobs", Job("a"), "tsr_00000000000000000000000000000000")->status, 401);
  EXPECT_EQ(s.Post("/api/v1/teams", {{"name", "x"}}, tok)->status, 403);
  auto bad = s.Post("/api/v1/jobs", Job("a", 9), tok);
  ASSERT_EQ(bad->status, 400);
  EXPECT_EQ(nlohmann::json::parse(bad->body)["error"]["field"], "gpus_per_worker");
  auto big = s.Post("/api/v1/jobs", {{"name", std::string(2 << 20, 'x')}}, tok);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  auto ok = s.Post("/api/v1/jobs", Job("a"), tok);
  ASSERT_EQ(ok->status, 201);
  const std::string id = nlohmann::json::parse(ok->body)["id"];
  auto got = s.Get("/api/v1/jobs/" + id, tok);
  ASSERT_EQ(got->status, 200);
  EXPECT_EQ(nlohmann::json::parse(got->body)["name"], "a");
  EXPECT_EQ(s.Get("/api/v1/jobs/999999", tok)->status, 404);
  auto metrics = s.Get("/metrics", "");
  ASSERT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("tessera_cycle_duration_seconds_bucket{le=\"+Inf\"}"), std::string::npos);
  // Every cycle holds the lock once to build its input and at least once to apply its plan.
  auto count = [&](const std::string& series) {
    const size_t at = metrics->body.find("\n" + series + " ");  // a sample line, not its # HELP
    return at == std::string::npos ? -1 : std::stoll(metrics->body.substr(at + series.size() + 2));
  };
  const int64_t cycles = count("tessera_cycle_duration_seconds_count");
  EXPECT_GE(cycles, 0);
  EXPECT_GE(count("tessera_cycle_lock_held_seconds_count{phase=\"input\"}"), cycles);
  EXPECT_GE(count("tessera_cycle_lock_held_seconds_count{phase=\"apply\"}"), cycles);
  EXPECT_GE(count("tessera_jobs_in_memory"), 1);  // job "a"
  EXPECT_NE(metrics->body.find("tessera_cycle_lock_held_seconds_bucket{phase=\"apply\",le=\"0.0001\"}"),
            std::string::npos);
  // Request threads run two nice levels below the store's writer, which every submission waits for.
  int writer = 100, lowest = -100;
  for (const auto& [name, nice] : ThreadNices(s.pid())) {
    if (name == "tessera-writer") writer = nice;
    if (name == "tessera") lowest = std::max(lowest, nice);
  }
  EXPECT_NE(writer, 100);
  EXPECT_EQ(lowest, std::min(19, writer + 2)) << "a worker thread that answered requests";
  EXPECT_EQ(s.Stop(SIGTERM), 0);
}

TEST_F(ServerTest, ServesHttpsWithASelfSignedCertificate) {
  const std::string cert = (dir_ / "cert.pem").string(), key = (dir_ / "key.pem").string();
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -keyout '" + key +
                          "' -out '" + cert + "' >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl CLI needed (scripts/install-deps.sh)";
  ServeProcess s(dir_, {"--tls-cert", cert, "--tls-key", key}, /*tls=*/true);
  ASSERT_TRUE(s.Start());
  const std::string tok = Member(s);
  auto r = s.Post("/api/v1/jobs", Job("tls"), tok);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(s.Stop(SIGTERM), 0);
}

TEST_F(ServerTest, KillNineLosesNoAcknowledgedJob) {
  auto s = std::make_unique<ServeProcess>(dir_, std::vector<std::string>{"--speed", "60"});
  ASSERT_TRUE(s->Start());
  const std::string tok = Member(*s);
  std::mutex mu;
  std::map<std::string, std::string> acked;  // key -> id
  std::atomic<bool> stop{false};
  std::atomic<int> next{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t)
    clients.emplace_back([&] {
      while (!stop) {
        const int i = next++;
        const std::string key = "k-" + std::to_string(i);
        auto r = s->Post("/api/v1/jobs", Job("j" + std::to_string(i), 1 + i % 4), tok, key);
        if (r && r->status == 201) {
          std::lock_guard<std::mutex> lock(mu);
          acked[key] = nlohmann::json::parse(r->body)["id"];
        }
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  s->Stop(SIGKILL);
  stop = true;
  for (auto& c : clients) c.join();
  ASSERT_GT(acked.size(), 10u);
  s = std::make_unique<ServeProcess>(dir_, std::vector<std::string>{"--speed", "60"});
  ASSERT_TRUE(s->Start());
  std::set<std::string> ids;
  std::string page;
  std::map<std::string, std::vector<std::pair<std::string, int>>> gpus_by_job;
  do {
    auto r = s->Get("/api/v1/jobs?page_size=1000" + (page.empty() ? "" : "&page_token=" + page), tok);
    ASSERT_EQ(r->status, 200);
    auto j = nlohmann::json::parse(r->body);
    for (const auto& job : j["jobs"]) {
      ids.insert(job["id"].get<std::string>());
      for (const auto& p : job["placements"])
        for (const auto& g : p["gpus"]) gpus_by_job[job["id"]].push_back({p["node"], g["index"]});
    }
    page = j["next_page_token"];
  } while (!page.empty());
  for (const auto& [key, id] : acked) EXPECT_TRUE(ids.count(id)) << key << " -> " << id << " lost";
  std::set<std::pair<std::string, int>> held;
  for (const auto& [id, gpus] : gpus_by_job)
    for (const auto& g : gpus) EXPECT_TRUE(held.insert(g).second) << "GPU allocated twice: " << g.first << "/" << g.second;
  // Resubmitting an acknowledged key makes no second job.
  const auto& [key, id] = *acked.begin();
  const int i = std::stoi(key.substr(2));
  auto again = s->Post("/api/v1/jobs", Job("j" + std::to_string(i), 1 + i % 4), tok, key);
  ASSERT_TRUE(again);
  EXPECT_EQ(nlohmann::json::parse(again->body)["id"], id);
  EXPECT_EQ(s->Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace tessera
