#include "server/http_server.h"

#include <httplib.h>

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "base/json_depth.h"
#include "base/thread_priority.h"
#include "base/utc_time.h"
#include "server/jobs_api.h"
#include "server/json_views.h"
#include "server/metrics.h"
#include "server/nodes_api.h"
#include "server/portal.h"
#include "server/portal_api.h"
#include "server/refusal_audit.h"
#include "server/respond.h"

namespace tessera {
namespace {

// Parses a JSON object body; a 400 naming the problem otherwise.
std::optional<nlohmann::json> ParseBody(const httplib::Request& req, httplib::Response& res, bool allow_empty) {
  if (req.body.empty() && allow_empty) return nlohmann::json::object();
  if (Status st = CheckJsonDepth(req.body); !st.ok()) {
    SendError(res, Invalid("", "the request body: " + st.message()));
    return std::nullopt;
  }
  nlohmann::json j = nlohmann::json::parse(req.body, nullptr, false);
  if (j.is_discarded()) {
    SendError(res, Invalid("", "the request body is not valid JSON"));
    return std::nullopt;
  }
  if (!j.is_object()) {
    SendError(res, Invalid("", "the request body must be a JSON object"));
    return std::nullopt;
  }
  return j;
}

// An error the connection does not survive: the rest of the request (a body) is left unread.
void SendFinalError(httplib::Response& res, const ApiError& e) {
  if (RequestGuard* g = RequestGuard::Current()) g->CloseAfterResponse();
  res.set_header("Connection", "close");
  SendError(res, e);
}

bool ParseJobId(const std::string& s, int64_t* id) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  *id = std::stoll(s);
  return true;
}

// GPUs in a request body: a non-negative number, stored in thousandths; -1 when absent.
bool ReadGpus(const nlohmann::json& b, const char* field, int64_t* out, httplib::Response& res) {
  *out = -1;
  if (!b.contains(field) || b[field].is_null()) return true;
  if (!b[field].is_number() || b[field].get<double>() < 0 || b[field].get<double>() > 1e7) {
    SendError(res, Invalid(field, fmt::format("field '{}': expected a non-negative number of GPUs", field)));
    return false;
  }
  *out = static_cast<int64_t>(b[field].get<double>() * 1000 + 0.5);
  return true;
}

// page_size: default 100 (ReadPageSize); false when the 400 was sent.
bool PageSizeOrSend400(const httplib::Request& req, int* out, httplib::Response& res) {
  *out = 100;
  if (auto e = ReadPageSize(req, out)) {
    SendError(res, *e);
    return false;
  }
  return true;
}

// ReadTime (request_checks.h); false when the 400 was sent.
bool TimeOrSend400(const httplib::Request& req, const char* name, int64_t* out, httplib::Response& res) {
  if (auto e = ReadTime(req, name, out)) {
    SendError(res, *e);
    return false;
  }
  return true;
}

using Authed = std::function<httplib::Server::Handler(AuthedHandler)>;

// A request that changes state (only the leader answers it): POST, PUT, PATCH, DELETE under /api/, but a
// portal sign-in or sign-out (this process's own sessions).
bool IsWrite(const httplib::Request& req) {
  if (req.method != "POST" && req.method != "PUT" && req.method != "PATCH" && req.method != "DELETE") return false;
  return req.path.starts_with("/api/") && req.path != "/api/v1/session";
}

// Handlers per resource; `authed` wraps a handler that needs a caller (ApiServer::Routes' authentication).
void RegisterTeamRoutes(httplib::Server& h, ServiceRef s, const Authed& authed) {
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  h.Post("/api/v1/teams", authed([s](const Caller& c, Req req, Res res) {
    auto b = ParseBody(req, res, false);
    if (!b) return;
    for (const auto& [k, v] : b->items())
      if (k != "name" && k != "guaranteed_gpus" && k != "limit_gpus" && k != "over_quota_weight")
        return SendError(res, Invalid(k, fmt::format("unknown field '{}'", k)));
    TeamRow t;
    if (!b->contains("name") || !(*b)["name"].is_string()) return SendError(res, Invalid("name", "field 'name': required string"));
    t.name = (*b)["name"].get<std::string>();
    if (!ReadGpus(*b, "guaranteed_gpus", &t.guaranteed_milli, res) || !ReadGpus(*b, "limit_gpus", &t.limit_milli, res)) return;
    t.guaranteed_milli = std::max<int64_t>(0, t.guaranteed_milli);
    if (b->contains("over_quota_weight")) {
      if (!(*b)["over_quota_weight"].is_number_integer())
        return SendError(res, Invalid("over_quota_weight", "field 'over_quota_weight': expected an integer"));
      t.over_quota_weight = (*b)["over_quota_weight"].get<int>();
    }
    auto r = s->CreateTeam(c, t);
    if (!r.ok()) return SendError(res, r.error());
    SendJson(res, 201, TeamJson(r.value()));
  }));
  h.Get("/api/v1/teams", authed([s](const Caller& c, Req, Res res) {
    nlohmann::json arr = nlohmann::json::array();
    for (const TeamView& t : s->Teams(c)) arr.push_back(TeamJson(t));
    SendJson(res, 200, {{"teams", arr}});
  }));

}

void RegisterUserRoutes(httplib::Server& h, ServiceRef s, const Authed& authed) {
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  h.Post("/api/v1/users", authed([s](const Caller& c, Req req, Res res) {
    auto b = ParseBody(req, res, false);
    if (!b) return;
    for (const auto& [k, v] : b->items()) {
      if (k != "name" && k != "team" && k != "role") return SendError(res, Invalid(k, fmt::format("unknown field '{}'", k)));
      if (!v.is_string()) return SendError(res, Invalid(k, fmt::format("field '{}': expected a string", k)));
    }
    auto str = [&](const char* k) { return b->contains(k) ? (*b)[k].get<std::string>() : std::string(); };
    auto r = s->CreateUser(c, str("name"), str("team"), b->contains("role") ? str("role") : "member");
    if (!r.ok()) return SendError(res, r.error());
    SendJson(res, 201, UserJson(r.value()));
  }));
  h.Get("/api/v1/users", authed([s](const Caller& c, Req, Res res) {
    nlohmann::json arr = nlohmann::json::array();
    for (const UserView& u : s->Users(c)) arr.push_back(UserJson(u));
    SendJson(res, 200, {{"users", arr}});
  }));

}

// The whole HTTP answer to a submission whose write failed after its answer was held: 503, and the
// connection closes (the answer held for it was never sent).
std::string NotStoredAnswer(const Status& st) {
  const std::string body = ErrorJson(ApiError{ErrorCode::kUnavailable, "", "not stored: " + st.message()})
                               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return fmt::format(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
      "Content-Length: {}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n{}",
      body.size(), body);
}

void RegisterJobRoutes(httplib::Server& h, ServiceRef s, const Authed& authed) {
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  h.Post("/api/v1/jobs", authed([s](const Caller& c, Req req, Res res) {
    if (c.role == Role::kViewer) return SendError(res, {ErrorCode::kPermissionDenied, "", "a viewer cannot submit jobs"});
    auto b = ParseBody(req, res, false);
    if (!b) return;
    auto spec = ParseJobSpec(*b);
    if (!spec.ok()) return SendError(res, spec.error());
    const std::string key = req.get_header_value("Idempotency-Key");
    if (key.size() > 255) return SendError(res, Invalid("Idempotency-Key", "Idempotency-Key: at most 255 characters"));
    bool created = false;
    // On a plain connection the answer waits in a gate for the write to be durable (sent by whichever
    // thread comes second), so this thread goes back to its connection at once.
    std::shared_ptr<ResponseGate> gate;
    if (RequestGuard* g = RequestGuard::Current()) gate = g->HoldResponse();
    std::function<void(const Status&)> on_durable;
    if (gate)
      on_durable = [gate](const Status& st) { gate->Settle(st.ok(), st.ok() ? "" : NotStoredAnswer(st)); };
    auto r = s->Submit(c, spec.value(), key, &created, std::move(on_durable));
    if (gate && !(r.ok() && created)) gate->Settle(true);  // nothing was queued: the answer is final now
    if (!r.ok()) return SendError(res, r.error());
    SendJson(res, created ? 201 : 200, JobJson(r.value(), *s));
  }));
  RegisterJobListRoute(h, s, authed);
  h.Get(R"(/api/v1/jobs/([^/:]+))", authed([s](const Caller& c, Req req, Res res) {
    int64_t id;
    if (!ParseJobId(req.matches[1], &id)) return SendError(res, {ErrorCode::kNotFound, "", "no job " + std::string(req.matches[1])});
    auto r = s->Get(c, id);
    if (!r.ok()) return SendError(res, r.error());
    SendJson(res, 200, JobDetailJson(r.value(), *s));
  }));
  h.Post(R"(/api/v1/jobs/([^/:]+):cancel)", authed([s](const Caller& c, Req req, Res res) {
    int64_t id;
    if (!ParseJobId(req.matches[1], &id)) return SendError(res, {ErrorCode::kNotFound, "", "no job " + std::string(req.matches[1])});
    auto r = s->Cancel(c, id);
    if (!r.ok()) return SendError(res, r.error());
    SendJson(res, 200, JobJson(r.value(), *s));
  }));
  h.Patch(R"(/api/v1/jobs/([^/:]+))", authed([s](const Caller& c, Req req, Res res) {
    int64_t id;
    if (!ParseJobId(req.matches[1], &id)) return SendError(res, {ErrorCode::kNotFound, "", "no job " + std::string(req.matches[1])});
    auto b = ParseBody(req, res, false);
    if (!b) return;
    for (const auto& [k, v] : b->items())
      if (k != "priority_class") return SendError(res, Invalid(k, fmt::format("field '{}': only priority_class can change", k)));
    if (!b->contains("priority_class") || !(*b)["priority_class"].is_string())
      return SendError(res, Invalid("priority_class", "field 'priority_class': required string"));
    auto r = s->SetPriority(c, id, (*b)["priority_class"].get<std::string>());
    if (!r.ok()) return SendError(res, r.error());
    SendJson(res, 200, JobJson(r.value(), *s));
  }));
}

void RegisterReportRoutes(httplib::Server& h, ServiceRef s, const Authed& authed) {
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  h.Get("/api/v1/queue", authed([s](const Caller& c, Req, Res res) {
    nlohmann::json arr = nlohmann::json::array();
    for (const QueueEntry& e : s->Queue(c)) arr.push_back(QueueEntryJson(e, *s));
    SendJson(res, 200, {{"jobs", arr}});
  }));
  h.Get("/api/v1/cluster",
        authed([s](const Caller&, Req, Res res) { SendJson(res, 200, ClusterJson(*s->snapshot())); }));
  h.Get("/api/v1/usage", authed([s](const Caller& c, Req req, Res res) {
    UsageQuery q;
    if (!TimeOrSend400(req, "from", &q.from, res) || !TimeOrSend400(req, "to", &q.to, res)) return;
    if (req.has_param("group_by")) q.group_by = req.get_param_value("group_by");
    const std::string format = req.has_param("format") ? req.get_param_value("format") : "json";
    if (format == "focus") {
      auto csv = s->UsageFocusCsv(c, q);
      if (!csv.ok()) return SendError(res, csv.error());
      return res.set_content(csv.value(), "text/csv");
    }
    if (format != "json" && format != "csv") return SendError(res, Invalid("format", "format: one of json, csv, focus"));
    auto rows = s->Usage(c, q);
    if (!rows.ok()) return SendError(res, rows.error());
    if (format == "csv") return res.set_content(UsageCsv(rows.value()), "text/csv");
    SendJson(res, 200, UsageJson(rows.value(), q.from, q.to, q.group_by));
  }));
}

}  // namespace

