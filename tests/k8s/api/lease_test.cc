// Lease timing: MicroTime round trips; a Lease is free, ours, or taken until its holder lets it expire.
#include "k8s/api/lease.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tessera {
namespace {

TEST(Lease, MicroTimeRoundTrips) {
  const int64_t t = int64_t{1767225600} * 1000000 + 123456;
  EXPECT_EQ(MicroTime(t), "2026-01-01T00:00:00.123456Z");
  EXPECT_EQ(ParseMicroTime(MicroTime(t)), t);
  EXPECT_EQ(ParseMicroTime("2026-01-01T00:00:01Z"), int64_t{1767225601} * 1000000);
  EXPECT_EQ(ParseMicroTime("yesterday"), -1);
}

TEST(Lease, HeldUntilItExpires) {
  const int64_t t = int64_t{1767225600} * 1000000;
  const nlohmann::json spec = {
      {"holderIdentity", "a"}, {"leaseDurationSeconds", 15}, {"renewTime", MicroTime(t)}};
  EXPECT_TRUE(LeaseAvailable(spec, "a", t + 1000000));
  EXPECT_FALSE(LeaseAvailable(spec, "b", t + 14000000));
  EXPECT_TRUE(LeaseAvailable(spec, "b", t + 16000000));
  EXPECT_TRUE(LeaseAvailable(nlohmann::json::object(), "b", t));
}

}  // namespace
}  // namespace tessera
