#include "service/identity.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "service/tokens.h"

namespace tessera {
namespace {

// A stored hash that no token hashes to (SHA-256 hex has no ':'), unique per user.
std::string RevokedHash(const std::string& user) { return "revoked:" + user; }

double GpusOf(int64_t milli) { return milli < 0 ? -1.0 : static_cast<double>(milli) / 1000; }

std::optional<ApiError> CheckQuota(const TeamRow& row) {
  if (row.guaranteed_milli < 0)
    return Invalid("guaranteed_gpus", "field 'guaranteed_gpus': must not be negative");
  if (row.limit_milli >= 0 && row.limit_milli < row.guaranteed_milli)
    return Invalid("limit_gpus", "field 'limit_gpus': must be at least guaranteed_gpus");
  if (row.over_quota_weight < 0)
    return Invalid("over_quota_weight", "field 'over_quota_weight': must be >= 0");
  return std::nullopt;
}

}  // namespace

const char* RoleName(Role r) {
  switch (r) {
    case Role::kAdmin:
      return "admin";
    case Role::kTeamLead:
      return "team-lead";
    case Role::kMember:
      return "member";
    case Role::kViewer:
      return "viewer";
  }
  return "viewer";
}

bool ParseRole(std::string_view s, Role* out) {
  for (Role r : {Role::kAdmin, Role::kTeamLead, Role::kMember, Role::kViewer})
    if (s == RoleName(r)) {
      *out = r;
      return true;
    }
  return false;
}

std::string TeamAuditJson(const TeamView& t) {
  return nlohmann::json{
      {"guaranteed_gpus", GpusOf(t.guaranteed_milli)},
      {"limit_gpus", t.limit_milli < 0 ? nlohmann::json() : nlohmann::json(GpusOf(t.limit_milli))},
      {"over_quota_weight", t.over_quota_weight},
      {"allowed_priority_classes", t.allowed_classes}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Identity::Identity(Store* store, const TenancyConfig* tenancy, std::function<int64_t()> now,
                   std::function<void(const TeamRow&)> team_changed)
    : store_(store), tenancy_(tenancy), now_(std::move(now)), team_changed_(std::move(team_changed)) {}

std::vector<TeamRow> Identity::Restore(const StoredState& s) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  for (const QueueConfig& q : tenancy_->queues)
    if (q.parent.empty() && !teams_.count(q.name))
      teams_[q.name] = TeamRow{q.name, q.guaranteed_milli, q.limit_milli, q.over_quota_weight, 0};
  for (const TeamRow& t : s.teams) teams_[t.name] = t;
  for (const UserRow& u : s.users) {
    Role role = Role::kViewer;
    ParseRole(u.role, &role);
    users_by_hash_[u.token_hash] = {u, role};
    hash_by_user_[u.name] = u.token_hash;
    next_user_id_ = std::max(next_user_id_, u.id + 1);
  }
  return s.teams;
}

TeamView Identity::ViewOf(const TeamRow& t) const {
  TeamView v{t.name, t.guaranteed_milli, t.limit_milli, t.over_quota_weight};
  if (t.allowed_classes) {
    v.allowed_classes = *t.allowed_classes;
  } else {
    for (const PriorityClass& p : tenancy_->priority_classes)
      if (p.name != kRestrictedClass) v.allowed_classes.push_back(p.name);
  }
  v.version = t.version;
  return v;
}

AuditRow Identity::AuditOf(const Caller& c, std::string action, std::string target, std::string before,
                           std::string after, bool changed) const {
  AuditRow a;
  a.time = now_();
  a.actor = c.user;
  a.action = std::move(action);
  a.target = std::move(target);
  a.source = c.source;
  a.before = std::move(before);
  a.after = std::move(after);
  a.changed = changed;
  return a;
}

Result<std::string> Identity::BootstrapAdmin() {
  std::lock_guard<std::mutex> change(change_mu_);
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (!users_by_hash_.empty()) return std::string();
  }
  auto token = NewToken();
  if (!token.ok()) return token.status();
  UserRow row{next_user_id_, "admin", "", RoleName(Role::kAdmin), Sha256Hex(*token), now_()};
  WriteBatch b;
  b.users.push_back(row);
  if (Status st = store_->WriteAndWait(std::move(b)); !st.ok()) return st;
  std::unique_lock<std::shared_mutex> lock(mu_);
  next_user_id_ = row.id + 1;
  users_by_hash_[row.token_hash] = {row, Role::kAdmin};
  hash_by_user_[row.name] = row.token_hash;
  return *token;
}

std::optional<Caller> Identity::Authenticate(std::string_view token) const { return CheckToken(token).caller; }

TokenCheck Identity::CheckToken(std::string_view token) const {
  if (token.empty() || token.size() > 256) return {};
  const std::string h = Sha256Hex(token);
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = users_by_hash_.find(h);
  if (it == users_by_hash_.end() || !ConstantTimeEqual(it->second.row.token_hash, h))
    return {std::nullopt, retired_hashes_.count(h) > 0};
  return {Caller{it->second.row.name, it->second.row.team, it->second.role}, false};
}

Status Identity::RecordAudit(const Caller& c, std::string action, std::string target, std::string after,
                             bool changed) {
  WriteBatch b;
  b.audit.push_back(AuditOf(c, std::move(action), std::move(target), "", std::move(after), changed));
  return store_->WriteAndWait(std::move(b));
}

bool Identity::HasTeam(const std::string& name) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return teams_.count(name) > 0;
}

