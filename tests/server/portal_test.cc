// The portal's routes on a real cpp-httplib server over real HTTP on the loopback.
#include "server/portal.h"

#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/portal_assets.h"

namespace tessera {
namespace {

class PortalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PortalOptions o;
    o.authenticate = [this](const std::string& t) -> std::optional<SessionIdentity> {
      if (t == "good-token" && !revoked_) return SessionIdentity{"ana", "vision", "team-lead"};
      return std::nullopt;
    };
    o.session_extra = [] { return nlohmann::json{{"now", 42}}; };
    RegisterPortal(server_, sessions_, o);
    // Stands in for an API route: answers with where the request's credential came from.
    server_.Post("/api/v1/probe", [this](const httplib::Request& req, httplib::Response& res) {
      Credential c = RequestCredential(req, sessions_);
      res.status = c.csrf_error.empty() ? 200 : 403;
      res.set_content(nlohmann::json{{"source", static_cast<int>(c.source)}, {"token", c.token}}.dump(),
                      "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
  }
  httplib::Client Client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(5);
    return c;
  }
  // Signs in; returns the Cookie header value and the CSRF token.
  std::pair<std::string, std::string> SignIn() {
    auto r = Client().Post("/api/v1/session", R"({"token":"good-token"})", "application/json");
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    std::string set = r->get_header_value("Set-Cookie");
    std::string cookie = set.substr(0, set.find(';'));
    return {cookie, nlohmann::json::parse(r->body)["csrf_token"].get<std::string>()};
  }

  int64_t now_ = 0;
  bool revoked_ = false;
  SessionStore sessions_{[this] { return now_; }};
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

TEST_F(PortalTest, ServesTheEmbeddedIndexOrSaysItWasNotBuilt) {
  auto r = Client().Get("/");
  ASSERT_TRUE(r);
  EXPECT_NE(r->get_header_value("Content-Security-Policy").find("default-src 'self'"), std::string::npos);
  if (PortalAssets().empty()) {
    EXPECT_EQ(r->status, 503);
    EXPECT_NE(r->body.find("not built"), std::string::npos);
    return;
  }
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->get_header_value("Content-Type").find("text/html"), std::string::npos);
  EXPECT_NE(r->body.find("<div id=\"app\">"), std::string::npos);
  // Every asset the index names is served with its type, and nothing else is.
  int scripts = 0;
  for (const PortalAsset& a : PortalAssets()) {
    if (!a.path.starts_with("/assets/")) continue;
    auto ar = Client().Get(std::string(a.path));
    ASSERT_TRUE(ar);
    EXPECT_EQ(ar->status, 200) << a.path;
    EXPECT_EQ(ar->body.size(), a.body.size());
    EXPECT_EQ(ar->get_header_value("Content-Type"), a.content_type);
    scripts += a.path.ends_with(".js");
  }
  EXPECT_GE(scripts, 1);
  EXPECT_EQ(Client().Get("/assets/missing.js")->status, 404);
}

TEST_F(PortalTest, SignInSetsAnHttpOnlyStrictCookieAndNeverEchoesTheToken) {
  auto r = Client().Post("/api/v1/session", R"({"token":"good-token"})", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  std::string set = r->get_header_value("Set-Cookie");
  EXPECT_NE(set.find("tessera_session="), std::string::npos);
  EXPECT_NE(set.find("HttpOnly"), std::string::npos);
  EXPECT_NE(set.find("SameSite=Strict"), std::string::npos);
  EXPECT_EQ(r->body.find("good-token"), std::string::npos);
  auto j = nlohmann::json::parse(r->body);
  EXPECT_EQ(j["user"], "ana");
  EXPECT_EQ(j["team"], "vision");
  EXPECT_EQ(j["role"], "team-lead");
  EXPECT_EQ(j["now"], 42);
  EXPECT_EQ(j["csrf_token"].get<std::string>().size(), 64u);
}

TEST_F(PortalTest, SignInRefusesBadTokensAndBadBodies) {
  EXPECT_EQ(Client().Post("/api/v1/session", R"({"token":"wrong"})", "application/json")->status, 401);
  auto r = Client().Post("/api/v1/session", R"({"tok":"good-token"})", "application/json");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(nlohmann::json::parse(r->body)["error"]["field"], "token");
  EXPECT_EQ(Client().Post("/api/v1/session", "{not json", "application/json")->status, 400);
  // A form post (what a cross-site page could send without a preflight) is refused.
  EXPECT_EQ(Client().Post("/api/v1/session", "token=good-token", "application/x-www-form-urlencoded")->status, 415);
  EXPECT_EQ(sessions_.Size(), 0u);
}

TEST_F(PortalTest, TheSessionCookieAuthenticatesWithCsrfForWrites) {
  auto [cookie, csrf] = SignIn();
  httplib::Headers with_cookie = {{"Cookie", cookie}};
  auto get = Client().Get("/api/v1/session", with_cookie);
  ASSERT_EQ(get->status, 200);
  EXPECT_EQ(nlohmann::json::parse(get->body)["csrf_token"], csrf);

  // A write with the cookie but without the CSRF token is refused; with it, the session's token is used.
  EXPECT_EQ(Client().Post("/api/v1/probe", with_cookie, "{}", "application/json")->status, 403);
  std::string wrong = csrf;
  wrong[0] = wrong[0] == '0' ? '1' : '0';
  EXPECT_EQ(Client().Post("/api/v1/probe", {{"Cookie", cookie}, {"X-CSRF-Token", wrong}}, "{}",
                          "application/json")->status, 403);
  auto ok = Client().Post("/api/v1/probe", {{"Cookie", cookie}, {"X-CSRF-Token", csrf}}, "{}", "application/json");
  ASSERT_EQ(ok->status, 200);
  EXPECT_EQ(nlohmann::json::parse(ok->body)["token"], "good-token");
  // Another origin is refused even with the right CSRF token.
  EXPECT_EQ(Client().Post("/api/v1/probe", {{"Cookie", cookie}, {"X-CSRF-Token", csrf}, {"Origin", "http://evil.example"}},
                          "{}", "application/json")->status, 403);
  // A bearer token wins over the cookie.
  auto bearer = Client().Post("/api/v1/probe", {{"Authorization", "Bearer other"}}, "{}", "application/json");
  EXPECT_EQ(nlohmann::json::parse(bearer->body)["token"], "other");
}

TEST_F(PortalTest, SignOutEndsTheSession) {
  auto [cookie, csrf] = SignIn();
  EXPECT_EQ(Client().Delete("/api/v1/session", {{"Cookie", cookie}})->status, 403);  // no CSRF token
  auto out = Client().Delete("/api/v1/session", {{"Cookie", cookie}, {"X-CSRF-Token", csrf}});
  ASSERT_EQ(out->status, 200);
  EXPECT_NE(out->get_header_value("Set-Cookie").find("Max-Age=0"), std::string::npos);
  EXPECT_EQ(Client().Get("/api/v1/session", {{"Cookie", cookie}})->status, 401);
  auto probe = Client().Post("/api/v1/probe", {{"Cookie", cookie}, {"X-CSRF-Token", csrf}}, "{}", "application/json");
  EXPECT_EQ(nlohmann::json::parse(probe->body)["token"], "");
}

TEST_F(PortalTest, ARevokedTokenEndsItsSessions) {
  auto [cookie, csrf] = SignIn();
  revoked_ = true;
  EXPECT_EQ(Client().Get("/api/v1/session", {{"Cookie", cookie}})->status, 401);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(WithoutBrotli, DropsOnlyTheBrotliCoding) {
  EXPECT_EQ(WithoutBrotli("gzip, deflate, br"), "gzip, deflate");
  EXPECT_EQ(WithoutBrotli("br;q=1.0, gzip;q=0.8"), "gzip;q=0.8");
  EXPECT_EQ(WithoutBrotli("gzip, deflate, br, zstd"), "gzip, deflate, zstd");
  EXPECT_EQ(WithoutBrotli("br"), "");
  EXPECT_EQ(WithoutBrotli("gzip"), "gzip");
}

TEST_F(PortalTest, BrowsersGetGzipNotBrotli) {
  auto r = Client().Get("/api/v1/session", {{"Accept-Encoding", "gzip, deflate, br"}});
  ASSERT_TRUE(r);
  EXPECT_NE(r->get_header_value("Content-Encoding"), "br");
}

}  // namespace
}  // namespace tessera
