#pragma once
// PortalApi: what the API server adds for the web portal, kept apart from the API handlers:
//  - the portal's routes and browser sessions (server/portal.h), signing in with the service's tokens;
//  - Credential(): the API's token from a bearer header or a session cookie (with the CSRF check);
//  - GET /api/v1/cluster/history: allocation over time, sampled once a wall second from the service's
//    published snapshot by a thread that runs between Start() and Stop();
//  - GET /api/v1/jobs/{id}/whatif: a pending job's earliest start with a half or a quarter of its GPUs;
//  - browser sessions capped per user (SessionLimits::max_per_user): the sessions a sign-in ends are audited
//    (`session.evicted`, one entry per user and second with their number);
//  - the Admin page's endpoints: POST/DELETE /api/v1/users/{name}/token (a new token / revoke it) and
//    PATCH /api/v1/teams/{name} (quota).

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "server/history.h"
#include "server/portal.h"
#include "server/session.h"
#include "server/service_slot.h"
#include "service/service.h"

namespace tessera {

// A team's ETag: its version, quoted.
std::string TeamEtag(const TeamView& t);

class PortalApi {
 public:
  // `speed`: service seconds per wall second (the clock's, for the page's clock estimate).
  PortalApi(ServiceRef service, double speed, bool secure_cookies, SessionLimits session_limits = {});
  ~PortalApi();
  // Registers the portal's routes and the history endpoint (`authed` wraps a handler that needs a caller;
  // `limit` runs the sign-in's and the session cookie's credential checks under the server's limits).
  void Register(httplib::Server& http,
                const std::function<httplib::Server::Handler(std::function<void(const Caller&, const httplib::Request&,
                                                                                 httplib::Response&)>)>& authed,
                decltype(PortalOptions::limit) limit = nullptr);
  Credential RequestCredentialOf(const httplib::Request& req) { return RequestCredential(req, sessions_); }
  void Start();
  void Stop();
  // Takes one history sample from the current snapshot (the sampler thread calls this; tests may).
  void Sample();
  // Writes an audit entry `session.evicted` for each user whose sessions a cap ended since the last call
  // (the sampler thread calls this every second, and Stop; tests may).
  void AuditSessionEvictions();
  const UtilisationHistory& history() const { return history_; }

 private:
  using Authed = std::function<httplib::Server::Handler(
      std::function<void(const Caller&, const httplib::Request&, httplib::Response&)>)>;
  void RegisterAdmin(httplib::Server& http, const Authed& authed);

  ServiceRef service_;
  double speed_;
  bool secure_cookies_;
  SessionStore sessions_;
  UtilisationHistory history_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread sampler_;
};

}  // namespace tessera
