#include "traces/mooncake_jsonl.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "tests/test_paths.h"
#include "tests/traces/trace_test_util.h"

namespace servesim::traces {
namespace {

using servesim::testing::shared_file;
using servesim::testing::TempDir;
using namespace servesim::traces::testing;

const std::string kConversation = "traces/mooncake-fast25/conversation_trace.jsonl";

std::string mooncake_config(const std::string& path, const std::string& extra = "") {
  return "[workload]\nkind = \"mooncake_jsonl\"\npath = " + q(path) + "\n" + extra;
}

std::vector<RequestSpec> read_mooncake(const std::string& path, const std::string& extra = "") {
  auto source = make_workload(mooncake_config(path, extra));
  return drain(*source);
}

Caught read_bad(const TempDir& dir, const std::string& text) {
  const std::string path = dir.file("bad.jsonl");
  write_file(path, text);
  return catch_input_error([&] { read_mooncake(path); });
}

constexpr const char* kGood =
    R"({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]})"
    "\n";

TEST(MooncakeJsonlTest, ConversationTraceEndToEnd) {
  auto source = make_workload(mooncake_config(shared_file(kConversation)));
  EXPECT_EQ(source->hash_block_tokens(), 512);
  RequestSpec r;
  int64_t count = 0, blocks = 0, repeats = 0;
  double input_sum = 0, output_sum = 0;
  core::Time last;
  bool sizes_match = true, ordered = true;
  std::unordered_set<uint64_t> seen;
  while (source->next(r)) {
    if (count == 0) {
      EXPECT_EQ(r.arrival.ns(), 0);
    }
    if (r.arrival < last) ordered = false;
    last = r.arrival;
    ++count;
    input_sum += static_cast<double>(r.prompt_tokens);
    output_sum += static_cast<double>(r.output_tokens);
    if (static_cast<int64_t>(r.block_hashes.size()) != (r.prompt_tokens + 511) / 512) sizes_match = false;
    for (uint64_t h : r.block_hashes) {
      ++blocks;
      if (!seen.insert(h).second) ++repeats;
    }
  }
  EXPECT_EQ(count, 12031);
  EXPECT_EQ(std::lround(input_sum / count), 12035);
  EXPECT_EQ(std::lround(output_sum / count), 343);
  EXPECT_TRUE(sizes_match);
  EXPECT_TRUE(ordered);
  EXPECT_NEAR(100.0 * static_cast<double>(repeats) / static_cast<double>(blocks), 36.6, 0.05);
  EXPECT_EQ(last.ns(), 3'536'999'000'000);  // the last line's timestamp, 3536999 ms
}

// The hand-written parser against nlohmann::json, line by line over the whole real trace.
TEST(MooncakeJsonlTest, AgreesWithNlohmannOnRealTrace) {
  const std::string path = shared_file(kConversation);
  MooncakeJsonlReader reader(path);
  std::ifstream in(path);
  std::string line;
  RequestSpec r;
  int64_t rows = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    ASSERT_TRUE(reader.read(r)) << "line " << rows + 1;
    ASSERT_EQ(r.arrival.ns(), j.at("timestamp").get<int64_t>() * 1'000'000) << "line " << rows + 1;
    ASSERT_EQ(r.prompt_tokens, j.at("input_length").get<int64_t>());
    ASSERT_EQ(r.output_tokens, j.at("output_length").get<int64_t>());
    ASSERT_EQ(r.block_hashes, j.at("hash_ids").get<std::vector<uint64_t>>()) << "line " << rows + 1;
    ++rows;
  }
  EXPECT_EQ(rows, 12031);
  EXPECT_FALSE(reader.read(r));
}

TEST(MooncakeJsonlTest, FieldsAndOffsetsFromFirstLine) {
  TempDir dir;
  const std::string path = dir.file("t.jsonl");
  write_file(
      path,
      R"({"timestamp": 1000, "input_length": 1025, "output_length": 7, "hash_ids": [5, 6, 18446744073709551615]})"
      "\n"
      R"({"hash_ids":[],"output_length":1,"input_length":1,"timestamp":1000.5})"
      "\n"
      R"({"timestamp": 2.5e3, "input_length": 3, "output_length": 4, "hash_ids": [ 7 ] })"
      "\n");
  const auto rows = read_mooncake(path);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].arrival.ns(), 0);
  EXPECT_EQ(rows[0].prompt_tokens, 1025);
  EXPECT_EQ(rows[0].output_tokens, 7);
  EXPECT_EQ(rows[0].block_hashes, (std::vector<uint64_t>{5, 6, 18446744073709551615ULL}));
  EXPECT_EQ(rows[1].arrival.ns(), 500'000);  // 0.5 ms later
  EXPECT_TRUE(rows[1].block_hashes.empty());
  EXPECT_EQ(rows[2].arrival.ns(), 1'500'000'000);
  EXPECT_EQ(rows[2].block_hashes, (std::vector<uint64_t>{7}));
}

TEST(MooncakeJsonlTest, IgnoresExtraKeysOfAnyShape) {
  TempDir dir;
  const std::string path = dir.file("t.jsonl");
  write_file(
      path,
      R"({"chat_id": 12, "meta": {"a": [1, {"b": "x\"y}]"}], "c": null, "d": true, "e": false, "f": -1.5e-3},)"
      R"( "timestamp": 0, "input_length": 2, "output_length": 3, "hash_ids": [1], "s\u0074r": "\\", "z": []})"
      "\n");
  const auto rows = read_mooncake(path);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].prompt_tokens, 2);
  EXPECT_EQ(rows[0].output_tokens, 3);
  EXPECT_EQ(rows[0].block_hashes, (std::vector<uint64_t>{1}));
}

