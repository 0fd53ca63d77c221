#include "server/credential_limits.h"

#include <algorithm>

namespace tessera {

void CredentialLimiter::Refill(Budgets& b, double now) const {
  const double minutes = std::max(0.0, now - b.at) / 60;
  b.failures = std::min(limits_.failures_per_min, b.failures + minutes * limits_.failures_per_min);
  b.extra = std::min(limits_.extra_checks_per_min, b.extra + minutes * limits_.extra_checks_per_min);
  b.at = std::max(b.at, now);
}

double CredentialLimiter::RetryAfterOf(const Budgets& b) const {
  return std::max(0.0, (1 - b.failures) * 60 / limits_.failures_per_min);
}

void CredentialLimiter::Sweep(Stripe& s, double now) const {
  if (s.budgets.size() < 8192) return;
  for (auto it = s.budgets.begin(); it != s.budgets.end();) {
    Refill(it->second, now);
    const bool full = it->second.failures >= limits_.failures_per_min &&
                      it->second.extra >= limits_.extra_checks_per_min;
    it = full ? s.budgets.erase(it) : std::next(it);
  }
}

CredentialLimiter::Verdict CredentialLimiter::Check(const std::string& key, double now,
                                                    const std::function<Found()>& check) {
  Verdict v;
  if (!enabled()) {
    v.checked = true;
    v.found = check();
    return v;
  }
  Stripe& s = StripeOf(key);
  std::lock_guard lock(s.mu);
  auto it = s.budgets.find(key);
  if (it != s.budgets.end()) {
    Refill(it->second, now);
    if (it->second.failures < 1 && it->second.extra < 1) {
      v.limited = true;
      v.retry_after_s = RetryAfterOf(it->second);
      return v;
    }
  }
  v.checked = true;
  v.found = check();  // under the lock: no other check of this key decides before this one is charged
  if (v.found != Found::kWrong) return v;
  if (it == s.budgets.end()) {
    Sweep(s, now);
    it = s.budgets.emplace(key, Budgets{limits_.failures_per_min, limits_.extra_checks_per_min, now}).first;
  }
  Budgets& b = it->second;
  if (b.failures >= 1) {
    b.failures -= 1;
  } else {
    b.extra -= 1;
    v.limited = true;
    v.retry_after_s = RetryAfterOf(b);
  }
  return v;
}

double CredentialLimiter::RetryAfter(const std::string& key, double now) {
  if (!enabled()) return 0;
  Stripe& s = StripeOf(key);
  std::lock_guard lock(s.mu);
  auto it = s.budgets.find(key);
  if (it == s.budgets.end()) return 0;
  Refill(it->second, now);
  return it->second.failures < 1 && it->second.extra < 1 ? RetryAfterOf(it->second) : 0;
}

}  // namespace tessera
