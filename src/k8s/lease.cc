#include "k8s/lease.h"

#include <fmt/format.h>

#include <ctime>
#include <nlohmann/json.hpp>

namespace tessera {

using json = nlohmann::json;

std::string MicroTime(int64_t unix_us) {
  const time_t s = static_cast<time_t>(unix_us / 1000000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, unix_us % 1000000);
}

int64_t ParseMicroTime(const std::string& s) {
  std::tm tm{};
  int frac_len = 0;
  long frac = 0;
  if (s.size() < 20) return -1;
  if (sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
             &tm.tm_sec) != 6)
    return -1;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  if (s[19] == '.') {
    size_t i = 20;
    for (; i < s.size() && isdigit(static_cast<unsigned char>(s[i])); ++i)
      if (frac_len < 6) frac = frac * 10 + (s[i] - '0'), ++frac_len;
    for (; frac_len < 6; ++frac_len) frac *= 10;
  }
  return static_cast<int64_t>(timegm(&tm)) * 1000000 + frac;
}

bool LeaseAvailable(const json& spec, const std::string& identity, int64_t now_us) {
  const std::string holder = spec.is_object() ? spec.value("holderIdentity", "") : "";
  if (holder.empty() || holder == identity) return true;
  const int duration = spec.value("leaseDurationSeconds", 15);
  const std::string renew = spec.value("renewTime", "");
  const int64_t renewed = renew.empty() ? -1 : ParseMicroTime(renew);
  return renewed < 0 || now_us > renewed + int64_t{duration} * 1000000;
}

LeaderElector::LeaderElector(const ApiClient* api, LeaseOptions options) : api_(api), options_(std::move(options)) {}

bool LeaderElector::TryAcquireOrRenew(int64_t now_us) {
  const std::string base = fmt::format("/apis/coordination.k8s.io/v1/namespaces/{}/leases", options_.ns);
  const ApiResponse got = api_->Get(base + "/" + options_.name);
  const std::string now = MicroTime(now_us);
  ApiResponse wrote;
  if (got.status == 404) {
    json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                  {"kind", "Lease"},
                  {"metadata", {{"name", options_.name}, {"namespace", options_.ns}}},
                  {"spec", {{"holderIdentity", options_.identity}, {"leaseDurationSeconds", options_.duration_s},
                            {"acquireTime", now}, {"renewTime", now}, {"leaseTransitions", 0}}}};
    wrote = api_->Post(base, lease);
  } else if (got.ok() && got.body.is_object()) {
    json lease = got.body;
    json& spec = lease["spec"];
    if (!spec.is_object()) spec = json::object();
    if (!LeaseAvailable(spec, options_.identity, now_us)) {
      leader_ = false;
      return false;
    }
    if (spec.value("holderIdentity", "") != options_.identity) {
      spec["leaseTransitions"] = spec.value("leaseTransitions", 0) + (spec.value("holderIdentity", "").empty() ? 0 : 1);
      spec["acquireTime"] = now;
      spec["holderIdentity"] = options_.identity;
    }
    spec["leaseDurationSeconds"] = options_.duration_s;
    spec["renewTime"] = now;
    wrote = api_->Put(base + "/" + options_.name, lease);  // carries metadata.resourceVersion
  }
  if (wrote.ok()) {
    last_renew_us_ = now_us;
    leader_ = true;
  } else if (leader_.load() && now_us > last_renew_us_ + int64_t{options_.duration_s} * 1000000) {
    leader_ = false;  // could not renew within the lease's duration: someone else may take it
  }
  return leader_.load();
}

}  // namespace tessera