TEST(MooncakeJsonlTest, BlockTokensParameter) {
  TempDir dir;
  const std::string path = dir.file("t.jsonl");
  write_file(path, kGood);
  EXPECT_EQ(make_workload(mooncake_config(path, "block_tokens = 16\n"))->hash_block_tokens(), 16);
  const std::string m = config_error([&] { make_workload(mooncake_config(path, "block_tokens = 0\n")); });
  EXPECT_NE(m.find("block_tokens"), std::string::npos) << m;
}

TEST(MooncakeJsonlTest, AcceptsBomCrlfAndBlankLines) {
  TempDir dir;
  const std::string path = dir.file("t.jsonl");
  write_file(path,
             "\xEF\xBB\xBF"
             R"({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]})"
             "\r\n\r\n"
             R"({"timestamp": 3, "input_length": 1, "output_length": 2, "hash_ids": [2]})"
             "\r\n\n  \n");
  const auto rows = read_mooncake(path);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].arrival.ns(), 3'000'000);
  EXPECT_EQ(rows[1].block_hashes, (std::vector<uint64_t>{2}));
}

TEST(MooncakeJsonlTest, ReusesTheCallersHashBuffer) {
  TempDir dir;
  const std::string path = dir.file("t.jsonl");
  std::string text;
  for (int i = 0; i < 100; ++i)
    text += R"({"timestamp": )" + std::to_string(i) +
            R"(, "input_length": 2000, "output_length": 5, "hash_ids": [1, 2, 3, 4]})"
            "\n";
  write_file(path, text);
  auto source = make_workload(mooncake_config(path));
  RequestSpec r;
  ASSERT_TRUE(source->next(r));
  ASSERT_TRUE(source->next(r));
  const uint64_t* buffer = r.block_hashes.data();
  while (source->next(r)) {
    ASSERT_EQ(r.block_hashes.data(), buffer);  // no reallocation per request
    ASSERT_EQ(r.block_hashes.size(), 4u);
  }
}

// ---- malformed input ---------------------------------------------------------------------------

TEST(MooncakeJsonlTest, TruncatedLine) {
  TempDir dir;
  expect_input_error(
      read_bad(dir, std::string(kGood) + R"({"timestamp": 5, "input_length": 600, "hash_ids": [0, 1)"),
      dir.file("bad.jsonl"), 2, "", "truncated");
  expect_input_error(read_bad(dir, std::string(kGood) + R"({"timestamp": 5, "input_le)"
                                                        "\n"),
                     dir.file("bad.jsonl"), 2, "", "truncated");
}

TEST(MooncakeJsonlTest, LineNotAnObject) {
  TempDir dir;
  expect_input_error(read_bad(dir, std::string(kGood) + "[1, 2]\n"), dir.file("bad.jsonl"), 2, "",
                     "must be a JSON object ({...}), got an array");
  expect_input_error(read_bad(dir, "42\n"), dir.file("bad.jsonl"), 1, "", "got a number");
}

TEST(MooncakeJsonlTest, MissingKey) {
  TempDir dir;
  expect_input_error(
      read_bad(dir, std::string(kGood) + R"({"timestamp": 5, "output_length": 5, "hash_ids": []})"
                                         "\n"),
      dir.file("bad.jsonl"), 2, "input_length", "missing key 'input_length'");
  expect_input_error(read_bad(dir, R"({"timestamp": 5, "input_length": 1, "output_length": 5})"
                                   "\n"),
                     dir.file("bad.jsonl"), 1, "hash_ids", "missing key 'hash_ids'");
  expect_input_error(read_bad(dir, "{}\n"), dir.file("bad.jsonl"), 1, "timestamp", "missing key 'timestamp'");
}

