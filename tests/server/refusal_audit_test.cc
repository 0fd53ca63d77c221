// The audit target and entry of a refused request.
#include "server/refusal_audit.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tessera {
namespace {

httplib::Request RefusedRequest(std::string method, std::string path, std::string body = "") {
  httplib::Request r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.body = std::move(body);
  return r;
}

TEST(RefusalAudit, TargetsNameTheResourceAsTheAuditLogDoes) {
  EXPECT_EQ(AuditTargetOf(RefusedRequest("PATCH", "/api/v1/teams/vision")), "team:vision");
  EXPECT_EQ(AuditTargetOf(RefusedRequest("POST", "/api/v1/users/ana/token")), "user:ana");
  EXPECT_EQ(AuditTargetOf(RefusedRequest("POST", "/api/v1/nodes/h100-001:drain")), "node:h100-001");
  EXPECT_EQ(AuditTargetOf(RefusedRequest("DELETE", "/api/v1/nodes/n1")), "node:n1");
  EXPECT_EQ(AuditTargetOf(RefusedRequest("POST", "/api/v1/jobs/17:cancel")), "job:17");
  EXPECT_EQ(AuditTargetOf(RefusedRequest("POST", "/api/v1/users", R"({"name":"lst-adm","role":"admin"})")),
            "user:lst-adm");
  EXPECT_EQ(AuditTargetOf(RefusedRequest("POST", "/api/v1/teams", R"({"name":"x"})")), "team:x");
  EXPECT_EQ(AuditTargetOf(RefusedRequest("POST", "/api/v1/users", "[[[")), "users");
  EXPECT_EQ(AuditTargetOf(RefusedRequest("POST", "/api/v1/jobs", R"({"name":"train"})")), "jobs");
  EXPECT_EQ(AuditTargetOf(RefusedRequest("GET", "/api/v1/audit")), "audit");
  EXPECT_EQ(AuditTargetOf(RefusedRequest("GET", "/api/v1/nodes")), "nodes");
}

TEST(RefusalAudit, TheEntrySaysWhatWasRefusedAndWhy) {
  httplib::Response res;
  res.status = 403;
  res.body = R"({"error":{"code":"PermissionDenied","field":"","message":"only an admin changes teams"}})";
  const auto j = nlohmann::json::parse(RefusalJson(RefusedRequest("PATCH", "/api/v1/teams/vision"), res));
  EXPECT_EQ(j["refused"], "PATCH /api/v1/teams/vision");
  EXPECT_EQ(j["status"], 403);
  EXPECT_EQ(j["reason"], "only an admin changes teams");
}

}  // namespace
}  // namespace tessera
