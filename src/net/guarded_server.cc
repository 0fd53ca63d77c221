#include "net/guarded_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>

#include "net/worker_pool.h"

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

// What an OpenSSL call that returned `rc` waits for: POLLIN, POLLOUT, or 0 (it failed for good).
short TlsWait(SSL* ssl, int rc) {
  switch (SSL_get_error(ssl, rc)) {
    case SSL_ERROR_WANT_READ: return POLLIN;
    case SSL_ERROR_WANT_WRITE: return POLLOUT;
    default: return 0;
  }
}

// The server side of a TLS handshake on non-blocking `fd`, ended by `deadline` (steady seconds).
bool TlsAccept(SSL* ssl, int fd, double deadline) {
  for (;;) {
    const int rc = SSL_accept(ssl);
    if (rc == 1) return true;
    const short ev = TlsWait(ssl, rc);
    if (ev == 0 || !WaitFor(fd, ev, deadline - SteadyNow())) return false;
  }
}

void FreeContext(ssl_ctx_st* ctx) { SSL_CTX_free(ctx); }

}  // namespace

double SteadyNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

RequestGuard* RequestGuard::Current() { return current_guard; }

std::shared_ptr<ResponseGate> RequestGuard::HoldResponse() {
  if (fd_ < 0) return nullptr;
  gate_ = std::make_shared<ResponseGate>(fd_);
  return gate_;
}

void ResponseGate::SendSomeLocked() {
  while (sent_ < answer_.size() && !failed_send_) {
    const ssize_t n =
        ::send(fd_, answer_.data() + sent_, answer_.size() - sent_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent_ += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else if (!(n < 0 && errno == EINTR)) {
      failed_send_ = true;
    }
  }
}

void ResponseGate::Settle(bool ok, std::string failure) {
  std::lock_guard<std::mutex> lock(mu_);
  if (settled_) return;
  settled_ = true;
  ok_ = ok;
  failure_ = std::move(failure);
  if (armed_) {
    if (!ok_) answer_ = std::move(failure_);
    SendSomeLocked();
  }
  cv_.notify_all();
}

void ResponseGate::Abandon() {
  std::lock_guard<std::mutex> lock(mu_);
  failed_send_ = true;
}

void ResponseGate::Arm() {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = true;
  if (!settled_) return;
  if (!ok_) answer_ = std::move(failure_);
  SendSomeLocked();
}

ResponseGate::Held ResponseGate::Progress(double seconds, double write_timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!settled_ && seconds > 0)
    cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return settled_; });
  if (!settled_) return Held::kWaiting;
  const double end = SteadyNow() + write_timeout_s;
  for (SendSomeLocked(); sent_ < answer_.size() && !failed_send_; SendSomeLocked())
    if (!WaitFor(fd_, POLLOUT, end - SteadyNow())) failed_send_ = true;
  return ok_ && !failed_send_ ? Held::kSent : Held::kClose;
}

// A socket stream (plain, or TLS when `ssl` is set) whose reads end at the request's deadline and at its
// body budget. Reads are buffered (httplib reads the request line and headers a byte at a time).
class GuardedStream final : public httplib::Stream {
 public:
  GuardedStream(int fd, SSL* ssl, RequestGuard* guard, const ConnectionLimits& limits)
      : fd_(fd), ssl_(ssl), guard_(guard), write_timeout_s_(limits.write_timeout_s), limits_(limits) {}

