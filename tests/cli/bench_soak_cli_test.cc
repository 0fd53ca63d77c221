// `tessera bench soak` for a few seconds: its own PostgreSQL, two replicas, the leader killed at least once;
// every acknowledged write found, usage reconciled, RSS judged, exit 0.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"

namespace tessera::testing {
namespace {

TEST(BenchSoakCliTest, AShortSoakKillsTheLeaderAndLosesNothing) {
  // Twelve seconds are no steady state for RSS (a process a few seconds old still grows): the RSS terms are
  // judged and reported, against a wide limit; docs/reliability.md has the 20-minute run at 10 %.
  const CliRun r = Tessera(
      "bench soak --seconds 12 --replicas 2 --warmup 3 --kill-every 4 --lease-seconds 3 --clients 8 --rate "
      "60 "
      "--seed 3 --rss-limit 100 --json");
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(r.code, 0) << j["failures"].dump();
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_GE(j["kills"].get<int>(), 1);
  EXPECT_GT(j["submissions_acknowledged"].get<int>(), 50);
  EXPECT_EQ(j["jobs_checked"], j["submissions_acknowledged"]);
  EXPECT_GT(j["usage_checked"].get<int>(), 0);
  EXPECT_GT(j["changes_checked"].get<int>(), 0);
  EXPECT_GE(j["rss"]["terms_judged"].get<int>(), 1);
  EXPECT_GT(j["rss"]["max_ratio"].get<double>(), 0);
  EXPECT_LE(j["takeover_max_s"].get<double>(), 3 + 2);
  for (const char* op : {"submit", "list", "get", "cancel", "priority", "usage"})
    EXPECT_GT(j["operations"][op]["acked"].get<int>(), 0) << op;
}

TEST(BenchSoakCliTest, WithoutALengthItSaysSo) {
  const CliRun r = Tessera("bench soak --replicas 2", true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--minutes"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tessera::testing
