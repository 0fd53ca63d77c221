#pragma once
// ApiServer: the REST API over HTTP or HTTPS (cpp-httplib). Every /api/v1 call needs
// `Authorization: Bearer <token>` (the scheme in any case) or the web portal's session cookie
// (server/portal.h); /healthz, /readyz and /metrics do not. Errors are JSON
// {"error": {"code", "field", "message"}}; bodies over 1 MiB get 413 as soon as the limit is passed,
// whatever the framing. Requests are checked before routing (server/request_checks.h) and bounded per
// connection (net/guarded_server.h). Wrong credentials are limited per client address
// (server/credential_limits.h; behind a trusted proxy, the forwarded client: server/client_address.h), and
// every 403 answered to an authenticated caller is audited (server/refusal_audit.h). Endpoints:
// docs/api.md; limits and their defaults: docs/security.md.

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "net/guarded_server.h"
#include "server/client_address.h"
#include "server/credential_limits.h"
#include "server/replica_role.h"
#include "server/request_checks.h"
#include "server/service_slot.h"
#include "server/session.h"
#include "service/service.h"

namespace tessera {

class PortalApi;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;          // 0 = any free port
  std::string tls_cert;     // both set: HTTPS
  std::string tls_key;
  int threads = 192;        // worker threads (one per open keep-alive connection)
  // Niceness added to the worker threads (Linux: per thread), so that the store's writer and the cycle's
  // short locked sections, which every request waits for, win a contended core over request parsing.
  int request_nice = 2;
  size_t max_body_bytes = 1 << 20;
  double clock_speed = 1;   // service seconds per wall second (told to the portal's page)
  ConnectionLimits limits;  // request deadline, connections per address (plain HTTP)
  // Wrong credentials per client address (server/credential_limits.h), sign-ins, bearer tokens and session
  // cookies together: answered 401 up to this many a minute, then 429.
  double sign_in_failures_per_min = 20;
  // Once those are spent, wrong credentials still checked a minute (a valid token gets in; a wrong one 429).
  double sign_in_extra_checks_per_min = 10;
  // Requests per minute per token and per client address before 429; 0 = no limit.
  double rate_limit_per_min = 0;
  // CIDRs of reverse proxies whose X-Forwarded-For names the client (server/client_address.h); Bind()
  // refuses a malformed one.
  std::vector<std::string> trusted_proxies;
  SessionLimits sessions;   // the portal's sessions: timeouts, 32 per user
  // One of several replicas on one database (server/replica.h), or null (the only one). A follower answers
  // /readyz 503 and a write 503 with `Retry-After: 1` and `Tessera-Leader: URL`; GET /api/v1/leader says
  // who leads. Must outlive the server.
  const ReplicaRole* replica = nullptr;
};

// What the server counts beyond the service's counters (appended to /metrics).
struct ServerCounters {
  std::atomic<uint64_t> auth_failures{0}, sign_in_failures{0}, rate_limited{0}, refused_requests{0};
};

class ApiServer {
 public:
  ApiServer(Service* service, ServerOptions options);
  // Answers with the slot's current service (replaced while serving: server/service_slot.h).
  ApiServer(ServiceSlot* slot, ServerOptions options);
  ~ApiServer();
  // Binds the listening socket; the error names the address or the TLS files.
  Status Bind();
  int port() const { return port_; }
  // Serves until Stop(); in-flight requests finish first.
  void Serve();
  void Stop();

 private:
  void Routes();
  void Guards();
  using CallerHandler = std::function<void(const Caller&, const httplib::Request&, httplib::Response&)>;
  void AuditRoute(const std::function<httplib::Server::Handler(CallerHandler)>& authed);
  // The client address of a request (behind a trusted proxy, the forwarded client).
  std::string ClientOf(const httplib::Request& req) const { return proxies_.ClientOf(req); }
  // The caller of the request's bearer token or session cookie, checked under the credential limits; else
  // nullopt, with the answer sent (401; 403 for a failed CSRF check; 429).
  std::optional<Caller> Authenticate(const httplib::Request& req, httplib::Response& res);
  // Records a 403 answered to `c` in the audit log (server/refusal_audit.h).
  void AuditRefusal(const Caller& c, const httplib::Request& req, const httplib::Response& res);
  std::string ServerMetrics() const;
  // A follower's answer to a write: 503, Retry-After, Tessera-Leader.
  void SendNotLeader(httplib::Response& res) const;
  std::unique_ptr<ServiceSlot> own_slot_;  // the one-service constructor's
  ServiceSlot* slot_;
  ServiceRef service_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::unique_ptr<PortalApi> portal_;  // the web portal, its sessions and the utilisation history
  int port_ = 0;
  GuardedServer* guarded_ = nullptr;  // http_
  TrustedProxies proxies_;  // set by Bind()
  CredentialLimiter credential_limiter_;
  RateLimiter token_limiter_, address_limiter_;
  ServerCounters counters_;
};

}  // namespace tessera
