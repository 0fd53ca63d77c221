// `tessera job|queue|usage` and `tessera bench api` against a real `tessera serve` over HTTP with a real
// SQLite file: output, JSON, exit status (0, 1 refused, 2 usage or connection), configuration sources.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_runner.h"
#include "testing/serve_process.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;
using testing::ServeProcess;
using testing::Tessera;

class ClientCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera-client-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    server_ = std::make_unique<ServeProcess>(dir_);
    ASSERT_TRUE(server_->Start());
    ASSERT_EQ(server_->AdminPost("/api/v1/teams", {{"name", "vision"}, {"guaranteed_gpus", 8}})["name"], "vision");
    token_ = server_->AdminPost("/api/v1/users", {{"name", "ana"}, {"team", "vision"}, {"role", "team-lead"}})
                 .value("token", "");
    ASSERT_FALSE(token_.empty());
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }
  // Runs tessera with the server and token in the environment and HOME in the test's folder.
  CliRun Cli(const std::string& args, bool with_stderr = false) {
    return Tessera(args, with_stderr,
                   "TESSERA_SERVER=" + server_->Url() + " TESSERA_TOKEN=" + token_ + " HOME=" + dir_.string());
  }
  std::string WriteFile(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  fs::path dir_;
  std::unique_ptr<ServeProcess> server_;
  std::string token_;
};

// Polls `f` for up to 5 s (lists may lag the last acknowledged write by up to 2 s).
template <typename F>
bool Eventually(F f) {
  for (int i = 0; i < 50; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

TEST_F(ClientCliTest, SubmitListGetPriorityCancel) {
  const std::string spec = WriteFile("job.yaml",
                                     "name: finetune\nclass: training\nproject: cli\nworkers: 1\ngpus_per_worker: 2\n"
                                     "memory_gib: 70\nduration_s: 7200\n");
  CliRun r = Cli("job submit -f " + spec + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto job = nlohmann::json::parse(r.out);
  const std::string id = job.at("id").get<std::string>();
  EXPECT_EQ(job["name"], "finetune");
  EXPECT_EQ(job["team"], "vision");

  r = Cli("job get " + id + " --json");
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(nlohmann::json::parse(r.out)["id"], id);
  r = Cli("job get " + id);
  EXPECT_NE(r.out.find("name: finetune"), std::string::npos) << r.out;

  EXPECT_TRUE(Eventually([&] {
    const auto l = nlohmann::json::parse(Cli("job list --json").out, nullptr, false);
    return l.is_object() && l["jobs"].size() == 1 && l["jobs"][0]["id"] == id;
  }));
  r = Cli("job list");
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')).find("JOBID"), 0u) << r.out;
  EXPECT_NE(r.out.find("NODES(REASON)"), std::string::npos);
  EXPECT_NE(r.out.find(id), std::string::npos);
  EXPECT_NE(r.out.find("finetune"), std::string::npos);

  r = Cli("job priority " + id + " inference --json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["priority_class"], "inference");
  r = Cli("job priority " + id + " no-such-class", true);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("no-such-class"), std::string::npos) << r.out;

  r = Cli("job cancel " + id, true);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Cancelled"), std::string::npos) << r.out;
  EXPECT_EQ(nlohmann::json::parse(Cli("job get " + id + " --json").out)["state"], "Cancelled");
  EXPECT_TRUE(Eventually([&] { return nlohmann::json::parse(Cli("job list --json").out)["jobs"].empty(); }));
  EXPECT_TRUE(Eventually([&] { return nlohmann::json::parse(Cli("job list --all --json").out)["jobs"].size() == 1; }));
}

TEST_F(ClientCliTest, RefusalsExitOneWithTheApiMessage) {
  CliRun r = Cli("job get 999999", true);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("error: no job"), std::string::npos) << r.out;
  const std::string bad = WriteFile("bad.json", R"({"name": "x", "class": "training", "workers": 1,
                                                    "gpus_per_worker": 9, "memory_gib": 10})");
  r = Cli("job submit -f " + bad, true);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("gpus_per_worker"), std::string::npos) << r.out;
  EXPECT_TRUE(nlohmann::json::parse(Cli("job list --all --json").out)["jobs"].empty());
}

