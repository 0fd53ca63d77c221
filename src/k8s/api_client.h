#pragma once
// A small Kubernetes API client over cpp-httplib: JSON requests (GET, POST, PUT, PATCH, DELETE) and watch
// streams (newline-delimited JSON events read as they arrive). TLS with the kubeconfig's CA (or without
// verification when the kubeconfig says insecure-skip-tls-verify), a bearer token re-read per request,
// client certificates when given.
//
// Thread safety: every method may be called from any thread; each request uses its own connection.

#include <atomic>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "k8s/kubeconfig.h"

namespace tessera {

struct ApiResponse {
  int status = 0;             // HTTP status; 0 = no answer (connection failed, see error)
  nlohmann::json body;        // parsed JSON (null when the body is not JSON)
  std::string error;          // transport error, or the Status message of a failed call
  bool ok() const { return status >= 200 && status < 300; }
};

class ApiClient {
 public:
  explicit ApiClient(KubeConfig config);
  const KubeConfig& config() const { return config_; }

  ApiResponse Get(const std::string& path) const;
  ApiResponse Post(const std::string& path, const nlohmann::json& body) const;
  ApiResponse Put(const std::string& path, const nlohmann::json& body) const;
  // `content_type`: application/merge-patch+json or application/strategic-merge-patch+json.
  ApiResponse Patch(const std::string& path, const nlohmann::json& body,
                    const std::string& content_type = "application/merge-patch+json") const;
  ApiResponse Delete(const std::string& path, const nlohmann::json& options = nullptr) const;

  // GETs `path` (with watch=1 in its query) and calls `on_event` for each JSON line as it arrives, until
  // the server ends the stream, the connection breaks, `on_event` returns false or `stop` becomes true.
  // Returns the HTTP status (0 = no answer); a line that is not JSON ends the stream with status -1.
  int Watch(const std::string& path, const std::function<bool(const nlohmann::json&)>& on_event,
            const std::atomic<bool>& stop, int read_timeout_s) const;

 private:
  ApiResponse Call(const std::string& method, const std::string& path, const std::string& body,
                   const std::string& content_type) const;

  KubeConfig config_;
  std::string scheme_, host_;
  int port_ = 443;
};

// Percent-encodes a query parameter value.
std::string QueryEscape(const std::string& s);

}  // namespace tessera