ApiServer::ApiServer(Service* service, ServerOptions options)
    : ApiServer(static_cast<ServiceSlot*>(nullptr), std::move(options)) {
  own_slot_ = ServiceSlot::Unowned(service);
  slot_ = own_slot_.get();
  service_ = ServiceRef(slot_);
  portal_ = std::make_unique<PortalApi>(service_, options_.clock_speed, !options_.tls_cert.empty(), options_.sessions);
}

ApiServer::ApiServer(ServiceSlot* slot, ServerOptions options)
    : slot_(slot),
      service_(slot),
      options_(std::move(options)),
      credential_limiter_({options_.sign_in_failures_per_min, options_.sign_in_extra_checks_per_min}),
      token_limiter_(options_.rate_limit_per_min),
      address_limiter_(options_.rate_limit_per_min) {
  if (slot_) portal_ = std::make_unique<PortalApi>(service_, options_.clock_speed, !options_.tls_cert.empty(), options_.sessions);
}
ApiServer::~ApiServer() = default;

Status ApiServer::Bind() {
  auto server = std::make_unique<GuardedServer>(options_.limits);
  auto proxies = TrustedProxies::Parse(options_.trusted_proxies);
  if (!proxies.ok()) return proxies.status();
  proxies_ = std::move(proxies).value();
  if (!options_.tls_cert.empty() || !options_.tls_key.empty()) {
    if (options_.tls_cert.empty() || options_.tls_key.empty())
      return Status::Error("--tls-cert and --tls-key go together");
    if (Status st = server->UseTls({options_.tls_cert, options_.tls_key, ""}); !st.ok()) return st;
  }
  guarded_ = server.get();
  http_ = std::move(server);
  const int threads = std::max(8, options_.threads);
  const int nice = options_.request_nice;
  guarded_->UseWorkers(static_cast<size_t>(threads), nice);
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_keep_alive_max_count(100000);
  http_->set_tcp_nodelay(true);  // headers and body go out as separate writes: no Nagle delay on the second
  // The whole-request deadline bounds a request (GuardedServer), TLS handshake included.
  http_->set_read_timeout(static_cast<time_t>(std::max(1.0, options_.limits.request_deadline_s)), 0);
  http_->set_keep_alive_timeout(static_cast<time_t>(std::max(1.0, options_.limits.keep_alive_s)));
  Routes();
  Guards();
  auto port = guarded_->Bind(options_.host, options_.port);
  if (!port.ok()) return port.status();
  port_ = *port;
  return Status::Ok();
}