TEST(MooncakeJsonlTest, DuplicateKey) {
  TempDir dir;
  expect_input_error(
      read_bad(dir,
               R"({"timestamp": 5, "input_length": 1, "input_length": 2, "output_length": 5, "hash_ids": []})"
               "\n"),
      dir.file("bad.jsonl"), 1, "input_length", "duplicate key");
}

TEST(MooncakeJsonlTest, HashIdsNotAnArrayOfIntegers) {
  TempDir dir;
  const std::string file = dir.file("bad.jsonl");
  auto line = [](const std::string& hashes) {
    return std::string(kGood) + R"({"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": )" +
           hashes + "}\n";
  };
  expect_input_error(read_bad(dir, line("5")), file, 2, "hash_ids",
                     "expected an array of non-negative integers, got a number");
  expect_input_error(read_bad(dir, line(R"("0,1")")), file, 2, "hash_ids", "got a string");
  expect_input_error(read_bad(dir, line(R"([0, "1"])")), file, 2, "hash_ids", "hash_ids[1] is a string");
  expect_input_error(read_bad(dir, line("[0, -1]")), file, 2, "hash_ids",
                     "hash_ids[1] must be a non-negative integer, got '-1'");
  expect_input_error(read_bad(dir, line("[1.5]")), file, 2, "hash_ids",
                     "hash_ids[0] must be a non-negative integer, got '1.5'");
  expect_input_error(read_bad(dir, line("[01]")), file, 2, "hash_ids", "got '01'");
  expect_input_error(read_bad(dir, line("[null]")), file, 2, "hash_ids", "hash_ids[0] is null");
  expect_input_error(read_bad(dir, line("[[1]]")), file, 2, "hash_ids", "hash_ids[0] is an array");
  expect_input_error(read_bad(dir, line("[18446744073709551616]")), file, 2, "hash_ids", "out of range");
  expect_input_error(read_bad(dir, line("[1 2]")), file, 2, "", "expected ',' or ']'");
  // Up to 19 digits are read without overflow checks, 20 with them: the messages at the boundary.
  expect_input_error(read_bad(dir, line("[0, 99999999999999999999]")), file, 2, "hash_ids",
                     "hash_ids[1] '99999999999999999999' is out of range (at most 2^64-1)");
  expect_input_error(read_bad(dir, line("[00000000000000000001]")), file, 2, "hash_ids",
                     "hash_ids[0] must be a non-negative integer, got '00000000000000000001'");
  expect_input_error(read_bad(dir, line("[1234567890123456789x]")), file, 2, "hash_ids",
                     "hash_ids[0] must be a non-negative integer, got '1234567890123456789x'");
}

// The largest ids of 19 and 20 digits, read exactly (10^19 - 1 and 2^64 - 1 = 18446744073709551615),
// with a last line that has no newline and CRLF before it.
TEST(MooncakeJsonlTest, HashIdsAtTheUncheckedDigitBoundary) {
  TempDir dir;
  const std::string path = dir.file("t.jsonl");
  write_file(path,
             R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [9999999999999999999, 10000000000000000000]})"
             "\r\n"
             R"({"timestamp": 1, "input_length": 2, "output_length": 3, "hash_ids": [18446744073709551615,0,7]})");
  const auto rows = read_mooncake(path);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].block_hashes, (std::vector<uint64_t>{9'999'999'999'999'999'999ULL, 10'000'000'000'000'000'000ULL}));
  EXPECT_EQ(rows[1].block_hashes, (std::vector<uint64_t>{18'446'744'073'709'551'615ULL, 0, 7}));
  EXPECT_EQ(rows[1].output_tokens, 3);
}

