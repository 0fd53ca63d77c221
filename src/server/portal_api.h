#pragma once
// PortalApi: what the API server adds for the web portal, kept apart from the API handlers:
//  - the portal's routes and browser sessions (server/portal.h), signing in with the service's tokens;
//  - Credential(): the API's token from a bearer header or a session cookie (with the CSRF check);
//  - GET /api/v1/cluster/history: allocation over time, sampled once a wall second from the service's
//    published snapshot by a thread that runs between Start() and Stop();
//  - GET /api/v1/jobs/{id}/whatif: a pending job's earliest start with a half or a quarter of its GPUs;
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
#include "service/service.h"

namespace tessera {

// A team's ETag: its version, quoted.
std::string TeamEtag(const TeamView& t);

class PortalApi {
 public:
  // `speed`: service seconds per wall second (the clock's, for the page's clock estimate).
  PortalApi(Service* service, double speed, bool secure_cookies);
  ~PortalApi();
  // Registers the portal's routes and the history endpoint (`authed` wraps a handler that needs a caller).
  void Register(httplib::Server& http,
                const std::function<httplib::Server::Handler(std::function<void(const Caller&, const httplib::Request&,
                                                                                 httplib::Response&)>)>& authed);
  Credential RequestCredentialOf(const httplib::Request& req) { return RequestCredential(req, sessions_); }
  void Start();
  void Stop();
  // Takes one history sample from the current snapshot (the sampler thread calls this; tests may).
  void Sample();
  const UtilisationHistory& history() const { return history_; }

 private:
  using Authed = std::function<httplib::Server::Handler(
      std::function<void(const Caller&, const httplib::Request&, httplib::Response&)>)>;
  void RegisterAdmin(httplib::Server& http, const Authed& authed);

  Service* service_;
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
