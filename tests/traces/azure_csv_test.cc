#include "traces/azure_csv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "tests/test_paths.h"
#include "tests/traces/trace_test_util.h"

namespace servesim::traces {
namespace {

using servesim::testing::shared_file;
using servesim::testing::TempDir;
using namespace servesim::traces::testing;

constexpr const char* kHeader = "TIMESTAMP,ContextTokens,GeneratedTokens\n";

std::string azure_config(const std::string& path, const std::string& extra = "") {
  return "[workload]\nkind = \"azure_csv\"\npath = " + q(path) + "\n" + extra;
}

std::vector<RequestSpec> read_azure(const std::string& path, const std::string& extra = "") {
  auto source = make_workload(azure_config(path, extra));
  return drain(*source);
}

// Writes `text` as a CSV and reads it to the end, capturing the InputError.
Caught read_bad(const TempDir& dir, const std::string& text) {
  const std::string path = dir.file("bad.csv");
  write_file(path, text);
  return catch_input_error([&] { read_azure(path); });
}

struct TraceStats {
  int64_t count = 0;
  double prompt_sum = 0, output_sum = 0;
  int64_t max_prompt = 0;
  std::vector<core::Time> first_two;
  core::Time last;
  bool ordered = true;
};

TraceStats stats_of(ArrivalSource& source) {
  TraceStats s;
  RequestSpec r;
  while (source.next(r)) {
    if (s.count > 0 && r.arrival < s.last) s.ordered = false;
    ++s.count;
    s.prompt_sum += static_cast<double>(r.prompt_tokens);
    s.output_sum += static_cast<double>(r.output_tokens);
    s.max_prompt = std::max(s.max_prompt, r.prompt_tokens);
    if (s.first_two.size() < 2) s.first_two.push_back(r.arrival);
    s.last = r.arrival;
    EXPECT_GE(r.prompt_tokens, 1);
    EXPECT_GE(r.output_tokens, 1);
    EXPECT_TRUE(r.block_hashes.empty());
  }
  return s;
}

TEST(AzureCsvTest, ConversationTraceEndToEnd) {
  auto source = make_workload(azure_config(shared_file("traces/azure-2023/AzureLLMInferenceTrace_conv.csv")));
  EXPECT_EQ(source->hash_block_tokens(), 0);
  const TraceStats s = stats_of(*source);
  EXPECT_EQ(s.count, 19366);
  EXPECT_EQ(std::lround(s.prompt_sum / s.count), 1155);
  EXPECT_EQ(std::lround(s.output_sum / s.count), 211);
  EXPECT_EQ(s.max_prompt, 14050);
  ASSERT_EQ(s.first_two.size(), 2u);
  EXPECT_EQ(s.first_two[0].ns(), 0);
  // 18:15:50.9951690 - 18:15:46.6805900, exactly.
  EXPECT_EQ(s.first_two[1].ns(), 4'314'579'000);
  // 19:14:08.4025270 - 18:15:46.6805900 = 58 min 21.7219370 s.
  EXPECT_EQ(s.last.ns(), 3'501'721'937'000);
  EXPECT_TRUE(s.ordered);
  RequestSpec r;
  EXPECT_FALSE(source->next(r));  // stays at the end
}

TEST(AzureCsvTest, CodeTraceEndToEnd) {
  auto source = make_workload(azure_config(shared_file("traces/azure-2023/AzureLLMInferenceTrace_code.csv")));
  const TraceStats s = stats_of(*source);
  EXPECT_EQ(s.count, 8819);
  EXPECT_EQ(std::lround(s.prompt_sum / s.count), 2048);
  EXPECT_NEAR(s.output_sum / s.count, 27.9, 0.05);
  EXPECT_EQ(s.first_two[0].ns(), 0);
  EXPECT_TRUE(s.ordered);
}

TEST(AzureCsvTest, ExactTimestampsAcrossDaysAndLeapYears) {
  TempDir dir;
  const std::string path = dir.file("t.csv");
  write_file(path, std::string(kHeader) +
                       "2024-02-28 23:59:59.5,10,20\n"
                       "2024-03-01 00:00:00,11,21\n"            // across the leap day
                       "2024-03-01T00:00:00.000000001,12,22\n"  // 'T' separator, 1 ns later
                       "2025-03-01 00:00:00.123456789,13,23\n");
  const auto rows = read_azure(path);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].arrival.ns(), 0);
  EXPECT_EQ(rows[1].arrival.ns(), 86'400'500'000'000);  // 1 day + 0.5 s
  EXPECT_EQ(rows[2].arrival.ns(), 86'400'500'000'001);
  // 2024-03-01 to 2025-03-01 is 365 days (no Feb 29 between), plus the first 1 day + 0.5 s.
  EXPECT_EQ(rows[3].arrival.ns(), 86'400LL * 366 * 1'000'000'000 + 500'000'000 + 123'456'789);
  EXPECT_EQ(rows[0].prompt_tokens, 10);
  EXPECT_EQ(rows[0].output_tokens, 20);
  EXPECT_EQ(rows[3].prompt_tokens, 13);
  EXPECT_EQ(rows[3].output_tokens, 23);
}

TEST(AzureCsvTest, UtcOffsetsConvertToUtc) {
  TempDir dir;
  const std::string path = dir.file("t.csv");
  write_file(path, std::string(kHeader) +
                       "2024-05-10 00:00:00Z,1,1\n"
                       "2024-05-10 02:00:01+02:00,1,1\n"    // 00:00:01 UTC
                       "2024-05-09 19:00:02-05:00,1,1\n");  // 00:00:02 UTC
  const auto rows = read_azure(path);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].arrival.ns(), 1'000'000'000);
  EXPECT_EQ(rows[2].arrival.ns(), 2'000'000'000);
}

TEST(AzureCsvTest, ColumnsInAnyOrderWithExtraColumns) {
  TempDir dir;
  const std::string path = dir.file("t.csv");
  write_file(path,
             "GeneratedTokens,Model,TIMESTAMP,ContextTokens\n"
             "7,gpt,2023-11-16 18:15:46.0000000,100\n"
             "8,gpt,2023-11-16 18:15:47.2500000,200\n");
  const auto rows = read_azure(path);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].prompt_tokens, 100);
  EXPECT_EQ(rows[0].output_tokens, 7);
  EXPECT_EQ(rows[1].prompt_tokens, 200);
  EXPECT_EQ(rows[1].output_tokens, 8);
  EXPECT_EQ(rows[1].arrival.ns(), 1'250'000'000);
}