void ApiServer::Serve() {
  portal_->Start();
  guarded_->Serve();
}
void ApiServer::Stop() {
  if (guarded_) guarded_->Stop();
  portal_->Stop();
}

void ApiServer::SendNotLeader(httplib::Response& res) const {
  const LeaderInfo i = options_.replica->Info();
  res.set_header("Retry-After", "1");
  if (!i.leader.empty() && !i.leading) res.set_header("Tessera-Leader", i.leader);
  SendError(res, {ErrorCode::kUnavailable, "",
                  i.leader.empty() ? "this replica does not lead and no leader is known yet; retry"
                                   : "this replica does not lead; send writes to " + i.leader});
}

// The checks before routing, the answers to protocol errors, and what every answer gets.
void ApiServer::Guards() {
  httplib::Server& h = *http_;
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  using HR = httplib::Server::HandlerResponse;
  const size_t max_body = options_.max_body_bytes;
  h.set_pre_routing_handler([this, max_body](Req req, Res res) {
    slot_->Pin();  // this request's service, to its end (the post-routing handler unpins)
    if (options_.replica && IsWrite(req) && !options_.replica->Leading()) {
      // Answered before its body is read: the connection cannot carry another request.
      if (RequestGuard* g = RequestGuard::Current()) g->CloseAfterResponse();
      res.set_header("Connection", "close");
      SendNotLeader(res);
      return HR::Handled;
    }
    if (auto e = CheckRequest(req, max_body)) {
      counters_.refused_requests.fetch_add(1, std::memory_order_relaxed);
      SendFinalError(res, *e);
      return HR::Handled;
    }
    // From here on the body may be read: at most the limit, as sent (httplib reads chunked bodies whole).
    if (RequestGuard* g = RequestGuard::Current()) g->LimitBody(static_cast<int64_t>(max_body) + 64 * 1024);
    const double now = SteadyNow();
    const std::string client = ClientOf(req);
    double wait = address_limiter_.TryTake(client, now);
    // A sign-in from an address whose credential checks are spent: refused before its body is read.
    if (wait == 0 && req.method == "POST" && req.path == "/api/v1/session")
      wait = credential_limiter_.RetryAfter(client, now);
    if (wait > 0) {
      res.set_header("Retry-After", std::to_string(std::max(1, static_cast<int>(std::ceil(wait)))));
      SendFinalError(res, {ErrorCode::kRateLimited, "", "too many requests from this address; retry later"});
      return HR::Handled;
    }
    StripBrotli(req);
    return HR::Unhandled;
  });
  h.set_post_routing_handler([this](Req req, Res res) {
    slot_->Unpin();
    // A write that failed because this replica stopped leading while it ran (the database refused it).
    if (options_.replica && res.status >= 500 && IsWrite(req) && !options_.replica->Leading() &&
        !res.has_header("Tessera-Leader"))
      SendNotLeader(res);
    if (req.path.starts_with("/api/")) res.set_header("Cache-Control", "no-store");
    if (res.status == 429) counters_.rate_limited.fetch_add(1, std::memory_order_relaxed);
    if (res.status != 401) return;
    counters_.auth_failures.fetch_add(1, std::memory_order_relaxed);
    const bool sign_in = req.method == "POST" && req.path == "/api/v1/session";
    if (sign_in) counters_.sign_in_failures.fetch_add(1, std::memory_order_relaxed);
    // Never the token: the address, the request and whether a credential came at all.
    fmt::print(stderr, "tessera serve: failed authentication from {}: {} {} ({})\n", ClientOf(req), req.method,
               req.path, sign_in ? "sign-in" : req.has_header("Authorization") ? "bearer" : "no or bad credential");
  });
  h.set_error_handler([](Req req, Res res) {
    RequestGuard* g = RequestGuard::Current();
    res.status = GuardedServer::ErrorStatus(res.status);
    if (!res.body.empty()) return;  // a handler's own answer
    // A protocol error: what follows on the connection cannot be trusted to start a request.
    if (g && res.status != 404) g->CloseAfterResponse();
    ApiError e{ErrorCode::kNotFound, "", "no such endpoint: " + req.method + " " + req.path};
    switch (res.status) {
      case 404: break;
      case 400: e = Invalid("", "malformed HTTP request"); break;
      case 408: e = {ErrorCode::kRequestTimeout, "", "the request was not complete within its deadline"}; break;
      case 413: e = {ErrorCode::kPayloadTooLarge, "", "the request body is over the limit"}; break;
      case 414: e = Invalid("", "the request target is too long"); break;
      case 431: e = Invalid("", "the request's headers are over the limit (128 lines, 64 KiB)"); break;
      case 415: e = {ErrorCode::kUnsupportedMedia, "", "unsupported media type"}; break;
      case 416: e = Invalid("Range", "the range cannot be satisfied"); break;
      default: e = {ErrorCode::kInternal, "", fmt::format("HTTP {}", res.status)};
    }
    const int status = res.status;
    if (status == 408 || status == 413) res.set_header("Connection", "close");
    SendJson(res, status, ErrorJson(e));
  });
  h.set_exception_handler([](Req, Res res, std::exception_ptr) {
    SendError(res, {ErrorCode::kInternal, "", "internal error"});
  });
}

