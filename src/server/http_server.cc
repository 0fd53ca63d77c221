#include "server/http_server.h"

#include <httplib.h>

#include <fmt/format.h>

#include "base/thread_priority.h"
#include "cost/focus.h"
#include "server/jobs_api.h"
#include "server/json_views.h"
#include "server/metrics.h"
#include "server/nodes_api.h"
#include "server/portal_api.h"

namespace tessera {
namespace {

// httplib's pool whose workers lower their own CPU priority by `nice` before their first connection.
class WorkerPool final : public httplib::ThreadPool {
 public:
  WorkerPool(size_t threads, int nice) : httplib::ThreadPool(threads), nice_(nice) {}
  void enqueue(std::function<void()> fn) override {
    httplib::ThreadPool::enqueue([nice = nice_, fn = std::move(fn)] {
      thread_local bool lowered = false;
      if (!lowered) LowerThreadPriority(nice);
      lowered = true;
      fn();
    });
  }

 private:
  int nice_;
};

void SendJson(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void SendError(httplib::Response& res, const ApiError& e) { SendJson(res, HttpStatusOf(e.code), ErrorJson(e)); }

// Parses a JSON object body; a 400 naming the problem otherwise.
std::optional<nlohmann::json> ParseBody(const httplib::Request& req, httplib::Response& res, bool allow_empty) {
  if (req.body.empty() && allow_empty) return nlohmann::json::object();
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

bool ReadTime(const httplib::Request& req, const char* name, int64_t* out, httplib::Response& res) {
  *out = -1;
  if (!req.has_param(name)) return true;
  const std::string v = req.get_param_value(name);
  if (!v.empty() && v.find_first_not_of("0123456789") == std::string::npos) {
    *out = std::stoll(v);
    return true;
  }
  auto t = ParseIsoUtc(v);
  if (!t.ok()) {
    SendError(res, Invalid(name, fmt::format("{}: '{}' is neither an ISO 8601 UTC time nor Unix seconds", name, v)));
    return false;
  }
  *out = *t;
  return true;
}

}  // namespace

ApiServer::ApiServer(Service* service, ServerOptions options) : service_(service), options_(std::move(options)) {
  portal_ = std::make_unique<PortalApi>(service_, options_.clock_speed, !options_.tls_cert.empty());
}
ApiServer::~ApiServer() = default;

Status ApiServer::Bind() {
  if (!options_.tls_cert.empty() || !options_.tls_key.empty()) {
    if (options_.tls_cert.empty() || options_.tls_key.empty())
      return Status::Error("--tls-cert and --tls-key go together");
    auto ssl = std::make_unique<httplib::SSLServer>(options_.tls_cert.c_str(), options_.tls_key.c_str());
    if (!ssl->is_valid())
      return Status::Error(fmt::format("cannot load the TLS certificate '{}' and key '{}'", options_.tls_cert,
                                       options_.tls_key));
    http_ = std::move(ssl);
  } else {
    http_ = std::make_unique<httplib::Server>();
  }
  const int threads = std::max(8, options_.threads);
  const int nice = options_.request_nice;
  http_->new_task_queue = [threads, nice] { return new WorkerPool(threads, nice); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_keep_alive_max_count(100000);
  http_->set_tcp_nodelay(true);  // headers and body go out as separate writes: no Nagle delay on the second
  http_->set_read_timeout(30, 0);
  Routes();
  // httplib listens with a backlog of 5; a burst of connections would wait for SYN retransmission (1 s).
  // Keep the socket to widen the backlog after binding.
  http_->set_socket_options([this](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd_ = sock;
  });
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host.c_str());
    if (port_ <= 0) return Status::Error(fmt::format("cannot listen on {}", options_.host));
  } else {
    if (!http_->bind_to_port(options_.host.c_str(), options_.port))
      return Status::Error(fmt::format("cannot listen on {}:{} (in use, or not an address of this host)",
                                       options_.host, options_.port));
    port_ = options_.port;
  }
  if (listen_fd_ >= 0) ::listen(listen_fd_, 4096);
  return Status::Ok();
}

void ApiServer::Serve() {
  portal_->Start();
  http_->listen_after_bind();
}
void ApiServer::Stop() {
  if (http_) http_->stop();
  portal_->Stop();
}

void ApiServer::Routes() {
  httplib::Server& h = *http_;
  Service* s = service_;
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  // Wraps a handler that needs a caller: a bearer token, or the portal's session cookie (CSRF-checked).
  PortalApi* portal = portal_.get();
  auto authed = [s, portal](std::function<void(const Caller&, Req, Res)> f) -> httplib::Server::Handler {
    return [s, portal, f](Req req, Res res) {
      const Credential cred = portal->RequestCredentialOf(req);
      if (!cred.csrf_error.empty()) {
        return SendError(res, {ErrorCode::kPermissionDenied, "X-CSRF-Token", cred.csrf_error});
      }
      const std::string& token = cred.token;
      auto caller = token.empty() ? std::nullopt : s->Authenticate(token);
      if (!caller) {
        res.set_header("WWW-Authenticate", "Bearer");
        SendError(res, {ErrorCode::kUnauthenticated, "Authorization",
                        token.empty() ? "missing 'Authorization: Bearer <token>'" : "unknown or revoked token"});
        return;
      }
      f(*caller, req, res);
    };
  };

  h.set_error_handler([](Req req, Res res) {
    if (!res.body.empty()) return;
    ApiError e{ErrorCode::kNotFound, "", "no such endpoint: " + req.method + " " + req.path};
    if (res.status == 413) e = {ErrorCode::kInvalidArgument, "", "the request body is over 1 MiB"};
    else if (res.status == 400) e = Invalid("", "malformed HTTP request");
    else if (res.status != 404) e = {ErrorCode::kInternal, "", fmt::format("HTTP {}", res.status)};
    const int status = res.status;
    res.set_content(ErrorJson(e).dump(), "application/json");
    res.status = status;
  });
  h.set_exception_handler([](Req, Res res, std::exception_ptr) {
    SendError(res, {ErrorCode::kInternal, "", "internal error"});
  });

  portal_->Register(h, authed);
  RegisterNodeRoutes(h, s, authed);

  h.Get("/healthz", [](Req, Res res) { res.set_content("ok\n", "text/plain"); });
  h.Get("/readyz", [s](Req, Res res) {
    res.status = s->Ready() ? 200 : 503;
    res.set_content(s->Ready() ? "ready\n" : "starting\n", "text/plain");
  });
  h.Get("/metrics", [s](Req, Res res) { res.set_content(MetricsText(*s), "text/plain; version=0.0.4; charset=utf-8"); });

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

  h.Post("/api/v1/jobs", authed([s](const Caller& c, Req req, Res res) {
    if (c.role == Role::kViewer) return SendError(res, {ErrorCode::kPermissionDenied, "", "a viewer cannot submit jobs"});
    auto b = ParseBody(req, res, false);
    if (!b) return;
    auto spec = ParseJobSpec(*b);
    if (!spec.ok()) return SendError(res, spec.error());
    const std::string key = req.get_header_value("Idempotency-Key");
    if (key.size() > 255) return SendError(res, Invalid("Idempotency-Key", "Idempotency-Key: at most 255 characters"));
    bool created = false;
    auto r = s->Submit(c, spec.value(), key, &created);
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
  h.Get("/api/v1/queue", authed([s](const Caller& c, Req, Res res) {
    nlohmann::json arr = nlohmann::json::array();
    for (const QueueEntry& e : s->Queue(c)) arr.push_back(QueueEntryJson(e, *s));
    SendJson(res, 200, {{"jobs", arr}});
  }));
  h.Get("/api/v1/cluster", authed([s](const Caller&, Req, Res res) { SendJson(res, 200, ClusterJson(*s->snapshot(), *s)); }));
  h.Get("/api/v1/usage", authed([s](const Caller& c, Req req, Res res) {
    UsageQuery q;
    if (!ReadTime(req, "from", &q.from, res) || !ReadTime(req, "to", &q.to, res)) return;
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

}  // namespace tessera
