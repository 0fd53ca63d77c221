#pragma once
// What the audit log records of a refused request: a 403 answered to an authenticated caller (its role or
// team may not do it). ApiServer writes one entry per refusal where every authenticated handler's answer
// passes (the `authed` wrapper), so no handler records its own: action `request.denied`, the caller as
// actor, the request's target, and `after` = {"refused": "<METHOD> <path>", "status": 403, "reason"}.

#include <httplib.h>

#include <string>

namespace tessera {

inline constexpr const char* kDeniedAction = "request.denied";

// The target of a request as the audit log names targets: `team:<name>`, `user:<name>`, `node:<name>` or
// `job:<id>` from the path (/api/v1/teams/vision, /api/v1/users/ana/token, /api/v1/nodes/n1:drain), or,
// for a POST to /api/v1/teams, /users or /nodes, the body's "name"; otherwise the resource ("jobs",
// "audit", "usage", ...).
std::string AuditTargetOf(const httplib::Request& req);
// The entry's `after` JSON for a refused request and its answer (the error's message as the reason).
std::string RefusalJson(const httplib::Request& req, const httplib::Response& res);

}  // namespace tessera
