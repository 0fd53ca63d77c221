#include "server/session.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace tessera {

SessionStore::SessionStore(std::function<int64_t()> now, SessionLimits limits)
    : now_(std::move(now)), limits_(limits) {}

bool SessionStore::Expired(const Session& s, int64_t now) const {
  return now - s.last_seen > limits_.idle_timeout_s || now - s.created_at > limits_.max_age_s;
}

void SessionStore::EraseLocked(Map::iterator it) {
  auto user = ids_by_user_.find(it->second.who.user);
  if (user != ids_by_user_.end()) {
    std::vector<std::string>& ids = user->second;
    ids.erase(std::find(ids.begin(), ids.end(), it->first));
    if (ids.empty()) ids_by_user_.erase(user);
  }
  sessions_.erase(it);
}

bool SessionStore::EvictLocked(const std::vector<std::string>* ids, int64_t now) {
  auto older = [](const Session& a, const Session& b) {
    return a.last_seen != b.last_seen ? a.last_seen < b.last_seen : a.created_at < b.created_at;
  };
  auto victim = sessions_.end();
  if (ids == nullptr) {
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
      if (victim == sessions_.end() || older(it->second, victim->second)) victim = it;
  } else {
    for (const std::string& id : *ids)
      if (auto it = sessions_.find(id); it != sessions_.end() && (victim == sessions_.end() || older(it->second, victim->second)))
        victim = it;
  }
  if (victim == sessions_.end()) return false;
  SessionEvictions& e = evictions_[victim->second.who.user];
  if (e.count++ == 0) e.first_at = now;
  e.user = victim->second.who.user;
  e.last_at = now;
  e.cap = ids == nullptr ? limits_.max_sessions : limits_.max_per_user;
  e.all_users = ids == nullptr;
  EraseLocked(victim);
  return true;
}

Session SessionStore::Create(std::string bearer_token, SessionIdentity who) {
  Session s;
  s.id = RandomHex(32);
  s.csrf_token = RandomHex(32);
  s.bearer_token = std::move(bearer_token);
  s.who = std::move(who);
  s.created_at = s.last_seen = now_();
  std::lock_guard lock(mu_);
  const size_t per_user = std::max<size_t>(1, limits_.max_per_user);
  for (auto mine = ids_by_user_.find(s.who.user); mine != ids_by_user_.end() && mine->second.size() >= per_user;
       mine = ids_by_user_.find(s.who.user))  // an eviction may remove the user's entry
    if (!EvictLocked(&mine->second, s.created_at)) break;
  while (sessions_.size() >= limits_.max_sessions && EvictLocked(nullptr, s.created_at)) {
  }
  sessions_[s.id] = s;
  ids_by_user_[s.who.user].push_back(s.id);
  return s;
}

std::optional<Session> SessionStore::Find(std::string_view id) {
  if (id.empty()) return std::nullopt;
  const int64_t now = now_();
  std::lock_guard lock(mu_);
  auto it = sessions_.find(std::string(id));
  if (it == sessions_.end()) return std::nullopt;
  if (Expired(it->second, now)) {
    EraseLocked(it);
    return std::nullopt;
  }
  it->second.last_seen = now;
  return it->second;
}

bool SessionStore::End(std::string_view id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(std::string(id));
  if (it == sessions_.end()) return false;
  EraseLocked(it);
  return true;
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

std::vector<SessionEvictions> SessionStore::TakeEvictions() {
  std::vector<SessionEvictions> out;
  std::lock_guard lock(mu_);
  for (auto& [user, e] : evictions_) out.push_back(std::move(e));
  evictions_.clear();
  return out;
}

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1)
    throw std::runtime_error("the system's random number generator failed");
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * bytes, '0');
  for (size_t i = 0; i < bytes; ++i) {
    out[2 * i] = kDigits[static_cast<unsigned char>(raw[i]) >> 4];
    out[2 * i + 1] = kDigits[static_cast<unsigned char>(raw[i]) & 15];
  }
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
