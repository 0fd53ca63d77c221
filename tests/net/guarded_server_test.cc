// GuardedServer in-process, over real sockets: TLS with and without client certificates, the handshake
// under the request deadline, header caps answered 431, the per-address connection cap, answers with and
// without a body (the head waits for the body), 100 Continue, answers held for an outcome (ResponseGate).
#include "net/guarded_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

#include "testing/certs.h"
#include "testing/raw_conn.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using testing::RawConn;
using Clock = std::chrono::steady_clock;

class GuardedServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera-net-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
    fs::remove_all(dir_);
  }
  // Starts a server whose GET /who answers whether the client's certificate was verified.
  void Start(ConnectionLimits limits, const TlsFiles* tls = nullptr) {
    server_ = std::make_unique<GuardedServer>(limits);
    if (tls != nullptr) ASSERT_TRUE(server_->UseTls(*tls).ok());
    server_->Get("/who", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(RequestGuard::Current()->peer_verified() ? "verified" : "anonymous", "text/plain");
    });
    server_->Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.body, "text/plain");
    });
    // POST /held: the answer waits for the test to settle its gate (kept in held_); ?now settles it in the
    // handler, before the answer is written.
    server_->Post("/held", [this](const httplib::Request& req, httplib::Response& res) {
      std::shared_ptr<ResponseGate> gate = RequestGuard::Current()->HoldResponse();
      if (gate && req.has_param("now")) gate->Settle(true);
      std::lock_guard<std::mutex> lock(held_mu_);
      held_.push_back(gate);
      res.set_content("held " + req.body, "text/plain");
    });
    server_->set_error_handler([](const httplib::Request&, httplib::Response& res) {
      res.status = GuardedServer::ErrorStatus(res.status);
    });
    port_ = server_->bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  testing::TestCerts Certs() {
    testing::TestCerts c;
    EXPECT_TRUE(testing::MakeTestCerts(dir_, &c)) << "openssl CLI needed (scripts/install-deps.sh)";
    return c;
  }
  // GET `path` over HTTPS, verifying the server against the CA, with a client certificate when given.
  httplib::Result TlsGet(const testing::TestCerts& c, const std::string& path, const std::string& cert = "",
                         const std::string& key = "") {
    httplib::SSLClient cli("127.0.0.1", port_, cert, key);
    cli.set_ca_cert_path(c.ca.c_str());
    cli.enable_server_certificate_verification(true);
    cli.set_connection_timeout(3);
    cli.set_read_timeout(3);
    return cli.Get(path.c_str());
  }

  // The gate of the `i`th held answer, once its handler ran (null: not held, or not yet).
  std::shared_ptr<ResponseGate> Held(size_t i) {
    for (int tries = 0; tries < 300; ++tries) {
      {
        std::lock_guard<std::mutex> lock(held_mu_);
        if (held_.size() > i) return held_[i];
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return nullptr;
  }

  fs::path dir_;
  std::mutex held_mu_;
  std::vector<std::shared_ptr<ResponseGate>> held_;
  std::unique_ptr<GuardedServer> server_;
  std::thread thread_;
  int port_ = 0;
};

TEST_F(GuardedServerTest, ServesTlsAndVerifiesClientCertificatesOfItsCa) {
  const testing::TestCerts c = Certs();
  const TlsFiles tls{c.server_cert, c.server_key, c.ca};
  Start(ConnectionLimits{}, &tls);
  auto anonymous = TlsGet(c, "/who");
  ASSERT_TRUE(anonymous) << "no client certificate: the handshake passes, handlers decide";
  EXPECT_EQ(anonymous->body, "anonymous");
  auto verified = TlsGet(c, "/who", c.client_cert, c.client_key);
  ASSERT_TRUE(verified);
  EXPECT_EQ(verified->body, "verified");
  EXPECT_FALSE(TlsGet(c, "/who", c.rogue_cert, c.rogue_key)) << "a certificate of another CA: no handshake";
  httplib::Client plain("127.0.0.1", port_);
  plain.set_read_timeout(2);
  auto p = plain.Get("/who");
  EXPECT_TRUE(!p || p->status >= 400) << "plain HTTP to a TLS port answers nothing";
}

TEST_F(GuardedServerTest, WithoutAClientCaNobodyIsVerified) {
  const testing::TestCerts c = Certs();
  const TlsFiles tls{c.server_cert, c.server_key, ""};
  Start(ConnectionLimits{}, &tls);
  auto r = TlsGet(c, "/who", c.client_cert, c.client_key);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "anonymous");
}

