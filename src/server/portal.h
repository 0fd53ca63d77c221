#pragma once
// The web portal on the API server: the embedded static files at `/` and `/assets/`, and the session
// endpoints the sign-in form uses:
//   POST   /api/v1/session  {"token": "..."}  -> 200 {user, team, role, csrf_token, ...} + session cookie
//   GET    /api/v1/session                    -> the same body for a live session cookie, else 401
//   DELETE /api/v1/session                    -> ends the session (needs X-CSRF-Token), clears the cookie
// A wrong sign-in token and a session cookie without a live session count against the options' `limit`
// (429 with Retry-After once it refuses).
// RequestCredential() lets the API accept the session cookie wherever it accepts a bearer token.

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/credential_limits.h"
#include "server/session.h"

namespace tessera {

struct PortalOptions {
  // Checks an API token (as the API does for a bearer token): the caller, or nullopt when it is not valid.
  std::function<std::optional<SessionIdentity>(const std::string& token)> authenticate;
  // Whether a token that is not valid was valid once (replaced or revoked): a stale credential, not a guess.
  // May be empty (every invalid token counts as wrong).
  std::function<bool(const std::string& token)> retired;
  // Runs a credential check of a request (a sign-in's token, a session cookie's lookup) under the server's
  // limits on wrong credentials (server/credential_limits.h). May be empty: checks run unlimited.
  using Check = std::function<CredentialLimiter::Found()>;
  std::function<CredentialLimiter::Verdict(const httplib::Request& req, const Check& check)> limit;
  // Extra fields for the session body (e.g. the service clock: {"now": ..., "speed": ...}); may be empty.
  std::function<nlohmann::json()> session_extra;
  bool secure_cookies = false;  // set Secure on the cookie (when serving TLS)
};

// An Accept-Encoding value without its brotli ("br") coding, e.g. "gzip, deflate, br" -> "gzip, deflate".
std::string WithoutBrotli(std::string_view accept_encoding);
// Drops brotli from the request's Accept-Encoding (RegisterPortal's pre-routing handler; a server that
// sets its own calls this).
void StripBrotli(const httplib::Request& req);

// Registers the portal's routes on `server` (and its pre-routing handler, which steers browsers from
// cpp-httplib's slow brotli compression to gzip). `sessions` and the options' functions must outlive it.
void RegisterPortal(httplib::Server& server, SessionStore& sessions, PortalOptions options);

// Where a request's API credential came from.
struct Credential {
  enum class Source { kNone, kBearer, kSession } source = Source::kNone;
  std::string token;        // the API token to check as a bearer token
  std::string csrf_error;   // non-empty: a session request that failed the CSRF check (answer 403)
};

// The request's API token: the Authorization bearer token when there is one; else the token behind a live
// session cookie, provided that a state-changing method (anything but GET/HEAD/OPTIONS) carries the
// session's X-CSRF-Token and, when the browser sent an Origin, that it is this server's.
Credential RequestCredential(const httplib::Request& req, SessionStore& sessions);

}  // namespace tessera
