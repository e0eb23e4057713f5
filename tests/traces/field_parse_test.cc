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

TEST(TraceFieldParseTest, QuotedEscapesAndShortens) {
  EXPECT_EQ(excerpt("ab"), "'ab'");
  EXPECT_EQ(excerpt(std::string_view("a\0b", 3)), "'a\\x00b'");
  EXPECT_EQ(excerpt(std::string(100, 'x')), "'" + std::string(40, 'x') + "'...");
}

}  // namespace
}  // namespace servesim::traces
