#include "k8s/extender/extender_server.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

namespace tessera {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxBody = 64u << 20;  // a node list of a large cluster, with full node objects

void SendAnswer(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

// `Authorization: Bearer <token>` (the scheme in any case) carries `token`, compared in constant time.
bool BearerMatches(const httplib::Request& req, const std::string& token) {
  const std::string h = req.get_header_value("Authorization");
  if (h.size() != 7 + token.size()) return false;
  for (size_t i = 0; i < 7; ++i)
    if (std::tolower(static_cast<unsigned char>(h[i])) != "bearer "[i]) return false;
  return CRYPTO_memcmp(h.data() + 7, token.data(), token.size()) == 0;
}

}  // namespace

ConnectionLimits ExtenderServerOptions::DefaultExtenderLimits() {
  ConnectionLimits l;
  l.request_deadline_s =
      10;  // kube-scheduler's httpTimeout is 5 s by default: an honest request is done by then
  l.max_per_address = 16;  // kube-scheduler keeps a few keep-alive connections; 16 leaves room for bursts
  l.keep_alive_s = 30;     // kube-scheduler reuses its connections between scheduling cycles
  return l;
}

ExtenderServer::ExtenderServer(const Extender* extender, ExtenderServerOptions options)
    : extender_(extender), options_(std::move(options)) {}

std::string ExtenderServer::url() const {
  return fmt::format("{}://{}:{}{}", options_.tls.cert.empty() ? "http" : "https", options_.host, port_,
                     options_.prefix);
}

bool ExtenderServer::Authorized(const httplib::Request& req) const {
  const bool by_cert = !options_.tls.client_ca.empty();
  if (options_.token.empty() && !by_cert) return true;
  if (!options_.token.empty() && BearerMatches(req, options_.token)) return true;
  const RequestGuard* g = RequestGuard::Current();
  return by_cert && g != nullptr && g->peer_verified();
}

void ExtenderServer::Routes() {
  GuardedServer& h = *server_;
  auto verb = [this](ExtenderAnswer (Extender::*f)(std::string_view) const) {
    return [this, f](const httplib::Request& req, httplib::Response& res) {
      ExtenderAnswer a;
      try {
        a = (extender_->*f)(req.body);
      } catch (const std::exception& e) {
        a = {400, json{{"Error", std::string("malformed request: ") + e.what()}}};
      }
      SendAnswer(res, a.status, a.body);
    };
  };
  h.Post(options_.prefix + "/filter", verb(&Extender::Filter));
  h.Post(options_.prefix + "/prioritize", verb(&Extender::Prioritize));
  h.Post(options_.prefix + "/preempt", verb(&Extender::Preempt));
  h.Post(options_.prefix + "/bind", verb(&Extender::Bind));
  // Probes: the extender keeps no state, so a process that answers is alive and ready.
  for (const char* probe : {"/healthz", "/readyz"})
    h.Get(probe,
          [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
  h.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    RequestGuard* g = RequestGuard::Current();
    if (req.path == "/healthz" || req.path == "/readyz" || Authorized(req)) {
      if (g) g->LimitBody(static_cast<int64_t>(kMaxBody) + 64 * 1024);  // the body as sent, framing included
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (g) g->CloseAfterResponse();  // its body is never read
    res.set_header("WWW-Authenticate", "Bearer");
    SendAnswer(res, 401,
               json{{"Error",
                     "unauthenticated: send the bearer token of --token-file, or a client "
                     "certificate of --client-ca"}});
    return httplib::Server::HandlerResponse::Handled;
  });
  h.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    res.status = GuardedServer::ErrorStatus(res.status);
    if (!res.body.empty()) return;
    if (res.status != 404) res.set_header("Connection", "close");
    SendAnswer(res, res.status,
               json{{"Error", res.status == 431   ? "the request's headers are over the limit"
                              : res.status == 408 ? "the request was not complete within its deadline"
                              : res.status == 413 ? "the request body is over the limit"
                              : res.status == 404 ? "no such verb"
                                                  : "malformed HTTP request"}});
  });
}

Status ExtenderServer::Bind() {
  server_ = std::make_unique<GuardedServer>(options_.limits);
  if (!options_.tls.cert.empty() || !options_.tls.key.empty()) {
    if (options_.tls.cert.empty() || options_.tls.key.empty())
      return Status::Error("--tls-cert and --tls-key go together");
    if (Status st = server_->UseTls(options_.tls); !st.ok()) return st;
  } else if (!options_.tls.client_ca.empty()) {
    return Status::Error("--client-ca needs --tls-cert and --tls-key");
  }
  server_->UseWorkers(static_cast<size_t>(options_.threads));
  server_->set_payload_max_length(kMaxBody);
  server_->set_keep_alive_max_count(100000);
  server_->set_tcp_nodelay(true);
  server_->set_keep_alive_timeout(static_cast<time_t>(options_.limits.keep_alive_s));
  server_->set_read_timeout(static_cast<time_t>(options_.limits.request_deadline_s), 0);
  server_->set_write_timeout(static_cast<time_t>(options_.limits.write_timeout_s), 0);
  Routes();
  auto port = server_->Bind(options_.host, options_.port);
  if (!port.ok()) return port.status();
  port_ = *port;
  return Status::Ok();
}

void ExtenderServer::Serve() { server_->Serve(); }

void ExtenderServer::Stop() {
  if (server_) server_->Stop();
}

Result<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error(fmt::format("--token-file: cannot read '{}'", path));
  std::string line;
  std::getline(in, line);
  const size_t b = line.find_first_not_of(" \t\r\n"), e = line.find_last_not_of(" \t\r\n");
  line = b == std::string::npos ? "" : line.substr(b, e - b + 1);
  if (line.size() < 16)
    return Status::Error(
        fmt::format("--token-file: '{}' holds {} (want a token of at least 16 characters on its first line)",
                    path, line.empty() ? "no token" : "a token too short to be secret"));
  return line;
}

int RunExtenderServer(const Extender& extender, const ExtenderServerOptions& options) {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  ExtenderServer server(&extender, options);
  if (Status st = server.Bind(); !st.ok()) {
    fmt::print(stderr, "tessera k8s extender: {}\n", st.message());
    return 1;
  }
  fmt::print("tessera k8s extender: listening on {}\n", server.url());
  std::fflush(stdout);
  std::thread t([&server] { server.Serve(); });
  int sig = 0;
  sigwait(&sigs, &sig);
  server.Stop();
  t.join();
  return 0;
}

}  // namespace tessera
