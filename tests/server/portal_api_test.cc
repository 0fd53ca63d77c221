// The portal's server side on a real service: SQLite file, scheduling cycles, ApiServer over real HTTP.
#include "server/portal_api.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/http_server.h"
#include "server/session.h"
#include "service/simulated_backend.h"
#include "base/utc_time.h"

namespace tessera {
namespace {

class PortalApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tessera-portal-api-" + std::to_string(::getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    ServiceConfig cfg;
    cfg.catalog = &Catalog::Default();
    // 4 nodes of 8 H100 GPUs.
    const std::string yaml =
        "name: portal-test\n"
        "defaults: {gpu: h100-80gb, gpus: 8, cpu: 192, memory_gib: 2048, tier: reserved, price_per_gpu_hour: 4}\n"
        "nodes:\n  - {name: n, count: 4, leaf: leaf-0}\n";
    auto cluster = LoadClusterYaml(yaml, "portal-test cluster", *cfg.catalog);
    ASSERT_TRUE(cluster.ok()) << cluster.error();
    cfg.cluster = std::move(cluster).value();
    cfg.tick_s = 0.05;
    auto store = OpenSqliteStore((dir_ / "t.db").string());
    ASSERT_TRUE(store.ok()) << store.error();
    auto svc = Service::Start(std::move(cfg), std::move(store).value(), &clock_, &backend_);
    ASSERT_TRUE(svc.ok()) << svc.error();
    service_ = std::move(svc).value();
    admin_ = service_->BootstrapAdmin().value();
    ServerOptions so;
    so.port = 0;
    so.clock_speed = 60;
    server_ = std::make_unique<ApiServer>(service_.get(), so);
    ASSERT_TRUE(server_->Bind().ok());
    thread_ = std::thread([this] { server_->Serve(); });
    for (int i = 0; i < 500 && !Client().Get("/healthz"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  void TearDown() override {
    if (server_) server_->Stop();
    if (thread_.joinable()) thread_.join();
    if (service_) service_->Stop();
    std::filesystem::remove_all(dir_);
  }
  httplib::Client Client() {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(10, 0);
    return c;
  }
  httplib::Headers Bearer(const std::string& t) { return {{"Authorization", "Bearer " + t}}; }
  nlohmann::json Json(const httplib::Result& r) { return nlohmann::json::parse(r->body, nullptr, false); }
  // A user of a new team; returns its token.
  std::string MakeUser(const std::string& name, const std::string& team, const std::string& role) {
    Client().Post("/api/v1/teams", Bearer(admin_), nlohmann::json{{"name", team}, {"guaranteed_gpus", 8}}.dump(),
                  "application/json");
    auto r = Client().Post("/api/v1/users", Bearer(admin_),
                           nlohmann::json{{"name", name}, {"team", team}, {"role", role}}.dump(), "application/json");
    EXPECT_EQ(r->status, 201) << r->body;
    return Json(r)["token"].get<std::string>();
  }
  // Signs in; returns {"Cookie" header value, CSRF token}.
  std::pair<std::string, std::string> SignIn(const std::string& token) {
    auto r = Client().Post("/api/v1/session", nlohmann::json{{"token", token}}.dump(), "application/json");
    EXPECT_EQ(r->status, 200) << r->body;
    std::string set = r->get_header_value("Set-Cookie");
    return {set.substr(0, set.find(';')), Json(r)["csrf_token"].get<std::string>()};
  }

  std::filesystem::path dir_;
  ScaledClock clock_{1.8e9, 60};
  SimulatedBackend backend_{&clock_, 0, 0, 7};
  std::unique_ptr<Service> service_;
  std::unique_ptr<ApiServer> server_;
  std::thread thread_;
  std::string admin_;
};

TEST_F(PortalApiTest, TheSessionCookieWorksAsTheTokenWithCsrfOnWrites) {
  const std::string lead = MakeUser("ana", "vision", "team-lead");
  auto [cookie, csrf] = SignIn(lead);
  auto me = Json(Client().Get("/api/v1/session", {{"Cookie", cookie}}));
  EXPECT_EQ(me["user"], "ana");
  EXPECT_EQ(me["team"], "vision");
  EXPECT_EQ(me["role"], "team-lead");
  EXPECT_EQ(me["speed"], 60);
  EXPECT_GE(me["now"].get<int64_t>(), 1800000000);
  const std::string job = R"({"name":"j","workers":1,"gpus_per_worker":1,"duration_s":600})";
  // Without the CSRF header the cookie does not authorise a write, and nothing is stored.
  auto refused = Client().Post("/api/v1/jobs", {{"Cookie", cookie}}, job, "application/json");
  EXPECT_EQ(refused->status, 403);
  EXPECT_EQ(Json(refused)["error"]["field"], "X-CSRF-Token");
  EXPECT_TRUE(Json(Client().Get("/api/v1/jobs", Bearer(lead)))["jobs"].empty());
  auto ok = Client().Post("/api/v1/jobs", {{"Cookie", cookie}, {"X-CSRF-Token", csrf}}, job, "application/json");
  ASSERT_EQ(ok->status, 201) << ok->body;
  EXPECT_EQ(Json(ok)["team"], "vision");
  EXPECT_EQ(Json(ok)["user"], "ana");
  auto list = Json(Client().Get("/api/v1/jobs", {{"Cookie", cookie}}));
  EXPECT_EQ(list["jobs"].size(), 1u);
  // No cookie and no token: 401.
  EXPECT_EQ(Client().Get("/api/v1/jobs")->status, 401);
}

TEST_F(PortalApiTest, ANewTokenReplacesTheOldAndEndsItsSessions) {
  const std::string old_token = MakeUser("bo", "nlp", "member");
  auto [cookie, csrf] = SignIn(old_token);
  // A member may not replace tokens; an admin may.
  EXPECT_EQ(Client().Post("/api/v1/users/bo/token", Bearer(old_token), "", "application/json")->status, 403);
  auto r = Client().Post("/api/v1/users/bo/token", Bearer(admin_), "", "application/json");
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string fresh = Json(r)["token"].get<std::string>();
  EXPECT_NE(fresh, old_token);
  EXPECT_EQ(Client().Get("/api/v1/jobs", Bearer(old_token))->status, 401);
  EXPECT_EQ(Client().Get("/api/v1/jobs", {{"Cookie", cookie}})->status, 401);
  EXPECT_EQ(Client().Get("/api/v1/session", {{"Cookie", cookie}})->status, 401);
  EXPECT_EQ(Client().Get("/api/v1/jobs", Bearer(fresh))->status, 200);
  // Revoked: no token works, and the user list says so.
  ASSERT_EQ(Client().Delete("/api/v1/users/bo/token", Bearer(admin_))->status, 200);
  EXPECT_EQ(Client().Get("/api/v1/jobs", Bearer(fresh))->status, 401);
  bool seen = false;
  const auto users = Json(Client().Get("/api/v1/users", Bearer(admin_)));
  for (const auto& u : users["users"])
    if (u["name"] == "bo") {
      seen = true;
      EXPECT_EQ(u["token_active"], false);
    }
  EXPECT_TRUE(seen) << users.dump();
  EXPECT_EQ(Client().Post("/api/v1/users/nobody/token", Bearer(admin_), "", "application/json")->status, 404);
}

TEST_F(PortalApiTest, ATeamLeadManagesOnlyItsOwnTeamsTokens) {
  const std::string lead = MakeUser("cy", "vision", "team-lead");
  MakeUser("dee", "vision", "member");
  MakeUser("eve", "nlp", "member");
  EXPECT_EQ(Client().Post("/api/v1/users/dee/token", Bearer(lead), "", "application/json")->status, 200);
  EXPECT_EQ(Client().Post("/api/v1/users/eve/token", Bearer(lead), "", "application/json")->status, 404);
  EXPECT_EQ(Client().Delete("/api/v1/users/admin/token", Bearer(lead))->status, 404);
}

TEST_F(PortalApiTest, AnAdminChangesQuotasWithinTheRules) {
  MakeUser("fay", "vision", "member");
  auto r = Client().Patch("/api/v1/teams/vision", Bearer(admin_), R"({"guaranteed_gpus":12,"limit_gpus":20})",
                          "application/json");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Json(r)["guaranteed_gpus"], 12.0);
  EXPECT_EQ(Json(r)["limit_gpus"], 20.0);
  auto weight = Client().Patch("/api/v1/teams/vision", Bearer(admin_), R"({"over_quota_weight":3})", "application/json");
  ASSERT_EQ(weight->status, 200) << weight->body;
  EXPECT_EQ(Json(weight)["over_quota_weight"], 3);
  EXPECT_EQ(Json(weight)["guaranteed_gpus"], 12.0);
  auto bad_weight = Client().Patch("/api/v1/teams/vision", Bearer(admin_), R"({"over_quota_weight":-1})",
                                   "application/json");
  EXPECT_EQ(Json(bad_weight)["error"]["field"], "over_quota_weight");
  auto bad = Client().Patch("/api/v1/teams/vision", Bearer(admin_), R"({"limit_gpus":4})", "application/json");
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(Json(bad)["error"]["field"], "limit_gpus");
  auto unknown = Client().Patch("/api/v1/teams/vision", Bearer(admin_), R"({"gpus":4})", "application/json");
  EXPECT_EQ(Json(unknown)["error"]["field"], "gpus");
  EXPECT_EQ(Client().Patch("/api/v1/teams/nope", Bearer(admin_), "{}", "application/json")->status, 404);
  const std::string member = MakeUser("gus", "vision", "member");
  EXPECT_EQ(Client().Patch("/api/v1/teams/vision", Bearer(member), R"({"limit_gpus":99})", "application/json")->status,
            403);
  const nlohmann::json teams = Json(Client().Get("/api/v1/teams", Bearer(admin_)));  // outlives the loop
  for (const auto& t : teams["teams"])
    if (t["name"] == "vision") {
      EXPECT_EQ(t["limit_gpus"], 20.0);
    }
}

TEST_F(PortalApiTest, IfMatchTakesOnlyThisServersEtagsAndNeverFailsOnLargeNumbers) {
  MakeUser("ivy", "vision", "member");  // makes the team
  auto first = Client().Patch("/api/v1/teams/vision", Bearer(admin_), R"({"guaranteed_gpus":9})", "application/json");
  ASSERT_EQ(first->status, 200) << first->body;
  const std::string etag = first->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());
  auto patch = [&](const std::string& if_match) {
    httplib::Headers h = Bearer(admin_);
    h.emplace("If-Match", if_match);
    return Client().Patch("/api/v1/teams/vision", h, R"({"guaranteed_gpus":10})", "application/json");
  };
  for (const std::string big : {"\"99999999999999999999\"", "W/\"99999999999999999999\"", "\"18446744073709551616\""}) {
    auto r = patch(big);
    EXPECT_EQ(r->status, 412) << big << ": " << r->body;
    EXPECT_EQ(Json(r)["error"]["field"], "If-Match") << big;
  }
  EXPECT_EQ(patch("\"18446744073709551615\"")->status, 412);  // the largest version, not this team's
  EXPECT_EQ(patch("\"12a\"")->status, 400);
  EXPECT_EQ(patch("\"123456789012345678901\"")->status, 400);  // 21 digits: not an ETag of this server
  auto r = patch(etag);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Json(r)["guaranteed_gpus"], 10.0);
}

