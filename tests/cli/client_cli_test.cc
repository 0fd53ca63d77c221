// `tessera job|queue|usage` and `tessera bench api` against a real `tessera serve` over HTTP with a real
// SQLite file: output, JSON, exit status (0, 1 refused, 2 usage or connection), configuration sources.
#include <gtest/gtest.h>

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

TEST_F(ClientCliTest, BenchApiSubmitsDistinctDurableJobs) {
  CliRun r = Tessera("bench api --url " + server_->Url() + " --token " + token_ + " --requests 60 --concurrency 4 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["errors"], 0);
  EXPECT_GT(j["submissions_per_second"].get<double>(), 0);
  EXPECT_LE(j["p50_ms"].get<double>(), j["p99_ms"].get<double>());
  EXPECT_TRUE(Eventually([&] { return nlohmann::json::parse(Cli("job list --all --json").out)["jobs"].size() == 60; }));
}

}  // namespace
}  // namespace tessera
