#include "base/utc_time.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>

namespace tessera {

std::string FormatIsoUtc(int64_t unix_s) {
  using namespace std::chrono;
  const sys_seconds t{seconds{unix_s}};
  const sys_days day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss<seconds> hms{t - day};
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}Z", static_cast<int>(ymd.year()),
                     static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()), hms.hours().count(),
                     hms.minutes().count(), hms.seconds().count());
}

int64_t MonthStartUnix(int64_t unix_s) {
  using namespace std::chrono;
  const year_month_day ymd{floor<days>(sys_seconds{seconds{unix_s}})};
  return sys_days{ymd.year() / ymd.month() / 1}.time_since_epoch().count() * 86400LL;
}

int64_t NextMonthStartUnix(int64_t unix_s) {
  using namespace std::chrono;
  const year_month_day ymd{floor<days>(sys_seconds{seconds{unix_s}})};
  const year_month next = ymd.year() / ymd.month() + months{1};
  return sys_days{next / 1}.time_since_epoch().count() * 86400LL;
}

std::string FormatDateUtc(int64_t unix_s) { return FormatIsoUtc(unix_s).substr(0, 10); }

Result<int64_t> ParseIsoUtc(std::string_view text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  char z = 0;
  const std::string str(text);
  if (str.size() != 20 || std::sscanf(str.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &y, &mo, &d, &h, &mi, &s, &z) != 7 ||
      z != 'Z') {
    return Status::Error(fmt::format("'{}' is not a UTC time of the form YYYY-MM-DDTHH:MM:SSZ", text));
  }
  using namespace std::chrono;
  const year_month_day ymd{year{y}, month{static_cast<unsigned>(mo)}, day{static_cast<unsigned>(d)}};
  if (!ymd.ok() || h > 23 || mi > 59 || s > 59) return Status::Error(fmt::format("'{}' is not a valid date/time", text));
  const int64_t unix_s = sys_days{ymd}.time_since_epoch().count() * 86400LL + h * 3600LL + mi * 60LL + s;
  if (FormatIsoUtc(unix_s) != str) return Status::Error(fmt::format("'{}' is not a valid date/time", text));
  return unix_s;
}

std::string FormatIsoUtcMicros(int64_t unix_us) {
  const int64_t s = unix_us >= 0 ? unix_us / 1000000 : -((-unix_us + 999999) / 1000000);
  const std::string sec = FormatIsoUtc(s);
  return fmt::format("{}.{:06d}Z", sec.substr(0, sec.size() - 1), unix_us - s * 1000000);
}

Result<int64_t> ParseIsoUtcMicros(std::string_view text) {
  // "YYYY-MM-DDTHH:MM:SS" then an optional fraction, then "Z".
  const size_t dot = text.size() > 19 && text[19] == '.' ? 19 : std::string_view::npos;
  const std::string_view whole = dot == std::string_view::npos ? text : text.substr(0, 19);
  auto s = ParseIsoUtc(dot == std::string_view::npos ? whole : std::string(whole) + "Z");
  const std::string bad =
      fmt::format("'{}' is not a UTC time of the form YYYY-MM-DDTHH:MM:SS[.ffffff]Z", text);
  if (!s.ok()) return Status::Error(bad);
  int64_t frac = 0;
  if (dot != std::string_view::npos) {
    size_t i = 20, digits = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits)
      if (digits < 6) frac = frac * 10 + (text[i] - '0');
    if (digits == 0 || i + 1 != text.size() || text[i] != 'Z') return Status::Error(bad);
    for (; digits < 6; ++digits) frac *= 10;
  }
  return *s * 1000000 + frac;
}

}  // namespace tessera