TEST(AzureCsvTest, AcceptsBomCrlfBlankLinesAndEqualTimestamps) {
  TempDir dir;
  const std::string path = dir.file("t.csv");
  write_file(path,
             "\xEF\xBB\xBFTIMESTAMP,ContextTokens,GeneratedTokens\r\n"
             "2023-11-16 18:15:46.1,5,6\r\n"
             "\r\n"
             "2023-11-16 18:15:46.1,7,8\r\n"
             "  \r\n\r\n\n");
  const auto rows = read_azure(path);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].arrival.ns(), 0);
  EXPECT_EQ(rows[1].prompt_tokens, 7);
  EXPECT_EQ(rows[1].output_tokens, 8);
}

TEST(AzureCsvTest, LastLineWithoutNewline) {
  TempDir dir;
  const std::string path = dir.file("t.csv");
  write_file(path, std::string(kHeader) + "2023-11-16 18:15:46,5,6\n2023-11-16 18:15:47,7,8");
  const auto rows = read_azure(path);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].output_tokens, 8);
}

TEST(AzureCsvTest, ReaderUsableDirectly) {
  TempDir dir;
  const std::string path = dir.file("t.csv");
  write_file(path, std::string(kHeader) + "2023-11-16 18:15:46,5,6\n");
  AzureCsvReader reader(path);
  RequestSpec r;
  r.block_hashes = {1, 2, 3};
  r.session = 9;
  ASSERT_TRUE(reader.read(r));
  EXPECT_TRUE(r.block_hashes.empty());  // stale values from the caller's object are cleared
  EXPECT_EQ(r.session, 0u);
  EXPECT_FALSE(reader.read(r));
}

