// Wrong credentials, trusted proxies, sessions per user and refused requests on a real ApiServer over real
// HTTP: clients bind source addresses of 127.0.0.0/8, so each probe has an address of its own.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/http_server.h"
#include "service/simulated_backend.h"

namespace tessera {
namespace {

// A connection from source address `from` (in 127.0.0.0/8) to the server on 127.0.0.1.
class SourcedConn {
 public:
  SourcedConn(int port, const std::string& from) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in src{};
    src.sin_family = AF_INET;
    inet_pton(AF_INET, from.c_str(), &src.sin_addr);
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(static_cast<uint16_t>(port));
    dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = bind(fd_, reinterpret_cast<sockaddr*>(&src), sizeof src) == 0 &&
          connect(fd_, reinterpret_cast<sockaddr*>(&dst), sizeof dst) == 0;
  }
  ~SourcedConn() { close(fd_); }
  bool Send(const std::string& d) {
    return ok_ && send(fd_, d.data(), d.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(d.size());
  }
  // What the server sends until it closes, at most 10 s.
  std::string ReadAll() {
    std::string out;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    char buf[4096];
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

int AnswerStatus(const std::string& answer) {
  return answer.rfind("HTTP/1.1 ", 0) == 0 && answer.size() >= 12 ? std::stoi(answer.substr(9, 3)) : 0;
}

// A request's head (Connection: close) with these extra header lines ("Name: value\r\n" each).
std::string Head(const std::string& method, const std::string& path, const std::string& headers, size_t body_size) {
  return method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + headers +
         (body_size > 0 ? "Content-Type: application/json\r\nContent-Length: " + std::to_string(body_size) + "\r\n"
                        : "") +
         "\r\n";
}

std::string SignInBody(const std::string& token) { return nlohmann::json{{"token", token}}.dump(); }

// "tsr_" and 32 hex digits no user holds.
std::string GuessedToken(int i) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "tsr_%032x", i + 1);
  return buf;
}

class SignInLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tessera-sign-in-" + std::to_string(::getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    ServiceConfig cfg;
    cfg.catalog = &Catalog::Default();
    auto cluster = LoadClusterYaml(
        "name: t\ndefaults: {gpu: h100-80gb, gpus: 8, cpu: 192, memory_gib: 2048, tier: reserved}\n"
        "nodes:\n  - {name: n, count: 2, leaf: leaf-0}\n",
        "test cluster", *cfg.catalog);
    ASSERT_TRUE(cluster.ok()) << cluster.error();
    cfg.cluster = std::move(cluster).value();
    auto store = OpenSqliteStore((dir_ / "t.db").string());
    ASSERT_TRUE(store.ok()) << store.error();
    auto svc = Service::Start(std::move(cfg), std::move(store).value(), &clock_, &backend_);
    ASSERT_TRUE(svc.ok()) << svc.error();
    service_ = std::move(svc).value();
    admin_ = service_->BootstrapAdmin().value();
  }
  void TearDown() override {
    if (server_) server_->Stop();
    if (thread_.joinable()) thread_.join();
    if (service_) service_->Stop();
    std::filesystem::remove_all(dir_);
  }
  // Starts the server and makes team vision with a lead, a member and a viewer.
  void Start(ServerOptions so = {}) {
    so.port = 0;
    server_ = std::make_unique<ApiServer>(service_.get(), so);
    ASSERT_TRUE(server_->Bind().ok());
    thread_ = std::thread([this] { server_->Serve(); });
    for (int i = 0; i < 500 && AnswerStatus(Ask("127.0.0.1", "GET", "/healthz")) != 200; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(AdminCall("POST", "/api/v1/teams", {{"name", "vision"}, {"guaranteed_gpus", 8}})["name"], "vision");
    for (const char* role : {"team-lead", "member", "viewer"})
      tokens_[role] = AdminCall("POST", "/api/v1/users", {{"name", role}, {"team", "vision"}, {"role", role}})
                          .value("token", "");
  }
  // One request from `from`; the whole answer.
  std::string Ask(const std::string& from, const std::string& method, const std::string& path,
                  const std::string& headers = "", const std::string& body = "") {
    SourcedConn c(server_->port(), from);
    c.Send(Head(method, path, headers, body.size()) + body);
    return c.ReadAll();
  }
  int SignIn(const std::string& from, const std::string& token, const std::string& headers = "") {
    return AnswerStatus(Ask(from, "POST", "/api/v1/session", headers, SignInBody(token)));
  }
  nlohmann::json AdminCall(const std::string& method, const std::string& path, const nlohmann::json& body = nullptr) {
    const std::string a = Ask("127.0.0.1", method, path, "Authorization: Bearer " + admin_ + "\r\n",
                              body.is_null() ? "" : body.dump());
    const size_t at = a.find("\r\n\r\n");
    return nlohmann::json::parse(at == std::string::npos ? "" : a.substr(at + 4), nullptr, false);
  }

  std::filesystem::path dir_;
  ScaledClock clock_{1.8e9, 60};
  SimulatedBackend backend_{&clock_, 0, 0, 7};
  std::unique_ptr<Service> service_;
  std::unique_ptr<ApiServer> server_;
  std::thread thread_;
  std::string admin_;
  std::map<std::string, std::string> tokens_;
};

TEST_F(SignInLimitsTest, WrongSignInsAreLimitedPerAddressAndAValidTokenStillSignsIn) {
  Start();
  std::vector<int> codes;
  for (int i = 0; i < 25; ++i) codes.push_back(SignIn("127.0.0.51", GuessedToken(i)));
  EXPECT_EQ(std::count(codes.begin(), codes.begin() + 20, 401), 20);
  EXPECT_EQ(std::count(codes.begin() + 20, codes.end(), 429), 5);
  const std::string limited = Ask("127.0.0.51", "POST", "/api/v1/session", "", SignInBody(GuessedToken(99)));
  EXPECT_NE(limited.find("Retry-After: "), std::string::npos) << limited;
  EXPECT_EQ(SignIn("127.0.0.51", tokens_["member"]), 200);  // a user sharing the guesser's address
  EXPECT_EQ(SignIn("127.0.0.52", GuessedToken(0)), 401);     // another address: its own count
  // Past the extra checks too, nothing from the address is checked, a valid token included.
  for (int i = 0; i < 10; ++i) SignIn("127.0.0.51", GuessedToken(100 + i));
  EXPECT_EQ(SignIn("127.0.0.51", tokens_["member"]), 429);
}

TEST_F(SignInLimitsTest, ConcurrentWrongSignInsWithLateBodiesGetAtMostTheLimit) {
  ServerOptions so;
  so.limits.max_per_address = 128;  // every connection of the burst admitted and answered
  Start(so);
  constexpr int kBurst = 90;
  std::vector<std::unique_ptr<SourcedConn>> conns;
  const std::string body = SignInBody(GuessedToken(7));
  for (int i = 0; i < kBurst; ++i) {
    conns.push_back(std::make_unique<SourcedConn>(server_->port(), "127.0.0.53"));
    conns.back()->Send(Head("POST", "/api/v1/session", "", body.size()));  // every head first
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int> codes(kBurst);
  std::vector<std::thread> threads;
  for (int i = 0; i < kBurst; ++i)
    threads.emplace_back([&, i] {
      conns[i]->Send(body);  // then the bodies, together
      codes[i] = AnswerStatus(conns[i]->ReadAll());
    });
  for (auto& t : threads) t.join();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LE(std::count(codes.begin(), codes.end(), 401), 20 + static_cast<int>(took / 3));
  EXPECT_EQ(std::count(codes.begin(), codes.end(), 401) + std::count(codes.begin(), codes.end(), 429), kBurst);
}

TEST_F(SignInLimitsTest, BearerTokensAndSessionCookiesCountTheSameWayButStaleTokensDoNot) {
  Start();
  const std::string guessed = "Authorization: Bearer " + GuessedToken(1) + "\r\n";
  for (int i = 0; i < 20; ++i) EXPECT_EQ(AnswerStatus(Ask("127.0.0.54", "GET", "/api/v1/queue", guessed)), 401);
  const std::string limited = Ask("127.0.0.54", "GET", "/api/v1/queue", guessed);
  EXPECT_EQ(AnswerStatus(limited), 429);
  EXPECT_NE(limited.find("Retry-After: "), std::string::npos);
  EXPECT_EQ(AnswerStatus(Ask("127.0.0.54", "GET", "/api/v1/queue", "Authorization: Bearer " + tokens_["member"] + "\r\n")),
            200);
  EXPECT_EQ(SignIn("127.0.0.54", GuessedToken(2)), 429);  // one budget for every way of guessing

  const std::string cookie = "Cookie: tessera_session=" + std::string(64, 'a') + "\r\n";
  for (int i = 0; i < 20; ++i) EXPECT_EQ(AnswerStatus(Ask("127.0.0.55", "GET", "/api/v1/session", cookie)), 401);
  EXPECT_EQ(AnswerStatus(Ask("127.0.0.55", "GET", "/api/v1/queue", cookie)), 429);

  // Replaced tokens are stale, not guesses: 401 however many.
  std::vector<std::string> old;
  for (int i = 0; i < 25; ++i) {
    old.push_back(tokens_["viewer"]);
    tokens_["viewer"] = AdminCall("POST", "/api/v1/users/viewer/token").value("token", "");
  }
  for (const std::string& t : old)
    EXPECT_EQ(AnswerStatus(Ask("127.0.0.56", "GET", "/api/v1/queue", "Authorization: Bearer " + t + "\r\n")), 401);
  EXPECT_EQ(SignIn("127.0.0.56", old[0]), 401);
  EXPECT_EQ(SignIn("127.0.0.56", GuessedToken(3)), 401);
}

TEST_F(SignInLimitsTest, BehindATrustedProxyTheForwardedClientIsCountedAndAudited) {
  ServerOptions so;
  so.trusted_proxies = {"127.0.0.60/32"};
  Start(so);
  auto via = [](const std::string& client) { return "X-Forwarded-For: " + client + "\r\n"; };
  std::vector<int> a;
  for (int i = 0; i < 25; ++i) a.push_back(SignIn("127.0.0.60", GuessedToken(i), via("198.51.100.1")));
  EXPECT_EQ(a.back(), 429);
  EXPECT_EQ(SignIn("127.0.0.60", GuessedToken(50), via("198.51.100.2")), 401);
  EXPECT_EQ(SignIn("127.0.0.60", admin_, via("198.51.100.2")), 200);
  EXPECT_EQ(SignIn("127.0.0.60", admin_, via("203.0.113.9, 198.51.100.1")), 200);
  std::vector<int> u;  // an untrusted peer's X-Forwarded-For is ignored: one address, one count
  for (int i = 0; i < 25; ++i) u.push_back(SignIn("127.0.0.61", GuessedToken(i), via("198.51.100." + std::to_string(10 + i))));
  EXPECT_EQ(u.back(), 429);

  const std::string lead = "Authorization: Bearer " + tokens_["team-lead"] + "\r\n";
  const std::string body = R"({"name": "proxied-adm", "team": "vision", "role": "admin"})";
  EXPECT_EQ(AnswerStatus(Ask("127.0.0.60", "POST", "/api/v1/users", lead + via("198.51.100.7"), body)), 403);
  auto audit = AdminCall("GET", "/api/v1/audit?actor=team-lead&target=user:proxied-adm");
  ASSERT_EQ(audit["entries"].size(), 1u) << audit.dump();
  EXPECT_EQ(audit["entries"][0]["source"], "198.51.100.7");
}

TEST_F(SignInLimitsTest, BindRefusesAMalformedTrustedProxy) {
  ServerOptions so;
  so.port = 0;
  so.trusted_proxies = {"10.0.0.0/8", "10.0.0.0/33"};
  ApiServer server(service_.get(), so);
  Status st = server.Bind();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--trusted-proxy '10.0.0.0/33'"), std::string::npos) << st.message();
}

TEST_F(SignInLimitsTest, EachUsersSessionsAreCappedOldestFirstAndTheEvictionsAudited) {
  ServerOptions so;
  so.sessions.max_per_user = 3;
  Start(so);
  auto cookie_of = [](const std::string& answer) {
    const size_t at = answer.find("Set-Cookie: ");
    return at == std::string::npos ? "" : "Cookie: " + answer.substr(at + 12, answer.find(';', at) - at - 12) + "\r\n";
  };
  const std::string lead = cookie_of(Ask("127.0.0.40", "POST", "/api/v1/session", "", SignInBody(tokens_["team-lead"])));
  std::vector<std::string> viewer;
  for (int i = 0; i < 5; ++i)
    viewer.push_back(cookie_of(Ask("127.0.0.41", "POST", "/api/v1/session", "", SignInBody(tokens_["viewer"]))));
  EXPECT_EQ(AnswerStatus(Ask("127.0.0.40", "GET", "/api/v1/session", lead)), 200);
  EXPECT_EQ(AnswerStatus(Ask("127.0.0.41", "GET", "/api/v1/session", viewer[0])), 401);
  EXPECT_EQ(AnswerStatus(Ask("127.0.0.41", "GET", "/api/v1/session", viewer[1])), 401);
  for (int i = 2; i < 5; ++i) EXPECT_EQ(AnswerStatus(Ask("127.0.0.41", "GET", "/api/v1/session", viewer[i])), 200);

  nlohmann::json entries;
  for (int i = 0; i < 50 && entries.empty(); ++i) {  // the server audits them within a second
    entries = AdminCall("GET", "/api/v1/audit?action=session.evicted&target=user:viewer")["entries"];
    if (entries.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(entries.size(), 1u) << entries.dump();
  EXPECT_EQ(entries[0]["actor"], "viewer");
  EXPECT_EQ(entries[0]["after"]["ended_sessions"], 2);
  EXPECT_NE(entries[0]["after"]["reason"].get<std::string>().find("capped at 3"), std::string::npos);
}

TEST_F(SignInLimitsTest, RefusedPrivilegedAttemptsAreAuditedWithActorAndTarget) {
  Start();
  auto bearer = [this](const char* role) { return "Authorization: Bearer " + tokens_[role] + "\r\n"; };
  EXPECT_EQ(AnswerStatus(Ask("127.0.0.1", "PATCH", "/api/v1/teams/vision", bearer("member"), R"({"limit_gpus": 999})")),
            403);
  EXPECT_EQ(AnswerStatus(Ask("127.0.0.1", "POST", "/api/v1/users", bearer("team-lead"),
                             R"({"name": "lst-adm", "team": "vision", "role": "admin"})")),
            403);
  EXPECT_EQ(AnswerStatus(Ask("127.0.0.1", "POST", "/api/v1/nodes/n-000:drain", bearer("team-lead"))), 403);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"member", "team:vision"}, {"team-lead", "user:lst-adm"}, {"team-lead", "node:n-000"}};
  for (const auto& [actor, target] : expected) {
    auto e = AdminCall("GET", "/api/v1/audit?actor=" + actor + "&target=" + target)["entries"];
    ASSERT_EQ(e.size(), 1u) << actor << " " << target << ": " << e.dump();
    EXPECT_EQ(e[0]["action"], "request.denied");
    EXPECT_EQ(e[0]["changed"], false);
    EXPECT_EQ(e[0]["after"]["status"], 403);
    EXPECT_FALSE(e[0]["after"]["reason"].get<std::string>().empty());
  }
  EXPECT_EQ(AdminCall("GET", "/api/v1/nodes")["nodes"][0]["state"], "ready");  // and nothing changed
}

}  // namespace
}  // namespace tessera
