#pragma once
// core/v1 Events (what `kubectl describe` shows under Events) about a Node or a Pod, written by Tessera
// (source.component and reportingComponent = `component`). The Event lives in the object's namespace
// ("default" for cluster-scoped objects such as Nodes).

#include <string>

#include <nlohmann/json.hpp>

#include "k8s/api_client.h"

namespace tessera {

// RFC 3339 UTC time of the wall clock, to the second.
std::string Rfc3339Now();

// The Event for `object` (its kind, metadata.name, namespace, uid); type is Normal or Warning.
nlohmann::json EventFor(const nlohmann::json& object, const std::string& type, const std::string& reason,
                        const std::string& message, const std::string& component, const std::string& now);
// Posts it; returns the API server's answer.
ApiResponse PostEvent(const ApiClient& api, const nlohmann::json& object, const std::string& type,
                      const std::string& reason, const std::string& message, const std::string& component);

}  // namespace tessera
