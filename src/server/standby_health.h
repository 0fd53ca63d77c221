#pragma once
// What a replica that waits to become the leader answers on its API address: GET /healthz 200 (the
// process is alive), GET /readyz and every other request 503 (it serves nothing yet), so that a Service
// sends traffic only to the leader and kubelet's liveness probe does not restart the standby. Stop frees
// the address for the API server the leader then starts there. Plain HTTP, a few threads.

#include <memory>
#include <string>
#include <thread>

#include "base/status.h"

namespace httplib {
class Server;
}

namespace tessera {

class StandbyHealth {
 public:
  // Serves on `listen` (HOST:PORT; port 0 = any free port); null when `listen` is empty. Errors when the
  // address cannot be used.
  static Result<std::unique_ptr<StandbyHealth>> Start(const std::string& listen);
  ~StandbyHealth();
  // Stops serving and closes the socket (idempotent).
  void Stop();
  int port() const { return port_; }

 private:
  StandbyHealth();
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace tessera
