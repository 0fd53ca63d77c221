#include "base/utc_time.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(UtcTime, FormatsAndParsesIso) {
  EXPECT_EQ(FormatIsoUtc(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatIsoUtc(1735689600), "2025-01-01T00:00:00Z");
  EXPECT_EQ(*ParseIsoUtc("2024-02-29T23:59:59Z"), 1709251199);
  for (int64_t t : {int64_t{0}, int64_t{951782400}, int64_t{1709251199}, int64_t{4102444799}})
    EXPECT_EQ(*ParseIsoUtc(FormatIsoUtc(t)), t) << t;
}

TEST(UtcTime, RefusesWhatIsNotAnExactUtcTime) {
  for (const char* bad : {"2025-02-30T00:00:00Z", "2025-01-01 00:00:00", "2023-02-29T00:00:00Z",
                          "2025-01-01T24:00:00Z", "2025-01-01T00:00:00+01:00", "2025-1-01T00:00:00Z", ""}) {
    auto r = ParseIsoUtc(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().find(bad), std::string::npos) << r.error();
  }
}

// Kubernetes' MicroTime: six fraction digits written; any number read (none: whole seconds).
TEST(UtcTime, MicrosecondsBothWays) {
  const int64_t t = int64_t{1767225600} * 1000000 + 123456;
  EXPECT_EQ(FormatIsoUtcMicros(t), "2026-01-01T00:00:00.123456Z");
  EXPECT_EQ(*ParseIsoUtcMicros(FormatIsoUtcMicros(t)), t);
  EXPECT_EQ(FormatIsoUtcMicros(int64_t{1709251199} * 1000000 + 7), "2024-02-29T23:59:59.000007Z");
  EXPECT_EQ(*ParseIsoUtcMicros("2026-01-01T00:00:01Z"), int64_t{1767225601} * 1000000);
  EXPECT_EQ(*ParseIsoUtcMicros("2026-01-01T00:00:01.5Z"), int64_t{1767225601} * 1000000 + 500000);
  EXPECT_EQ(*ParseIsoUtcMicros("2026-01-01T00:00:01.123456789Z"), int64_t{1767225601} * 1000000 + 123456);
  for (const char* bad : {"yesterday", "2026-01-01T00:00:01.Z", "2026-01-01T00:00:01.5",
                          "2026-02-30T00:00:00.1Z", "2026-01-01T00:00:01.5Zx", ""}) {
    auto r = ParseIsoUtcMicros(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().find(bad), std::string::npos) << r.error();
  }
}

TEST(UtcTime, MonthsAndDates) {
  const int64_t leap_day = *ParseIsoUtc("2024-02-29T12:34:56Z");
  EXPECT_EQ(FormatIsoUtc(MonthStartUnix(leap_day)), "2024-02-01T00:00:00Z");
  EXPECT_EQ(FormatIsoUtc(NextMonthStartUnix(leap_day)), "2024-03-01T00:00:00Z");
  EXPECT_EQ(FormatIsoUtc(NextMonthStartUnix(*ParseIsoUtc("2024-12-31T23:59:59Z"))), "2025-01-01T00:00:00Z");
  EXPECT_EQ(FormatDateUtc(leap_day), "2024-02-29");
}

}  // namespace
}  // namespace tessera
