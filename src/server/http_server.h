#pragma once
// ApiServer: the REST API over HTTP or HTTPS (cpp-httplib). Every /api/v1 call needs
// `Authorization: Bearer <token>` or the web portal's session cookie (server/portal.h); /healthz, /readyz
// and /metrics do not. Errors are JSON
// {"error": {"code", "field", "message"}}; bodies over 1 MiB get 413. Endpoints: docs/api.md.

#include <memory>
#include <string>

#include "base/status.h"
#include "service/service.h"

namespace httplib {
class Server;
}

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
  std::unique_ptr<PortalApi> portal_;  // the web portal, its sessions and the utilisation history
  int port_ = 0;
  int listen_fd_ = -1;
};

}  // namespace tessera
