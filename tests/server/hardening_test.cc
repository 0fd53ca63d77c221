// The control plane under hostile and careless clients, against a real `tessera serve` over raw sockets:
// bytes that are not valid UTF-8, body framings, the request deadline, the per-address connection cap,
// the sign-in limit, token races, the clock after kill -9 (docs/security.md).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "testing/raw_conn.h"
#include "testing/serve_process.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using testing::RawConn;
using testing::ServeProcess;

int StatusOf(const std::string& answer) {
  return answer.rfind("HTTP/1.1 ", 0) == 0 && answer.size() >= 12 ? std::stoi(answer.substr(9, 3)) : 0;
}

class HardeningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera-hard-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static int Port(const ServeProcess& s) { return std::stoi(s.Url().substr(s.Url().rfind(':') + 1)); }
  static std::string Raw(const ServeProcess& s, const std::string& request, double wait_s = 5) {
    RawConn c(Port(s));
    c.Send(request);
    std::string out;
    c.ReadToClose(wait_s, &out);
    return out;
  }
  fs::path dir_;
};

TEST_F(HardeningTest, BadBytesAndFramingsGet4xxAndTheServerLives) {
  ServeProcess s(dir_, {});
  ASSERT_TRUE(s.Start());
  const std::string admin = s.AdminToken();
  const std::string end = " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  for (const std::string path : {"/%FC", "/api/v1/%FF", "/%C0%AE%C0%AE/etc/passwd", "/%00", "/%1B%5B2J", "/\xfc",
                                 "/api/v1/queue?x=%FF"}) {
    const std::string a = Raw(s, "GET " + path + end);
    EXPECT_EQ(StatusOf(a), 400) << path << ": " << a.substr(0, 200);
    EXPECT_NE(a.find("\"error\""), std::string::npos) << path;
  }
  EXPECT_EQ(StatusOf(Raw(s, "GET /api/v1/queue HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xff\r\n\r\n")), 400);
  const std::string post = "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + admin +
                           "\r\nContent-Type: application/json\r\nConnection: close\r\n";
  EXPECT_EQ(StatusOf(Raw(s, post + "Content-Length: -5\r\n\r\n{}")), 400);
  EXPECT_EQ(StatusOf(Raw(s, post + "Content-Length: 99999999999999999999999\r\n\r\n{}")), 400);
  EXPECT_EQ(StatusOf(Raw(s, post + "Content-Length: 2000000\r\n\r\n{}")), 413);
  EXPECT_EQ(StatusOf(Raw(s, post + "Content-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}")), 415);
  EXPECT_EQ(StatusOf(Raw(s, post + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n")), 400);
  // A chunked body is refused once past the limit, long before it is all sent.
  RawConn c(Port(s));
  ASSERT_TRUE(c.Send(post + "Transfer-Encoding: chunked\r\n\r\n"));
  std::string chunk = "10000\r\n" + std::string(0x10000, 'a') + "\r\n", answer;
  for (int i = 0; i < 20 && c.Send(chunk); ++i) {
  }
  c.ReadToClose(5, &answer);
  EXPECT_EQ(StatusOf(answer), 413) << answer.substr(0, 200);
  EXPECT_EQ(s.Get("/healthz", "")->status, 200);
}

// Every JSON body is refused past the nesting limit with a 400 naming it, before any recursion (a node spec
// nested 60,000 deep crashed serve), and the server lives on.
TEST_F(HardeningTest, DeepJsonBodiesAre400sNamingTheLimit) {
  ServeProcess s(dir_, {});
  ASSERT_TRUE(s.Start());
  const std::string admin = s.AdminToken();
  const std::string deep = std::string(60000, '[') + std::string(60000, ']');
  const std::string end = "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ";
  const struct {
    const char* method;
    const char* path;
    std::string body;
  } probes[] = {{"POST", "/api/v1/nodes", "{\"name\":" + deep + "}"},
                {"POST", "/api/v1/jobs", "{\"name\":\"x\",\"memory\":" + deep + "}"},
                {"PATCH", "/api/v1/teams/t", "{\"guaranteed_gpus\":" + deep + "}"},
                {"POST", "/api/v1/teams", deep}};
  for (const auto& p : probes) {
    const std::string a = Raw(s, std::string(p.method) + " " + p.path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                                     admin + end + std::to_string(p.body.size()) + "\r\n\r\n" + p.body);
    EXPECT_EQ(StatusOf(a), 400) << p.path << ": " << a.substr(0, 200);
    EXPECT_NE(a.find("nested deeper than 64"), std::string::npos) << p.path << ": " << a.substr(0, 300);
  }
  EXPECT_EQ(s.Get("/healthz", "")->status, 200);
}

// Header floods are cut: past 128 lines or 64 KiB of request line and headers the answer is 431 and the
// connection closes, however the flood is shaped.
TEST_F(HardeningTest, HeaderFloodsAre431AndClosed) {
  ServeProcess s(dir_, {});
  ASSERT_TRUE(s.Start());
  std::string many = "GET /api/v1/queue HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 200; ++i) many += "a:b\r\n";
  std::string wide = "GET /api/v1/queue HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 10; ++i) wide += "x" + std::to_string(i) + ": " + std::string(8000, 'v') + "\r\n";
  for (const std::string& flood : {many, wide}) {
    const std::string a = Raw(s, flood + "\r\n");
    EXPECT_EQ(StatusOf(a), 431) << a.substr(0, 200);
  }
  std::string fine = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
  for (int i = 0; i < 50; ++i) fine += "h" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(StatusOf(Raw(s, fine + "\r\n")), 200);
}

TEST_F(HardeningTest, EmptyPostNeedsNoContentLengthAndTokensAreNotCached) {
  ServeProcess s(dir_, {});
  ASSERT_TRUE(s.Start());
  const std::string admin = s.AdminToken();
  ASSERT_EQ(s.Post("/api/v1/teams", {{"name", "vision"}}, admin)->status, 201);
  ASSERT_EQ(s.Post("/api/v1/users", {{"name", "ana"}, {"team", "vision"}}, admin)->status, 201);
  const std::string a = Raw(s, "POST /api/v1/users/ana/token HTTP/1.1\r\nHost: x\r\nAuthorization: bearer " + admin +
                                   "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(StatusOf(a), 200) << a.substr(0, 300);
  EXPECT_NE(a.find("Cache-Control: no-store"), std::string::npos);
  struct stat st {};
  ASSERT_EQ(stat((dir_ / "t.db").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  if (stat((dir_ / "t.db-wal").c_str(), &st) == 0) EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(HardeningTest, SlowClientsAreCutAtTheDeadlineAndCappedPerAddress) {
  // A deadline long enough that a loaded machine still sees the cap while the three are held (5 s was
  // missed now and then with two test suites and a sanitizer build sharing two cores).
  ServeProcess s(dir_, {"--request-deadline", "10", "--max-connections-per-address", "3"});
  ASSERT_TRUE(s.Start());
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<RawConn>> slow;
  // Three held, each never finishing its headers. The server may still count the connection Start probed
  // with for a moment, so a connection closed at once (over the cap) is replaced.
  for (int tries = 0; slow.size() < 3 && tries < 50; ++tries) {
    auto c = std::make_unique<RawConn>(Port(s));
    ASSERT_TRUE(c->Send("GET /healthz HTTP/1.1\r\n"));
    std::string out;
    if (!c->ReadToClose(0.2, &out)) slow.push_back(std::move(c));
  }
  ASSERT_EQ(slow.size(), 3u);
  // A fourth connection is over the cap once the server holds the three (under load that takes a moment):
  // it is closed at once, without an answer.
  bool refused = false;
  for (int attempt = 0; attempt < 50 && !refused; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::string out;
    RawConn fourth(Port(s));
    fourth.Send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    refused = fourth.ReadToClose(2, &out) && StatusOf(out) == 0;
  }
  EXPECT_TRUE(refused);
  for (auto& c : slow) {
    std::string a;
    EXPECT_TRUE(c->ReadToClose(13, &a));
    EXPECT_TRUE(a.empty() || StatusOf(a) == 408 || StatusOf(a) == 400) << a.substr(0, 100);
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 14);  // deadline 10 s
  slow.clear();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto h = s.Get("/healthz", "");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

TEST_F(HardeningTest, FailedSignInsAreLimitedPerAddress) {
  ServeProcess s(dir_, {"--sign-in-limit", "3"});
  ASSERT_TRUE(s.Start());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(s.Post("/api/v1/session", {{"token", "tsr_bad"}}, "")->status, 401);
  auto r = s.Post("/api/v1/session", {{"token", "tsr_bad"}}, "");
  EXPECT_EQ(r->status, 429);
  EXPECT_FALSE(r->get_header_value("Retry-After").empty());
  auto m = s.Get("/metrics", "");
  EXPECT_NE(m->body.find("tessera_sign_in_failures_total 3"), std::string::npos);
}

TEST_F(HardeningTest, ConcurrentRotationsLeaveExactlyTheLastTokenAndRevokeEndsAll) {
  ServeProcess s(dir_, {});
  ASSERT_TRUE(s.Start());
  const std::string admin = s.AdminToken();
  ASSERT_EQ(s.Post("/api/v1/teams", {{"name", "vision"}}, admin)->status, 201);
  std::vector<std::string> issued = {s.AdminPost("/api/v1/users", {{"name", "v"}, {"team", "vision"}})["token"]};
  for (int round = 0; round < 10; ++round) {
    std::string a, b;
    std::thread t1([&] { a = s.AdminPost("/api/v1/users/v/token", nullptr).value("token", ""); });
    std::thread t2([&] { b = s.AdminPost("/api/v1/users/v/token", nullptr).value("token", ""); });
    t1.join();
    t2.join();
    ASSERT_FALSE(a.empty() || b.empty());
    issued.push_back(a);
    issued.push_back(b);
    int working = 0;
    for (const std::string& t : issued) working += s.Get("/api/v1/queue", t)->status == 200;
    EXPECT_EQ(working, 1) << "round " << round;
    auto users = nlohmann::json::parse(s.Get("/api/v1/users", admin)->body)["users"];
    int listed = 0;
    for (const auto& u : users) listed += u["name"] == "v";
    EXPECT_EQ(listed, 1);
  }
  auto del = s.Client()->Delete("/api/v1/users/v/token", {{"Authorization", "Bearer " + admin}});
  ASSERT_EQ(del->status, 200);
  for (const std::string& t : issued) EXPECT_EQ(s.Get("/api/v1/queue", t)->status, 401);
}

}  // namespace
}  // namespace tessera
