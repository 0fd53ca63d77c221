#pragma once
// Writing an answer: every JSON body of both listeners goes through SendJson.
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "service/api_error.h"

namespace tessera {

// Never throws: a string that is not valid UTF-8 (which the checks before routing keep out) is sent with
// U+FFFD in place of its bad bytes.
void SendJson(httplib::Response& res, int status, const nlohmann::json& body);
// The error's status and ErrorJson body.
void SendError(httplib::Response& res, const ApiError& e);

}  // namespace tessera
