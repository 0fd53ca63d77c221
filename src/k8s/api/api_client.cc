#include "k8s/api/api_client.h"

#include <fmt/format.h>
#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "base/json_depth.h"

namespace tessera {
namespace {

using json = nlohmann::json;

// A certificate store with every certificate of `pem` (the client context takes ownership).
X509_STORE* StoreOf(const std::string& pem) {
  X509_STORE* store = X509_STORE_new();
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(store, cert);
    X509_free(cert);
  }
  BIO_free(bio);
  return store;
}

std::unique_ptr<httplib::ClientImpl> MakeClient(const KubeConfig& k, const std::string& scheme,
                                                const std::string& host, int port, int connect_s,
                                                int read_s) {
  std::unique_ptr<httplib::ClientImpl> c;
  if (scheme == "https") {
    std::unique_ptr<httplib::SSLClient> s;
    if (!k.client_cert_pem.empty()) {
      BIO* cb = BIO_new_mem_buf(k.client_cert_pem.data(), static_cast<int>(k.client_cert_pem.size()));
      BIO* kb = BIO_new_mem_buf(k.client_key_pem.data(), static_cast<int>(k.client_key_pem.size()));
      X509* cert = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
      EVP_PKEY* key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
      s = std::make_unique<httplib::SSLClient>(host, port, cert, key);
      if (cert) X509_free(cert);
      if (key) EVP_PKEY_free(key);
      BIO_free(cb);
      BIO_free(kb);
    } else {
      s = std::make_unique<httplib::SSLClient>(host, port);
    }
    if (k.insecure)
      s->enable_server_certificate_verification(false);
    else if (!k.ca_pem.empty())
      s->set_ca_cert_store(StoreOf(k.ca_pem));
    c = std::move(s);
  } else {
    c = std::make_unique<httplib::ClientImpl>(host, port);
  }
  c->set_connection_timeout(connect_s);
  c->set_read_timeout(read_s);
  c->set_write_timeout(read_s);
  c->set_tcp_nodelay(true);
  const std::string token = k.Token();
  if (!token.empty()) c->set_bearer_token_auth(token.c_str());
  return c;
}

ApiResponse FromResult(const httplib::Result& r) {
  ApiResponse out;
  if (!r) {
    out.error = httplib::to_string(r.error());
    return out;
  }
  if (Status st = CheckJsonDepth(r->body); !st.ok()) {  // never recurse into what the server sent
    out.error = fmt::format("the API server's answer ({}): {}", r->status, st.message());
    return out;
  }
  out.status = r->status;
  out.body = json::parse(r->body, nullptr, false);
  if (out.body.is_discarded()) out.body = nullptr;
  if (!out.ok()) {
    const json* m = out.body.is_object() && out.body.contains("message") ? &out.body["message"] : nullptr;
    out.error = m != nullptr && m->is_string() ? m->get<std::string>() : r->body.substr(0, 200);
  }
  return out;
}

}  // namespace

std::string QueryEscape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

// The kept-alive connections, the bearer token (re-read from its file at most once a minute, as client-go
// does) and the request rate limiter.
struct ApiClient::Pool {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::unique_ptr<httplib::ClientImpl>> idle;
  int in_flight = 0;
  std::string token;
  std::chrono::steady_clock::time_point token_read{};
  double qps = 0, tokens = 0;
  int burst = 0;
  std::chrono::steady_clock::time_point refilled{};
};

ApiClient::~ApiClient() = default;

void ApiClient::set_rate_limit(double qps, int burst) {
  std::lock_guard<std::mutex> l(pool_->mu);
  pool_->qps = qps;
  pool_->burst = std::max(1, burst);
  pool_->tokens = pool_->burst;
  pool_->refilled = std::chrono::steady_clock::now();
}

void ApiClient::WaitForToken() const {
  std::unique_lock<std::mutex> l(pool_->mu);
  while (pool_->qps > 0) {
    const auto now = std::chrono::steady_clock::now();
    pool_->tokens = std::min<double>(
        pool_->burst,
        pool_->tokens + pool_->qps * std::chrono::duration<double>(now - pool_->refilled).count());
    pool_->refilled = now;
    if (pool_->tokens >= 1) {
      pool_->tokens -= 1;
      return;
    }
    pool_->cv.wait_for(l, std::chrono::duration<double>((1 - pool_->tokens) / pool_->qps));
  }
}

ApiClient::ApiClient(KubeConfig config) : config_(std::move(config)), pool_(std::make_unique<Pool>()) {
  std::string rest = config_.server;
  const size_t sep = rest.find("://");
  scheme_ = sep == std::string::npos ? "https" : rest.substr(0, sep);
  if (sep != std::string::npos) rest = rest.substr(sep + 3);
  if (size_t slash = rest.find('/'); slash != std::string::npos) rest = rest.substr(0, slash);
  port_ = scheme_ == "https" ? 443 : 80;
  const size_t colon = rest.rfind(':');
  if (colon != std::string::npos && rest.find(']', colon) == std::string::npos) {
    port_ = std::atoi(rest.c_str() + colon + 1);
    rest = rest.substr(0, colon);
  }
  if (rest.size() > 1 && rest.front() == '[') rest = rest.substr(1, rest.size() - 2);
  host_ = rest;
}