TEST_F(GuardedServerTest, ASlowHandshakeIsCutAtTheRequestDeadline) {
  const testing::TestCerts c = Certs();
  const TlsFiles tls{c.server_cert, c.server_key, ""};
  ConnectionLimits limits;
  limits.request_deadline_s = 1;
  Start(limits, &tls);
  RawConn slow(port_);
  ASSERT_TRUE(slow.Send(std::string("\x16\x03\x01\x02\x00", 5)));  // the start of a ClientHello, then nothing
  const auto t0 = Clock::now();
  std::string got;
  EXPECT_TRUE(slow.ReadToClose(5, &got));
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(2500));
  auto r = TlsGet(c, "/who");
  ASSERT_TRUE(r) << "the server still serves";
  EXPECT_EQ(r->status, 200);
}

TEST_F(GuardedServerTest, HeaderFloodsAreAnswered431AndClosed) {
  ConnectionLimits limits;
  limits.max_header_lines = 16;
  limits.max_header_bytes = 4096;
  Start(limits);
  for (const std::string line : {std::string("a:b\r\n"), "X-Long: " + std::string(1000, 'a') + "\r\n"}) {
    RawConn c(port_);
    ASSERT_TRUE(c.Send("GET /who HTTP/1.1\r\nHost: x\r\n"));
    for (int i = 0; i < 64; ++i) c.Send(line);
    std::string got;
    EXPECT_TRUE(c.ReadToClose(5, &got));
    EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 431") << got;
  }
}