  bool is_readable() const override {
    if (buffered()) return true;
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
      guard_->headers_over_ = true;  // answered 431 and closed
      return -1;
    }
    if (guard_->body_budget_ > 0) size = std::min<size_t>(size, static_cast<size_t>(guard_->body_budget_));
    if (pos_ == len_) {
      const ssize_t n = Fill();
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

  // A response's status line and headers wait for its body, so that both leave in one send (one TCP
  // segment, one TLS record, one wake-up of the client); Flush sends them when no body follows. A 1xx
  // (100 Continue) goes at once: the client waits for it before sending the body.
  ssize_t write(const char* ptr, size_t size) override {
    if (guard_->gate_) {  // a held answer: sent by ResponseGate
      guard_->gate_->answer_.append(ptr, size);
      return static_cast<ssize_t>(size);
    }
    const std::string_view data(ptr, size);
    if (head_.empty() && data.starts_with("HTTP/1.") && !data.starts_with("HTTP/1.1 1") &&
        data.ends_with("\r\n\r\n")) {
      head_.assign(data);
      return static_cast<ssize_t>(size);
    }
    if (head_.empty()) return WriteSome(ptr, size);
    head_.append(data);
    const bool sent = SendAll(head_);
    head_.clear();
    return sent ? static_cast<ssize_t>(size) : -1;
  }
  // Sends a held response head; false when the connection failed.
  bool Flush() {
    if (head_.empty()) return true;
    const bool sent = SendAll(head_);
    head_.clear();
    return sent;
  }
  bool SendAll(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = WriteSome(data.data(), data.size());
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Plain sockets: a send that would block waits for room (the write timeout), else no poll first.
  ssize_t WriteSome(const char* ptr, size_t size) {
    if (ssl_ == nullptr) {
      for (;;) {
        const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0 || errno == EINTR) {
          if (n >= 0) return n;
          continue;
        }
        if ((errno != EAGAIN && errno != EWOULDBLOCK) || !is_writable()) return -1;
      }
    }
    const double end = SteadyNow() + write_timeout_s_;
    for (;;) {
      const int n = SSL_write(ssl_, ptr, static_cast<int>(std::min<size_t>(size, INT_MAX)));
      if (n > 0) return n;
      const short ev = TlsWait(ssl_, n);
      if (ev == 0 || !WaitFor(fd_, ev, end - SteadyNow())) return -1;
    }
  }
  // Both ends are asked once per connection (httplib asks for every request).
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    if (remote_port_ == -2) Endpoint(fd_, true, remote_ip_, remote_port_);
    ip = remote_ip_;
    port = remote_port_;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    if (local_port_ == -2) Endpoint(fd_, false, local_ip_, local_port_);
    ip = local_ip_;
    port = local_port_;
  }
  socket_t socket() const override { return fd_; }
  // Waits up to `seconds` for a request's first bytes; true when some are buffered or the connection
  // ended (then reads see the end). Plain sockets: one blocking read with a receive timeout, instead of a
  // poll and a read.
  bool Await(double seconds) {
    if (buffered()) return true;
    if (ssl_ != nullptr) return WaitFor(fd_, POLLIN, seconds);
    if (seconds != rcv_timeout_s_) {
      rcv_timeout_s_ = seconds;
      timeval tv{static_cast<time_t>(seconds),
                 static_cast<suseconds_t>((seconds - std::floor(seconds)) * 1e6)};
      if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1;  // zero would mean no timeout
      setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    ssize_t n;
    do n = ::recv(fd_, buf_, sizeof buf_, 0);
    while (n < 0 && errno == EINTR);
    if (n > 0) {
      pos_ = 0;
      len_ = static_cast<size_t>(n);
      return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    return true;  // the end, or an error: the next read meets it again
  }
  bool buffered() const { return pos_ < len_ || (ssl_ != nullptr && SSL_pending(ssl_) > 0); }

 private:
  // Reads what the socket has by the request's deadline into buf_: bytes read, 0 at the end, -1 on error.
  // Plain sockets: what has arrived is read without a poll first; past the deadline nothing is.
  ssize_t Fill() {
    if (ssl_ == nullptr) {
      if (SteadyNow() >= guard_->deadline_) {
        guard_->deadline_passed_ = true;
        return -1;
      }
      ssize_t n;
      do n = ::recv(fd_, buf_, sizeof buf_, MSG_DONTWAIT);
      while (n < 0 && errno == EINTR);
      if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return n;
      if (!is_readable()) return -1;
      do n = ::recv(fd_, buf_, sizeof buf_, 0);
      while (n < 0 && errno == EINTR);
      return n;
    }
    for (;;) {
      const int n = SSL_read(ssl_, buf_, sizeof buf_);
      if (n > 0) return n;
      if (SSL_get_error(ssl_, n) == SSL_ERROR_ZERO_RETURN) return 0;
      const short ev = TlsWait(ssl_, n);
      if (ev == 0) return -1;
      if (!WaitFor(fd_, ev, guard_->deadline_ - SteadyNow())) {
        guard_->deadline_passed_ = true;
        return -1;
      }
    }
  }

  int fd_;
  SSL* ssl_;
  RequestGuard* guard_;
  double write_timeout_s_;
  ConnectionLimits limits_;
  char buf_[16384];
  size_t pos_ = 0, len_ = 0;
  double rcv_timeout_s_ = -1;  // the socket's receive timeout, as Await last set it
  std::string head_;  // a response's status line and headers, held for its body
  mutable std::string remote_ip_, local_ip_;
  mutable int remote_port_ = -2, local_port_ = -2;  // -2: not asked yet
};

GuardedServer::GuardedServer(ConnectionLimits limits) : limits_(limits) {}

GuardedServer::~GuardedServer() { FreeContext(ctx_); }

Status GuardedServer::UseTls(const TlsFiles& files) {
  if (files.cert.empty() || files.key.empty()) return Status::Error("a TLS certificate and key go together");
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx(SSL_CTX_new(TLS_server_method()), FreeContext);
  if (!ctx) return Status::Error("cannot create a TLS context");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), files.cert.c_str()) != 1)
    return Status::Error(fmt::format("cannot load the TLS certificate '{}'", files.cert));
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), files.key.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx.get()) != 1)
    return Status::Error(fmt::format("cannot load the TLS key '{}' (or it does not match '{}')", files.key, files.cert));
  if (!files.client_ca.empty()) {
    if (SSL_CTX_load_verify_locations(ctx.get(), files.client_ca.c_str(), nullptr) != 1)
      return Status::Error(fmt::format("cannot load the client CA '{}'", files.client_ca));
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.client_ca.c_str())) SSL_CTX_set_client_CA_list(ctx.get(), names);
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);  // a certificate from another CA fails the handshake
  }
  ERR_clear_error();
  FreeContext(ctx_);
  ctx_ = ctx.release();
  verify_clients_ = !files.client_ca.empty();
  return Status::Ok();
}

