#pragma once
// Status and Result<T>: the engine's recoverable-error channel (no exceptions cross layer boundaries).
// Broken invariants use TESSERA_CHECK, which prints a message and aborts.

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace tessera {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !message_.has_value(); }
  const std::string& message() const {
    static const std::string kEmpty;
    return message_ ? *message_ : kEmpty;
  }

 private:
  explicit Status(std::string m) : message_(std::move(m)) {}
  std::optional<std::string> message_;
};

// Either a value or an error Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {
    if (std::get<Status>(v_).ok()) std::get<Status>(v_) = Status::Error("Result built from an OK status");
  }
  bool ok() const { return std::holds_alternative<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }
  const std::string& error() const { return std::get<Status>(v_).message(); }

 private:
  std::variant<T, Status> v_;
};

[[noreturn]] inline void CheckFailed(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "%s:%d: invariant violated: %s %s\n", file, line, cond, msg.c_str());
  std::abort();
}

}  // namespace tessera

#define TESSERA_CHECK(cond, msg)                                                \
  do {                                                                          \
    if (!(cond)) ::tessera::CheckFailed(__FILE__, __LINE__, #cond, (msg));      \
  } while (0)