TEST_F(ClientCliTest, UsageAndConnectionErrorsExitTwo) {
  EXPECT_EQ(Cli("job", true).code, 2);
  EXPECT_EQ(Cli("job get", true).code, 2);
  CliRun r = Cli("job submit -f " + (dir_ / "missing.yaml").string(), true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("missing.yaml"), std::string::npos) << r.out;
  r = Cli("queue --server http://127.0.0.1:1", true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("cannot reach"), std::string::npos) << r.out;
  r = Tessera("queue --server " + server_->Url() + " --token wrong", true);
  EXPECT_EQ(r.code, 1) << r.out;
}

TEST_F(ClientCliTest, QueueAndUsage) {
  CliRun r = Cli("queue");
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(r.out.rfind("POS", 0), 0u) << r.out;
  r = Cli("queue --json");
  EXPECT_TRUE(nlohmann::json::parse(r.out)["jobs"].is_array());
  r = Cli("usage --csv");
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(r.out.rfind("team,project,job,tier", 0), 0u) << r.out;
  r = Cli("usage --from 2020-01-01T00:00:00Z");
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(r.out.rfind("TEAM", 0), 0u) << r.out;
  r = Cli("usage --from yesterday", true);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("from"), std::string::npos) << r.out;
}

TEST_F(ClientCliTest, ConfigFileAndFlags) {
  fs::create_directories(dir_ / ".config/tessera");
  std::ofstream(dir_ / ".config/tessera/config.yaml") << "server: " << server_->Url() << "\ntoken: " << token_ << "\n";
  CliRun r = Tessera("queue", true, "env -u TESSERA_SERVER -u TESSERA_TOKEN HOME=" + dir_.string());
  EXPECT_EQ(r.code, 0) << r.out;
  r = Tessera("queue --token bad", true, "env -u TESSERA_SERVER -u TESSERA_TOKEN HOME=" + dir_.string());
  EXPECT_EQ(r.code, 1) << r.out;  // the flag wins over the file
  r = Tessera("queue", true, "env -u TESSERA_SERVER -u TESSERA_TOKEN HOME=" + dir_.string() + "/none");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("no API token"), std::string::npos) << r.out;
}

