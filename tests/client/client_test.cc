// src/client without a server: configuration precedence, workload files, tables, percentiles.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "client/api_client.h"
#include "client/format.h"
#include "client/load.h"

namespace tessera::client {
namespace {

namespace fs = std::filesystem;

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& k) { return vars.count(k) ? vars.at(k) : std::string(); };
}

TEST(ResolveConfigTest, FlagsThenEnvironmentThenFile) {
  const fs::path file = fs::temp_directory_path() / ("tessera-client-config-" + std::to_string(getpid()) + ".yaml");
  std::ofstream(file) << "server: http://file:1/\ntoken: file-token\n";
  auto c = ResolveConfig("", "", Env({}), file.string());
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->server, "http://file:1");  // trailing slash dropped
  EXPECT_EQ(c->token, "file-token");
  c = ResolveConfig("", "", Env({{"TESSERA_SERVER", "http://env:2"}, {"TESSERA_TOKEN", "env-token"}}), file.string());
  EXPECT_EQ(c->server, "http://env:2");
  EXPECT_EQ(c->token, "env-token");
  c = ResolveConfig("http://flag:3", "flag-token", Env({{"TESSERA_TOKEN", "env-token"}}), file.string());
  EXPECT_EQ(c->server, "http://flag:3");
  EXPECT_EQ(c->token, "flag-token");
  std::ofstream(file) << "token: [not, a, string]\n";
  c = ResolveConfig("", "", Env({}), file.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().find("'token'"), std::string::npos) << c.error();
  fs::remove(file);
  c = ResolveConfig("", "", Env({}), file.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().find("no API token"), std::string::npos);
  c = ResolveConfig("", "t", Env({}), "");
  EXPECT_EQ(c->server, "http://127.0.0.1:8080");
  EXPECT_EQ(DefaultConfigPath(Env({{"HOME", "/h"}})), "/h/.config/tessera/config.yaml");
}

TEST(WorkloadFileTest, YamlBecomesTypedJson) {
  auto w = WorkloadFromText("name: a\nclass: training\nworkers: 2\ngpu_fraction: 0.5\nproject: '42'\n"
                            "mig_profile: null\nflag: true\n",
                            "w.yaml");
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_EQ((*w)["workers"], 2);
  EXPECT_TRUE((*w)["workers"].is_number_integer());
  EXPECT_DOUBLE_EQ((*w)["gpu_fraction"].get<double>(), 0.5);
  EXPECT_EQ((*w)["project"], "42");  // quoted stays a string
  EXPECT_TRUE((*w)["mig_profile"].is_null());
  EXPECT_EQ((*w)["flag"], true);
  w = WorkloadFromText("- name: only\n  class: inference\n", "w.yaml");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)["name"], "only");
  w = WorkloadFromText(R"({"name": "j", "replicas": 3})", "w.json");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)["replicas"], 3);
}

TEST(WorkloadFileTest, BadFilesNameTheFile) {
  for (const char* text : {"{\"name\": ", "- a: 1\n- b: 2\n", "just text\n", "a: [1\n"}) {
    auto w = WorkloadFromText(text, "bad.yaml");
    ASSERT_FALSE(w.ok()) << text;
    EXPECT_EQ(w.error().rfind("bad.yaml", 0), 0u) << w.error();
  }
  auto w = ReadWorkloadFile("/nonexistent/job.yaml");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().find("job.yaml"), std::string::npos);
}

TEST(FormatTest, StateCodesAndAges) {
  EXPECT_EQ(StateCode("Pending"), "PD");
  EXPECT_EQ(StateCode("Running"), "R");
  EXPECT_EQ(StateCode("Succeeded"), "CD");
  EXPECT_EQ(StateCode("Cancelled"), "CA");
  EXPECT_EQ(FormatAge(65), "1:05");
  EXPECT_EQ(FormatAge(3 * 3600 + 7), "3:00:07");
  EXPECT_EQ(FormatAge(2 * 86400 + 61), "2-00:01:01");
  EXPECT_EQ(FormatAge(-5), "0:00");
}