std::string ApiServer::ServerMetrics() const {
  std::string o;
  auto counter = [&o](const char* name, const char* help, uint64_t v) {
    o += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, v);
  };
  counter("tessera_auth_failures_total", "Requests refused for a missing, unknown or revoked credential (401).",
          counters_.auth_failures.load());
  counter("tessera_sign_in_failures_total", "Failed sign-ins (POST /api/v1/session answered 401).",
          counters_.sign_in_failures.load());
  counter("tessera_rate_limited_total",
          "Requests answered 429 (wrong credentials, and the per-token and per-address request limits).",
          counters_.rate_limited.load());
  counter("tessera_refused_requests_total", "Requests refused before routing (bad bytes, framing or size).",
          counters_.refused_requests.load());
  counter("tessera_refused_connections_total", "Connections closed at once: over the per-address cap.",
          guarded_ ? guarded_->refused_connections() : 0);
  return o;
}

// GET /api/v1/audit (admin only): filters actor, target, action, since; paged by id.
void ApiServer::AuditRoute(const std::function<httplib::Server::Handler(CallerHandler)>& authed) {
  ServiceRef s = service_;
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  http_->Get("/api/v1/audit", authed([s](const Caller& c, Req req, Res res) {
    AuditQuery q;
    if (!PageSizeOrSend400(req, &q.limit, res) || !TimeOrSend400(req, "since", &q.since, res)) return;
    q.actor = req.get_param_value("actor");
    q.target = req.get_param_value("target");
    q.action = req.get_param_value("action");
    if (req.has_param("page_token") && !req.get_param_value("page_token").empty() &&
        !ParseJobId(req.get_param_value("page_token"), &q.after_id))
      return SendError(res, Invalid("page_token", "page_token: not a token this service gave"));
    bool more = false;
    auto rows = s->Audit(c, q, &more);
    if (!rows.ok()) return SendError(res, rows.error());
    nlohmann::json arr = nlohmann::json::array();
    for (const AuditRow& a : rows.value()) arr.push_back(AuditJson(a));
    SendJson(res, 200, {{"entries", arr},
                        {"next_page_token", more && !rows.value().empty() ? std::to_string(rows.value().back().id) : ""}});
  }));
}

