#include "server/portal.h"

#include <strings.h>

#include <algorithm>
#include <cmath>
#include <string_view>
#include <nlohmann/json.hpp>

#include "base/json_depth.h"
#include "server/portal_assets.h"

namespace tessera {
namespace {

constexpr std::string_view kNotBuilt =
    "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Tessera</title></head><body>"
    "<h1>Tessera</h1><p>The web portal was not built into this binary: the build found no node and npm. "
    "Install them (scripts/install-deps.sh) and rebuild. The API at <code>/api/v1</code> and the "
    "<code>tessera</code> command work without it.</p></body></html>";

// Served with every portal page: no framing, no inline scripts, nothing loaded from elsewhere.
void SecurityHeaders(httplib::Response& res) {
  res.set_header("Content-Security-Policy",
                 "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                 "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("X-Frame-Options", "DENY");
}

void JsonError(httplib::Response& res, int status, std::string_view code, std::string_view message,
               std::string_view field = "") {
  nlohmann::json e = {{"code", code}, {"message", message}};
  if (!field.empty()) e["field"] = field;
  res.status = status;
  res.set_content(nlohmann::json{{"error", e}}.dump(), "application/json");
}

void ServeAsset(std::string_view path, httplib::Response& res) {
  SecurityHeaders(res);
  if (PortalAssets().empty()) {
    res.status = 503;
    res.set_content(std::string(kNotBuilt), "text/html; charset=utf-8");
    return;
  }
  const PortalAsset* a = FindPortalAsset(path);
  if (!a) {
    res.status = 404;
    res.set_content("not found", "text/plain");
    return;
  }
  // Vite names assets by content hash, so they never change; index.html must be revalidated.
  res.set_header("Cache-Control", path.starts_with("/assets/") ? "public, max-age=31536000, immutable" : "no-cache");
  res.set_content(std::string(a->body), std::string(a->content_type));
}

nlohmann::json SessionBody(const Session& s, const PortalOptions& o) {
  nlohmann::json j = {{"user", s.who.user}, {"team", s.who.team}, {"role", s.who.role}, {"csrf_token", s.csrf_token}};
  if (o.session_extra) j.update(o.session_extra());
  return j;
}

std::optional<Session> CookieSession(const httplib::Request& req, SessionStore& sessions) {
  return sessions.Find(CookieValue(req.get_header_value("Cookie"), kSessionCookie));
}

bool SafeMethod(std::string_view m) { return m == "GET" || m == "HEAD" || m == "OPTIONS"; }

// The browser's Origin, when it sent one, names this server (scheme and host:port as the Host header says).
bool SameOrigin(const httplib::Request& req) {
  if (!req.has_header("Origin")) return true;
  std::string origin = req.get_header_value("Origin");
  std::string host = req.get_header_value("Host");
  return origin == "http://" + host || origin == "https://" + host;
}

using Found = CredentialLimiter::Found;

// Runs `check` under the options' limit (unlimited without one).
CredentialLimiter::Verdict Limited(const httplib::Request& req, const PortalOptions& o, const PortalOptions::Check& check) {
  if (o.limit) return o.limit(req, check);
  CredentialLimiter::Verdict v;
  v.checked = true;
  v.found = check();
  return v;
}

void TooManyFailures(httplib::Response& res, double retry_after_s) {
  res.set_header("Retry-After", std::to_string(std::max<int64_t>(1, static_cast<int64_t>(std::ceil(retry_after_s)))));
  JsonError(res, 429, "RateLimited", "too many wrong credentials from this address; retry later");
}

// The live session of the request's cookie, checked under the options' limit: a cookie without a live
// session is a wrong credential. False when the answer (429) was sent; `*s` is empty without a session.
bool LimitedCookieSession(const httplib::Request& req, httplib::Response& res, SessionStore& sessions,
                          const PortalOptions& o, std::optional<Session>* s) {
  const std::string id = CookieValue(req.get_header_value("Cookie"), kSessionCookie);
  if (id.empty()) return true;
  const auto v = Limited(req, o, [&] {
    *s = sessions.Find(id);
    return *s ? Found::kValid : Found::kWrong;
  });
  if (v.limited) TooManyFailures(res, v.retry_after_s);
  return !v.limited;
}

void SignIn(const httplib::Request& req, httplib::Response& res, SessionStore& sessions, const PortalOptions& o) {
  if (req.get_header_value("Content-Type").find("application/json") != 0)
    return JsonError(res, 415, "InvalidArgument", "the sign-in body must be JSON: {\"token\": \"...\"}");
  if (!SameOrigin(req)) return JsonError(res, 403, "PermissionDenied", "sign-in from another origin");
  if (Status st = CheckJsonDepth(req.body); !st.ok())
    return JsonError(res, 400, "InvalidArgument", "the sign-in body: " + st.message());
  nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
  if (!body.is_object() || !body.contains("token") || !body["token"].is_string() ||
      body["token"].get<std::string>().empty())
    return JsonError(res, 400, "InvalidArgument", "field 'token': required, a string", "token");
  std::string token = body["token"].get<std::string>();
  std::optional<SessionIdentity> who;
  const auto v = Limited(req, o, [&] {
    who = o.authenticate ? o.authenticate(token) : std::nullopt;
    if (who) return Found::kValid;
    return o.retired && o.retired(token) ? Found::kStale : Found::kWrong;
  });
  if (v.limited) return TooManyFailures(res, v.retry_after_s);
  if (!who) return JsonError(res, 401, "Unauthenticated", "the token is not valid");
  Session s = sessions.Create(std::move(token), *who);
  res.set_header("Set-Cookie", SessionCookieHeader(s, SessionLimits{}.max_age_s, o.secure_cookies));
  res.set_header("Cache-Control", "no-store");
  res.set_content(SessionBody(s, o).dump(), "application/json");
}

}  // namespace

std::string WithoutBrotli(std::string_view accept_encoding) {
  std::string out;
  while (!accept_encoding.empty()) {
    size_t end = accept_encoding.find(',');
    std::string_view item = accept_encoding.substr(0, end);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    std::string_view coding = item.substr(0, item.find(';'));
    while (!coding.empty() && coding.back() == ' ') coding.remove_suffix(1);
    if (coding != "br" && !item.empty()) out += (out.empty() ? "" : ", ") + std::string(item);
    if (end == std::string_view::npos) break;
    accept_encoding.remove_prefix(end + 1);
  }
  return out;
}

void StripBrotli(const httplib::Request& req) {
  auto it = req.headers.find("Accept-Encoding");
  if (it != req.headers.end() && it->second.find("br") != std::string::npos) {
    // The request object is the server's own (non-const); only this header changes.
    const_cast<std::string&>(it->second) = WithoutBrotli(it->second);
  }
}

void RegisterPortal(httplib::Server& server, SessionStore& sessions, PortalOptions options) {
  auto opts = std::make_shared<PortalOptions>(std::move(options));
  // cpp-httplib compresses brotli at quality 11, which takes seconds for the few hundred KB of a jobs list
  // or the portal's script; a browser that offers brotli also offers gzip, so it gets gzip instead.
  server.set_pre_routing_handler([](const httplib::Request& req, httplib::Response&) {
    StripBrotli(req);
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server.Get("/", [](const httplib::Request&, httplib::Response& res) { ServeAsset("/index.html", res); });
  server.Get("/index.html", [](const httplib::Request&, httplib::Response& res) { ServeAsset("/index.html", res); });
  server.Get(R"(/assets/[A-Za-z0-9._-]+)",
             [](const httplib::Request& req, httplib::Response& res) { ServeAsset(req.path, res); });
  server.Post("/api/v1/session", [&sessions, opts](const httplib::Request& req, httplib::Response& res) {
    SignIn(req, res, sessions, *opts);
  });
  server.Get("/api/v1/session", [&sessions, opts](const httplib::Request& req, httplib::Response& res) {
    std::optional<Session> s;
    if (!LimitedCookieSession(req, res, sessions, *opts, &s)) return;
    if (!s || (opts->authenticate && !opts->authenticate(s->bearer_token))) {
      res.set_header("Set-Cookie", ClearSessionCookieHeader(opts->secure_cookies));
      return JsonError(res, 401, "Unauthenticated", "not signed in");
    }
    res.set_header("Cache-Control", "no-store");
    res.set_content(SessionBody(*s, *opts).dump(), "application/json");
  });
  server.Delete("/api/v1/session", [&sessions, opts](const httplib::Request& req, httplib::Response& res) {
    // Without a live session the answer would differ (no CSRF check): the lookup is a credential check.
    std::optional<Session> live;
    if (!LimitedCookieSession(req, res, sessions, *opts, &live)) return;
    Credential c = RequestCredential(req, sessions);
    if (!c.csrf_error.empty()) return JsonError(res, 403, "PermissionDenied", c.csrf_error);
    if (c.source == Credential::Source::kSession)
      sessions.End(CookieValue(req.get_header_value("Cookie"), kSessionCookie));
    res.set_header("Set-Cookie", ClearSessionCookieHeader(opts->secure_cookies));
    res.set_content(R"({"signed_out":true})", "application/json");
  });
}

Credential RequestCredential(const httplib::Request& req, SessionStore& sessions) {
  Credential c;
  std::string auth = req.get_header_value("Authorization");
  if (!auth.empty()) {
    c.source = Credential::Source::kBearer;
    // The scheme is case-insensitive (RFC 9110, 11.1); one or more spaces follow it.
    if (auth.size() > 7 && strncasecmp(auth.c_str(), "Bearer ", 7) == 0)
      c.token = auth.substr(auth.find_first_not_of(' ', 7) == std::string::npos ? auth.size()
                                                                                 : auth.find_first_not_of(' ', 7));
    return c;
  }
  std::optional<Session> s = CookieSession(req, sessions);
  if (!s) return c;
  if (!SafeMethod(req.method)) {
    if (!SameOrigin(req)) {
      c.csrf_error = "request from another origin";
      return c;
    }
    if (!ConstantTimeEquals(req.get_header_value(std::string(kCsrfHeader).c_str()), s->csrf_token)) {
      c.csrf_error = "missing or wrong X-CSRF-Token for this session";
      return c;
    }
  }
  c.source = Credential::Source::kSession;
  c.token = s->bearer_token;
  return c;
}

}  // namespace tessera
