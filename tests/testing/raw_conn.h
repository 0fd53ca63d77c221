#pragma once
// A raw loopback TCP connection for tests that speak bytes a client library would not send: partial
// requests, header floods, slow clients. Connects on construction; closes on destruction.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace tessera::testing {

class RawConn {
 public:
  explicit RawConn(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawConn() {
    if (fd_ >= 0) close(fd_);
  }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  bool connected() const { return ok_; }
  // Whether all of `d` was sent.
  bool Send(const std::string& d) {
    return ok_ && send(fd_, d.data(), d.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(d.size());
  }
  // Appends what arrives to *out until the server closes (true) or `wait_s` passes (false).
  bool ReadToClose(double wait_s, std::string* out) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
    char buf[4096];
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return true;
      out->append(buf, static_cast<size_t>(n));
    }
    return false;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

}  // namespace tessera::testing