std::optional<Caller> ApiServer::Authenticate(const httplib::Request& req, httplib::Response& res) {
  using Found = CredentialLimiter::Found;
  Credential cred;
  std::optional<Caller> caller;
  auto check = [&] {
    cred = portal_->RequestCredentialOf(req);
    if (!cred.csrf_error.empty()) return Found::kValid;                  // a live session: no guess (403)
    if (cred.source == Credential::Source::kNone) return Found::kWrong;  // a cookie without a live session
    if (cred.token.empty()) return Found::kStale;                        // Authorization without a token
    TokenCheck t = service_->CheckToken(cred.token);
    caller = std::move(t.caller);
    if (caller) return Found::kValid;
    // A replaced or revoked token is stale, as is the token behind a live session (revoked since).
    return t.retired || cred.source == Credential::Source::kSession ? Found::kStale : Found::kWrong;
  };
  const bool presented =
      req.has_header("Authorization") || !CookieValue(req.get_header_value("Cookie"), kSessionCookie).empty();
  if (presented) {
    const CredentialLimiter::Verdict v = credential_limiter_.Check(ClientOf(req), SteadyNow(), check);
    if (v.limited) {
      res.set_header("Retry-After", std::to_string(std::max(1, static_cast<int>(std::ceil(v.retry_after_s)))));
      SendError(res, {ErrorCode::kRateLimited, "", "too many wrong credentials from this address; retry later"});
      return std::nullopt;
    }
  }
  if (!cred.csrf_error.empty()) {
    SendError(res, {ErrorCode::kPermissionDenied, "X-CSRF-Token", cred.csrf_error});
    return std::nullopt;
  }
  if (!caller) {
    res.set_header("WWW-Authenticate", "Bearer");
    SendError(res, {ErrorCode::kUnauthenticated, "Authorization",
                    cred.token.empty() ? "missing 'Authorization: Bearer <token>'" : "unknown or revoked token"});
  }
  return caller;
}