ApiResponse ApiClient::Call(const std::string& method, const std::string& path, const std::string& body,
                            const std::string& content_type) const {
  if (method != "GET" && write_guard_ && !write_guard_()) {
    ApiResponse refused;
    refused.error = kNotLeader;
    return refused;
  }
  WaitForToken();
  std::unique_ptr<httplib::ClientImpl> c;
  std::string token;
  {
    std::unique_lock<std::mutex> l(pool_->mu);
    pool_->cv.wait(l, [&] { return !pool_->idle.empty() || pool_->in_flight < kMaxConnections; });
    ++pool_->in_flight;
    if (!pool_->idle.empty()) {
      c = std::move(pool_->idle.back());
      pool_->idle.pop_back();
    }
    const auto now = std::chrono::steady_clock::now();
    if (pool_->token_read == std::chrono::steady_clock::time_point{} ||
        now - pool_->token_read > std::chrono::minutes(1)) {
      pool_->token = config_.Token();
      pool_->token_read = now;
    }
    token = pool_->token;
  }
  const httplib::Headers h = {{"Accept", "application/json"}, {"User-Agent", "tessera-k8s-scheduler"}};
  auto send = [&] {
    if (!c) {
      c = MakeClient(config_, scheme_, host_, port_, connect_s_, read_s_);
      c->set_keep_alive(true);
      ++connections_opened_;
    }
    if (!token.empty()) c->set_bearer_token_auth(token.c_str());
    if (method == "GET") return c->Get(path.c_str(), h);
    if (method == "POST") return c->Post(path.c_str(), h, body, content_type.c_str());
    if (method == "PUT") return c->Put(path.c_str(), h, body, content_type.c_str());
    if (method == "PATCH") return c->Patch(path.c_str(), h, body, content_type.c_str());
    return c->Delete(path.c_str(), h, body, content_type.c_str());
  };
  const bool reused = c != nullptr;
  httplib::Result r = send();
  if (!r && reused) {  // the server closed the idle connection as the request went out: once more, anew
    c.reset();
    r = send();
  }
  const bool reusable = static_cast<bool>(r) && r->get_header_value("Connection") != "close";
  {
    std::lock_guard<std::mutex> l(pool_->mu);
    --pool_->in_flight;
    if (reusable) pool_->idle.push_back(std::move(c));
  }
  pool_->cv.notify_one();
  return FromResult(r);
}

ApiResponse ApiClient::Get(const std::string& path) const { return Call("GET", path, "", ""); }
ApiResponse ApiClient::Post(const std::string& path, const json& body) const {
  return Call("POST", path, body.dump(), "application/json");
}
ApiResponse ApiClient::Put(const std::string& path, const json& body) const {
  return Call("PUT", path, body.dump(), "application/json");
}
ApiResponse ApiClient::Patch(const std::string& path, const json& body,
                             const std::string& content_type) const {
  return Call("PATCH", path, body.dump(), content_type);
}
ApiResponse ApiClient::Delete(const std::string& path, const json& options) const {
  return Call("DELETE", path, options.is_null() ? "" : options.dump(), "application/json");
}

int ApiClient::Watch(const std::string& path, const std::function<bool(const json&)>& on_event,
                     const std::atomic<bool>& stop, int read_timeout_s) const {
  auto c = MakeClient(config_, scheme_, host_, port_, connect_s_, read_s_);
  ++connections_opened_;
  c->set_read_timeout(read_timeout_s);
  const httplib::Headers h = {{"Accept", "application/json"}, {"User-Agent", "tessera-k8s-scheduler"}};
  std::string buffer;
  bool bad_line = false;
  // A stopped watch ends now, not when the next event or bookmark arrives: its socket is shut down.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> l(mu);
    while (!done) {
      if (stop.load()) c->stop();
      cv.wait_for(l, std::chrono::milliseconds(100));
    }
  });
  auto res = c->Get(path.c_str(), h, [&](const char* data, size_t n) {
    if (stop.load()) return false;
    buffer.append(data, n);
    for (size_t nl = buffer.find('\n'); nl != std::string::npos; nl = buffer.find('\n')) {
      const std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      if (line.empty()) continue;
      json ev =
          CheckJsonDepth(line).ok() ? json::parse(line, nullptr, false) : json(json::value_t::discarded);
      if (ev.is_discarded()) {
        bad_line = true;
        return false;
      }
      if (!on_event(ev)) return false;
    }
    return true;
  });
  {
    std::lock_guard<std::mutex> l(mu);
    done = true;
  }
  cv.notify_all();
  watchdog.join();
  if (bad_line) return -1;
  if (!res) return 0;
  return res->status;
}

}  // namespace tessera
