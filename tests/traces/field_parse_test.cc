#include "traces/field_parse.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"

namespace servesim::traces {
namespace {

const std::string kFile = "f.csv";

int64_t dt(std::string_view text) { return parse_datetime_ns(text, {kFile, 1, "TIMESTAMP"}); }

TEST(TraceFieldParseTest, DaysFromCivil) {
  EXPECT_EQ(days_from_civil(1970, 1, 1), 0);
  EXPECT_EQ(days_from_civil(1969, 12, 31), -1);
  EXPECT_EQ(days_from_civil(2000, 3, 1), 11017);
  EXPECT_EQ(days_from_civil(2023, 11, 16), 19677);
  EXPECT_EQ(days_from_civil(2024, 2, 29), 19782);
}

TEST(TraceFieldParseTest, DatetimeIsExact) {
  EXPECT_EQ(dt("2023-11-16 18:15:46"), 1'700'158'546LL * 1'000'000'000);
  EXPECT_EQ(dt("2023-11-16 18:15:46.6805900"), 1'700'158'546'680'590'000LL);
  EXPECT_EQ(dt(" 2023-11-16 18:15:46.000000001 "), 1'700'158'546'000'000'001LL);
  EXPECT_EQ(dt("1970-01-01T00:00:00.5Z"), 500'000'000);
  EXPECT_EQ(dt("1970-01-01 01:00:00+01:00"), 0);
  EXPECT_EQ(dt("1969-12-31 23:59:59"), -1'000'000'000);
  EXPECT_THROW(dt("2300-01-01 00:00:00"), core::InputError);  // beyond int64 nanoseconds
}

TEST(TraceFieldParseTest, Lengths) {
  const FieldRef at{kFile, 4, "ContextTokens"};
  EXPECT_EQ(parse_length("1", at), 1);
  EXPECT_EQ(parse_length(" 42 ", at), 42);
  EXPECT_EQ(parse_length("+42", at), 42);
  EXPECT_EQ(parse_length("9223372036854775807", at), 9223372036854775807LL);
  for (const char* bad :
       {"", " ", "0", "-1", "1.5", "12a", "0x10", "+", "+-1", "9223372036854775808", "1e3", "--1"}) {
    SCOPED_TRACE(bad);
    try {
      parse_length(bad, at);
      FAIL();
    } catch (const core::InputError& e) {
      EXPECT_EQ(e.file(), kFile);
      EXPECT_EQ(e.line(), 4);
      EXPECT_EQ(e.field(), "ContextTokens");
    }
  }
}

// parse_datetime_ns reads the common form ("YYYY-MM-DD HH:MM:SS[.fraction]", no suffix) on a fast
// path and everything else on the general one. Values here are worked out by hand from
// days_from_civil(2023, 11, 16) = 19677 (checked above): 19677 * 86400 = 1,700,092,800 s at
// midnight, + 18:15:46 = 65,746 s -> 1,700,158,546 s.
TEST(TraceFieldParseTest, DatetimeFastAndGeneralPathsAgree) {
  constexpr int64_t kS = 1'700'158'546;  // 2023-11-16 18:15:46
  EXPECT_EQ(dt("2023-11-16T18:15:46"), kS * 1'000'000'000);
  EXPECT_EQ(dt("2023-11-16 18:15:46.1"), kS * 1'000'000'000 + 100'000'000);
  EXPECT_EQ(dt("2023-11-16 18:15:46.123456789"), kS * 1'000'000'000 + 123'456'789);
  EXPECT_EQ(dt("\t2023-11-16 18:15:46.6805900\t"), kS * 1'000'000'000 + 680'590'000);
  // The same instant with a suffix (general path): Z, and +01:00 for 19:15:46 local.
  EXPECT_EQ(dt("2023-11-16 18:15:46.6805900Z"), kS * 1'000'000'000 + 680'590'000);
  EXPECT_EQ(dt("2023-11-16 19:15:46.6805900+01:00"), kS * 1'000'000'000 + 680'590'000);
  // 2024-02-29 (leap day): days_from_civil 19782 (above) * 86400 = 1,709,164,800; + 23:59:59.
  EXPECT_EQ(dt("2024-02-29 23:59:59.9"), (1'709'164'800LL + 86'399) * 1'000'000'000 + 900'000'000);
  // 1900-01-01: 25,567 days before 1970 (70 years, 17 leap days: 1904..1968) -> -2,208,988,800 s.
  EXPECT_EQ(dt("1900-01-01 00:00:00"), -2'208'988'800LL * 1'000'000'000);
  // Rejections keep the general path's messages.
  auto message = [](std::string_view text) {
    try {
      dt(text);
    } catch (const core::InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string p = "f.csv:1: field 'TIMESTAMP': malformed datetime ";
  const std::string tail = " (expected YYYY-MM-DD HH:MM:SS[.fraction])";
  EXPECT_EQ(message("2023-02-29 00:00:00"),
            p + "'2023-02-29 00:00:00': day 29 does not exist in that month" + tail);
  EXPECT_EQ(message("2023-13-01 00:00:00"), p + "'2023-13-01 00:00:00': month 13 is not 1-12" + tail);
  EXPECT_EQ(message("2023-11-16 24:00:00"), p + "'2023-11-16 24:00:00': time of day out of range" + tail);
  EXPECT_EQ(message("2023-11-16 18:15:46."),
            p + "'2023-11-16 18:15:46.': no digits after the decimal point" + tail);
  EXPECT_EQ(message("2023-11-16 18:15:46.1234567890"),
            p + "'2023-11-16 18:15:46.1234567890': more than 9 fractional digits (finer than a nanosecond)" + tail);
  EXPECT_EQ(message("2023-11-16 18:15:46x"),
            p + "'2023-11-16 18:15:46x': unexpected text 'x' after the time" + tail);
  EXPECT_EQ(message("2023-11-16 18:15:4"), p + "'2023-11-16 18:15:4': bad time of day" + tail);
  EXPECT_EQ(message("2023-1a-16 18:15:46"), p + "'2023-1a-16 18:15:46': bad date" + tail);
  EXPECT_EQ(message("2023-11-16_18:15:46"), p + "'2023-11-16_18:15:46': no time after the date" + tail);
  EXPECT_EQ(message(" "), "f.csv:1: field 'TIMESTAMP': empty value; expected a datetime YYYY-MM-DD HH:MM:SS[.fraction]");
}

// DatetimeColumn reuses the date, hour and minute of the row before when a timestamp begins with
// the same 16 characters; the values are those worked out above, and across a minute, a day and a
// year the prefix is read afresh.
TEST(TraceFieldParseTest, DatetimeColumnReusesTheMinute) {
  constexpr int64_t kS = 1'700'158'546;  // 2023-11-16 18:15:46
  constexpr int64_t kNs = 1'000'000'000;
  DatetimeColumn col;
  const FieldRef at{kFile, 9, "TIMESTAMP"};
  EXPECT_EQ(col.parse("2023-11-16 18:15:46.6805900", at), kS * kNs + 680'590'000);
  EXPECT_EQ(col.parse("2023-11-16 18:15:47", at), (kS + 1) * kNs);
  EXPECT_EQ(col.parse(" 2023-11-16 18:15:59.999999999", at), (kS + 13) * kNs + 999'999'999);
  EXPECT_EQ(col.parse("2023-11-16 18:16:00", at), (kS + 14) * kNs);            // next minute
  EXPECT_EQ(col.parse("2023-11-16 18:16:00.5Z", at), (kS + 14) * kNs + 500'000'000);  // suffix: general
  EXPECT_EQ(col.parse("2023-11-16 19:16:01+01:00", at), (kS + 15) * kNs);
  EXPECT_EQ(col.parse("2023-11-17 18:16:00", at), (kS + 14 + 86'400) * kNs);   // next day
  EXPECT_EQ(col.parse("2023-11-17T18:16:00", at), (kS + 14 + 86'400) * kNs);   // 'T': another prefix
  // 2024-01-01: days_from_civil 19723 (2023-11-16 is 19677; + 15 days to December 1, + 31).
  EXPECT_EQ(col.parse("2024-01-01 00:00:01", at), (19'723LL * 86'400 + 1) * kNs);
  // A bad second after a remembered prefix gets the general path's message.
  col.parse("2023-11-16 18:15:46", at);
  try {
    col.parse("2023-11-16 18:15:60", at);
    FAIL();
  } catch (const core::InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "f.csv:9: field 'TIMESTAMP': malformed datetime '2023-11-16 18:15:60': time of day out of range "
              "(expected YYYY-MM-DD HH:MM:SS[.fraction])");
  }
  EXPECT_THROW(col.parse("2023-11-16 18:15:4", at), core::InputError);
  EXPECT_THROW(col.parse("2023-11-16 18:15:46.", at), core::InputError);
  EXPECT_THROW(col.parse("2023-11-16 18:15:46 x", at), core::InputError);
}

// parse_length reads plain digits on a fast path (up to 18 of them, not 0) and the rest through
// from_chars; the values are the digits read in decimal, and the messages the general path's.
TEST(TraceFieldParseTest, LengthFastAndGeneralPathsAgree) {
  const FieldRef at{kFile, 7, "GeneratedTokens"};
  EXPECT_EQ(parse_length("007", at), 7);
  EXPECT_EQ(parse_length("\t12\t", at), 12);
  EXPECT_EQ(parse_length(" +5 ", at), 5);
  EXPECT_EQ(parse_length("999999999999999999", at), 999'999'999'999'999'999LL);       // 18 digits
  EXPECT_EQ(parse_length("1000000000000000000", at), 1'000'000'000'000'000'000LL);     // 19
  auto message = [&](std::string_view text) {
    try {
      parse_length(text, at);
    } catch (const core::InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string p = "f.csv:7: field 'GeneratedTokens': ";
  EXPECT_EQ(message("0"), p + "must be >= 1 (a token count), got 0");
  EXPECT_EQ(message("000000000000000000"), p + "must be >= 1 (a token count), got 0");
  EXPECT_EQ(message("-3"), p + "must be >= 1 (a token count), got -3");
  EXPECT_EQ(message("1e3"), p + "expected an integer token count, got '1e3'");
  EXPECT_EQ(message("1.0"), p + "expected an integer token count, got '1.0'");
  EXPECT_EQ(message("12\r"), p + "expected an integer token count, got '12\\x0d'");
  EXPECT_EQ(message("\t"), p + "empty value; expected a token count (an integer >= 1)");
  EXPECT_EQ(message("99999999999999999999"),
            p + "integer '99999999999999999999' is out of range (at most 9223372036854775807)");
}

TEST(TraceFieldParseTest, QuotedEscapesAndShortens) {
  EXPECT_EQ(excerpt("ab"), "'ab'");
  EXPECT_EQ(excerpt(std::string_view("a\0b", 3)), "'a\\x00b'");
  EXPECT_EQ(excerpt(std::string(100, 'x')), "'" + std::string(40, 'x') + "'...");
}

}  // namespace
}  // namespace servesim::traces