TEST_F(GuardedServerTest, ConnectionsPerAddressAreCapped) {
  ConnectionLimits limits;
  limits.max_per_address = 2;
  Start(limits);
  RawConn a(port_), b(port_);
  ASSERT_TRUE(a.Send("G"));
  ASSERT_TRUE(b.Send("G"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // both admitted and reading
  RawConn third(port_);
  std::string got;
  EXPECT_TRUE(third.ReadToClose(2, &got)) << "the third connection from 127.0.0.1 is closed at once";
  EXPECT_EQ(got, "");
  EXPECT_GE(server_->refused_connections(), 1u);
}

TEST(GuardedServerTls, UnusableFilesAreNamed) {
  GuardedServer s{ConnectionLimits{}};
  const Status st = s.UseTls({"/nonexistent/cert.pem", "/nonexistent/key.pem", ""});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/nonexistent/cert.pem"), std::string::npos) << st.message();
  EXPECT_FALSE(s.tls());
  EXPECT_FALSE(s.UseTls({"", "", ""}).ok());
}

// The head of an answer waits for its body; an answer without one (HEAD) is sent when the request ends.
TEST_F(GuardedServerTest, AnswersWithAndWithoutABodyArriveWhole) {
  Start(ConnectionLimits{});
  RawConn c(port_);
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send("HEAD /who HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string out;
  EXPECT_FALSE(c.ReadToClose(0.5, &out));  // kept alive
  EXPECT_EQ(out.rfind("HTTP/1.1 200", 0), 0u) << out;
  EXPECT_EQ(out.find("anonymous"), std::string::npos) << out;
  out.clear();
  ASSERT_TRUE(c.Send("GET /who HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_TRUE(c.ReadToClose(3, &out));
  EXPECT_EQ(out.rfind("HTTP/1.1 200", 0), 0u) << out;
  EXPECT_EQ(out.substr(out.size() - 9), "anonymous") << out;
}

// "100 Continue" goes out at once: the client waits for it before it sends the body.
TEST_F(GuardedServerTest, ContinueIsSentBeforeTheBody) {
  Start(ConnectionLimits{});
  RawConn c(port_);
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(
      c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n"
             "Connection: close\r\n\r\n"));
  std::string out;
  EXPECT_FALSE(c.ReadToClose(0.5, &out));
  EXPECT_EQ(out.rfind("HTTP/1.1 100 Continue\r\n\r\n", 0), 0u) << out;
  ASSERT_TRUE(c.Send("hello"));
  EXPECT_TRUE(c.ReadToClose(3, &out));
  EXPECT_NE(out.find("HTTP/1.1 200"), std::string::npos) << out;
  EXPECT_EQ(out.substr(out.size() - 5), "hello");
}

// A held answer leaves once its outcome is good, and a request sent behind it (pipelined) is answered after
// it, never before.
TEST_F(GuardedServerTest, HeldAnswersWaitForTheirOutcomeAndLeaveInOrder) {
  Start(ConnectionLimits{});
  RawConn c(port_);
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(
      c.Send("POST /held HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nonePOST /echo HTTP/1.1\r\n"
             "Host: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\ntwo"));
  std::shared_ptr<ResponseGate> gate = Held(0);
  ASSERT_NE(gate, nullptr);
  std::string out;
  EXPECT_FALSE(c.ReadToClose(0.4, &out));
  EXPECT_EQ(out, "") << "nothing before the outcome";
  gate->Settle(true);
  EXPECT_TRUE(c.ReadToClose(3, &out));
  const size_t first = out.find("held one"), second = out.find("two");
  ASSERT_NE(first, std::string::npos) << out;
  ASSERT_NE(second, std::string::npos) << out;
  EXPECT_LT(first, second) << out;
  EXPECT_EQ(out.rfind("HTTP/1.1 200", 0), 0u) << out;
}

// An outcome known before the answer is written (the write was quick) sends the answer as it is written.
TEST_F(GuardedServerTest, AnAnswerSettledBeforeItIsWrittenLeavesAtOnce) {
  Start(ConnectionLimits{});
  RawConn c(port_);
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send("POST /held?now=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na"));
  std::string out;
  EXPECT_FALSE(c.ReadToClose(0.5, &out));  // kept alive
  EXPECT_EQ(out.rfind("HTTP/1.1 200", 0), 0u) << out;
  EXPECT_EQ(out.substr(out.size() - 6), "held a") << out;
  out.clear();
  ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nConnection: close\r\n\r\nb"));
  EXPECT_TRUE(c.ReadToClose(3, &out));
  EXPECT_EQ(out.substr(out.size() - 1), "b") << out;
}

// A bad outcome sends the failure answer instead of the held one, and the connection closes: a request
// behind it is not answered.
TEST_F(GuardedServerTest, AFailedOutcomeSendsItsAnswerAndCloses) {
  Start(ConnectionLimits{});
  RawConn c(port_);
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send("POST /held HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\none"));
  std::shared_ptr<ResponseGate> gate = Held(0);
  ASSERT_NE(gate, nullptr);
  ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\ntwo"));
  const std::string failure =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nConnection: close\r\n\r\nlost";
  gate->Settle(false, failure);
  gate->Settle(true);  // a second outcome changes nothing
  std::string out;
  EXPECT_TRUE(c.ReadToClose(3, &out));
  EXPECT_EQ(out, failure);
}

// TLS connections cannot hold answers: the handler is told so (it then waits itself).
TEST_F(GuardedServerTest, TlsConnectionsDoNotHoldAnswers) {
  const testing::TestCerts certs = Certs();
  const TlsFiles tls{certs.server_cert, certs.server_key, ""};
  Start(ConnectionLimits{}, &tls);
  httplib::SSLClient cli("127.0.0.1", port_);
  cli.set_ca_cert_path(certs.ca.c_str());
  cli.enable_server_certificate_verification(true);
  auto r = cli.Post("/held", "x", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "held x");
  std::lock_guard<std::mutex> lock(held_mu_);
  ASSERT_EQ(held_.size(), 1u);  // the handler ran before the answer came
  EXPECT_EQ(held_[0], nullptr);
}

// The listening socket of this process on `port` (-1: none).
int ListeningSocketOn(int port) {
  for (int fd = 3; fd < 1024; ++fd) {
    int listening = 0;
    socklen_t len = sizeof listening;
    sockaddr_in a{};
    socklen_t alen = sizeof a;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &alen) == 0 && ntohs(a.sin_port) == port)
      return fd;
  }
  return -1;
}

// An accept that fails for good (here: the listening socket shut down under it, so accept says EINVAL)
// ends cpp-httplib's accept loop, which closes the socket; Serve binds the address again and serves on,
// until Stop.
TEST(GuardedServerServe, ResumesAfterTheAcceptLoopEndsAndStopsOnStop) {
  GuardedServer server{ConnectionLimits{}};
  server.Get("/who",
             [](const httplib::Request&, httplib::Response& res) { res.set_content("here", "text/plain"); });
  auto port = server.Bind("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status().message();
  std::thread serving([&] { server.Serve(); });
  auto first = httplib::Client("127.0.0.1", *port).Get("/who");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->body, "here");
  const int fd = ListeningSocketOn(*port);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(shutdown(fd, SHUT_RDWR), 0);
  for (int i = 0; i < 300 && server.resumed() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server.resumed(), 1);
  std::string body;
  for (int i = 0; i < 100 && body.empty(); ++i) {  // refused while it binds again
    if (auto again = httplib::Client("127.0.0.1", *port).Get("/who"))
      body = again->body;
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(body, "here");
  server.Stop();
  serving.join();  // Stop ends Serve
  EXPECT_FALSE(httplib::Client("127.0.0.1", *port).Get("/who"));
  EXPECT_EQ(server.resumed(), 1);
}

}  // namespace
}  // namespace tessera
