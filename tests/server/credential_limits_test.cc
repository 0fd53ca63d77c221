// CredentialLimiter: wrong credentials per client address, 401s then 429s, a valid credential never charged.
#include "server/credential_limits.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tessera {
namespace {

using Found = CredentialLimiter::Found;

CredentialLimiter::Verdict Try(CredentialLimiter& l, const std::string& key, double now, Found found,
                               bool* ran = nullptr) {
  return l.Check(key, now, [&] {
    if (ran) *ran = true;
    return found;
  });
}

TEST(CredentialLimiter, WrongOnesGet401sThen429sWhileAValidOneStillGetsIn) {
  CredentialLimiter l({.failures_per_min = 20, .extra_checks_per_min = 10});
  for (int i = 0; i < 20; ++i) {
    auto v = Try(l, "a", 0, Found::kWrong);
    EXPECT_TRUE(v.checked && !v.limited) << i;  // 401
  }
  for (int i = 0; i < 5; ++i) {
    auto v = Try(l, "a", 0, Found::kWrong);
    EXPECT_TRUE(v.checked && v.limited) << i;  // checked, answered 429
    EXPECT_NEAR(v.retry_after_s, 3, 1e-9);    // one failure refills every 3 s
  }
  auto valid = Try(l, "a", 0, Found::kValid);
  EXPECT_TRUE(valid.checked && !valid.limited && valid.found == Found::kValid);
  EXPECT_TRUE(Try(l, "b", 0, Found::kWrong).checked);  // another address: its own budgets
  EXPECT_FALSE(Try(l, "b", 0, Found::kWrong).limited);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(Try(l, "a", 0, Found::kWrong).limited);  // the extra checks spent
  bool ran = false;
  auto spent = Try(l, "a", 0, Found::kValid, &ran);
  EXPECT_FALSE(ran);  // nothing is checked now, not even a valid credential
  EXPECT_TRUE(spent.limited && !spent.checked);
  EXPECT_GT(l.RetryAfter("a", 0), 0);
  EXPECT_EQ(l.RetryAfter("b", 0), 0);
  auto later = Try(l, "a", 3, Found::kWrong);  // 3 s later one failure has refilled: a 401 again
  EXPECT_TRUE(later.checked && !later.limited);
}

TEST(CredentialLimiter, StaleCredentialsAreNeverCharged) {
  CredentialLimiter l({.failures_per_min = 3, .extra_checks_per_min = 1});
  for (int i = 0; i < 100; ++i) {
    auto v = Try(l, "a", 0, Found::kStale);
    EXPECT_TRUE(v.checked && !v.limited);
  }
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(Try(l, "a", 0, Found::kValid).limited);
  EXPECT_EQ(l.RetryAfter("a", 0), 0);
}

TEST(CredentialLimiter, ConcurrentWrongCredentialsNeverPassTheBudgets) {
  CredentialLimiter l({.failures_per_min = 20, .extra_checks_per_min = 10});
  std::atomic<int> answered401{0}, checked{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto v = l.Check("a", 0, [&] {
          checked.fetch_add(1);
          std::this_thread::yield();  // widen any window between a check and its charge
          return Found::kWrong;
        });
        if (v.checked && !v.limited) answered401.fetch_add(1);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(answered401.load(), 20);
  EXPECT_EQ(checked.load(), 30);  // the failures and the extra checks, exactly
}

TEST(CredentialLimiter, ValidCredentialsHoldNothingWhileChecked) {
  CredentialLimiter l({.failures_per_min = 2, .extra_checks_per_min = 1});
  std::atomic<int> limited{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i)
        if (Try(l, "a", 0, Found::kValid).limited) limited.fetch_add(1);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(limited.load(), 0);
}

TEST(CredentialLimiter, NoLimitChecksEverything) {
  CredentialLimiter l({.failures_per_min = 0, .extra_checks_per_min = 0});
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(Try(l, "a", 0, Found::kWrong).limited);
}

}  // namespace
}  // namespace tessera
