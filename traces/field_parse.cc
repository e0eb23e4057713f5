#include "traces/field_parse.h"

#include <charconv>
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

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

int64_t parse_length(std::string_view text, const FieldRef& at) {
  const std::string_view t = trim(text);
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

}  // namespace

int64_t parse_datetime_ns(std::string_view text, const FieldRef& at) {
  const std::string_view t = trim(text);
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

}  // namespace servesim::traces
