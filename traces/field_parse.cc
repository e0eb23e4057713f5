#include "traces/field_parse.h"

#include <charconv>
#include <cstring>
#include <limits>

#include "sim/core/error.h"

namespace servesim::traces {

void field_error(const FieldRef& at, const std::string& message) {
  throw core::InputError(at.file, at.line, std::string(at.field), message);
}

std::string excerpt(std::string_view text) {
  constexpr size_t kMax = 40;
  std::string out = "'";
  for (char c : text.substr(0, kMax)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  out += text.size() > kMax ? "'..." : "'";
  return out;
}

namespace {

// The value of a decimal digit; above 9 for any other character.
inline unsigned digit(char c) { return static_cast<unsigned>(static_cast<unsigned char>(c)) - '0'; }

}  // namespace

int64_t parse_length(std::string_view text, const FieldRef& at) {
  const std::string_view t = trim(text);
  // Fast path, for what trace rows hold: 1 to 18 digits (below 10^18, so no overflow) and not 0.
  // Anything else (a sign, 0, 19 or more digits, an error) takes the general path below, which
  // gives the same value (from_chars) or the same message.
  if (!t.empty() && t.size() <= 18) {
    int64_t v = 0;
    size_t i = 0;
    for (; i < t.size(); ++i) {
      const unsigned dv = digit(t[i]);
      if (dv > 9) break;
      v = v * 10 + dv;
    }
    if (i == t.size() && v >= 1) return v;
  }
  if (t.empty()) field_error(at, "empty value; expected a token count (an integer >= 1)");
  int64_t v = 0;
  const char* first = t.data();
  const char* last = t.data() + t.size();
  // from_chars takes no '+'; a '+' before a digit is harmless.
  if (*first == '+' && t.size() > 1 && t[1] >= '0' && t[1] <= '9') ++first;
  const auto [ptr, ec] = std::from_chars(first, last, v);
  if (ec == std::errc::result_out_of_range)
    field_error(at, "integer " + excerpt(t) + " is out of range (at most " +
                        std::to_string(std::numeric_limits<int64_t>::max()) + ")");
  if (ec != std::errc() || ptr != last || first == last)
    field_error(at, "expected an integer token count, got " + excerpt(t));
  if (v < 1) field_error(at, "must be >= 1 (a token count), got " + std::to_string(v));
  return v;
}

namespace {

// Reads exactly `n` digits at `pos`; false when they are not all digits.
// (The fast path of parse_datetime_ns reads fixed positions with digit() instead.)
bool digits(std::string_view s, size_t pos, size_t n, int64_t& out) {
  if (pos + n > s.size()) return false;
  int64_t v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  out = v;
  return true;
}

bool is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

unsigned days_in_month(int64_t y, int64_t m) {
  static const unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : kDays[m - 1];
}

// The rest of a datetime in the common form once its first 16 characters "YYYY-MM-DD HH:MM" are
// known to be valid and to stand for `minute_secs` seconds since 1970: ":SS", then optionally '.'
// and 1 to 9 digits, and nothing else. False for anything else, which the general path handles.
bool seconds_fast(std::string_view t, int64_t minute_secs, int64_t& ns) {
  const char* p = t.data();
  const unsigned s0 = digit(p[17]), s1 = digit(p[18]);
  if (p[16] != ':' || s0 > 5 || s1 > 9) return false;  // seconds 00-59
  int64_t frac_ns = 0;
  if (t.size() > 19) {
    if (p[19] != '.' || t.size() > 29 || t.size() == 20) return false;
    for (size_t i = 20; i < t.size(); ++i) {
      const unsigned dv = digit(p[i]);
      if (dv > 9) return false;
      frac_ns = frac_ns * 10 + dv;
    }
    for (size_t i = t.size() - 20; i < 9; ++i) frac_ns *= 10;
  }
  const int64_t secs = minute_secs + s0 * 10 + s1;
  constexpr int64_t kMaxSecs = std::numeric_limits<int64_t>::max() / 1'000'000'000 - 1;
  if (secs > kMaxSecs || secs < -kMaxSecs) return false;
  ns = secs * 1'000'000'000 + frac_ns;
  return true;
}

// The common case of parse_datetime_ns: "YYYY-MM-DD HH:MM:SS" (or 'T'), then optionally '.' and 1 to
// 9 digits, and nothing else; a valid date and time of day. Returns false for anything else (an
// offset suffix, an error), which the general path handles; when true, `ns` is what the general
// path computes (the same arithmetic, the range check included) and `minute_secs` the seconds of
// "YYYY-MM-DD HH:MM" alone.
bool datetime_fast(std::string_view t, int64_t& ns, int64_t& minute_secs) {
  if (t.size() < 19) return false;
  const char* p = t.data();
  const unsigned y0 = digit(p[0]), y1 = digit(p[1]), y2 = digit(p[2]), y3 = digit(p[3]);
  const unsigned mo0 = digit(p[5]), mo1 = digit(p[6]), d0 = digit(p[8]), d1 = digit(p[9]);
  const unsigned h0 = digit(p[11]), h1 = digit(p[12]), mi0 = digit(p[14]), mi1 = digit(p[15]);
  // Each digit() is at most 9 for a digit; bitwise ors of the tests keep the checks branch-free.
  if ((y0 > 9) | (y1 > 9) | (y2 > 9) | (y3 > 9) | (mo0 > 9) | (mo1 > 9) | (d0 > 9) | (d1 > 9) | (h0 > 9) |
      (h1 > 9) | (mi0 > 9) | (mi1 > 9))
    return false;
  if (p[4] != '-' || p[7] != '-' || (p[10] != ' ' && p[10] != 'T') || p[13] != ':') return false;
  const int64_t y = y0 * 1000 + y1 * 100 + y2 * 10 + y3;
  const int64_t mo = mo0 * 10 + mo1, d = d0 * 10 + d1, h = h0 * 10 + h1, mi = mi0 * 10 + mi1;
  if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59) return false;
  minute_secs = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 + h * 3600 + mi * 60;
  return seconds_fast(t, minute_secs, ns);
}

}  // namespace

int64_t parse_datetime_ns(std::string_view text, const FieldRef& at) {
  const std::string_view t = trim(text);
  if (int64_t ns = 0, minute_secs = 0; datetime_fast(t, ns, minute_secs)) return ns;
  auto malformed = [&](const std::string& why) {
    field_error(
        at, "malformed datetime " + excerpt(t) + ": " + why + " (expected YYYY-MM-DD HH:MM:SS[.fraction])");
  };
  if (t.empty()) field_error(at, "empty value; expected a datetime YYYY-MM-DD HH:MM:SS[.fraction]");
  int64_t y, mo, d, h, mi, s;
  if (!digits(t, 0, 4, y) || t.size() < 5 || t[4] != '-' || !digits(t, 5, 2, mo) || t.size() < 8 ||
      t[7] != '-' || !digits(t, 8, 2, d))
    malformed("bad date");
  if (t.size() < 11 || (t[10] != ' ' && t[10] != 'T')) malformed("no time after the date");
  if (!digits(t, 11, 2, h) || t.size() < 14 || t[13] != ':' || !digits(t, 14, 2, mi) || t.size() < 17 ||
      t[16] != ':' || !digits(t, 17, 2, s))
    malformed("bad time of day");
  if (mo < 1 || mo > 12) malformed("month " + std::to_string(mo) + " is not 1-12");
  if (d < 1 || d > days_in_month(y, mo))
    malformed("day " + std::to_string(d) + " does not exist in that month");
  if (h > 23 || mi > 59 || s > 59) malformed("time of day out of range");
  size_t pos = 19;
  int64_t frac_ns = 0;
  if (pos < t.size() && t[pos] == '.') {
    ++pos;
    size_t n = 0;
    int64_t frac = 0;
    while (pos < t.size() && t[pos] >= '0' && t[pos] <= '9') {
      if (++n > 9) malformed("more than 9 fractional digits (finer than a nanosecond)");
      frac = frac * 10 + (t[pos] - '0');
      ++pos;
    }
    if (n == 0) malformed("no digits after the decimal point");
    for (size_t i = n; i < 9; ++i) frac *= 10;
    frac_ns = frac;
  }
  int64_t offset_s = 0;  // of the local time east of UTC
  if (pos < t.size()) {
    if (t[pos] == 'Z' && pos + 1 == t.size()) {
      ++pos;
    } else if ((t[pos] == '+' || t[pos] == '-') && pos + 6 == t.size() && t[pos + 3] == ':') {
      int64_t oh, om;
      if (!digits(t, pos + 1, 2, oh) || !digits(t, pos + 4, 2, om) || oh > 23 || om > 59)
        malformed("bad UTC offset");
      offset_s = (oh * 3600 + om * 60) * (t[pos] == '-' ? -1 : 1);
      pos = t.size();
    } else {
      malformed("unexpected text " + excerpt(t.substr(pos)) + " after the time");
    }
  }
  // Four-digit years keep seconds far inside int64 and nanoseconds inside it until 2262.
  const int64_t secs = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 +
                       h * 3600 + mi * 60 + s - offset_s;
  constexpr int64_t kMaxSecs = std::numeric_limits<int64_t>::max() / 1'000'000'000 - 1;
  if (secs > kMaxSecs || secs < -kMaxSecs) malformed("year out of the representable range 1678-2261");
  return secs * 1'000'000'000 + frac_ns;
}

int64_t DatetimeColumn::parse(std::string_view text, const FieldRef& at) {
  const std::string_view t = trim(text);
  int64_t ns = 0;
  if (have_minute_ && t.size() >= 19 && std::memcmp(t.data(), minute_text_, sizeof minute_text_) == 0 &&
      seconds_fast(t, minute_secs_, ns))
    return ns;
  int64_t minute_secs = 0;
  if (datetime_fast(t, ns, minute_secs)) {
    std::memcpy(minute_text_, t.data(), sizeof minute_text_);
    minute_secs_ = minute_secs;
    have_minute_ = true;
    return ns;
  }
  return parse_datetime_ns(t, at);
}

}  // namespace servesim::traces
