#include "server/guarded_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace tessera {
namespace {

thread_local RequestGuard* current_guard = nullptr;

// Address and port of a socket's peer (`peer`) or its own end.
void Endpoint(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ip.clear();
  port = -1;
  if ((peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len)
            : getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len)) != 0)
    return;
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    port = ntohs(a->sin6_port);
  }
  ip = buf;
}

// Waits up to `seconds` for `events` on fd; true when ready.
bool WaitFor(int fd, short events, double seconds) {
  if (seconds <= 0) return false;
  pollfd p{fd, events, 0};
  int ms = static_cast<int>(std::ceil(seconds * 1000));
  int rc;
  do rc = ::poll(&p, 1, ms);
  while (rc < 0 && errno == EINTR);
  return rc > 0;
}

// After an answer that left a body unread: stop sending, then read and drop what the client still sends
// (at most 1 s, 4 MiB), so that closing does not reset the connection before the client read the answer.
void LingeringClose(int fd) {
  ::shutdown(fd, SHUT_WR);
  char buf[16384];
  size_t total = 0;
  const double end = SteadyNow() + 1;
  while (total < (4u << 20)) {
    const double left = end - SteadyNow();
    if (left <= 0 || !WaitFor(fd, POLLIN, left)) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    total += static_cast<size_t>(n);
  }
}

}  // namespace

double SteadyNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

RequestGuard* RequestGuard::Current() { return current_guard; }

// A plain socket stream whose reads end at the request's deadline and at its body budget. Reads are
// buffered (httplib reads the request line and headers a byte at a time).
class GuardedStream final : public httplib::Stream {
 public:
  GuardedStream(int fd, RequestGuard* guard, const ConnectionLimits& limits)
      : fd_(fd), guard_(guard), write_timeout_s_(limits.write_timeout_s), limits_(limits) {}

  bool is_readable() const override {
    if (pos_ < len_) return true;
    const double left = guard_->deadline_ - SteadyNow();
    if (WaitFor(fd_, POLLIN, left)) return true;
    if (left <= 0 || SteadyNow() >= guard_->deadline_) guard_->deadline_passed_ = true;
    return false;
  }
  bool is_writable() const override { return WaitFor(fd_, POLLOUT, write_timeout_s_); }

  ssize_t read(char* ptr, size_t size) override {
    if (guard_->body_budget_ == 0) {
      guard_->over_limit_ = true;
      return -1;
    }
    const bool headers = guard_->body_budget_ < 0;  // the request line and headers (cpp-httplib reads bytewise)
    if (headers && (guard_->header_bytes_ >= limits_.max_header_bytes ||
                    guard_->header_lines_ >= limits_.max_header_lines)) {
      guard_->headers_over_ = true;  // answered 400 and closed
      return -1;
    }
    if (guard_->body_budget_ > 0) size = std::min<size_t>(size, static_cast<size_t>(guard_->body_budget_));
    if (pos_ == len_) {
      if (!is_readable()) return -1;
      ssize_t n;
      do n = ::recv(fd_, buf_, sizeof buf_, 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      pos_ = 0;
      len_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, len_ - pos_);
    std::copy(buf_ + pos_, buf_ + pos_ + n, ptr);
    pos_ += n;
    if (guard_->body_budget_ > 0) guard_->body_budget_ -= static_cast<int64_t>(n);
    if (headers) {
      guard_->header_bytes_ += static_cast<int64_t>(n);
      guard_->header_lines_ += std::count(ptr, ptr + n, '\n');
    }
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { Endpoint(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { Endpoint(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }
  bool buffered() const { return pos_ < len_; }

 private:
  int fd_;
  RequestGuard* guard_;
  double write_timeout_s_;
  ConnectionLimits limits_;
  char buf_[4096];
  size_t pos_ = 0, len_ = 0;
};

int GuardedServer::open_connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& [a, c] : open_) n += c;
  return n;
}

bool GuardedServer::Admit(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  int& n = open_[address];
  if (n >= limits_.max_per_address) return false;
  ++n;
  return true;
}

void GuardedServer::Release(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(address);
  if (it != open_.end() && --it->second <= 0) open_.erase(it);
}

// httplib's keep-alive loop over a GuardedStream: wait (keep_alive_s at most) for a request's first byte,
// then give the whole request `request_deadline_s`.
bool GuardedServer::process_and_close_socket(socket_t sock) {
  std::string address;
  int port = 0;
  Endpoint(sock, true, address, port);
  bool ret = false;
  if (Admit(address)) {
    RequestGuard guard;
    GuardedStream strm(sock, &guard, limits_);
    current_guard = &guard;
    for (size_t count = keep_alive_max_count_; count > 0 && svr_sock_ != INVALID_SOCKET; --count) {
      bool readable = strm.buffered();
      for (double waited = 0; !readable && waited < limits_.keep_alive_s && svr_sock_ != INVALID_SOCKET;
           waited += 0.1)
        readable = WaitFor(sock, POLLIN, std::min(0.1, limits_.keep_alive_s - waited));
      if (!readable) break;
      guard.Reset(SteadyNow() + limits_.request_deadline_s);
      bool closed = false;
      ret = process_request(strm, count == 1, closed, nullptr);
      if (guard.close_ || guard.over_limit_ || guard.headers_over_) {
        if (!guard.deadline_passed_) LingeringClose(sock);  // a slow client gets no more time
        break;
      }
      if (!ret || closed || guard.deadline_passed_) break;
    }
    current_guard = nullptr;
    Release(address);
  } else {
    refused_.fetch_add(1, std::memory_order_relaxed);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

}  // namespace tessera