std::vector<TeamView> Identity::Teams(const Caller& c) const {
  std::vector<TeamView> out;
  std::shared_lock<std::shared_mutex> lock(mu_);
  for (const auto& [name, t] : teams_)
    if (c.role == Role::kAdmin || c.team == name) out.push_back(ViewOf(t));
  return out;
}

std::optional<ApiError> Identity::ClassPolicy(const Caller& c, const std::string& team,
                                              const std::string& pc) const {
  if (c.role == Role::kAdmin) return std::nullopt;
  TeamView v;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = teams_.find(team);
    if (it == teams_.end()) return std::nullopt;  // the caller reports the unknown team
    v = ViewOf(it->second);
  }
  if (std::find(v.allowed_classes.begin(), v.allowed_classes.end(), pc) != v.allowed_classes.end())
    return std::nullopt;
  return ApiError{ErrorCode::kPermissionDenied, "priority_class",
                  fmt::format("team '{}' may not use priority class '{}' (an admin allows it: "
                              "PATCH /api/v1/teams/{} with allowed_priority_classes)",
                              team, pc, team)};
}

Outcome<TeamView> Identity::CreateTeam(const Caller& c, const TeamRow& team) {
  if (c.role != Role::kAdmin)
    return ApiError{ErrorCode::kPermissionDenied, "", "only an admin creates teams"};
  if (team.name.empty() || team.name.size() > 63 ||
      team.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_") != std::string::npos)
    return Invalid("name", "field 'name': 1-63 characters of a-z, 0-9, '-' and '_'");
  if (auto bad = CheckQuota(team)) return *bad;
  TeamRow row = team;
  row.created_at = now_();
  row.version = 1;
  if (row.allowed_classes)
    for (const std::string& pc : *row.allowed_classes)
      if (!tenancy_->FindClass(pc))
        return Invalid("allowed_priority_classes",
                       fmt::format("field 'allowed_priority_classes': unknown class '{}'", pc));
  std::lock_guard<std::mutex> change(
      change_mu_);  // the check and the write are one step: a second create is 409
  if (HasTeam(row.name))
    return ApiError{ErrorCode::kAlreadyExists, "name", fmt::format("team '{}' exists", row.name)};
  WriteBatch b;
  b.teams.push_back(row);
  const TeamView view = ViewOf(row);
  b.audit.push_back(AuditOf(c, "team.create", "team:" + row.name, "", TeamAuditJson(view), true));
  if (Status st = store_->WriteAndWait(std::move(b)); !st.ok())
    return ApiError{ErrorCode::kInternal, "", st.message()};
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    teams_[row.name] = row;
  }
  team_changed_(row);
  return view;
}

Outcome<TeamView> Identity::UpdateTeam(const Caller& c, const std::string& name, const TeamChange& change) {
  if (c.role != Role::kAdmin)
    return ApiError{ErrorCode::kPermissionDenied, "", "only an admin changes teams"};
  if (change.allowed_classes)
    for (const std::string& pc : *change.allowed_classes)
      if (!tenancy_->FindClass(pc))
        return Invalid("allowed_priority_classes",
                       fmt::format("field 'allowed_priority_classes': unknown class '{}'", pc));
  std::lock_guard<std::mutex> serial(change_mu_);  // read-modify-write as one step: no lost update
  TeamRow row;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = teams_.find(name);
    if (it == teams_.end()) return ApiError{ErrorCode::kNotFound, "", fmt::format("no team '{}'", name)};
    row = it->second;
  }
  if (change.if_version && *change.if_version != row.version)
    return ApiError{ErrorCode::kPreconditionFailed, "If-Match",
                    fmt::format("team '{}' is at version {}, not {}", name, row.version, *change.if_version)};
  const std::string before_json = TeamAuditJson(ViewOf(row));
  if (change.guaranteed_milli) row.guaranteed_milli = *change.guaranteed_milli;
  if (change.limit_milli) row.limit_milli = *change.limit_milli < 0 ? -1 : *change.limit_milli;
  if (change.over_quota_weight) row.over_quota_weight = *change.over_quota_weight;
  if (change.allowed_classes) row.allowed_classes = *change.allowed_classes;
  if (auto bad = CheckQuota(row)) return *bad;
  const bool changed = TeamAuditJson(ViewOf(row)) != before_json;
  if (changed) ++row.version;
  const TeamView after = ViewOf(row);
  WriteBatch b;
  if (changed) b.teams.push_back(row);
  b.audit.push_back(AuditOf(c, "team.update", "team:" + name, before_json, TeamAuditJson(after), changed));
  if (Status st = store_->WriteAndWait(std::move(b)); !st.ok())
    return ApiError{ErrorCode::kInternal, "", st.message()};
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    teams_[name] = row;
  }
  team_changed_(row);  // the next cycle sees the new quota
  return after;
}

