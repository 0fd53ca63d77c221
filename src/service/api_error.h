#pragma once
// ApiError and Outcome<T>: what a service operation answers when it refuses. The server maps the code to
// an HTTP status; `field` names the offending request field when there is one.

#include <optional>
#include <string>
#include <utility>

namespace tessera {

enum class ErrorCode {
  kInvalidArgument,      // 400
  kUnauthenticated,      // 401
  kPermissionDenied,     // 403
  kNotFound,             // 404
  kAlreadyExists,        // 409
  kFailedPrecondition,   // 409: the target is in a state that refuses the change (e.g. a node still busy)
  kIdempotencyMismatch,  // 422: the key was used with another body
  kPreconditionFailed,   // 412: If-Match named another version
  kRequestTimeout,       // 408: the request was not complete within its deadline
  kPayloadTooLarge,      // 413
  kUnsupportedMedia,     // 415: e.g. a Content-Encoding the server refuses
  kRateLimited,          // 429
  kUnavailable,          // 503
  kInternal,             // 500
};
const char* ErrorCodeName(ErrorCode c);
int HttpStatusOf(ErrorCode c);

struct ApiError {
  ErrorCode code = ErrorCode::kInternal;
  std::string field;
  std::string message;
};

template <typename T>
class [[nodiscard]] Outcome {
 public:
  Outcome(T v) : value_(std::move(v)) {}  // NOLINT: implicit by design
  Outcome(ApiError e) : error_(std::move(e)) {}  // NOLINT
  bool ok() const { return value_.has_value(); }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  const T* operator->() const { return &*value_; }
  const ApiError& error() const { return error_; }

 private:
  std::optional<T> value_;
  ApiError error_;
};

inline ApiError Invalid(std::string field, std::string message) {
  return {ErrorCode::kInvalidArgument, std::move(field), std::move(message)};
}

}  // namespace tessera