void ApiServer::AuditRefusal(const Caller& c, const httplib::Request& req, const httplib::Response& res) {
  if (Status st = service_->RecordAudit(c, kDeniedAction, AuditTargetOf(req), RefusalJson(req, res), false); !st.ok())
    fmt::print(stderr, "tessera serve: cannot audit a refused {} {} of {}: {}\n", req.method, req.path, c.user,
               st.message());
}

void ApiServer::Routes() {
  httplib::Server& h = *http_;
  ServiceRef s = service_;
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  // Wraps a handler that needs a caller: a bearer token, or the portal's session cookie (CSRF-checked).
  RateLimiter* token_limit = &token_limiter_;
  auto authed = [this, token_limit](CallerHandler f) -> httplib::Server::Handler {
    return [this, token_limit, f](Req req, Res res) {
      std::optional<Caller> caller = Authenticate(req, res);
      if (!caller) return;
      if (const double wait = token_limit->TryTake(caller->user, SteadyNow()); wait > 0) {
        res.set_header("Retry-After", std::to_string(static_cast<int>(std::ceil(wait))));
        return SendError(res, {ErrorCode::kRateLimited, "", "too many requests with this token; retry later"});
      }
      caller->source = ClientOf(req);
      f(*caller, req, res);
      if (res.status == 403) AuditRefusal(*caller, req, res);  // the one place refusals are recorded
    };
  };
  auto limit = [this](Req req, const PortalOptions::Check& check) {
    return credential_limiter_.Check(ClientOf(req), SteadyNow(), check);
  };

  portal_->Register(h, authed, limit);
  RegisterNodeRoutes(h, s, authed);

  h.Get("/healthz", [](Req, Res res) { res.set_content("ok\n", "text/plain"); });
  const ReplicaRole* replica = options_.replica;
  h.Get("/readyz", [s, replica](Req, Res res) {
    if (replica && !replica->Leading()) {
      res.status = 503;
      return res.set_content("follower\n", "text/plain");
    }
    res.status = s->Ready() ? 200 : 503;
    res.set_content(s->Ready() ? "ready\n" : "starting\n", "text/plain");
  });
  // Who leads (any authenticated caller). Without replicas this process is the leader.
  h.Get("/api/v1/leader", authed([replica](const Caller&, Req, Res res) {
    LeaderInfo i = replica ? replica->Info() : LeaderInfo{"", 0, "", true};
    auto url = [](const std::string& u) { return u.empty() ? nlohmann::json(nullptr) : nlohmann::json(u); };
    SendJson(res, 200, {{"leader", url(i.leader)}, {"epoch", i.epoch}, {"self", url(i.self)},
                        {"role", i.leading ? "leader" : "follower"}});
  }));
  h.Get("/metrics", [this, s](Req, Res res) {
    res.set_content(MetricsText(*s) + ServerMetrics(), "text/plain; version=0.0.4; charset=utf-8");
  });

  RegisterTeamRoutes(h, s, authed);
  RegisterUserRoutes(h, s, authed);
  RegisterJobRoutes(h, s, authed);
  RegisterReportRoutes(h, s, authed);
  AuditRoute(authed);
}

}  // namespace tessera
