// Service operations behind the portal's Admin page (and the API): a user's token is replaced or revoked,
// a team's quota changes.
#include <fmt/format.h>

#include "service/service.h"
#include "service/tokens.h"

namespace tessera {
namespace {

// A stored hash that no token hashes to (SHA-256 hex has no ':'), unique per user.
std::string RevokedHash(const std::string& user) { return "revoked:" + user; }

}  // namespace

Outcome<UserView> Service::ReplaceToken(const Caller& c, const std::string& user, bool revoke) {
  if (c.role != Role::kAdmin && c.role != Role::kTeamLead)
    return ApiError{ErrorCode::kPermissionDenied, "", "only an admin or a team lead manages tokens"};
  std::string token;
  if (!revoke) {
    auto t = NewToken();
    if (!t.ok()) return ApiError{ErrorCode::kInternal, "", t.error()};
    token = *t;
  }
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
  row.token_hash = revoke ? RevokedHash(user) : Sha256Hex(token);
  WriteBatch b;
  b.users.push_back(row);
  if (Status st = store_->WriteAndWait(std::move(b)); !st.ok()) return ApiError{ErrorCode::kInternal, "", st.message()};
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_lock<std::shared_mutex> users(users_mu_);
  users_by_hash_.erase(old_hash);
  users_by_hash_[row.token_hash] = {row, role};
  hash_by_user_[user] = row.token_hash;
  UserView v{row.name, row.team, role, token};
  v.token_active = !revoke;
  return v;
}

Outcome<TeamView> Service::UpdateTeam(const Caller& c, const std::string& name,
                                      std::optional<int64_t> guaranteed_milli, std::optional<int64_t> limit_milli) {
  if (c.role != Role::kAdmin) return ApiError{ErrorCode::kPermissionDenied, "", "only an admin changes quotas"};
  TeamRow row;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = teams_.find(name);
    if (it == teams_.end()) return ApiError{ErrorCode::kNotFound, "", fmt::format("no team '{}'", name)};
    row = it->second;
  }
  if (guaranteed_milli) row.guaranteed_milli = *guaranteed_milli;
  if (limit_milli) row.limit_milli = *limit_milli < 0 ? -1 : *limit_milli;
  if (row.guaranteed_milli < 0) return Invalid("guaranteed_gpus", "field 'guaranteed_gpus': must not be negative");
  if (row.limit_milli >= 0 && row.limit_milli < row.guaranteed_milli)
    return Invalid("limit_gpus", "field 'limit_gpus': must be at least guaranteed_gpus");
  WriteBatch b;
  b.teams.push_back(row);
  if (Status st = store_->WriteAndWait(std::move(b)); !st.ok()) return ApiError{ErrorCode::kInternal, "", st.message()};
  {
    std::lock_guard<std::mutex> lock(mu_);
    teams_[name] = row;
    EnsureQueue(name, &row);
  }
  Notify();  // the next cycle sees the new quota
  return TeamView{row.name, row.guaranteed_milli, row.limit_milli, row.over_quota_weight};
}

}  // namespace tessera
