// Service operations behind the portal's Admin page (and the API): a user's token is replaced or revoked,
// a team's quota and priority policy change, the audit log is read. Each change reads, checks and writes
// under admin_mu_ and is durable (with its audit entry, in one transaction) before it is applied.
#include <fmt/format.h>

#include <algorithm>

#include "service/service.h"
#include "service/tokens.h"

namespace tessera {
namespace {

// A stored hash that no token hashes to (SHA-256 hex has no ':'), unique per user.
std::string RevokedHash(const std::string& user) { return "revoked:" + user; }

double GpusOf(int64_t milli) { return milli < 0 ? -1.0 : static_cast<double>(milli) / 1000; }

}  // namespace

std::string TeamAuditJson(const TeamView& t) {
  return nlohmann::json{{"guaranteed_gpus", GpusOf(t.guaranteed_milli)},
                        {"limit_gpus", t.limit_milli < 0 ? nlohmann::json() : nlohmann::json(GpusOf(t.limit_milli))},
                        {"over_quota_weight", t.over_quota_weight},
                        {"allowed_priority_classes", t.allowed_classes}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

TeamView Service::TeamViewOf(const TeamRow& t) const {
  TeamView v{t.name, t.guaranteed_milli, t.limit_milli, t.over_quota_weight};
  if (t.allowed_classes) {
    v.allowed_classes = *t.allowed_classes;
  } else {
    for (const PriorityClass& p : config_.tenancy.priority_classes)
      if (p.name != kRestrictedClass) v.allowed_classes.push_back(p.name);
  }
  v.version = t.version;
  return v;
}

AuditRow Service::AuditOf(const Caller& c, std::string action, std::string target, std::string before,
                          std::string after, bool changed) const {
  AuditRow a;
  a.time = Now();
  a.actor = c.user;
  a.action = std::move(action);
  a.target = std::move(target);
  a.source = c.source;
  a.before = std::move(before);
  a.after = std::move(after);
  a.changed = changed;
  return a;
}

std::optional<ApiError> Service::ClassPolicyLocked(const Caller& c, const std::string& team,
                                                   const std::string& pc) const {
  if (c.role == Role::kAdmin) return std::nullopt;
  auto it = teams_.find(team);
  if (it == teams_.end()) return std::nullopt;  // the caller reports the unknown team
  const TeamView v = TeamViewOf(it->second);
  if (std::find(v.allowed_classes.begin(), v.allowed_classes.end(), pc) != v.allowed_classes.end()) return std::nullopt;
  return ApiError{ErrorCode::kPermissionDenied, "priority_class",
                  fmt::format("team '{}' may not use priority class '{}' (an admin allows it: "
                              "PATCH /api/v1/teams/{} with allowed_priority_classes)",
                              team, pc, team)};
}

Outcome<UserView> Service::ReplaceToken(const Caller& c, const std::string& user, bool revoke) {
  if (c.role != Role::kAdmin && c.role != Role::kTeamLead)
    return ApiError{ErrorCode::kPermissionDenied, "", "only an admin or a team lead manages tokens"};
  std::string token;
  if (!revoke) {
    auto t = NewToken();
    if (!t.ok()) return ApiError{ErrorCode::kInternal, "", t.error()};
    token = *t;
  }
  // Held from the read of the current token to the swap in memory: two changes of one user's token never
  // both start from the same old token, so exactly the last one issued works (or none after a revoke).
  std::lock_guard<std::mutex> admin(admin_mu_);
  UserRow row;
  Role role;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto h = hash_by_user_.find(user);
    auto it = h == hash_by_user_.end() ? users_by_hash_.end() : users_by_hash_.find(h->second);
    const bool visible = it != users_by_hash_.end() &&
                         (c.role == Role::kAdmin || (c.role == Role::kTeamLead && it->second.row.team == c.team));
    if (!visible) return ApiError{ErrorCode::kNotFound, "", fmt::format("no user '{}'", user)};
    if (c.role == Role::kTeamLead && it->second.role == Role::kAdmin)
      return ApiError{ErrorCode::kPermissionDenied, "", "a team lead cannot change an admin's token"};
    row = it->second.row;
    role = it->second.role;
  }
  const std::string old_hash = row.token_hash;
  const bool was_active = old_hash.find(':') == std::string::npos;
  row.token_hash = revoke ? RevokedHash(user) : Sha256Hex(token);
  WriteBatch b;
  b.users.push_back(row);
  const auto state = [](bool active) { return nlohmann::json{{"token_active", active}}.dump(); };
  b.audit.push_back(AuditOf(c, revoke ? "user.token.revoke" : "user.token.rotate", "user:" + user, state(was_active),
                            state(!revoke), !revoke || was_active));
  if (Status st = store_->WriteAndWait(std::move(b)); !st.ok()) return ApiError{ErrorCode::kInternal, "", st.message()};
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_lock<std::shared_mutex> users(users_mu_);
    users_by_hash_.erase(old_hash);
    users_by_hash_[row.token_hash] = {row, role};
    hash_by_user_[user] = row.token_hash;
  }
  UserView v{row.name, row.team, role, token};
  v.token_active = !revoke;
  return v;
}

Outcome<TeamView> Service::UpdateTeam(const Caller& c, const std::string& name, const TeamChange& change) {
  if (c.role != Role::kAdmin) return ApiError{ErrorCode::kPermissionDenied, "", "only an admin changes teams"};
  if (change.allowed_classes)
    for (const std::string& pc : *change.allowed_classes)
      if (!config_.tenancy.FindClass(pc))
        return Invalid("allowed_priority_classes", fmt::format("field 'allowed_priority_classes': unknown class '{}'", pc));
  std::lock_guard<std::mutex> admin(admin_mu_);  // read-modify-write as one step: no lost update
  TeamRow row;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = teams_.find(name);
    if (it == teams_.end()) return ApiError{ErrorCode::kNotFound, "", fmt::format("no team '{}'", name)};
    row = it->second;
  }
  if (change.if_version && *change.if_version != row.version)
    return ApiError{ErrorCode::kPreconditionFailed, "If-Match",
                    fmt::format("team '{}' is at version {}, not {}", name, row.version, *change.if_version)};
  const TeamView before = TeamViewOf(row);
  if (change.guaranteed_milli) row.guaranteed_milli = *change.guaranteed_milli;
  if (change.limit_milli) row.limit_milli = *change.limit_milli < 0 ? -1 : *change.limit_milli;
  if (change.over_quota_weight) row.over_quota_weight = *change.over_quota_weight;
  if (change.allowed_classes) row.allowed_classes = *change.allowed_classes;
  if (row.over_quota_weight < 0) return Invalid("over_quota_weight", "field 'over_quota_weight': must be >= 0");
  if (row.guaranteed_milli < 0) return Invalid("guaranteed_gpus", "field 'guaranteed_gpus': must not be negative");
  if (row.limit_milli >= 0 && row.limit_milli < row.guaranteed_milli)
    return Invalid("limit_gpus", "field 'limit_gpus': must be at least guaranteed_gpus");
  const std::string before_json = TeamAuditJson(before);
  const bool changed = TeamAuditJson(TeamViewOf(row)) != before_json;
  if (changed) ++row.version;
  const TeamView after = TeamViewOf(row);
  WriteBatch b;
  if (changed) b.teams.push_back(row);
  b.audit.push_back(AuditOf(c, "team.update", "team:" + name, before_json, TeamAuditJson(after), changed));
  if (Status st = store_->WriteAndWait(std::move(b)); !st.ok()) return ApiError{ErrorCode::kInternal, "", st.message()};
  {
    std::lock_guard<std::mutex> lock(mu_);
    teams_[name] = row;
    EnsureQueue(name, &row);
  }
  Notify();  // the next cycle sees the new quota
  return after;
}

Outcome<std::vector<AuditRow>> Service::Audit(const Caller& c, const AuditQuery& q, bool* more) const {
  if (c.role != Role::kAdmin) return ApiError{ErrorCode::kPermissionDenied, "", "only an admin reads the audit log"};
  auto rows = store_->ReadAudit(q, more);
  if (!rows.ok()) return ApiError{ErrorCode::kUnavailable, "", rows.error()};
  return std::move(rows).value();
}

}  // namespace tessera
