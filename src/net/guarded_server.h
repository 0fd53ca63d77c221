#pragma once
// GuardedServer: cpp-httplib's server with per-connection bounds that its own connection loop lacks.
//  - A whole-request deadline: from the first byte of a request (or the connection's start) to the last
//    byte of its body, at most `request_deadline_s`; a client that is slower gets 408 (or, mid-line, a
//    closed connection). A per-read timeout alone lets a client that sends a byte every few seconds hold a
//    worker thread for ever.
//  - A cap on open connections per client address: beyond it a new connection is closed at once.
//  - Caps on the request line and headers (bytes and lines): past them the read fails, so the request is
//    answered 400 and the connection closed, before a header flood costs memory.
//  - A body budget: once the headers are read (RequestGuard::LimitBody), reading more than the budget of
//    body bytes as sent (chunk framing included) fails, whatever the framing, so a chunked body is refused
//    (413) as soon as it passes the limit instead of being read whole.
//  - TLS (UseTls) under the same bounds: the handshake must end within the request deadline, so a client
//    that sends its ClientHello a byte at a time holds a worker no longer than a slow plain request; with a
//    client CA, a client certificate it signed is verified (RequestGuard::peer_verified).
// The per-request state lives with the worker thread serving the connection (RequestGuard), so that the
// server's handlers (pre-routing, error) can see and set it. Depends on base only (used by `serve` and
// the Kubernetes extender alike).

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"

struct ssl_ctx_st;
struct ssl_st;

namespace tessera {

struct ConnectionLimits {
  double request_deadline_s = 10;  // headers and body of one request
  int64_t max_header_bytes = 64 * 1024;  // request line and headers of one request
  int max_header_lines = 128;            // request line and header lines of one request
  // Open connections from one client address: 64, the connections of `tessera bench api` (one load
  // generator) at its default concurrency.
  int max_per_address = 64;
  double keep_alive_s = 5;         // an idle keep-alive connection is closed after this
  double write_timeout_s = 5;      // per write of a response
};

// A response held back until something it states is true (a durable write): the handler's answer is
// written into the gate instead of the socket, and whichever comes second, the answer (Arm, on the
// connection's thread) or the outcome (Settle, on any thread), sends it: the answer as written when the
// outcome is good, else `failure`, a whole HTTP response, after which the connection closes. The thread
// that settles never blocks on the socket: what the socket does not take at once, the connection's thread
// sends. The connection's thread waits for a held answer to be sent before it answers the next request on
// the connection or closes it, so answers leave in order and never on a closed descriptor.
class ResponseGate {
 public:
  explicit ResponseGate(int fd) : fd_(fd) {}
  // The outcome: `ok`, or not and the response to send instead. Once; later calls change nothing.
  void Settle(bool ok, std::string failure = {});

 private:
  friend class GuardedStream;
  friend class GuardedServer;
  // The connection's thread: the answer is written whole.
  void Arm();
  enum class Held { kWaiting, kSent, kClose };
  // The connection's thread: waits up to `seconds` for the outcome, then sends what is left (blocking up
  // to `write_timeout_s`): kWaiting (no outcome yet), kSent (the connection may go on), kClose.
  Held Progress(double seconds, double write_timeout_s);
  void SendSomeLocked();  // what the socket takes without blocking
  void Abandon();         // the connection closes: nothing is sent from now on

  int fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string answer_;  // written by the handler's thread before Arm, read by either after
  std::string failure_;
  size_t sent_ = 0;
  bool armed_ = false, settled_ = false, ok_ = false, failed_send_ = false;
};

// The state of the request being read on this thread (null outside a GuardedServer connection).
class RequestGuard {
 public:
  static RequestGuard* Current();
  // The answer to this request waits for the gate's outcome (see ResponseGate); null where it cannot
  // (TLS connections): the handler then waits itself before answering.
  std::shared_ptr<ResponseGate> HoldResponse();
  // From now on at most `bytes` more may be read for this request (its body).
  void LimitBody(int64_t bytes) { body_budget_ = bytes; }
  // The connection closes after this response (an unread body may follow).
  void CloseAfterResponse() { close_ = true; }
  bool body_over_limit() const { return over_limit_; }
  bool deadline_passed() const { return deadline_passed_; }
  bool headers_over_limit() const { return headers_over_; }
  // TLS with a client CA: the client presented a certificate that CA signed (the handshake refuses one it
  // did not; no certificate at all passes the handshake, so probes work, and handlers decide).
  bool peer_verified() const { return peer_verified_; }

