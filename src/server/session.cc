#include "server/session.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <stdexcept>

#include <fmt/format.h>

namespace tessera {

SessionStore::SessionStore(std::function<int64_t()> now, SessionLimits limits)
    : now_(std::move(now)), limits_(limits) {}

bool SessionStore::Expired(const Session& s, int64_t now) const {
  return now - s.last_seen > limits_.idle_timeout_s || now - s.created_at > limits_.max_age_s;
}

void SessionStore::EvictOldestLocked() {
  auto oldest = sessions_.begin();
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
    if (it->second.last_seen < oldest->second.last_seen) oldest = it;
  if (oldest != sessions_.end()) sessions_.erase(oldest);
}

Session SessionStore::Create(std::string bearer_token, SessionIdentity who) {
  Session s;
  s.id = RandomHex(32);
  s.csrf_token = RandomHex(32);
  s.bearer_token = std::move(bearer_token);
  s.who = std::move(who);
  s.created_at = s.last_seen = now_();
  std::lock_guard lock(mu_);
  while (sessions_.size() >= limits_.max_sessions && !sessions_.empty()) EvictOldestLocked();
  sessions_[s.id] = s;
  return s;
}

std::optional<Session> SessionStore::Find(std::string_view id) {
  if (id.empty()) return std::nullopt;
  const int64_t now = now_();
  std::lock_guard lock(mu_);
  auto it = sessions_.find(std::string(id));
  if (it == sessions_.end()) return std::nullopt;
  if (Expired(it->second, now)) {
    sessions_.erase(it);
    return std::nullopt;
  }
  it->second.last_seen = now;
  return it->second;
}

bool SessionStore::End(std::string_view id) {
  std::lock_guard lock(mu_);
  return sessions_.erase(std::string(id)) > 0;
}

bool SessionStore::Rebind(std::string_view id, std::string bearer_token) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(std::string(id));
  if (it == sessions_.end()) return false;
  it->second.bearer_token = std::move(bearer_token);
  return true;
}

size_t SessionStore::Size() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1)
    throw std::runtime_error("the system's random number generator failed");
  std::string out;
  out.reserve(2 * bytes);
  for (unsigned char c : raw) out += fmt::format("{:02x}", c);
  return out;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string CookieValue(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    size_t end = header.find(';');
    std::string_view part = header.substr(0, end);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    if (size_t eq = part.find('='); eq != std::string_view::npos && part.substr(0, eq) == name)
      return std::string(part.substr(eq + 1));
    if (end == std::string_view::npos) break;
    header.remove_prefix(end + 1);
  }
  return "";
}

std::string SessionCookieHeader(const Session& s, int64_t max_age_s, bool secure) {
  return fmt::format("{}={}; Path=/; Max-Age={}; HttpOnly; SameSite=Strict{}", kSessionCookie, s.id, max_age_s,
                     secure ? "; Secure" : "");
}

std::string ClearSessionCookieHeader(bool secure) {
  return fmt::format("{}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict{}", kSessionCookie, secure ? "; Secure" : "");
}

}  // namespace tessera
