#include "server/portal_api.h"

#include <charconv>
#include <chrono>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/json_depth.h"
#include "base/utc_time.h"
#include "server/json_views.h"
#include "server/request_checks.h"
#include "server/respond.h"

namespace tessera {
namespace {

int64_t WallSeconds() { return static_cast<int64_t>(std::time(nullptr)); }

// A GPU count field of a JSON body in thousandths: nullopt when absent; false (and a 400) when malformed.
bool GpusField(const nlohmann::json& b, const char* field, std::optional<int64_t>* out, httplib::Response& res) {
  if (!b.contains(field) || b[field].is_null()) return true;
  if (!b[field].is_number() || b[field].get<double>() > 1e7) {
    SendError(res, Invalid(field, fmt::format("field '{}': expected a number of GPUs", field)));
    return false;
  }
  *out = static_cast<int64_t>(b[field].get<double>() * 1000 + (b[field].get<double>() < 0 ? -0.5 : 0.5));
  return true;
}

// allowed_priority_classes: a list of class names (at most 64); false (and a 400) otherwise.
bool ClassesField(const nlohmann::json& b, std::optional<std::vector<std::string>>* out, httplib::Response& res) {
  if (!b.contains("allowed_priority_classes")) return true;
  const nlohmann::json& v = b["allowed_priority_classes"];
  bool ok = v.is_array() && v.size() <= 64;
  for (size_t i = 0; ok && i < v.size(); ++i) ok = v[i].is_string() && v[i].get<std::string>().size() <= 63;
  if (!ok) {
    SendError(res, Invalid("allowed_priority_classes", "field 'allowed_priority_classes': a list of class names"));
    return false;
  }
  *out = v.get<std::vector<std::string>>();
  return true;
}

// If-Match: "\"<version>\"" (an ETag this server gave) or *. False once it answered: 400 when malformed, 412
// when its digits pass any version.
bool IfMatch(const httplib::Request& req, std::optional<uint64_t>* out, httplib::Response& res) {
  if (!req.has_header("If-Match")) return true;
  std::string v = req.get_header_value("If-Match");
  if (v == "*") return true;
  if (v.starts_with("W/")) v = v.substr(2);
  if (v.size() < 3 || v.size() > 22 || v.front() != '"' || v.back() != '"' ||
      v.find_first_not_of("0123456789", 1) != v.size() - 1) {
    SendError(res, Invalid("If-Match", "If-Match: an ETag from this server, e.g. \"3\""));
    return false;
  }
  uint64_t version = 0;
  const char* first = v.data() + 1;
  const char* last = v.data() + v.size() - 1;
  if (auto [end, ec] = std::from_chars(first, last, version); ec != std::errc() || end != last) {
    // 20 digits past the largest version: no team ever had it.
    SendError(res, ApiError{ErrorCode::kPreconditionFailed, "If-Match",
                               "If-Match: no version of this team is that large (the ETag is not this server's)"});
    return false;
  }
  *out = version;
  return true;
}

}  // namespace

std::string TeamEtag(const TeamView& t) { return fmt::format("\"{}\"", t.version); }

PortalApi::PortalApi(ServiceRef service, double speed, bool secure_cookies, SessionLimits session_limits)
    : service_(service),
      speed_(speed > 0 ? speed : 1),
      secure_cookies_(secure_cookies),
      sessions_(WallSeconds, session_limits) {}

PortalApi::~PortalApi() { Stop(); }

void PortalApi::Register(
    httplib::Server& http,
    const std::function<httplib::Server::Handler(
        std::function<void(const Caller&, const httplib::Request&, httplib::Response&)>)>& authed,
    decltype(PortalOptions::limit) limit) {
  PortalOptions o;
  o.authenticate = [s = service_](const std::string& token) -> std::optional<SessionIdentity> {
    auto c = s->Authenticate(token);
    if (!c) return std::nullopt;
    return SessionIdentity{c->user, c->team, RoleName(c->role)};
  };
  o.retired = [s = service_](const std::string& token) { return s->CheckToken(token).retired; };
  o.limit = std::move(limit);
  o.session_extra = [s = service_, speed = speed_] { return nlohmann::json{{"now", s->Now()}, {"speed", speed}}; };
  o.secure_cookies = secure_cookies_;
  RegisterPortal(http, sessions_, std::move(o));
  RegisterAdmin(http, authed);

  http.Get("/api/v1/cluster/history", authed([this](const Caller&, const httplib::Request& req, httplib::Response& res) {
    int64_t from, to;
    for (auto [name, out] : {std::pair{"from", &from}, std::pair{"to", &to}})
      if (auto e = ReadTime(req, name, out)) return SendError(res, *e);
    size_t max_points = 500;
    if (req.has_param("max_points")) {
      const std::string v = req.get_param_value("max_points");
      if (v.empty() || v.size() > 5 || v.find_first_not_of("0123456789") != std::string::npos || std::stoi(v) < 1)
        return SendError(res, Invalid("max_points", "max_points: an integer from 1 to 99999"));
      max_points = std::stoul(v);
    }
    nlohmann::json points = nlohmann::json::array();
    for (const UtilisationSample& p : history_.Range(from, to, max_points))
      points.push_back({{"t", TimeJson(p.t)}, {"total_gpus", p.total_gpus},
                        {"allocated_gpus", static_cast<double>(p.allocated_milli) / 1000}, {"busy_gpus", p.busy_gpus}});
    res.set_content(nlohmann::json{{"now", service_->Now()}, {"points", std::move(points)}}.dump(), "application/json");
  }));
}

void PortalApi::RegisterAdmin(
    httplib::Server& http,
    const std::function<httplib::Server::Handler(
        std::function<void(const Caller&, const httplib::Request&, httplib::Response&)>)>& authed) {
  ServiceRef s = service_;
  auto token_route = [this, s](bool revoke) {
    return [this, s, revoke](const Caller& c, const httplib::Request& req, httplib::Response& res) {
      auto r = s->ReplaceToken(c, req.matches[1], revoke);
      if (!r.ok()) return SendError(res, r.error());
      // Replacing your own token from the portal keeps this session (on the new token): the page shows the
      // new token instead of signing out. Other sessions on the old token end (the token check refuses it).
      if (!revoke && r.value().name == c.user && RequestCredentialOf(req).source == Credential::Source::kSession)
        sessions_.Rebind(CookieValue(req.get_header_value("Cookie"), kSessionCookie), r.value().token);
      res.set_header("Cache-Control", "no-store");
      res.set_content(UserJson(r.value()).dump(), "application/json");
    };
  };
  http.Post(R"(/api/v1/users/([a-z0-9._-]+)/token)", authed(token_route(false)));
  http.Delete(R"(/api/v1/users/([a-z0-9._-]+)/token)", authed(token_route(true)));
  http.Get(R"(/api/v1/jobs/(\d{1,18})/whatif)", authed([s](const Caller& c, const httplib::Request& req, httplib::Response& res) {
    auto r = s->WhatIf(c, std::stoll(req.matches[1]));
    if (!r.ok()) return SendError(res, r.error());
    nlohmann::json options = nlohmann::json::array();
    for (const WhatIfOption& o : r.value()) {
      nlohmann::json j = {{"fraction", o.fraction}, {"gpus", o.gpus}, {"estimated_start", TimeJson(o.estimated_start)}};
      j["change"] = o.change.empty() ? nlohmann::json() : nlohmann::json(o.change);
      if (!o.mig_profile.empty()) j["mig_profile"] = o.mig_profile;
      j["reason"] = o.code.empty() ? nlohmann::json() : nlohmann::json{{"code", o.code}, {"message", o.message}};
      options.push_back(std::move(j));
    }
    res.set_content(nlohmann::json{{"job", req.matches[1]}, {"options", std::move(options)}}.dump(), "application/json");
  }));
  http.Patch(R"(/api/v1/teams/([a-z0-9_-]+))", authed([s](const Caller& c, const httplib::Request& req, httplib::Response& res) {
    if (Status st = CheckJsonDepth(req.body); !st.ok())
      return SendError(res, Invalid("", "the request body: " + st.message()));
    nlohmann::json b = nlohmann::json::parse(req.body, nullptr, false);
    if (!b.is_object()) return SendError(res, Invalid("", "the request body must be a JSON object"));
    for (const auto& [k, v] : b.items())
      if (k != "guaranteed_gpus" && k != "limit_gpus" && k != "over_quota_weight" && k != "allowed_priority_classes")
        return SendError(res, Invalid(k, fmt::format("unknown field '{}' (guaranteed_gpus, limit_gpus, "
                                                        "over_quota_weight, allowed_priority_classes)", k)));
    Service::TeamChange change;
    if (b.contains("over_quota_weight")) {
      const nlohmann::json& w = b["over_quota_weight"];
      if (!w.is_number_integer() || w.get<int64_t>() < 0 || w.get<int64_t>() > 65535)
        return SendError(res, Invalid("over_quota_weight", "field 'over_quota_weight': an integer 0..65535"));
      change.over_quota_weight = static_cast<int>(w.get<int64_t>());
    }
    if (!GpusField(b, "guaranteed_gpus", &change.guaranteed_milli, res) ||
        !GpusField(b, "limit_gpus", &change.limit_milli, res) || !ClassesField(b, &change.allowed_classes, res) ||
        !IfMatch(req, &change.if_version, res))
      return;
    auto r = s->UpdateTeam(c, req.matches[1], change);
    if (!r.ok()) return SendError(res, r.error());
    res.set_header("ETag", TeamEtag(r.value()));
    res.set_content(TeamJson(r.value()).dump(), "application/json");
  }));
}

void PortalApi::Sample() {
  auto snap = service_->snapshot();
  if (!snap || !snap->summary) return;
  UtilisationSample s;
  s.t = snap->at;
  s.total_gpus = snap->summary->gpus;
  s.busy_gpus = snap->summary->busy_gpus;
  s.allocated_milli = snap->summary->allocated_milli;
  history_.Record(s);
}

void PortalApi::AuditSessionEvictions() {
  for (const SessionEvictions& e : sessions_.TakeEvictions()) {
    const std::string reason =
        e.all_users ? fmt::format("all users' sessions are capped at {}: the least recently used ended first", e.cap)
                    : fmt::format("sessions per user are capped at {}: a sign-in beyond it ended the user's least "
                                  "recently used session",
                                  e.cap);
    const nlohmann::json after = {{"ended_sessions", e.count}, {"reason", reason}};
    Caller who;
    who.user = e.user;
    if (Status st = service_->RecordAudit(who, "session.evicted", "user:" + e.user, after.dump(), true); !st.ok())
      fmt::print(stderr, "tessera serve: cannot audit {} ended sessions of {}: {}\n", e.count, e.user, st.message());
  }
}

void PortalApi::Start() {
  std::lock_guard lock(mu_);
  if (sampler_.joinable()) return;
  stop_ = false;
  sampler_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      Sample();
      AuditSessionEvictions();
      lock.lock();
      cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
    }
  });
}

void PortalApi::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (!sampler_.joinable()) return;
  sampler_.join();
  AuditSessionEvictions();  // the last second's (the service is still running while its server stops)
}

}  // namespace tessera
