#pragma once
// CredentialLimiter: how many wrong credentials (sign-in tokens, bearer tokens, session cookies) a client
// address may try.
//
// Whose failure is it? A Tessera token is 128 random bits stored only as a hash: a wrong token names no
// user, so neither does its failure, and keying by the presented token would give a guesser a fresh count
// for every guess. Failures are therefore counted per client address (server/client_address.h: behind a
// trusted proxy, the forwarded client), and a valid credential is never charged, so that a user is not
// locked out by a stranger guessing from the same address:
//  - failures: the first `failures_per_min` wrong credentials of an address per minute are answered 401;
//  - extra checks: once those are spent, `extra_checks_per_min` more a minute are still checked, so that a
//    valid token from that address still gets in, while a wrong one is answered 429;
//  - beyond both, nothing from the address is checked (429 at once) until one refills.
// So an address makes at most failures + extra checks wrong guesses a minute, and a user sharing it with a
// guesser signs in unless the guesser keeps past both. Each is a token bucket: a burst of its size, then
// refilled evenly over the minute. A stale credential (a replaced or revoked token) is not a guess: 401,
// not charged.
//
// The check runs under the key's lock, together with the decision and the charge: concurrent wrong
// credentials from one address never get more than the budgets, however they interleave (no window
// between checking a budget and charging it), and valid credentials hold nothing while they are checked.
// Thread safe.

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

namespace tessera {

class CredentialLimiter {
 public:
  struct Limits {
    double failures_per_min = 20;     // 401s; <= 0: no limit at all
    double extra_checks_per_min = 10;
  };
  // What a check found: a valid credential; one that is not valid but no guess either (stale: answered 401,
  // not charged); a wrong one (charged).
  enum class Found { kValid, kStale, kWrong };
  struct Verdict {
    bool checked = false;         // false: both budgets were spent and the credential was not checked
    Found found = Found::kWrong;  // what the check found (kWrong when not checked)
    bool limited = false;         // not checked, or wrong past the failure budget: answer 429
    double retry_after_s = 0;     // with `limited`: seconds until a failure may be answered 401 again
  };

  explicit CredentialLimiter(Limits limits) : limits_(limits) {}
  // Runs `check` unless both of `key`'s budgets are spent, and charges a wrong credential in the same step.
  Verdict Check(const std::string& key, double now, const std::function<Found()>& check);
  // Seconds until `key`'s credentials are checked again (0: now), without charging: an early refusal of a
  // sign-in before its body is read.
  double RetryAfter(const std::string& key, double now);

 private:
  struct Budgets {
    double failures = 0, extra = 0, at = 0;
  };
  struct Stripe {
    std::mutex mu;
    std::unordered_map<std::string, Budgets> budgets;  // keys with a failure not yet refilled
  };
  static constexpr int kStripes = 16;
  bool enabled() const { return limits_.failures_per_min > 0; }
  Stripe& StripeOf(const std::string& key) { return stripes_[std::hash<std::string>{}(key) % kStripes]; }
  void Refill(Budgets& b, double now) const;
  double RetryAfterOf(const Budgets& b) const;
  // Forgets full budgets when a stripe holds many (a full budget says nothing).
  void Sweep(Stripe& s, double now) const;

  Limits limits_;
  Stripe stripes_[kStripes];
};

}  // namespace tessera
