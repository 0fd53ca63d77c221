#include "k8s/api/lease.h"

#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "base/utc_time.h"

namespace tessera {

using json = nlohmann::json;

std::string MicroTime(int64_t unix_us) { return FormatIsoUtcMicros(unix_us); }

int64_t ParseMicroTime(const std::string& s) {
  auto t = ParseIsoUtcMicros(s);
  return t.ok() ? *t : -1;
}

bool LeaseAvailable(const json& spec, const std::string& identity, int64_t now_us) {
  const std::string holder = spec.is_object() ? spec.value("holderIdentity", "") : "";
  if (holder.empty() || holder == identity) return true;
  const int duration = spec.value("leaseDurationSeconds", 15);
  const std::string renew = spec.value("renewTime", "");
  const int64_t renewed = renew.empty() ? -1 : ParseMicroTime(renew);
  return renewed < 0 || now_us > renewed + int64_t{duration} * 1000000;
}

std::string LeaseProblem(const ApiResponse& r, const std::string& verb, const LeaseOptions& o) {
  if (r.ok() || r.status == 409) return "";
  const std::string lease = fmt::format("Lease {}/{}", o.ns, o.name);
  if (r.status == 0) {
    if (r.error == ApiClient::kNotLeader) return "";
    const bool tls =
        r.error.find("SSL") != std::string::npos || r.error.find("ertificate") != std::string::npos;
    return tls ? fmt::format(
                     "TLS with the API server failed ({}): check the kubeconfig's server address and "
                     "certificate-authority",
                     r.error)
               : fmt::format("cannot reach the API server ({}): check the kubeconfig's server address",
                             r.error);
  }
  if (r.status == 401)
    return fmt::format(
        "the API server refuses the credentials (401 Unauthorized) reading the {}: the kubeconfig's "
        "token or client certificate is wrong or expired",
        lease);
  if (r.status == 403)
    return fmt::format(
        "RBAC: {} on leases.coordination.k8s.io in namespace {} is forbidden (403): grant the "
        "scheduler's service account get, create and update on leases there ({})",
        verb, o.ns, r.error);
  if (r.status == 404 && verb == "create")
    return fmt::format(
        "the Lease namespace '{}' does not exist (404 creating the {}): create it or pass "
        "--lease-namespace",
        o.ns, lease);
  return fmt::format("{} the {}: {} {}", verb, lease, r.status, r.error);
}

LeaderElector::LeaderElector(const ApiClient* api, LeaseOptions options)
    : api_(api), options_(std::move(options)) {}

std::string LeaderElector::Base() const {
  return fmt::format("/apis/coordination.k8s.io/v1/namespaces/{}/leases", options_.ns);
}

void LeaderElector::Note(const ApiResponse& r, const std::string& verb) {
  std::lock_guard<std::mutex> l(mu_);
  problem_ = LeaseProblem(r, verb, options_);
}

std::string LeaderElector::problem() const {
  std::lock_guard<std::mutex> l(mu_);
  return problem_;
}

bool LeaderElector::IsLeader(int64_t now_us) const {
  return leader_.load() && now_us < last_renew_us_.load() + int64_t{options_.renew_deadline_s} * 1000000;
}

bool LeaderElector::IsLeader() const {
  return IsLeader(std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count());
}

bool LeaderElector::TryAcquireOrRenew(int64_t now_us) {
  if (leader_.load() && !IsLeader(now_us)) leader_ = false;  // past the renew deadline: leading ended
  const ApiResponse got = api_->Get(Base() + "/" + options_.name);
  const std::string now = MicroTime(now_us);
  ApiResponse wrote;
  if (got.status == 404) {
    json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                  {"kind", "Lease"},
                  {"metadata", {{"name", options_.name}, {"namespace", options_.ns}}},
                  {"spec",
                   {{"holderIdentity", options_.identity},
                    {"leaseDurationSeconds", options_.duration_s},
                    {"acquireTime", now},
                    {"renewTime", now},
                    {"leaseTransitions", 0}}}};
    wrote = api_->Post(Base(), lease);
    Note(wrote, "create");
  } else if (got.ok() && got.body.is_object()) {
    json lease = got.body;
    json& spec = lease["spec"];
    if (!spec.is_object()) spec = json::object();
    if (!LeaseAvailable(spec, options_.identity, now_us)) {
      Note(got, "get");
      leader_ = false;
      return false;
    }
    if (spec.value("holderIdentity", "") != options_.identity) {
      spec["leaseTransitions"] =
          spec.value("leaseTransitions", 0) + (spec.value("holderIdentity", "").empty() ? 0 : 1);
      spec["acquireTime"] = now;
      spec["holderIdentity"] = options_.identity;
    }
    spec["leaseDurationSeconds"] = options_.duration_s;
    spec["renewTime"] = now;
    wrote = api_->Put(Base() + "/" + options_.name, lease);  // carries metadata.resourceVersion
    Note(wrote, "update");
  } else {
    Note(got, "get");
  }
  if (wrote.ok()) {
    last_renew_us_ = now_us;
    leader_ = true;
  }
  return IsLeader(now_us);
}

bool LeaderElector::Release(int64_t now_us) {
  if (!leader_.exchange(false)) return true;
  const ApiResponse got = api_->Get(Base() + "/" + options_.name);
  if (!got.ok() || !got.body.is_object()) return false;
  json lease = got.body;
  json& spec = lease["spec"];
  if (!spec.is_object() || spec.value("holderIdentity", "") != options_.identity) return true;
  spec["holderIdentity"] = "";
  spec["leaseDurationSeconds"] = 1;
  spec["renewTime"] = MicroTime(now_us);
  spec["acquireTime"] = MicroTime(now_us);
  return api_->Put(Base() + "/" + options_.name, lease).ok();
}

}  // namespace tessera