TEST(MooncakeJsonlTest, NonNumericLengths) {
  TempDir dir;
  const std::string file = dir.file("bad.jsonl");
  auto line = [](const std::string& input) {
    return R"({"timestamp": 1, "input_length": )" + input +
           R"(, "output_length": 1, "hash_ids": []})"
           "\n";
  };
  expect_input_error(read_bad(dir, line("12a")), file, 1, "input_length",
                     "expected an integer token count, got '12a'");
  expect_input_error(read_bad(dir, line(R"("12")")), file, 1, "input_length", "got a string '\"12\"'");
  expect_input_error(read_bad(dir, line("1.5")), file, 1, "input_length", "got '1.5'");
  expect_input_error(read_bad(dir, line("1e3")), file, 1, "input_length", "got '1e3'");
  expect_input_error(read_bad(dir, line("0")), file, 1, "input_length", "must be >= 1");
  expect_input_error(read_bad(dir, line("-4")), file, 1, "input_length",
                     "must be >= 1 (a token count), got -4");
  expect_input_error(read_bad(dir, line("null")), file, 1, "input_length", "got null");
  expect_input_error(read_bad(dir, line("99999999999999999999")), file, 1, "input_length", "out of range");
}

TEST(MooncakeJsonlTest, NanAndInfTimestamps) {
  TempDir dir;
  const std::string file = dir.file("bad.jsonl");
  auto line = [](const std::string& ts) {
    return R"({"timestamp": )" + ts +
           R"(, "input_length": 1, "output_length": 1, "hash_ids": []})"
           "\n";
  };
  expect_input_error(read_bad(dir, line("NaN")), file, 1, "timestamp", "no NaN or Infinity");
  expect_input_error(read_bad(dir, std::string(kGood) + line("Infinity")), file, 2, "timestamp",
                     "no NaN or Infinity");
  expect_input_error(read_bad(dir, line("-Infinity")), file, 1, "timestamp", "no NaN or Infinity");
  expect_input_error(read_bad(dir, line("1e999")), file, 1, "timestamp", "not a finite number");
  expect_input_error(read_bad(dir, line("99999999999999999999")), file, 1, "timestamp", "out of range");
  expect_input_error(read_bad(dir, line("9300000000000")), file, 1, "timestamp", "out of range");
  expect_input_error(read_bad(dir, line(R"("0")")), file, 1, "timestamp", "got a string");
}

TEST(MooncakeJsonlTest, DecreasingTimestamps) {
  TempDir dir;
  const Caught c = read_bad(
      dir, std::string(kGood) + R"({"timestamp": 10, "input_length": 1, "output_length": 1, "hash_ids": []})"
                                "\n"
                                R"({"timestamp": 9.5, "input_length": 1, "output_length": 1, "hash_ids": []})"
                                "\n");
  expect_input_error(c, dir.file("bad.jsonl"), 3, "timestamp", "timestamp goes backwards: 9.5 < previous 10");
}

TEST(MooncakeJsonlTest, InvalidJsonSyntax) {
  TempDir dir;
  const std::string file = dir.file("bad.jsonl");
  expect_input_error(read_bad(dir, R"({"timestamp": 1 "input_length": 1})"
                                   "\n"),
                     file, 1, "", "expected ',' or '}'");
  expect_input_error(read_bad(dir, R"({timestamp: 1})"
                                   "\n"),
                     file, 1, "", "expected a quoted key");
  expect_input_error(read_bad(dir, std::string(kGood) + std::string(kGood).substr(0, 5)), file, 2, "", "");
  expect_input_error(read_bad(dir, std::string(kGood).substr(0, std::string(kGood).size() - 1) + " x\n"),
                     file, 1, "", "unexpected text after the JSON object");
  expect_input_error(read_bad(dir, R"({"x": tru, "timestamp": 1})"
                                   "\n"),
                     file, 1, "", "invalid value 'tru'");
  expect_input_error(read_bad(dir, R"({"x": [1,})"
                                   "\n"),
                     file, 1, "", "invalid JSON at column");
  expect_input_error(read_bad(dir, std::string(200, '[') + "\n"), file, 1, "", "");
  expect_input_error(read_bad(dir, R"({"x": )" + std::string(200, '[') + "\n"), file, 1, "",
                     "nested too deeply");
}

TEST(MooncakeJsonlTest, EmptyFile) {
  TempDir dir;
  expect_input_error(read_bad(dir, ""), dir.file("bad.jsonl"), 1, "", "empty file");
  expect_input_error(read_bad(dir, "\n \n\r\n"), dir.file("bad.jsonl"), 1, "", "empty file");
}

TEST(MooncakeJsonlTest, MissingFileIsAConfigErrorAtPath) {
  TempDir dir;
  const std::string path = dir.file("nope.jsonl");
  const std::string m = config_error([&] { make_workload(mooncake_config(path)); });
  EXPECT_NE(m.find("workload.path"), std::string::npos) << m;
  EXPECT_NE(m.find(path), std::string::npos) << m;
}

}  // namespace
}  // namespace servesim::traces