TEST_F(ClientCliTest, TeamsAndQuotasFromTheCli) {
  const std::string admin = "TESSERA_SERVER=" + server_->Url() + " TESSERA_TOKEN=" + server_->AdminToken();
  CliRun r = Tessera("team create nlp --guaranteed 4 --limit 8 --json", true, admin);
  ASSERT_EQ(r.code, 0) << r.out;
  auto t = nlohmann::json::parse(r.out);
  EXPECT_EQ(t["name"], "nlp");
  EXPECT_EQ(t["guaranteed_gpus"], 4);
  EXPECT_EQ(t["limit_gpus"], 8);
  r = Tessera("team set nlp --limit 12 --json", true, admin);
  ASSERT_EQ(r.code, 0) << r.out;
  t = nlohmann::json::parse(r.out);
  EXPECT_EQ(t["limit_gpus"], 12);
  EXPECT_EQ(t["guaranteed_gpus"], 4);  // untouched
  r = Tessera("team list", true, admin);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("TEAM", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("nlp"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vision"), std::string::npos) << r.out;
  EXPECT_EQ(Tessera("team set nlp", true, admin).code, 2);  // nothing to change
  r = Cli("team create other --guaranteed 1", true);      // a team lead is not an admin
  EXPECT_EQ(r.code, 1) << r.out;
  r = Cli("team set vision --limit 100", true);
  EXPECT_EQ(r.code, 1) << r.out;
}

TEST_F(ClientCliTest, UsersAndTokensFromTheCli) {
  CliRun r = Cli("user create bo --team vision --role member --json", true);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string first = nlohmann::json::parse(r.out).value("token", "");
  ASSERT_FALSE(first.empty());
  const std::string url = "TESSERA_SERVER=" + server_->Url() + " TESSERA_TOKEN=";
  EXPECT_EQ(Tessera("queue", true, url + first).code, 0);

  r = Cli("user token bo", true);
  ASSERT_EQ(r.code, 0) << r.out;
  const size_t at = r.out.find("token: ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string second = r.out.substr(at + 7, r.out.find('\n', at) - at - 7);
  EXPECT_NE(second, first);
  EXPECT_EQ(Tessera("queue", true, url + first).code, 1);  // the old token stopped working
  EXPECT_EQ(Tessera("queue", true, url + second).code, 0);

  r = Cli("user revoke bo", true);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("revoked"), std::string::npos) << r.out;
  EXPECT_EQ(Tessera("queue", true, url + second).code, 1);
  r = Cli("user list");
  ASSERT_EQ(r.code, 0);
  const size_t row = r.out.find("bo ");
  ASSERT_NE(row, std::string::npos) << r.out;
  EXPECT_NE(r.out.substr(row, r.out.find('\n', row) - row).find("revoked"), std::string::npos) << r.out;
  EXPECT_EQ(Cli("user create eve --team vision --role admin", true).code, 1);  // a lead makes no admins
}

TEST_F(ClientCliTest, WhatIfClusterAndFocusExport) {
  const std::string big = WriteFile("big.yaml",
                                    "name: big\nclass: training\nworkers: 4\ngpus_per_worker: 8\nmemory_gib: 70\n"
                                    "duration_s: 86400\n");
  const std::string next = WriteFile("next.yaml",
                                     "name: next\nclass: training\nworkers: 2\ngpus_per_worker: 8\nmemory_gib: 70\n"
                                     "duration_s: 3600\n");
  ASSERT_EQ(Cli("job submit -f " + big).code, 0);
  ASSERT_TRUE(Eventually([&] {
    const auto l = nlohmann::json::parse(Cli("job list --json").out, nullptr, false);
    return l.is_object() && l["jobs"].size() == 1 && l["jobs"][0]["state"] == "Running";
  }));
  CliRun r = Cli("job submit -f " + next + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string id = nlohmann::json::parse(r.out)["id"];
  ASSERT_TRUE(Eventually([&] { return Cli("job whatif " + id, true).code == 0; }));
  r = Cli("job whatif " + id + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto w = nlohmann::json::parse(r.out);
  ASSERT_GE(w["options"].size(), 2u) << r.out;
  EXPECT_EQ(w["options"][0]["fraction"], 1);
  EXPECT_EQ(w["options"][0]["gpus"], 16);
  EXPECT_LT(w["options"][1]["gpus"].get<int>(), 16);
  r = Cli("job whatif " + id);
  EXPECT_EQ(r.out.rfind("IF IT ASKED FOR", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("16"), std::string::npos) << r.out;

  r = Cli("cluster");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("4 nodes, 32 GPUs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NODE"), std::string::npos) << r.out;
  r = Cli("usage --focus");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string header = r.out.substr(0, r.out.find('\n'));
  EXPECT_NE(header.find("BilledCost"), std::string::npos) << header;
  EXPECT_NE(header.find("ChargePeriodStart"), std::string::npos) << header;
  EXPECT_EQ(Cli("usage --focus --csv", true).code, 2);
}

TEST_F(ClientCliTest, NodesFromTheCli) {
  const std::string admin = "TESSERA_SERVER=" + server_->Url() + " TESSERA_TOKEN=" + server_->AdminToken();
  const std::string node = WriteFile("node.yaml",
                                     "name: extra\ngpu: h100-80gb\ngpus: 8\ncpu: 192\nmemory_gib: 2048\n"
                                     "interconnect: nvswitch\nleaf: leaf-0\nspine: s\ntier: reserved\n");
  CliRun r = Tessera("node add " + node + " --json", true, admin);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["state"], "ready");
  r = Tessera("node cordon extra", true, admin);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("extra  cordoned"), std::string::npos) << r.out;
  r = Tessera("node drain node-000", true, admin);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("node-000  drained"), std::string::npos) << r.out;
  r = Tessera("node list", true, admin);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("NODE", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("extra"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("node-003  ready"), std::string::npos) << r.out;
  r = Tessera("node uncordon node-000", true, admin);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("node-000  ready"), std::string::npos) << r.out;
  r = Tessera("node remove extra", true, admin);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "removed node extra\n");
  EXPECT_EQ(Tessera("node remove extra", true, admin).code, 1);  // gone: the API says 404
  EXPECT_EQ(Cli("node list", true).code, 1);                     // a team lead is not an admin
  EXPECT_EQ(Tessera("node add " + (dir_ / "missing.yaml").string(), true, admin).code, 2);
  r = Tessera("node add " + WriteFile("bad.yaml", "name: bad\ngpus: nine\n"), true, admin);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("gpus"), std::string::npos) << r.out;
}