Outcome<UserView> Identity::CreateUser(const Caller& c, const std::string& name, const std::string& team,
                                       const std::string& role_name) {
  Role role;
  if (!ParseRole(role_name, &role))
    return Invalid("role", "field 'role': one of admin, team-lead, member, viewer");
  if (c.role != Role::kAdmin && c.role != Role::kTeamLead)
    return ApiError{ErrorCode::kPermissionDenied, "", "only an admin or a team lead creates users"};
  if (c.role == Role::kTeamLead && (team != c.team || role == Role::kAdmin))
    return ApiError{ErrorCode::kPermissionDenied, "team", "a team lead creates users of its own team only"};
  if (name.empty() || name.size() > 63 ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_.") != std::string::npos)
    return Invalid("name", "field 'name': 1-63 characters of a-z, 0-9, '-', '_' and '.'");
  auto token = NewToken();
  if (!token.ok()) return ApiError{ErrorCode::kInternal, "", token.error()};
  UserRow row{0, name, team, RoleName(role), Sha256Hex(*token), now_()};
  std::lock_guard<std::mutex> change(change_mu_);
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (role != Role::kAdmin && !teams_.count(team))
      return Invalid("team", fmt::format("field 'team': unknown team '{}'", team));
    if (hash_by_user_.count(name))
      return ApiError{ErrorCode::kAlreadyExists, "name", "user '" + name + "' exists"};
  }
  row.id = next_user_id_;
  WriteBatch b;
  b.users.push_back(row);
  b.audit.push_back(AuditOf(c, "user.create", "user:" + name, "",
                            nlohmann::json{{"team", team}, {"role", RoleName(role)}}.dump(), true));
  if (Status st = store_->WriteAndWait(std::move(b)); !st.ok())
    return ApiError{ErrorCode::kInternal, "", st.message()};
  std::unique_lock<std::shared_mutex> lock(mu_);
  next_user_id_ = row.id + 1;
  users_by_hash_[row.token_hash] = {row, role};
  hash_by_user_[name] = row.token_hash;
  return UserView{name, team, role, *token};
}

std::vector<UserView> Identity::Users(const Caller& c) const {
  std::vector<UserView> out;
  std::shared_lock<std::shared_mutex> lock(mu_);
  for (const auto& [hash, u] : users_by_hash_)
    if (c.role == Role::kAdmin || (c.role == Role::kTeamLead && u.row.team == c.team))
      out.push_back({u.row.name, u.row.team, u.role, "", u.row.token_hash.find(':') == std::string::npos});
  std::sort(out.begin(), out.end(), [](const UserView& a, const UserView& b) { return a.name < b.name; });
  return out;
}

Outcome<UserView> Identity::ReplaceToken(const Caller& c, const std::string& user, bool revoke) {
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
  std::lock_guard<std::mutex> change(change_mu_);
  UserRow row;
  Role role;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto h = hash_by_user_.find(user);
    auto it = h == hash_by_user_.end() ? users_by_hash_.end() : users_by_hash_.find(h->second);
    const bool visible =
        it != users_by_hash_.end() &&
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
  b.audit.push_back(AuditOf(c, revoke ? "user.token.revoke" : "user.token.rotate", "user:" + user,
                            state(was_active), state(!revoke), !revoke || was_active));
  if (Status st = store_->WriteAndWait(std::move(b)); !st.ok())
    return ApiError{ErrorCode::kInternal, "", st.message()};
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    users_by_hash_.erase(old_hash);
    users_by_hash_[row.token_hash] = {row, role};
    hash_by_user_[user] = row.token_hash;
    if (was_active && retired_hashes_.insert(old_hash).second) {
      retired_order_.push_back(old_hash);
      if (retired_order_.size() > 65536) {
        retired_hashes_.erase(retired_order_.front());
        retired_order_.pop_front();
      }
    }
  }
  UserView v{row.name, row.team, role, token};
  v.token_active = !revoke;
  return v;
}

Outcome<std::vector<AuditRow>> Identity::Audit(const Caller& c, const AuditQuery& q, bool* more) const {
  if (c.role != Role::kAdmin)
    return ApiError{ErrorCode::kPermissionDenied, "", "only an admin reads the audit log"};
  auto rows = store_->ReadAudit(q, more);
  if (!rows.ok()) return ApiError{ErrorCode::kUnavailable, "", rows.error()};
  return std::move(rows).value();
}

}  // namespace tessera
