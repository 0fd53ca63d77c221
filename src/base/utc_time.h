#pragma once
// UTC calendar time as Tessera writes and reads it: ISO 8601 with seconds precision ("2025-01-01T00:00:00Z"),
// dates, and calendar months. Pure functions of unix seconds (no clock, no time zone database).

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tessera {

// ISO 8601 UTC, seconds precision: "2025-01-01T00:00:00Z".
std::string FormatIsoUtc(int64_t unix_s);
// Start (unix s) of the calendar month (UTC) holding `unix_s`, and of the month after it.
int64_t MonthStartUnix(int64_t unix_s);
int64_t NextMonthStartUnix(int64_t unix_s);
// "YYYY-MM-DD" of a unix time (UTC).
std::string FormatDateUtc(int64_t unix_s);
// Parses exactly "YYYY-MM-DDTHH:MM:SSZ" (a real date and time); the error names the text.
Result<int64_t> ParseIsoUtc(std::string_view text);
// Microseconds: "2025-01-01T00:00:00.123456Z" (Kubernetes' MicroTime) of unix microseconds, and back; the
// parser takes any number of fraction digits (none: whole seconds, without the dot), keeping six.
std::string FormatIsoUtcMicros(int64_t unix_us);
Result<int64_t> ParseIsoUtcMicros(std::string_view text);

}  // namespace tessera
