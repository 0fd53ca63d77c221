#include "server/respond.h"

#include <nlohmann/json.hpp>

#include "server/json_views.h"

namespace tessera {

void SendJson(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

void SendError(httplib::Response& res, const ApiError& e) { SendJson(res, HttpStatusOf(e.code), ErrorJson(e)); }

}  // namespace tessera
