#include "server/standby_health.h"

#include <fmt/format.h>
#include <httplib.h>

namespace tessera {

StandbyHealth::StandbyHealth() : server_(std::make_unique<httplib::Server>()) {}

StandbyHealth::~StandbyHealth() { Stop(); }

Result<std::unique_ptr<StandbyHealth>> StandbyHealth::Start(const std::string& listen) {
  if (listen.empty()) return std::unique_ptr<StandbyHealth>();
  const size_t colon = listen.rfind(':');
  const std::string host = colon == std::string::npos ? "127.0.0.1" : listen.substr(0, colon);
  const int port = colon == std::string::npos ? 0 : std::atoi(listen.c_str() + colon + 1);
  std::unique_ptr<StandbyHealth> s(new StandbyHealth());
  httplib::Server& h = *s->server_;
  h.new_task_queue = [] { return new httplib::ThreadPool(2); };
  // One request per connection, so none outlives Stop. The API binds the port right after: SO_REUSEADDR on
  // both sockets lets it bind past this one's connections in TIME_WAIT (cpp-httplib's default sets only
  // SO_REUSEPORT, which does not, and would let another process share the port).
  h.set_keep_alive_max_count(1);
  h.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  h.set_read_timeout(5, 0);
  h.set_write_timeout(5, 0);
  h.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok (standby: waiting for the leader Lease)\n", "text/plain");
  });
  // Every other request, /readyz included: not served by a standby.
  h.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    res.status = 503;
    res.set_content("standby: another replica holds the leader Lease\n", "text/plain");
  });
  s->port_ = port == 0 ? h.bind_to_any_port(host) : (h.bind_to_port(host, port) ? port : -1);
  if (s->port_ <= 0) return Status::Error(fmt::format("cannot listen on {} (in use, or not an address of this host)", listen));
  s->thread_ = std::thread([&h] { h.listen_after_bind(); });
  return s;
}

void StandbyHealth::Stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

}  // namespace tessera
