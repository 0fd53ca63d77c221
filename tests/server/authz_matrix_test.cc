// The authorization matrix: every API endpoint x every kind of caller (admin, team lead, member, viewer,
// another team's member, no token, a revoked token) against a real `tessera serve`, each cell's status
// checked. Team `vision` has no GPU limit to borrow beyond (limit 0), so its jobs stay pending.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "testing/serve_process.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using testing::ServeProcess;

enum Who { kAdmin, kLead, kMember, kViewer, kOther, kNoToken, kRevoked, kWhoCount };
const char* const kWhoName[] = {"admin", "lead", "member", "viewer", "other-team member", "no token", "revoked"};

struct Cell {
  std::string method, path;
  nlohmann::json body;           // null: no body
  std::vector<int> want;         // by Who
};

class AuthzMatrixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera-authz-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  int Call(const ServeProcess& s, const std::string& method, const std::string& path, const nlohmann::json& body,
           const std::string& token) {
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    auto c = s.Client();
    const std::string b = body.is_null() ? "" : body.dump();
    auto status = [](const httplib::Result& r) { return r ? r->status : 0; };
    if (method == "GET") return status(c->Get(path, h));
    if (method == "POST") return status(c->Post(path, h, b, "application/json"));
    if (method == "PATCH") return status(c->Patch(path, h, b, "application/json"));
    if (method == "DELETE") return status(c->Delete(path, h));
    return 0;
  }

  fs::path dir_;
};

TEST_F(AuthzMatrixTest, EveryEndpointAndRole) {
  ServeProcess s(dir_, {});
  ASSERT_TRUE(s.Start());
  const std::string admin = s.AdminToken();
  ASSERT_EQ(s.Post("/api/v1/teams", {{"name", "vision"}, {"guaranteed_gpus", 0}, {"limit_gpus", 0}}, admin)->status, 201);
  ASSERT_EQ(s.Post("/api/v1/teams", {{"name", "search"}, {"guaranteed_gpus", 0}, {"limit_gpus", 0}}, admin)->status, 201);
  std::string tok[kWhoCount];
  tok[kAdmin] = admin;
  auto user = [&](const std::string& name, const std::string& team, const std::string& role) {
    auto r = s.AdminPost("/api/v1/users", {{"name", name}, {"team", team}, {"role", role}});
    return r.value("token", "");
  };
  tok[kLead] = user("lead", "vision", "team-lead");
  tok[kMember] = user("member", "vision", "member");
  tok[kViewer] = user("viewer", "vision", "viewer");
  tok[kOther] = user("other", "search", "member");
  tok[kRevoked] = user("gone", "vision", "member");
  user("target", "vision", "member");
  ASSERT_EQ(Call(s, "DELETE", "/api/v1/users/gone/token", nullptr, admin), 200);
  for (int w = 0; w < kWhoCount; ++w)
    if (w != kNoToken) ASSERT_FALSE(tok[w].empty()) << kWhoName[w];
  const nlohmann::json job = {{"name", "j"}, {"class", "training"}, {"gpus_per_worker", 1}, {"memory_gib", 10},
                              {"duration_s", 600}, {"team", "vision"}};
  nlohmann::json own = job;
  own.erase("team");
  auto j = s.Post("/api/v1/jobs", own, tok[kMember]);
  ASSERT_EQ(j->status, 201);
  const std::string id = nlohmann::json::parse(j->body)["id"];

  // Denied cells come before allowed ones where an allowed call changes what a later one sees.
  const std::vector<Cell> cells = {
      {"GET", "/healthz", nullptr, {200, 200, 200, 200, 200, 200, 200}},
      {"GET", "/metrics", nullptr, {200, 200, 200, 200, 200, 200, 200}},
      {"GET", "/api/v1/teams", nullptr, {200, 200, 200, 200, 200, 401, 401}},
      {"POST", "/api/v1/teams", {{"name", "new-team"}}, {201, 403, 403, 403, 403, 401, 401}},
      {"PATCH", "/api/v1/teams/vision", {{"guaranteed_gpus", 0}}, {200, 403, 403, 403, 403, 401, 401}},
      {"GET", "/api/v1/users", nullptr, {200, 200, 200, 200, 200, 401, 401}},
      {"POST", "/api/v1/users", {{"name", "made"}, {"team", "vision"}, {"role", "member"}},
       {409, 201, 403, 403, 403, 401, 401}},  // the lead (asked first) creates it; then it exists
      {"POST", "/api/v1/users/target/token", nullptr, {200, 200, 403, 403, 403, 401, 401}},
      {"DELETE", "/api/v1/users/target/token", nullptr, {200, 200, 403, 403, 403, 401, 401}},
      {"POST", "/api/v1/jobs", job, {201, 201, 201, 403, 403, 401, 401}},
      {"GET", "/api/v1/jobs", nullptr, {200, 200, 200, 200, 200, 401, 401}},
      {"GET", "/api/v1/jobs/" + id, nullptr, {200, 200, 200, 200, 404, 401, 401}},
      {"GET", "/api/v1/jobs/" + id + "/whatif", nullptr, {200, 200, 200, 200, 404, 401, 401}},
      {"PATCH", "/api/v1/jobs/" + id, {{"priority_class", "training-high"}}, {200, 200, 200, 403, 404, 401, 401}},
      {"GET", "/api/v1/queue", nullptr, {200, 200, 200, 200, 200, 401, 401}},
      {"GET", "/api/v1/cluster", nullptr, {200, 200, 200, 200, 200, 401, 401}},
      {"GET", "/api/v1/cluster/history", nullptr, {200, 200, 200, 200, 200, 401, 401}},
      {"GET", "/api/v1/usage", nullptr, {200, 200, 200, 200, 200, 401, 401}},
      {"GET", "/api/v1/audit", nullptr, {200, 403, 403, 403, 403, 401, 401}},
      {"POST", "/api/v1/jobs/" + id + ":cancel", nullptr, {200, 200, 200, 403, 404, 401, 401}},
  };
  // In each row the callers go from the least to the most privileged, so that an allowed change (a
  // cancel, a revocation) comes after every refusal.
  const Who order[] = {kNoToken, kRevoked, kOther, kViewer, kMember, kLead, kAdmin};
  int checked = 0;
  for (const Cell& c : cells) {
    for (Who w : order) {
      const int got = Call(s, c.method, c.path, c.body, w == kNoToken ? "" : tok[w]);
      EXPECT_EQ(got, c.want[w]) << c.method << " " << c.path << " as " << kWhoName[w];
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(cells.size()) * kWhoCount);
}

}  // namespace
}  // namespace tessera
