#pragma once
// GET /api/v1/jobs: the jobs list with filters (state, including `active`; team; project; search), sort
// (id, or newest first by submitted/started/ended), a cursor (page_token) and a version for polls: the
// answer carries `version`, and a request with `since=<that version>` gets 304 with no body while the
// page it would return is unchanged. Handler only: the service decides (Service::ListJobs).

#include "server/nodes_api.h"

namespace tessera {

void RegisterJobListRoute(
    httplib::Server& http, ServiceRef service,
    const std::function<std::function<void(const httplib::Request&, httplib::Response&)>(AuthedHandler)>&
        authed);

}  // namespace tessera