TEST(FormatTest, JobsTableShowsNodesOrReason) {
  const nlohmann::json jobs = {
      {"jobs",
       {{{"id", "1"}, {"team", "vision"}, {"name", "train"}, {"user", "ana"}, {"state", "Running"},
         {"submitted_at", "2026-01-01T00:00:00Z"}, {"gpus", 16},
         {"placements", {{{"node", "n1"}}, {{"node", "n2"}}, {{"node", "n1"}}}}},
        {{"id", "22"}, {"team", "vision"}, {"name", "serve"}, {"user", "bo"}, {"state", "Pending"},
         {"submitted_at", "2026-01-01T00:59:00Z"}, {"gpus", 1}, {"placements", nlohmann::json::array()},
         {"reason", {{"code", "Resources"}, {"message", "no room"}}}}}}};
  const std::string t = JobsTable(jobs, 1767229200);  // 2026-01-01T01:00:00Z
  std::istringstream lines(t);
  std::string header, first, second;
  std::getline(lines, header);
  std::getline(lines, first);
  std::getline(lines, second);
  EXPECT_EQ(header.rfind("JOBID  TEAM", 0), 0u) << t;
  EXPECT_NE(header.find("NODES(REASON)"), std::string::npos);
  EXPECT_NE(first.find(" R "), std::string::npos) << t;
  EXPECT_NE(first.find("1:00:00"), std::string::npos) << t;
  EXPECT_NE(first.find("n1,n2"), std::string::npos) << t;
  EXPECT_NE(second.find(" PD "), std::string::npos) << t;
  EXPECT_NE(second.find("1:00"), std::string::npos) << t;
  EXPECT_NE(second.find("(Resources)"), std::string::npos) << t;
  EXPECT_EQ(header.find("TEAM"), first.find("vision"));  // columns aligned
}

TEST(FormatTest, UsageAndQueueTables) {
  const std::string u = UsageTable({{"rows", {{{"team", "vision"}, {"project", nullptr}, {"job", nullptr},
                                               {"tier", "reserved"}, {"gpu_hours", 1.5}, {"cost", 3.25}}}}});
  EXPECT_NE(u.find("vision"), std::string::npos);
  EXPECT_NE(u.find("1.50"), std::string::npos);
  EXPECT_NE(u.find("3.25"), std::string::npos);
  const std::string q = QueueTable({{"jobs", {{{"id", "7"}, {"queue_position", 1},
                                               {"reason", {{"code", "Quota"}, {"message", "over limit"}}}}}}});
  EXPECT_NE(q.find("Quota: over limit"), std::string::npos) << q;
  EXPECT_EQ(QueueTable({{"jobs", nlohmann::json::array()}}).rfind("POS", 0), 0u);
}

TEST(FormatTest, NodesTableListsStatesOfAListOrOneNode) {
  const nlohmann::json list = {{"nodes",
                                {{{"name", "gpu-1"}, {"state", "drained"}, {"gpu", "h100-80gb"}, {"gpus", 8},
                                  {"leaf", "leaf-0"}, {"spine", "s"}, {"tier", "reserved"}, {"tasks", 0}},
                                 {{"name", "gpu-2"}, {"state", "ready"}, {"gpus", 4}, {"tasks", 3}}}}};
  const std::string t = NodesTable(list);
  EXPECT_EQ(t.rfind("NODE", 0), 0u) << t;
  EXPECT_NE(t.find("gpu-1  drained  h100-80gb"), std::string::npos) << t;
  EXPECT_NE(t.find("gpu-2  ready    -"), std::string::npos) << t;
  const std::string one = NodesTable({{"name", "gpu-3"}, {"state", "cordoned"}});
  EXPECT_NE(one.find("gpu-3  cordoned"), std::string::npos) << one;
  auto bad = MappingFromText("- a\n- b\n", "node.yaml", "one node");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), "node.yaml: expected one node");
}

TEST(LoadTest, NearestRankPercentile) {
  EXPECT_EQ(Percentile({}, 0.5), 0);
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_EQ(Percentile(v, 0.5), 50);
  EXPECT_EQ(Percentile(v, 0.99), 99);
  EXPECT_EQ(Percentile(v, 1.0), 100);
  EXPECT_EQ(Percentile({7}, 0.99), 7);
  EXPECT_EQ(UrlEncode("a b/c:d"), "a%20b%2Fc%3Ad");
}

}  // namespace
}  // namespace tessera::client
