#pragma once
// A small Kubernetes API client over cpp-httplib: JSON requests (GET, POST, PUT, PATCH, DELETE) and watch
// streams (newline-delimited JSON events read as they arrive). TLS with the kubeconfig's CA (or without
// verification when the kubeconfig says insecure-skip-tls-verify), a bearer token re-read per request,
// client certificates when given.
//
// Connections: requests share a small pool of kept-alive connections (at most kMaxConnections in flight at
// once; a caller beyond that waits for one), as client-go shares its transport; a watch holds its own. A
// connection that failed is closed, never reused. Requests may be limited to `qps` per second with bursts
// of `burst` (a token bucket, as client-go's --kube-api-qps and --kube-api-burst); off by default.
//
// Thread safety: every method may be called from any thread. set_timeouts, set_rate_limit and
// set_write_guard are set up before the client is shared.

#include <atomic>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "k8s/api/kubeconfig.h"

namespace tessera {

struct ApiResponse {
  int status = 0;       // HTTP status; 0 = no answer (connection failed, see error)
  nlohmann::json body;  // parsed JSON (null when the body is not JSON)
  std::string error;    // transport error, or the Status message of a failed call
  bool ok() const { return status >= 200 && status < 300; }
};

class ApiClient {
 public:
  static constexpr int kMaxConnections = 6;
  explicit ApiClient(KubeConfig config);
  ~ApiClient();
  const KubeConfig& config() const { return config_; }
  // Connect and read timeouts of each request (default 5 s and 30 s; watches set their own read timeout).
  void set_timeouts(int connect_s, int read_s) { connect_s_ = connect_s, read_s_ = read_s; }
  // At most `qps` requests per second on average, `burst` at once (qps <= 0: no limit). Watches are not
  // counted (they are long-lived streams).
  void set_rate_limit(double qps, int burst);
  // Connections opened so far (pooled requests and watches), for the scheduler's figures.
  int64_t connections_opened() const { return connections_opened_.load(); }
  // Writes (POST, PUT, PATCH, DELETE) are sent only while `guard` answers true; otherwise they answer
  // status 0 with kNotLeader as the error, without a request (a scheduler writes only while it leads).
  void set_write_guard(std::function<bool()> guard) { write_guard_ = std::move(guard); }
  static constexpr const char* kNotLeader = "not sent: this replica is not the leader";

  ApiResponse Get(const std::string& path) const;
  ApiResponse Post(const std::string& path, const nlohmann::json& body) const;
  ApiResponse Put(const std::string& path, const nlohmann::json& body) const;
  // `content_type`: application/merge-patch+json or application/strategic-merge-patch+json.
  ApiResponse Patch(const std::string& path, const nlohmann::json& body,
                    const std::string& content_type = "application/merge-patch+json") const;
  ApiResponse Delete(const std::string& path, const nlohmann::json& options = nullptr) const;

  // GETs `path` (with watch=1 in its query) and calls `on_event` for each JSON line as it arrives, until
  // the server ends the stream, the connection breaks, `on_event` returns false or `stop` becomes true
  // (the connection is then shut down within 100 ms, even while no event arrives).
  // Returns the HTTP status (0 = no answer); a line that is not JSON ends the stream with status -1.
  int Watch(const std::string& path, const std::function<bool(const nlohmann::json&)>& on_event,
            const std::atomic<bool>& stop, int read_timeout_s) const;

 private:
  ApiResponse Call(const std::string& method, const std::string& path, const std::string& body,
                   const std::string& content_type) const;
  struct Pool;
  void WaitForToken() const;

  KubeConfig config_;
  std::string scheme_, host_;
  int port_ = 443;
  int connect_s_ = 5, read_s_ = 30;
  std::function<bool()> write_guard_;
  std::unique_ptr<Pool> pool_;
  mutable std::atomic<int64_t> connections_opened_{0};
};

// Percent-encodes a query parameter value.
std::string QueryEscape(const std::string& s);

}  // namespace tessera