// ---- malformed input ---------------------------------------------------------------------------

TEST(AzureCsvTest, MissingColumnNamesItAtLineOne) {
  TempDir dir;
  const Caught c = read_bad(dir, "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46,5\n");
  expect_input_error(c, dir.file("bad.csv"), 1, "GeneratedTokens", "missing column 'GeneratedTokens'");
  EXPECT_NE(c.message.find("found: 'TIMESTAMP', 'ContextTokens'"), std::string::npos) << c.message;
}

TEST(AzureCsvTest, MissingTimestampColumn) {
  TempDir dir;
  const Caught c = read_bad(dir, "Time,ContextTokens,GeneratedTokens\n1,5,6\n");
  expect_input_error(c, dir.file("bad.csv"), 1, "TIMESTAMP", "missing column 'TIMESTAMP'");
}

TEST(AzureCsvTest, DuplicateColumn) {
  TempDir dir;
  const Caught c = read_bad(dir, "TIMESTAMP,ContextTokens,GeneratedTokens,ContextTokens\n");
  expect_input_error(c, dir.file("bad.csv"), 1, "ContextTokens", "twice");
}

TEST(AzureCsvTest, NonNumericLength) {
  TempDir dir;
  const Caught c =
      read_bad(dir, std::string(kHeader) + "2023-11-16 18:15:46,5,6\n2023-11-16 18:15:47,12a,6\n");
  expect_input_error(c, dir.file("bad.csv"), 3, "ContextTokens",
                     "expected an integer token count, got '12a'");
}

TEST(AzureCsvTest, EmptyField) {
  TempDir dir;
  const Caught c = read_bad(dir, std::string(kHeader) + "2023-11-16 18:15:46,,6\n");
  expect_input_error(c, dir.file("bad.csv"), 2, "ContextTokens", "empty value");
}

TEST(AzureCsvTest, FractionalLength) {
  TempDir dir;
  const Caught c = read_bad(dir, std::string(kHeader) + "2023-11-16 18:15:46,5,1.5\n");
  expect_input_error(c, dir.file("bad.csv"), 2, "GeneratedTokens", "got '1.5'");
}

TEST(AzureCsvTest, ZeroAndNegativeLengths) {
  TempDir dir;
  expect_input_error(read_bad(dir, std::string(kHeader) + "2023-11-16 18:15:46,0,6\n"), dir.file("bad.csv"),
                     2, "ContextTokens", "must be >= 1");
  expect_input_error(
      read_bad(dir, std::string(kHeader) + "2023-11-16 18:15:46,5,6\n\n2023-11-16 18:15:47,5,-3\n"),
      dir.file("bad.csv"), 4, "GeneratedTokens", "must be >= 1 (a token count), got -3");
}

TEST(AzureCsvTest, IntegerOverflow) {
  TempDir dir;
  const Caught c = read_bad(dir, std::string(kHeader) + "2023-11-16 18:15:46,99999999999999999999,6\n");
  expect_input_error(c, dir.file("bad.csv"), 2, "ContextTokens", "out of range");
}

TEST(AzureCsvTest, NanAndInfTimestamps) {
  TempDir dir;
  expect_input_error(read_bad(dir, std::string(kHeader) + "nan,5,6\n"), dir.file("bad.csv"), 2, "TIMESTAMP",
                     "malformed datetime 'nan'");
  expect_input_error(read_bad(dir, std::string(kHeader) + "2023-11-16 18:15:46,5,6\ninf,5,6\n"),
                     dir.file("bad.csv"), 3, "TIMESTAMP", "malformed datetime 'inf'");
}