TEST_F(PortalApiTest, HistorySamplesTheClusterOverTime) {
  const std::string lead = MakeUser("hal", "vision", "team-lead");
  Client().Post("/api/v1/jobs", Bearer(lead), R"({"name":"h","workers":1,"gpus_per_worker":8,"duration_s":36000})",
                "application/json");
  nlohmann::json points;
  for (int i = 0; i < 100; ++i) {
    points = Json(Client().Get("/api/v1/cluster/history", Bearer(lead)))["points"];
    if (!points.empty() && points.back()["allocated_gpus"].get<double>() >= 8) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(points.empty());
  EXPECT_EQ(points.back()["total_gpus"], 32);
  EXPECT_GE(points.back()["allocated_gpus"].get<double>(), 8.0);
  EXPECT_EQ(Client().Get("/api/v1/cluster/history?from=yesterday", Bearer(lead))->status, 400);
  EXPECT_EQ(Client().Get("/api/v1/cluster/history?max_points=0", Bearer(lead))->status, 400);
  // The range every time parameter of the API has (Unix seconds 0..253402300799, year 9999).
  for (const std::string q : {"from=999999999999999999", "to=253402300800", "from=10000-01-01T00:00:00Z"}) {
    auto r = Client().Get("/api/v1/cluster/history?" + q, Bearer(lead));
    EXPECT_EQ(r->status, 400) << q;
    EXPECT_EQ(Json(r)["error"]["field"], q.substr(0, q.find('='))) << q;
  }
  EXPECT_EQ(Client().Get("/api/v1/cluster/history?from=0&to=253402300799", Bearer(lead))->status, 200);
  EXPECT_EQ(Client().Get("/api/v1/cluster/history")->status, 401);
}

TEST_F(PortalApiTest, WhatIfFindsAnEarlierStartWithHalfTheGpus) {
  const std::string lead = MakeUser("ida", "vision", "team-lead");
  auto post = [&](const std::string& body) {
    auto r = Client().Post("/api/v1/jobs", Bearer(lead), body, "application/json");
    EXPECT_EQ(r->status, 201) << r->body;
    return Json(r)["id"].get<std::string>();
  };
  const std::string filler = post(R"({"name":"fill","class":"training","workers":3,"gpus_per_worker":8,"duration_s":360000})");
  for (int i = 0; i < 100 && Json(Client().Get("/api/v1/jobs/" + filler, Bearer(lead)))["state"] != "Running"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const std::string big = post(R"({"name":"big","class":"training","workers":2,"gpus_per_worker":8,"duration_s":3600})");
  nlohmann::json w;
  for (int i = 0; i < 100; ++i) {  // after a cycle saw it
    w = Json(Client().Get("/api/v1/jobs/" + big + "/whatif", Bearer(lead)));
    if (w.contains("options") && w["options"].size() >= 2 && !w["options"][1]["estimated_start"].is_null()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GE(w["options"].size(), 2u) << w.dump();
  EXPECT_EQ(w["options"][0]["fraction"], 1.0);
  EXPECT_EQ(w["options"][0]["gpus"], 16);
  EXPECT_FALSE(w["options"][0]["reason"].is_null());  // as asked it still waits: 8 GPUs are free
  EXPECT_EQ(w["options"][1]["fraction"], 0.5);
  EXPECT_EQ(w["options"][1]["gpus"], 8);
  ASSERT_FALSE(w["options"][1]["estimated_start"].is_null());
  EXPECT_TRUE(w["options"][1]["reason"].is_null());  // with half it would start
  if (!w["options"][0]["estimated_start"].is_null()) {
    EXPECT_LT(*ParseIsoUtc(w["options"][1]["estimated_start"].get<std::string>()),
              *ParseIsoUtc(w["options"][0]["estimated_start"].get<std::string>()));
  }
  // Nothing was applied: the job still waits with its own request.
  auto j = Json(Client().Get("/api/v1/jobs/" + big, Bearer(lead)));
  EXPECT_EQ(j["state"], "Pending");
  EXPECT_EQ(j["gpus"], 16);
  // Another team's member gets a 404; a running job has no what-if.
  const std::string other = MakeUser("jo", "nlp", "member");
  EXPECT_EQ(Client().Get("/api/v1/jobs/" + big + "/whatif", Bearer(other))->status, 404);
  EXPECT_EQ(Client().Get("/api/v1/jobs/" + filler + "/whatif", Bearer(lead))->status, 400);
}

TEST_F(PortalApiTest, TheJobsListKeepsEndedJobsWithStateSortSearchAndCursor) {
  const std::string lead = MakeUser("kit", "vision", "team-lead");
  auto post = [&](const std::string& name) {
    auto r = Client().Post("/api/v1/jobs", Bearer(lead),
                           nlohmann::json{{"name", name}, {"workers", 1}, {"gpus_per_worker", 1}, {"duration_s", 36000},
                                          {"project", name == "needle" ? "hay" : "p"}}.dump(),
                           "application/json");
    EXPECT_EQ(r->status, 201) << r->body;
    return Json(r)["id"].get<std::string>();
  };
  const std::string gone = post("gone"), kept = post("kept"), needle = post("needle");
  ASSERT_EQ(Client().Post("/api/v1/jobs/" + gone + ":cancel", Bearer(lead), "", "application/json")->status, 200);
  auto ids = [&](const std::string& query) {
    std::vector<std::string> out;
    const nlohmann::json page = Json(Client().Get("/api/v1/jobs?" + query, Bearer(lead)));  // outlives the loop
    for (const auto& j : page["jobs"]) out.push_back(j["id"]);
    return out;
  };
  EXPECT_EQ(ids("state=Cancelled"), std::vector<std::string>{gone});
  EXPECT_EQ(ids("state=cancelled,pending,running&sort=submitted").size(), 3u);
  EXPECT_EQ(ids("state=active&sort=id"), (std::vector<std::string>{kept, needle}));
  EXPECT_EQ(ids("state=all&search=NEED"), std::vector<std::string>{needle});
  EXPECT_EQ(ids("search=hay"), std::vector<std::string>{needle});
  auto cancelled = Json(Client().Get("/api/v1/jobs/" + gone, Bearer(lead)));
  EXPECT_FALSE(cancelled["finished_at"].is_null());
  EXPECT_TRUE(cancelled["spec"].is_object());
  EXPECT_EQ(cancelled["spec"]["name"], "gone");
  // Newest first, one row a page: the cursor walks every job once.
  std::vector<std::string> walked;
  std::string token;
  for (int i = 0; i < 5; ++i) {
    auto page = Json(Client().Get("/api/v1/jobs?sort=submitted&page_size=1&page_token=" + token, Bearer(lead)));
    EXPECT_EQ(page["total"], 3);
    for (const auto& j : page["jobs"]) walked.push_back(j["id"]);
    token = page["next_page_token"];
    if (token.empty()) break;
  }
  std::vector<std::string> sorted = walked;
  std::sort(sorted.begin(), sorted.end(), [](const std::string& a, const std::string& b) { return std::stoll(a) > std::stoll(b); });
  EXPECT_EQ(walked, sorted);
  EXPECT_EQ(walked.size(), 3u);
  EXPECT_EQ(Client().Get("/api/v1/jobs?sort=size", Bearer(lead))->status, 400);
  EXPECT_EQ(Client().Get("/api/v1/jobs?state=Lost", Bearer(lead))->status, 400);
  EXPECT_EQ(Client().Get("/api/v1/jobs?sort=ended&page_token=12", Bearer(lead))->status, 400);
}

TEST_F(PortalApiTest, APollWithTheListsVersionGets304WhileNothingChanged) {
  const std::string lead = MakeUser("lu", "vision", "team-lead");
  Client().Post("/api/v1/jobs", Bearer(lead), R"({"name":"v","workers":1,"gpus_per_worker":1,"duration_s":36000})",
                "application/json");
  std::string version;
  for (int i = 0; i < 100; ++i) {  // until the job runs and the list settles
    service_->RunCycleNow();
    auto a = Json(Client().Get("/api/v1/jobs?state=Cancelled", Bearer(lead)));
    version = a["version"];
    if (!version.empty()) break;
  }
  ASSERT_FALSE(version.empty());
  auto same = Client().Get("/api/v1/jobs?state=Cancelled&since=" + version, Bearer(lead));
  EXPECT_EQ(same->status, 304);
  EXPECT_TRUE(same->body.empty());
  // A change in the page's rows gives a new version and the full page.
  auto all = Json(Client().Get("/api/v1/jobs?state=all", Bearer(lead)));
  const std::string id = all["jobs"][0]["id"];
  ASSERT_EQ(Client().Post("/api/v1/jobs/" + id + ":cancel", Bearer(lead), "", "application/json")->status, 200);
  auto changed = Client().Get("/api/v1/jobs?state=Cancelled&since=" + version, Bearer(lead));
  ASSERT_EQ(changed->status, 200);
  EXPECT_NE(Json(changed)["version"], version);
  EXPECT_EQ(Json(changed)["jobs"].size(), 1u);
}

TEST_F(PortalApiTest, RotatingYourOwnTokenInThePortalKeepsTheSession) {
  const std::string lead = MakeUser("max", "vision", "team-lead");
  auto [cookie, csrf] = SignIn(lead);
  auto r = Client().Post("/api/v1/users/max/token", {{"Cookie", cookie}, {"X-CSRF-Token", csrf}}, "", "application/json");
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string fresh = Json(r)["token"];
  EXPECT_NE(fresh, lead);
  EXPECT_EQ(Client().Get("/api/v1/session", {{"Cookie", cookie}})->status, 200);
  EXPECT_EQ(Client().Get("/api/v1/jobs", {{"Cookie", cookie}})->status, 200);
  EXPECT_EQ(Client().Get("/api/v1/jobs", Bearer(lead))->status, 401);
  EXPECT_EQ(Client().Get("/api/v1/jobs", Bearer(fresh))->status, 200);
  // Rotating someone else's token leaves the rotating session on its own token.
  MakeUser("ned", "vision", "member");
  ASSERT_EQ(Client().Post("/api/v1/users/ned/token", {{"Cookie", cookie}, {"X-CSRF-Token", csrf}}, "", "application/json")->status, 200);
  EXPECT_EQ(Json(Client().Get("/api/v1/session", {{"Cookie", cookie}}))["user"], "max");
}

TEST_F(PortalApiTest, AnEstimateStaysPutWhileNothingChangesInItsQueue) {
  ASSERT_EQ(Client().Post("/api/v1/teams", Bearer(admin_), R"({"name":"one","guaranteed_gpus":8,"limit_gpus":8})",
                          "application/json")->status, 201);
  auto u = Client().Post("/api/v1/users", Bearer(admin_), R"({"name":"oz","team":"one","role":"team-lead"})",
                         "application/json");
  const std::string lead = Json(u)["token"];
  const std::string other = MakeUser("pia", "nlp", "team-lead");
  auto post = [&](const std::string& token, const std::string& body) {
    auto r = Client().Post("/api/v1/jobs", Bearer(token), body, "application/json");
    EXPECT_EQ(r->status, 201) << r->body;
    return Json(r)["id"].get<std::string>();
  };
  const std::string holder = post(lead, R"({"name":"hold","workers":1,"gpus_per_worker":8,"duration_s":36000})");
  nlohmann::json h;
  for (int i = 0; i < 100 && (h = Json(Client().Get("/api/v1/jobs/" + holder, Bearer(lead))))["state"] != "Running"; ++i)
    service_->RunCycleNow();
  ASSERT_EQ(h["state"], "Running");
  const std::string behind = post(lead, R"({"name":"behind","workers":1,"gpus_per_worker":8,"duration_s":600})");
  auto estimate = [&] {
    service_->RunCycleNow();
    return Json(Client().Get("/api/v1/jobs/" + behind, Bearer(lead)));
  };
  nlohmann::json first = estimate();
  ASSERT_FALSE(first["estimate"].is_null()) << first.dump();
  // It waits on its team's limit: it starts when the holder ends, whatever is free elsewhere.
  EXPECT_EQ(*ParseIsoUtc(first["estimated_start"].get<std::string>()),
            *ParseIsoUtc(h["started_at"].get<std::string>()) + 36000);
  EXPECT_LE(*ParseIsoUtc(first["estimate"]["earliest"].get<std::string>()), *ParseIsoUtc(first["estimated_start"].get<std::string>()));
  EXPECT_GE(*ParseIsoUtc(first["estimate"]["latest"].get<std::string>()), *ParseIsoUtc(first["estimated_start"].get<std::string>()));
  // Work of another team comes and goes; the clock moves: the estimate does not.
  for (int i = 0; i < 5; ++i) {
    post(other, R"({"name":"x","workers":1,"gpus_per_worker":4,"duration_s":60})");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    nlohmann::json again = estimate();
    EXPECT_EQ(again["estimate"], first["estimate"]);
  }
  // The what-if's "as asked" row is the headline.
  auto w = Json(Client().Get("/api/v1/jobs/" + behind + "/whatif", Bearer(lead)));
  EXPECT_EQ(w["options"][0]["estimated_start"], first["estimated_start"]);
}

}  // namespace
}  // namespace tessera
