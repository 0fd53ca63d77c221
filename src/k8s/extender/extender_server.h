#pragma once
// The extender's listener: the verbs at PREFIX/filter, /prioritize, /preempt and /bind, and GET /healthz
// and /readyz (200, never authenticated, for kubelet's probes), on a GuardedServer: a whole-request
// deadline (TLS handshake included), header caps (431), a cap on connections per client address, and
// enough workers that the slow clients one address may hold never starve the others.
//
// Authentication (both optional; with either set, a verb without credentials is answered 401):
//  - `token`: `Authorization: Bearer <token>` (compared in constant time);
//  - `tls.client_ca`: a client certificate that CA signed (a certificate from another CA fails the TLS
//    handshake). kube-scheduler's extender configuration (tlsConfig certFile/keyFile) presents one; it has
//    no field for a bearer token, so the token is for other callers.
// With both set, either credential is enough.

#include <memory>
#include <string>

#include "k8s/extender/extender.h"
#include "net/guarded_server.h"

namespace tessera {

struct ExtenderServerOptions {
  std::string host = "127.0.0.1";
  int port = 8888;
  std::string prefix;  // "" or "/something"
  TlsFiles tls;        // cert and key: HTTPS
  std::string token;   // non-empty: the bearer token verbs need
  ConnectionLimits limits = DefaultExtenderLimits();
  int threads = 96;  // workers: more than max_per_address times the addresses a few slow clients use

  static ConnectionLimits DefaultExtenderLimits();
};

// One listener; Bind, then Serve on a thread of its own until Stop.
class ExtenderServer {
 public:
  ExtenderServer(const Extender* extender, ExtenderServerOptions options);
  // Listens on host:port (port 0: any free port). Errors name the TLS file or the address.
  Status Bind();
  int port() const { return port_; }
  std::string url() const;
  void Serve();
  void Stop();

 private:
  void Routes();
  bool Authorized(const httplib::Request& req) const;

  const Extender* extender_;
  ExtenderServerOptions options_;
  std::unique_ptr<GuardedServer> server_;
  int port_ = 0;
};

// Reads a bearer token file: its first line, without surrounding whitespace. An error names the file when
// it cannot be read, is empty, or holds fewer than 16 characters.
Result<std::string> ReadTokenFile(const std::string& path);

// Serves until SIGTERM/SIGINT (blocked in the calling thread and every thread it starts). Prints
// "tessera k8s extender: listening on URL" once bound; returns 0 after a signal, 1 when it cannot listen.
int RunExtenderServer(const Extender& extender, const ExtenderServerOptions& options);

}  // namespace tessera
