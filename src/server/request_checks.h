#pragma once
// Checks of a request before routing (what the handlers may then assume), and the rate limiter.
//  - Path, query keys and values, header names and values: valid UTF-8 without control characters
//    (a header value may hold a tab); else 400 naming the part.
//  - Content-Length: digits only and at most the body limit (else 400 / 413, before any body is read);
//    Transfer-Encoding: "chunked" only, never together with a Content-Length; Content-Encoding on a
//    request: refused (415), so no body is ever inflated. A POST, PUT, PATCH or DELETE with neither header
//    has an empty body.

#include <httplib.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/text.h"
#include "service/api_error.h"

namespace tessera {

// The refusal of a request whose line or headers break the rules above; nullopt when it may be routed.
// May add "Content-Length: 0" to a body method without framing (the request object is the server's own).
std::optional<ApiError> CheckRequest(const httplib::Request& req, size_t max_body_bytes);

// page_size of a list: `*out` keeps its default when absent; a positive integer, clamped to kMaxPageSize
// (the rest comes with the next page's cursor); else the 400 to answer.
inline constexpr int kMaxPageSize = 1000;
std::optional<ApiError> ReadPageSize(const httplib::Request& req, int* out);

// A time query parameter: ISO 8601 UTC or Unix seconds, from 0 to 253402300799 (9999-12-31T23:59:59Z);
// `*out` is -1 when absent; else the 400 to answer, naming the parameter.
std::optional<ApiError> ReadTime(const httplib::Request& req, const char* name, int64_t* out);

// Token buckets by key: `per_minute` events a minute, bursts up to `per_minute`. Thread safe.
class RateLimiter {
 public:
  explicit RateLimiter(double per_minute) : per_minute_(per_minute) {}
  bool enabled() const { return per_minute_ > 0; }
  // Seconds until an event of `key` would be allowed (0: allowed now); does not take one.
  double RetryAfter(const std::string& key, double now);
  // Takes one event of `key` (may go below zero: the wait grows).
  void Take(const std::string& key, double now);
  // RetryAfter, and Take when it is 0.
  double TryTake(const std::string& key, double now);

 private:
  struct Bucket {
    double tokens = 0, at = 0;
  };
  Bucket& Refill(const std::string& key, double now);
  double per_minute_;
  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace tessera
