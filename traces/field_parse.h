#pragma once
// Parsing of the scalar fields of trace files, with errors that name the file, the line and the
// field. Shared by the readers so that every format reports a bad number the same way.

#include <cstdint>
#include <string>
#include <string_view>

namespace servesim::traces {

// Where a field sits, for error messages.
struct FieldRef {
  const std::string& file;
  int64_t line;
  std::string_view field;
};

// Throws core::InputError at `at` with `message`.
[[noreturn]] void field_error(const FieldRef& at, const std::string& message);

// `text` in quotes for a message, shortened when long (a binary file can put anything in a field).
std::string excerpt(std::string_view text);

// Spaces and tabs removed at both ends. Inline: the readers call it on every field of every row.
inline std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// A token count: a decimal integer >= 1 ("must be >= 1" for 0 and negatives; "1.5", "12a", an empty
// field and values beyond int64 are errors too).
int64_t parse_length(std::string_view text, const FieldRef& at);

// A wall-clock datetime "YYYY-MM-DD HH:MM:SS[.fraction]" (a 'T' may stand for the space; the
// fraction has 1 to 9 digits; an optional "Z" or "+HH:MM"/"-HH:MM" suffix converts to UTC), parsed
// exactly, with no locale and no floating point, into nanoseconds since 1970-01-01 00:00:00.
int64_t parse_datetime_ns(std::string_view text, const FieldRef& at);

// parse_datetime_ns over a column of timestamps that mostly share their date, hour and minute with
// the row before (a trace's arrivals): it remembers the last "YYYY-MM-DD HH:MM" it read in full and
// reads only the seconds and the fraction of a timestamp that begins with the same 16 characters.
// The same values and the same errors as parse_datetime_ns.
class DatetimeColumn {
 public:
  int64_t parse(std::string_view text, const FieldRef& at);

 private:
  char minute_text_[16] = {};
  int64_t minute_secs_ = 0;  // seconds since 1970 of minute_text_
  bool have_minute_ = false;
};

// Days from 1970-01-01 to the proleptic Gregorian date y-m-d (H. Hinnant's days_from_civil).
constexpr int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

}  // namespace servesim::traces