TEST(AzureCsvTest, MalformedDatetimes) {
  TempDir dir;
  const std::string file = dir.file("bad.csv");
  const std::pair<const char*, const char*> cases[] = {
      {"2023/11/16 18:15:46", "bad date"},
      {"2023-13-01 00:00:00", "month 13"},
      {"2023-02-29 00:00:00", "day 29 does not exist"},  // 2023 is not a leap year
      {"2023-11-16", "no time"},
      {"2023-11-16 24:00:00", "out of range"},
      {"2023-11-16 18:15", "bad time of day"},
      {"2023-11-16 18:15:46.", "no digits after the decimal point"},
      {"2023-11-16 18:15:46.1234567891", "more than 9 fractional digits"},
      {"2023-11-16 18:15:46 PM", "unexpected text"},
      {"1700158546", "bad date"},
  };
  for (const auto& [text, needle] : cases) {
    SCOPED_TRACE(text);
    expect_input_error(read_bad(dir, std::string(kHeader) + text + ",5,6\n"), file, 2, "TIMESTAMP", needle);
  }
}

TEST(AzureCsvTest, DecreasingTimestamps) {
  TempDir dir;
  const Caught c = read_bad(dir, std::string(kHeader) +
                                     "2023-11-16 18:15:46.5,5,6\n"
                                     "2023-11-16 18:15:47.0,5,6\n"
                                     "2023-11-16 18:15:46.9,5,6\n");
  expect_input_error(c, dir.file("bad.csv"), 4, "TIMESTAMP",
                     "timestamp goes backwards: 2023-11-16 18:15:46.9 < previous 2023-11-16 18:15:47.0");
}

TEST(AzureCsvTest, WrongNumberOfFields) {
  TempDir dir;
  expect_input_error(read_bad(dir, std::string(kHeader) + "2023-11-16 18:15:46,5\n"), dir.file("bad.csv"), 2,
                     "GeneratedTokens", "expected 3 comma-separated fields as in the header, got 2");
  expect_input_error(
      read_bad(dir, std::string(kHeader) + "2023-11-16 18:15:46,5,6\n2023-11-16 18:15:46,5,6,7\n"),
      dir.file("bad.csv"), 3, "", "expected 3 comma-separated fields as in the header, got 4");
}

TEST(AzureCsvTest, EmptyFile) {
  TempDir dir;
  expect_input_error(read_bad(dir, ""), dir.file("bad.csv"), 1, "",
                     "empty file, expected header TIMESTAMP,ContextTokens,GeneratedTokens");
  expect_input_error(read_bad(dir, "\n\r\n  \n"), dir.file("bad.csv"), 1, "", "empty file");
  expect_input_error(read_bad(dir, "\xEF\xBB\xBF"), dir.file("bad.csv"), 1, "", "empty file");
}

TEST(AzureCsvTest, HeaderOnlyIsAnErrorAtConstruction) {
  TempDir dir;
  const std::string path = dir.file("bad.csv");
  write_file(path, std::string(kHeader) + "\n\n");
  // Raised when the workload is built, before the simulation would start.
  const Caught c = catch_input_error([&] { make_workload(azure_config(path)); });
  expect_input_error(c, path, 1, "", "no requests");
}

TEST(AzureCsvTest, MissingFileIsAConfigErrorAtPath) {
  TempDir dir;
  const std::string path = dir.file("nope.csv");
  const std::string m = config_error([&] { make_workload(azure_config(path)); });
  EXPECT_NE(m.find("test.toml:3"), std::string::npos) << m;
  EXPECT_NE(m.find("workload.path"), std::string::npos) << m;
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("no such file"), std::string::npos) << m;
}

TEST(AzureCsvTest, DirectoryIsAConfigErrorAtPath) {
  TempDir dir;
  const std::string m = config_error([&] { make_workload(azure_config(dir.path())); });
  EXPECT_NE(m.find("workload.path"), std::string::npos) << m;
  EXPECT_NE(m.find(dir.path()), std::string::npos) << m;
  EXPECT_NE(m.find("is a directory"), std::string::npos) << m;
}

TEST(AzureCsvTest, ReaderRefusesDirectoryWithCoreError) {
  TempDir dir;
  try {
    AzureCsvReader reader(dir.path());
    FAIL() << "expected an error";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.path()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("directory"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace servesim::traces
