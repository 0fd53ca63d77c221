// The nodes API over real HTTP against a real `tessera serve` and SQLite file: admin only, add (201, the
// documented body), cordon/drain/uncordon, DELETE (404, 409 while busy, 204), the cluster view following,
// and the nodes and their states kept across a restart on the same database.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "testing/serve_process.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using testing::ServeProcess;

class NodesApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera-nodes-api-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "cluster.yaml")
        << "name: t\ndefaults: {gpu: h100-80gb, gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch, "
           "spine: s, tier: reserved}\nnodes:\n  - {name: node, count: 2, leaf: leaf-0}\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  static nlohmann::json Body(const httplib::Result& r) {
    return r ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
  }
  // name -> state from GET /api/v1/nodes.
  static std::map<std::string, std::string> States(const ServeProcess& s) {
    std::map<std::string, std::string> out;
    const nlohmann::json body = Body(s.Get("/api/v1/nodes", s.AdminToken()));
    for (const auto& n : body["nodes"]) out[n["name"]] = n["state"];
    return out;
  }
  static std::vector<std::string> ClusterNodes(const ServeProcess& s) {
    std::vector<std::string> out;
    const nlohmann::json body = Body(s.Get("/api/v1/cluster", s.AdminToken()));
    for (const auto& n : body["nodes"]) out.push_back(n["name"]);
    return out;
  }
  template <typename F>
  static bool Eventually(F f) {
    for (int i = 0; i < 100; ++i) {
      if (f()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  fs::path dir_;
};

TEST_F(NodesApiTest, AddCordonDrainRemoveAndRestart) {
  auto s = std::make_unique<ServeProcess>(dir_);
  ASSERT_TRUE(s->Start());
  const std::string admin = s->AdminToken();
  ASSERT_EQ(s->AdminPost("/api/v1/teams", {{"name", "vision"}, {"guaranteed_gpus", 8}})["name"], "vision");
  const std::string member =
      s->AdminPost("/api/v1/users", {{"name", "ana"}, {"team", "vision"}, {"role", "member"}}).value("token", "");
  ASSERT_FALSE(member.empty());
  EXPECT_EQ(s->Get("/api/v1/nodes", member)->status, 403);
  EXPECT_EQ(s->Post("/api/v1/nodes/node-000:cordon", {}, member)->status, 403);

  const nlohmann::json node = {{"name", "added"}, {"gpu", "h100-80gb"}, {"gpus", 8}, {"cpu", 192},
                               {"memory_gib", 2048}, {"interconnect", "nvswitch"}, {"leaf", "leaf-0"},
                               {"spine", "s"}, {"tier", "reserved"}};
  for (const char* field : {"gpus", "cpu", "memory_gib"}) {  // typed as job bodies: "8" is no number
    nlohmann::json stringly = node;
    stringly[field] = stringly[field].dump();
    auto bad = s->Post("/api/v1/nodes", stringly, admin);
    EXPECT_EQ(bad->status, 400) << field;
    EXPECT_NE(bad->body.find(std::string("'") + field + "'"), std::string::npos) << bad->body;
  }
  auto r = s->Post("/api/v1/nodes", node, admin);
  ASSERT_EQ(r->status, 201) << r->body;
  EXPECT_EQ(Body(r)["state"], "ready");
  EXPECT_EQ(Body(r)["gpus"], 8);
  EXPECT_EQ(s->Post("/api/v1/nodes", node, admin)->status, 409);
  auto bad = s->Post("/api/v1/nodes", {{"name", "x"}, {"gpu", "h100-80gb"}, {"gpus", -1}}, admin);
  ASSERT_EQ(bad->status, 400);
  EXPECT_EQ(Body(bad)["error"]["field"], "gpus") << bad->body;
  EXPECT_TRUE(Eventually([&] { return ClusterNodes(*s).size() == 3; }));

  // A job on node-000, then a drain: the job goes back to the queue or elsewhere, the node ends drained.
  ASSERT_EQ(s->Post("/api/v1/nodes/node-001:cordon", {}, admin)->status, 200);
  ASSERT_EQ(s->Post("/api/v1/nodes/added:cordon", {}, admin)->status, 200);
  auto job = s->Post("/api/v1/jobs",
                     {{"name", "a"}, {"class", "training"}, {"gpus_per_worker", 8}, {"duration_s", 36000}}, member);
  ASSERT_EQ(job->status, 201);
  const std::string id = Body(job)["id"];
  auto placed_on = [&] {
    auto j = Body(s->Get("/api/v1/jobs/" + id, member));
    return j["state"] == "Running" ? j["placements"][0]["node"].get<std::string>() : std::string();
  };
  ASSERT_TRUE(Eventually([&] { return placed_on() == "node-000"; }));
  // The cluster view counts what jobs hold, not what a cordon holds: the cordoned idle nodes are not
  // allocated, in the API and in /metrics alike.
  ASSERT_TRUE(Eventually([&] {
    const nlohmann::json c = Body(s->Get("/api/v1/cluster", admin));
    return c["totals"]["allocated_gpus"] == 8.0 && c["totals"]["busy_gpus"] == 8 &&
           c["nodes"][1]["state"] == "cordoned" && c["nodes"][1]["allocated_gpus"] == 0.0;
  })) << Body(s->Get("/api/v1/cluster", admin))["totals"].dump();
  const std::string metrics = s->Get("/metrics", "")->body;
  EXPECT_NE(metrics.find("tessera_gpu_allocated_ratio{gpu=\"0\",device=\"nvidia0\",model_name=\"h100-80gb\","
                         "hostname=\"node-001\"} 0\n"),
            std::string::npos);
  EXPECT_NE(metrics.find("tessera_nodes{state=\"cordoned\"} 2"), std::string::npos);
  EXPECT_NE(metrics.find("tessera_gpu_utilization_ratio{gpu=\"0\",device=\"nvidia0\",model_name=\"h100-80gb\","
                         "hostname=\"node-000\"} 1\n"),
            std::string::npos);
  EXPECT_EQ(metrics.find("DCGM_"), std::string::npos) << "GPU gauges carry Tessera's names";
  auto del = s->Client()->Delete("/api/v1/nodes/node-000", {{"Authorization", "Bearer " + admin}});
  ASSERT_EQ(del->status, 409) << del->body;
  EXPECT_EQ(Body(del)["error"]["code"], "FailedPrecondition");
  EXPECT_EQ(s->Client()->Delete("/api/v1/nodes/nope", {{"Authorization", "Bearer " + admin}})->status, 404);
  ASSERT_EQ(s->Post("/api/v1/nodes/added:uncordon", {}, admin)->status, 200);
  auto drained = s->Post("/api/v1/nodes/node-000:drain", {}, admin);
  ASSERT_EQ(drained->status, 200) << drained->body;
  EXPECT_TRUE(Eventually([&] { return placed_on() == "added"; }));
  EXPECT_EQ(States(*s), (std::map<std::string, std::string>{
                            {"node-000", "drained"}, {"node-001", "cordoned"}, {"added", "ready"}}));
  auto gone = s->Client()->Delete("/api/v1/nodes/node-000", {{"Authorization", "Bearer " + admin}});
  ASSERT_EQ(gone->status, 204);
  EXPECT_TRUE(Eventually([&] { return ClusterNodes(*s) == std::vector<std::string>{"node-001", "added"}; }));
  auto cluster = Body(s->Get("/api/v1/cluster", admin));
  EXPECT_EQ(cluster["nodes"][0]["state"], "cordoned");
  EXPECT_EQ(cluster["totals"]["nodes"], 2);  // the removed node is not counted

  // Every node change is audited: who, what, the state before and after; so is the member's refused cordon.
  auto audit = Body(s->Get("/api/v1/audit?target=node:node-000", admin));
  std::vector<std::string> actions;
  for (const auto& e : audit["entries"]) actions.push_back(e["action"]);
  EXPECT_EQ(actions, (std::vector<std::string>{"request.denied", "node.drain", "node.remove"})) << audit.dump();
  EXPECT_EQ(audit["entries"][0]["actor"], "ana");
  EXPECT_EQ(audit["entries"][0]["after"]["refused"], "POST /api/v1/nodes/node-000:cordon");
  EXPECT_EQ(audit["entries"][1]["before"]["state"], "ready");
  EXPECT_EQ(audit["entries"][2]["after"]["state"], "removed");
  EXPECT_EQ(Body(s->Get("/api/v1/audit?action=node.add", admin))["entries"].size(), 1u);

  // Restart with the same cluster file (which still names node-000 and lacks added).
  const auto before = States(*s);
  EXPECT_EQ(s->Stop(SIGTERM), 0);
  s = std::make_unique<ServeProcess>(dir_);
  ASSERT_TRUE(s->Start());
  EXPECT_EQ(States(*s), before);
  EXPECT_EQ(placed_on(), "added");
  std::ifstream log(dir_ / "serve.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("ignored"), std::string::npos) << text;
  EXPECT_EQ(s->Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace tessera
