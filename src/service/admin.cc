// The service's identity room as the API sees it: each call goes to Identity (identity.h), which owns teams,
// users, tokens and the audit log; the team list adds each team's figures from the last snapshot.
#include "service/service_driver.h"

namespace tessera {

Result<std::string> Service::BootstrapAdmin() { return identity_->BootstrapAdmin(); }

std::optional<Caller> Service::Authenticate(std::string_view token) const {
  return identity_->Authenticate(token);
}

TokenCheck Service::CheckToken(std::string_view token) const { return identity_->CheckToken(token); }

Outcome<TeamView> Service::CreateTeam(const Caller& c, const TeamRow& team) {
  return identity_->CreateTeam(c, team);
}

Outcome<TeamView> Service::UpdateTeam(const Caller& c, const std::string& name, const TeamChange& change) {
  return identity_->UpdateTeam(c, name, change);
}

std::vector<TeamView> Service::Teams(const Caller& c) const {
  std::vector<TeamView> out = identity_->Teams(c);
  driver_->snapshots().AddQueueFigures(&out);
  return out;
}

Outcome<UserView> Service::CreateUser(const Caller& c, const std::string& name, const std::string& team,
                                      const std::string& role) {
  return identity_->CreateUser(c, name, team, role);
}

std::vector<UserView> Service::Users(const Caller& c) const { return identity_->Users(c); }

Outcome<UserView> Service::ReplaceToken(const Caller& c, const std::string& user, bool revoke) {
  return identity_->ReplaceToken(c, user, revoke);
}

Outcome<std::vector<AuditRow>> Service::Audit(const Caller& c, const AuditQuery& q, bool* more) const {
  return identity_->Audit(c, q, more);
}

Status Service::RecordAudit(const Caller& c, std::string action, std::string target, std::string after,
                            bool changed) {
  return identity_->RecordAudit(c, std::move(action), std::move(target), std::move(after), changed);
}

}  // namespace tessera
