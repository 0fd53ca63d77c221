#pragma once
// The nodes API (admin only; docs/api.md "Nodes"): GET/POST /api/v1/nodes, GET/DELETE /api/v1/nodes/{name},
// POST /api/v1/nodes/{name}:cordon|:uncordon|:drain. Handlers only: the service decides.

#include <functional>

#include "server/service_slot.h"
#include "service/service.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace tessera {

using AuthedHandler = std::function<void(const Caller&, const httplib::Request&, httplib::Response&)>;

// Registers the routes; `authed` wraps a handler that needs a caller (ApiServer's authentication).
void RegisterNodeRoutes(httplib::Server& http, ServiceRef service,
                        const std::function<std::function<void(const httplib::Request&, httplib::Response&)>(
                            AuthedHandler)>& authed);

}  // namespace tessera
