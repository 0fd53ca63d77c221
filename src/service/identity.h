#pragma once
// Identity: the service's teams, users and bearer tokens, and the audit log of their changes. Who may call
// the service (Authenticate), which teams exist and which priority classes each may use.
//
// Contracts:
//  - Every change is durable (its rows and its audit entry in one store transaction) before it is visible.
//  - Changes are serialised: each reads, checks and writes under one lock (change_mu_), so none is lost
//    and two changes of one user's token never start from the same old token.
//  - Reads take a shared lock that no change holds across a store write, and never wait for the
//    scheduling loop: Authenticate stays fast while the cycle runs.
//  - `team_changed` is called after a team is created or changed, with the change lock held and no read
//    lock; it may take the driver's lock (the driver's lock is never held when a change starts).

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "sched/tenancy.h"
#include "service/api_error.h"
#include "store/store.h"

namespace tessera {

enum class Role : uint8_t { kAdmin, kTeamLead, kMember, kViewer };
const char* RoleName(Role r);
bool ParseRole(std::string_view s, Role* out);

struct Caller {
  std::string user;
  std::string team;  // empty for an admin
  Role role = Role::kViewer;
  std::string source;  // the client's address, for the audit log ("" = inside the process)
};

// What a bearer token is: its caller when valid; `retired` when it is not valid but was once (replaced or
// revoked since the process started; the last 65,536 such tokens are remembered), so that a failure with
// it is a stale credential rather than a guess.
struct TokenCheck {
  std::optional<Caller> caller;
  bool retired = false;
};

// The priority class only some teams may use (an admin allows it per team); new teams may use every other.
inline constexpr std::string_view kRestrictedClass = "production-inference";

struct UserView {
  std::string name, team;
  Role role = Role::kViewer;
  std::string token;         // only in the answer that created the user or replaced its token
  bool token_active = true;  // false once the token was revoked
};

struct TeamView {
  std::string name;
  int64_t guaranteed_milli = 0, limit_milli = -1;
  int over_quota_weight = 1;
  std::vector<std::string> allowed_classes;  // the priority classes its jobs may use
  uint64_t version = 1;                      // +1 on every change (ETag)
  int64_t allocated_milli = 0, fair_share_milli = 0, pending_jobs = 0, running_jobs = 0;
  int64_t pending_milli = 0;  // GPUs its pending jobs ask for (the last cycle's demand less its allocation)
};

// A team's quota and policy as the audit log records them (JSON text).
std::string TeamAuditJson(const TeamView& t);

// A change of a team: each field given replaces the stored one; `if_version` (from If-Match), when set,
// must be the team's version (else 412).
struct TeamChange {
  std::optional<int64_t> guaranteed_milli, limit_milli;
  std::optional<int> over_quota_weight;
  std::optional<std::vector<std::string>> allowed_classes;
  std::optional<uint64_t> if_version;
};

class Identity {
 public:
  Identity(Store* store, const TenancyConfig* tenancy, std::function<int64_t()> now,
           std::function<void(const TeamRow&)> team_changed);

  // Teams of the configuration (top-level queues) and the store (the store wins), users with their token
  // hashes. Returns the stored teams (their quotas override the configuration's queues).
  std::vector<TeamRow> Restore(const StoredState& s);

  // Creates user `admin` with a new token when there are no users; returns the token (else empty).
  Result<std::string> BootstrapAdmin();
  // The caller of a bearer token, or nothing.
  std::optional<Caller> Authenticate(std::string_view token) const;
  TokenCheck CheckToken(std::string_view token) const;

  Outcome<TeamView> CreateTeam(const Caller& c, const TeamRow& team);
  Outcome<TeamView> UpdateTeam(const Caller& c, const std::string& name, const TeamChange& change);
  // The teams the caller may see (an admin all, others their own), without usage figures.
  std::vector<TeamView> Teams(const Caller& c) const;
  bool HasTeam(const std::string& name) const;
  // 403 naming the class when team `team` may not use priority class `pc` (admins may use any; an unknown
  // team is the caller's to report).
  std::optional<ApiError> ClassPolicy(const Caller& c, const std::string& team, const std::string& pc) const;

  Outcome<UserView> CreateUser(const Caller& c, const std::string& name, const std::string& team,
                               const std::string& role);
  std::vector<UserView> Users(const Caller& c) const;
  // A new token for `user` (the old one stops working), or, with `revoke`, none. An admin, or a team lead
  // for its team's non-admin users.
  Outcome<UserView> ReplaceToken(const Caller& c, const std::string& user, bool revoke);
  // The audit log (admin only), by id; `more` is set when further entries match.
  Outcome<std::vector<AuditRow>> Audit(const Caller& c, const AuditQuery& q, bool* more) const;

  // Appends an audit entry by `c` that goes with no stored change (a refused request, sessions a cap
  // ended); durable when it returns.
  Status RecordAudit(const Caller& c, std::string action, std::string target, std::string after, bool changed);
  // An audit entry by `c` now (any room of the service writes them).
  AuditRow AuditOf(const Caller& c, std::string action, std::string target, std::string before,
                   std::string after, bool changed) const;
  TeamView ViewOf(const TeamRow& t) const;

 private:
  struct UserEntry {
    UserRow row;
    Role role = Role::kViewer;
  };

  Store* store_;
  const TenancyConfig* tenancy_;
  std::function<int64_t()> now_;
  std::function<void(const TeamRow&)> team_changed_;
  std::mutex change_mu_;          // one read-check-write at a time
  mutable std::shared_mutex mu_;  // the maps below
  std::map<std::string, TeamRow> teams_;
  std::unordered_map<std::string, UserEntry> users_by_hash_;
  std::map<std::string, std::string> hash_by_user_;  // a name is reserved here while its user is written
  std::unordered_set<std::string> retired_hashes_;    // hashes of replaced and revoked tokens
  std::deque<std::string> retired_order_;             // the same, oldest first (the oldest are forgotten)
  int64_t next_user_id_ = 1;
};

}  // namespace tessera