 private:
  friend class GuardedStream;
  friend class GuardedServer;
  void Reset(double deadline) {
    deadline_ = deadline;
    body_budget_ = -1;
    header_bytes_ = header_lines_ = 0;
    over_limit_ = deadline_passed_ = close_ = headers_over_ = false;
    gate_.reset();
  }
  int fd_ = -1;                         // plain connections: the socket (answers may be held)
  std::shared_ptr<ResponseGate> gate_;  // the answer being written goes here
  double deadline_ = 0;       // steady seconds
  int64_t body_budget_ = -1;  // -1 = not limited (the request line and headers)
  int64_t header_bytes_ = 0, header_lines_ = 0;  // read of the request line and headers so far
  bool headers_over_ = false;
  bool over_limit_ = false, deadline_passed_ = false, close_ = false;
  bool peer_verified_ = false;  // per connection: Reset keeps it
};

// The certificate chain and key a TLS listener presents, and the CA its clients' certificates must come from
// (empty: no client certificates asked for).
struct TlsFiles {
  std::string cert, key, client_ca;
};

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(ConnectionLimits limits);
  ~GuardedServer() override;
  // Serves HTTPS from now on (TLS 1.2 or later). An error names the file that cannot be used.
  Status UseTls(const TlsFiles& files);
  bool tls() const { return ctx_ != nullptr; }
  // Binds host:port (port 0: any free port) with SO_REUSEADDR and a listen backlog of 4096 (httplib's is
  // 5: a burst of connections would wait for SYN retransmission, 1 s and more); the port, or an error naming
  // the address.
  Result<int> Bind(const std::string& host, int port);
  // Serves until Stop. cpp-httplib's accept loop ends for good on an accept error other than "too many
  // open files" (a signal, no buffers or memory, a firewall's refusal), closing the listening socket: then
  // the address is bound again and serving resumes, with a line on stderr, for as long as Stop is not
  // called (the connections in flight finish meanwhile; new ones are refused until it listens again).
  void Serve();
  // Stops serving (Serve returns): use this, not stop(), so that Serve does not resume.
  void Stop();
  // How many times Serve resumed after the accept loop ended on its own.
  int resumed() const { return resumed_.load(); }
  // `threads` workers, each at `nice` levels below the process (0: unchanged). Use this rather than
  // new_task_queue: the first request's deadline then counts the time a connection waited for a worker.
  void UseWorkers(size_t threads, int nice = 0);
  // The status an error handler answers: 413, 431 or 408 when this request broke a bound, else `status`.
  static int ErrorStatus(int status);
  // Open connections now (all addresses).
  int open_connections() const;
  uint64_t refused_connections() const { return refused_.load(); }

 private:
  bool process_and_close_socket(socket_t sock) override;
  bool ServeTls(socket_t sock, RequestGuard& guard);
  bool ServeConnection(socket_t sock, ssl_st* ssl, RequestGuard& guard);
  bool Settled(std::shared_ptr<ResponseGate>& held, double seconds);
  // How long a connection waits for a held answer's outcome (a durable write) before it gives up on it.
  static constexpr double kHeldAnswerWaitS = 60;
  bool Admit(const std::string& address);
  void Release(const std::string& address);

  ConnectionLimits limits_;
  ssl_ctx_st* ctx_ = nullptr;  // owned; null for plain HTTP
  int listen_fd_ = -1;
  bool verify_clients_ = false;
  mutable std::mutex mu_;
  std::map<std::string, int> open_;  // per client address
  std::atomic<uint64_t> refused_{0};
  std::string host_;  // as bound: Serve binds it again after a failure
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> resumed_{0};
};

// Steady-clock seconds.
double SteadyNow();

}  // namespace tessera
