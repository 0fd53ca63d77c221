#pragma once
// Browser sessions of the web portal. Signing in exchanges an API token for a session: the browser gets
// only an opaque session id in an HttpOnly, SameSite=Strict cookie, and the page gets a per-session CSRF
// token that every state-changing request must echo in the X-CSRF-Token header. The API token stays in the
// server's memory, so a revoked token also ends its sessions (the API's token check refuses it).
// Sessions live in memory: a restart signs everyone out.
//
// Thread safety: every method may be called from any thread.

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tessera {

inline constexpr std::string_view kSessionCookie = "tessera_session";
inline constexpr std::string_view kCsrfHeader = "X-CSRF-Token";

struct SessionIdentity {
  std::string user, team, role;
};

struct Session {
  std::string id;            // 256 random bits, hex
  std::string csrf_token;    // 256 random bits, hex
  std::string bearer_token;  // the API token the user signed in with (never sent back to the browser)
  SessionIdentity who;
  int64_t created_at = 0, last_seen = 0;  // wall seconds
};

struct SessionLimits {
  int64_t idle_timeout_s = 12 * 3600;    // ends after this long without a request
  int64_t max_age_s = 7 * 24 * 3600;     // ends this long after sign-in, used or not
  size_t max_sessions = 100000;          // all users together: the least recently seen ends first beyond this
  // One user's sessions: a sign-in beyond this ends that user's least recently seen session first, so one
  // user's sign-ins never end another user's sessions (the global cap above is only a memory bound).
  size_t max_per_user = 32;
};

// Sessions of `user` that a cap ended since the last TakeEvictions (for the audit log).
struct SessionEvictions {
  std::string user;
  int64_t count = 0;
  int64_t first_at = 0, last_at = 0;  // wall seconds
  size_t cap = 0;                     // the cap that ended the last of them
  bool all_users = false;             // that cap was max_sessions (else max_per_user)
};

class SessionStore {
 public:
  // `now` returns wall seconds (injected; tests drive it).
  explicit SessionStore(std::function<int64_t()> now, SessionLimits limits = {});

  // A new session; when `who.user` already holds max_per_user sessions, its least recently seen ends first.
  Session Create(std::string bearer_token, SessionIdentity who);
  // The live session with this id (refreshing its idle timer), or nullopt; an expired one is removed.
  std::optional<Session> Find(std::string_view id);
  // Ends the session; false when there was none.
  bool End(std::string_view id);
  // The session `id` now stands for `bearer_token` (its user replaced their own token through it, so it
  // carries on with the new one). False when there is no such session.
  bool Rebind(std::string_view id, std::string bearer_token);
  size_t Size() const;
  // Sessions ended by a cap since the last call, one entry per user (and forgets them).
  std::vector<SessionEvictions> TakeEvictions();

 private:
  using Map = std::unordered_map<std::string, Session>;
  bool Expired(const Session& s, int64_t now) const;
  void EraseLocked(Map::iterator it);
  // Ends the least recently seen of `ids` (of all sessions when null), recorded against its user; false
  // when there was none.
  bool EvictLocked(const std::vector<std::string>* ids, int64_t now);

  std::function<int64_t()> now_;
  SessionLimits limits_;
  mutable std::mutex mu_;
  Map sessions_;
  std::unordered_map<std::string, std::vector<std::string>> ids_by_user_;  // each user's session ids
  std::unordered_map<std::string, SessionEvictions> evictions_;            // by user, until taken
};

// 2 * bytes hex characters from the system's CSPRNG (OpenSSL RAND_bytes).
std::string RandomHex(size_t bytes);
// Compares in time independent of where the strings differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);
// The value of cookie `name` in a Cookie header ("a=1; b=2"), or "".
std::string CookieValue(std::string_view cookie_header, std::string_view name);
// Set-Cookie values: the session cookie (HttpOnly, SameSite=Strict, Path=/, Secure when `secure`), and
// one that clears it.
std::string SessionCookieHeader(const Session& s, int64_t max_age_s, bool secure);
std::string ClearSessionCookieHeader(bool secure);

}  // namespace tessera
