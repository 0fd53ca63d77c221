#include "server/request_checks.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/utc_time.h"

namespace tessera {
namespace {

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

bool BodyMethod(const std::string& m) { return m == "POST" || m == "PUT" || m == "PATCH" || m == "DELETE"; }

}  // namespace

std::optional<ApiError> CheckRequest(const httplib::Request& req, size_t max_body_bytes) {
  if (!CleanText(req.path)) return Invalid("path", "the path is not valid UTF-8 or holds control characters");
  for (const auto& [k, v] : req.params)
    if (!CleanText(k) || !CleanText(v))
      return Invalid(CleanText(k) ? k : "query", "a query parameter is not valid UTF-8 or holds control characters");
  for (const auto& [k, v] : req.headers)
    if (!CleanText(k) || !CleanText(v, /*allow_tab=*/true))
      return Invalid(CleanText(k) ? k : "header", "a header is not valid UTF-8 or holds control characters");
  if (auto it = req.headers.find("Content-Encoding"); it != req.headers.end() && !IEquals(it->second, "identity"))
    return ApiError{ErrorCode::kUnsupportedMedia, "Content-Encoding",
                    "request bodies are accepted uncompressed only (no Content-Encoding)"};
  const bool has_length = req.has_header("Content-Length");
  if (req.has_header("Transfer-Encoding")) {
    if (!IEquals(req.get_header_value("Transfer-Encoding"), "chunked") || req.get_header_value_count("Transfer-Encoding") > 1)
      return Invalid("Transfer-Encoding", "Transfer-Encoding: only 'chunked' is accepted");
    if (has_length) return Invalid("Content-Length", "Content-Length and Transfer-Encoding together");
  }
  if (has_length) {
    const std::string v = req.get_header_value("Content-Length");
    if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos ||
        req.get_header_value_count("Content-Length") > 1)
      return Invalid("Content-Length", "Content-Length: not a single non-negative integer");
    if (std::stoull(v) > max_body_bytes)
      return ApiError{ErrorCode::kPayloadTooLarge, "Content-Length",
                      fmt::format("the request body is over the limit of {} bytes", max_body_bytes)};
  } else if (!req.has_header("Transfer-Encoding") && BodyMethod(req.method)) {
    // No framing: an empty body (httplib would otherwise read until the client closes).
    const_cast<httplib::Headers&>(req.headers).emplace("Content-Length", "0");
  }
  return std::nullopt;
}

RateLimiter::Bucket& RateLimiter::Refill(const std::string& key, double now) {
  if (buckets_.size() > 100000) {  // forget the full ones (a bucket that has refilled says nothing)
    for (auto it = buckets_.begin(); it != buckets_.end();)
      it = it->second.tokens + (now - it->second.at) * per_minute_ / 60 >= per_minute_ ? buckets_.erase(it) : ++it;
  }
  auto [it, fresh] = buckets_.try_emplace(key, Bucket{per_minute_, now});
  Bucket& b = it->second;
  b.tokens = std::min(per_minute_, b.tokens + (now - b.at) * per_minute_ / 60);
  b.at = now;
  return b;
}

double RateLimiter::RetryAfter(const std::string& key, double now) {
  if (!enabled()) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  const Bucket& b = Refill(key, now);
  return b.tokens >= 1 ? 0 : (1 - b.tokens) * 60 / per_minute_;
}

void RateLimiter::Take(const std::string& key, double now) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  Bucket& b = Refill(key, now);
  b.tokens = std::max(-per_minute_, b.tokens - 1);
}

double RateLimiter::TryTake(const std::string& key, double now) {
  if (!enabled()) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  Bucket& b = Refill(key, now);
  if (b.tokens < 1) return (1 - b.tokens) * 60 / per_minute_;
  b.tokens -= 1;
  return 0;
}

std::optional<ApiError> ReadPageSize(const httplib::Request& req, int* out) {
  if (!req.has_param("page_size")) return std::nullopt;
  const std::string v = req.get_param_value("page_size");
  if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos || v.find_first_not_of('0') == std::string::npos)
    return Invalid("page_size", fmt::format("page_size: an integer from 1 to {} (larger is clamped)", kMaxPageSize));
  *out = v.size() > 6 ? kMaxPageSize : std::min(kMaxPageSize, std::stoi(v));
  return std::nullopt;
}

std::optional<ApiError> ReadTime(const httplib::Request& req, const char* name, int64_t* out) {
  *out = -1;
  if (!req.has_param(name)) return std::nullopt;
  const std::string v = req.get_param_value(name);
  constexpr int64_t kMaxTime = 253402300799;  // 9999-12-31T23:59:59Z
  if (!v.empty() && v.find_first_not_of("0123456789") == std::string::npos) {
    if (v.size() > 12 || std::stoll(v) > kMaxTime)
      return Invalid(name, fmt::format("{}: Unix seconds from 0 to {}", name, kMaxTime));
    *out = std::stoll(v);
    return std::nullopt;
  }
  auto t = ParseIsoUtc(v);
  if (!t.ok() || *t < 0 || *t > kMaxTime)
    return Invalid(name, fmt::format("{}: '{}' is neither an ISO 8601 UTC time nor Unix seconds", name, v));
  *out = *t;
  return std::nullopt;
}

}  // namespace tessera