Result<int> GuardedServer::Bind(const std::string& host, int port) {
  set_socket_options([this](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd_ = sock;
  });
  const int bound = port == 0 ? bind_to_any_port(host) : (bind_to_port(host, port) ? port : -1);
  if (bound <= 0) return Status::Error(fmt::format("cannot listen on {}:{} (in use, or not an address of this host)", host, port));
  if (listen_fd_ >= 0) ::listen(listen_fd_, 4096);
  host_ = host;
  port_ = bound;
  return bound;
}

void GuardedServer::Serve() {
  while (!stopping_.load()) {
    listen_after_bind();
    if (stopping_.load()) break;
    const int error = errno;  // the accept's, unless the pool's shutdown changed it
    fmt::print(stderr, "tessera: the listener on {}:{} stopped accepting (last error: {}); listening again\n",
               host_, port_, std::strerror(error));
    resumed_.fetch_add(1);
    for (int tries = 0; !stopping_.load(); ++tries) {
      if (Bind(host_, port_).ok()) break;
      if (tries % 100 == 0)
        fmt::print(stderr, "tessera: cannot listen on {}:{} again yet; retrying\n", host_, port_);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  stop();  // a socket bound again as Stop came is closed too
}

void GuardedServer::Stop() {
  stopping_.store(true);
  stop();
}

void GuardedServer::UseWorkers(size_t threads, int nice) {
  new_task_queue = [threads, nice] { return new WorkerPool(threads, nice); };  // worker_pool.h
}

int GuardedServer::ErrorStatus(int status) {
  const RequestGuard* g = RequestGuard::Current();
  if (g && g->body_over_limit()) return 413;
  if (g && g->headers_over_limit()) return 431;
  if (g && g->deadline_passed()) return 408;
  return status;
}

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
// then give the whole request `request_deadline_s`. An answer a handler held (ResponseGate) is sent before
// the next request is answered and before the connection closes.
bool GuardedServer::ServeConnection(socket_t sock, SSL* ssl, RequestGuard& guard) {
  GuardedStream strm(sock, ssl, &guard, limits_);
  guard.fd_ = ssl == nullptr ? sock : -1;
  std::shared_ptr<ResponseGate> held;
  bool ret = false, gave_up = false;
  for (size_t count = keep_alive_max_count_; count > 0 && svr_sock_ != INVALID_SOCKET; --count) {
    bool readable = strm.buffered(), go_on = true;
    for (double waited = 0;
         !readable && go_on && waited < limits_.keep_alive_s && svr_sock_ != INVALID_SOCKET; waited += 0.1) {
      if (held) go_on = Settled(held, 0);  // the rest of an answer the socket did not take at once
      readable = go_on && strm.Await(std::min(0.1, limits_.keep_alive_s - waited));
    }
    if (!readable) break;
    if (held && !Settled(held, kHeldAnswerWaitS)) {
      gave_up = true;  // waited its outcome out (or must close): not again below
      break;
    }
    // The first request's deadline runs from the connection's start, later ones from their first byte.
    const double now = SteadyNow();
    const double start = count == keep_alive_max_count_ && WorkerPool::QueuedAt() > 0
                             ? std::min(now, WorkerPool::QueuedAt())
                             : now;
    guard.Reset(start + limits_.request_deadline_s);
    bool closed = false;
    ret = process_request(strm, count == 1, closed, nullptr);
    if (guard.gate_) {
      held = std::move(guard.gate_);
      held->Arm();
    } else if (!strm.Flush()) {
      ret = false;
    }
    if (guard.close_ || guard.over_limit_ || guard.headers_over_) {
      if (held) Settled(held, kHeldAnswerWaitS);
      if (ssl != nullptr) SSL_shutdown(ssl);
      if (!guard.deadline_passed_) LingeringClose(sock);  // a slow client gets no more time
      break;
    }
    if (!ret || closed || guard.deadline_passed_) break;
  }
  if (held && (gave_up || !Settled(held, kHeldAnswerWaitS))) held->Abandon();  // the descriptor closes
  return ret;
}

// Drives a held answer: true once it is sent and the connection may go on (`held` is then reset) or while
// its outcome is not known after `seconds`; false when the connection must close.
bool GuardedServer::Settled(std::shared_ptr<ResponseGate>& held, double seconds) {
  switch (held->Progress(seconds, limits_.write_timeout_s)) {
    case ResponseGate::Held::kWaiting:
      return seconds <= 0;
    case ResponseGate::Held::kSent:
      held.reset();
      return true;
    case ResponseGate::Held::kClose:
      return false;
  }
  return false;
}

// A TLS connection: the handshake within the request deadline, then the keep-alive loop.
bool GuardedServer::ServeTls(socket_t sock, RequestGuard& guard) {
  ::fcntl(sock, F_SETFL, ::fcntl(sock, F_GETFL) | O_NONBLOCK);
  std::unique_ptr<SSL, void (*)(SSL*)> ssl(SSL_new(ctx_), SSL_free);
  if (!ssl || SSL_set_fd(ssl.get(), sock) != 1) return false;
  const double start =
      WorkerPool::QueuedAt() > 0 ? std::min(SteadyNow(), WorkerPool::QueuedAt()) : SteadyNow();
  const bool ok = TlsAccept(ssl.get(), sock, start + limits_.request_deadline_s);
  ERR_clear_error();  // OpenSSL's error queue is per thread: leave nothing for the next connection
  if (!ok) return false;
  guard.peer_verified_ = verify_clients_ && SSL_get0_peer_certificate(ssl.get()) != nullptr &&
                         SSL_get_verify_result(ssl.get()) == X509_V_OK;
  const bool ret = ServeConnection(sock, ssl.get(), guard);
  SSL_shutdown(ssl.get());
  ERR_clear_error();
  return ret;
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  std::string address;
  int port = 0;
  Endpoint(sock, true, address, port);
  bool ret = false;
  if (Admit(address)) {
    RequestGuard guard;
    current_guard = &guard;
    ret = ctx_ != nullptr ? ServeTls(sock, guard) : ServeConnection(sock, nullptr, guard);
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
