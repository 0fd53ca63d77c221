#pragma once
// ApiServer: the REST API over HTTP or HTTPS (cpp-httplib). Every /api/v1 call needs
// `Authorization: Bearer <token>`; /healthz, /readyz and /metrics do not. Errors are JSON
// {"error": {"code", "field", "message"}}; bodies over 1 MiB get 413. Endpoints: docs/api.md. The web portal
// (server/portal.h) is served at `/`; its session cookie is accepted wherever a bearer token is.

#include <memory>
#include <string>

#include "base/status.h"
#include "server/session.h"
#include "service/service.h"

namespace httplib {
class Server;
}

namespace tessera {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;          // 0 = any free port
  std::string tls_cert;     // both set: HTTPS
  std::string tls_key;
  int threads = 192;        // worker threads (one per open keep-alive connection)
  size_t max_body_bytes = 1 << 20;
};

class ApiServer {
 public:
  ApiServer(Service* service, ServerOptions options);
  ~ApiServer();
  // Binds the listening socket; the error names the address or the TLS files.
  Status Bind();
  int port() const { return port_; }
  // Serves until Stop(); in-flight requests finish first.
  void Serve();
  void Stop();

 private:
  void Routes();
  Service* service_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::unique_ptr<SessionStore> sessions_;  // the portal's browser sessions
  int port_ = 0;
  int listen_fd_ = -1;
};

}  // namespace tessera