TEST_F(ClientCliTest, BenchApiSubmitsDistinctDurableJobs) {
  const std::string csv = (dir_ / "latencies.csv").string();
  CliRun r = Tessera("bench api --url " + server_->Url() + " --token " + token_ +
                     " --requests 60 --concurrency 4 --json --latencies " + csv);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["errors"], 0);
  // One line per acknowledged submission: when it was sent (the system clock, ms) and its latency.
  std::ifstream in(csv);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(line, "sent_unix_ms,latency_ms");
  int rows = 0;
  double max_ms = 0;
  const double now_ms =
      std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch()).count();
  while (std::getline(in, line)) {
    const size_t comma = line.find(',');
    ASSERT_NE(comma, std::string::npos) << line;
    const double sent = std::stod(line.substr(0, comma)), ms = std::stod(line.substr(comma + 1));
    EXPECT_GT(sent, now_ms - 600'000) << line;
    EXPECT_LE(sent, now_ms) << line;
    EXPECT_GE(ms, 0) << line;
    max_ms = std::max(max_ms, ms);
    ++rows;
  }
  EXPECT_EQ(rows, 60);
  EXPECT_GE(max_ms + 0.001, j["p99_ms"].get<double>());  // the file keeps three decimals
  CliRun unwritable = Tessera("bench api --url http://127.0.0.1:1 --token x --requests 1 --latencies " +
                                  (dir_ / "no" / "such" / "dir.csv").string(),
                              true);
  EXPECT_EQ(unwritable.code, 2);
  EXPECT_NE(unwritable.out.find("--latencies: cannot write"), std::string::npos) << unwritable.out;
  EXPECT_GT(j["submissions_per_second"].get<double>(), 0);
  EXPECT_LE(j["p50_ms"].get<double>(), j["p99_ms"].get<double>());
  EXPECT_TRUE(Eventually([&] { return nlohmann::json::parse(Cli("job list --all --json").out)["jobs"].size() == 60; }));
}

TEST_F(ClientCliTest, BenchApiCountsRefusalsAndUnreachableServers) {
  const std::string refused_args = "bench api --url " + server_->Url() + " --token wrong --requests 10 --concurrency 3";
  CliRun refused = Tessera(refused_args + " --json");
  EXPECT_EQ(refused.code, 1) << refused.out;
  EXPECT_EQ(nlohmann::json::parse(refused.out)["errors"], 10);
  CliRun said = Tessera(refused_args, true);
  EXPECT_NE(said.out.find("first error: HTTP 401"), std::string::npos) << said.out;
  CliRun unreachable = Tessera("bench api --url http://127.0.0.1:1 --token x --requests 5 --concurrency 2", true);
  EXPECT_EQ(unreachable.code, 1) << unreachable.out;
  EXPECT_NE(unreachable.out.find("5 errors"), std::string::npos) << unreachable.out;
}

}  // namespace
}  // namespace tessera
