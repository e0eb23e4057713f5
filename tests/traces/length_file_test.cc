// Length files (traces/length_file.cc) through the `empirical` distribution that reads them: JSON
// arrays, JSON lines and CSV, column detection, replay in file order, and the errors naming the
// file, line and field.
#include <gtest/gtest.h>

#include "tests/test_paths.h"
#include "tests/traces/trace_test_util.h"
#include "traces/length_file.h"

namespace servesim::traces {
namespace {

using servesim::testing::TempDir;
using namespace servesim::traces::testing;

std::string empirical(const std::string& path, const std::string& format, const std::string& field,
                      const std::string& extra = "") {
  return "[dist]\nkind = \"empirical\"\npath = " + q(path) + "\nformat = \"" + format + "\"\nfield = \"" + field +
         "\"\n" + extra;
}

std::vector<int64_t> column(const std::string& path, LengthFileFormat format, const std::string& field,
                            const std::string& name = "") {
  static const std::vector<std::string> kPrompt = {"input_length", "prompt_len", "prompt_tokens"};
  static const std::vector<std::string> kOutput = {"output_length", "output_len", "completion_tokens"};
  return read_length_column(path, format, name, field == "prompt" ? kPrompt : kOutput).values;
}

TEST(LengthFileTest, JsonArrayOverManyLinesWithOtherKeysAndNesting) {
  TempDir dir;
  const std::string path = dir.file("lengths.json");
  write_file(path,
             "[\n"
             "  {\"id\": \"a\", \"conversations\": [{\"from\": \"human\", \"value\": \"x, y}\"}],\n"
             "   \"prompt_len\": 12, \"output_len\": 3, \"score\": -1.5e3, \"ok\": true, \"x\": null},\n"
             "  {\"prompt_len\": 7,\n"
             "   \"output_len\": 40},\n"
             "  {\"output_len\": 1, \"prompt_len\": 999}\n"
             "]\n");
  EXPECT_EQ(column(path, LengthFileFormat::kJson, "prompt"), (std::vector<int64_t>{12, 7, 999}));
  EXPECT_EQ(column(path, LengthFileFormat::kJson, "output"), (std::vector<int64_t>{3, 40, 1}));
  // A column named outright, even one the detection would not pick.
  EXPECT_EQ(column(path, LengthFileFormat::kJson, "prompt", "output_len"), (std::vector<int64_t>{3, 40, 1}));
}

TEST(LengthFileTest, JsonLinesAndCsv) {
  TempDir dir;
  const std::string jsonl = dir.file("l.jsonl");
  write_file(jsonl,
             "{\"input_length\": 100, \"output_length\": 5}\r\n\n{\"input_length\": 200, \"output_length\": 6}\n");
  EXPECT_EQ(column(jsonl, LengthFileFormat::kJsonl, "prompt"), (std::vector<int64_t>{100, 200}));
  const std::string csv = dir.file("l.csv");
  write_file(csv,
             "\xEF\xBB\xBFid,\"text\",Prompt_Tokens,completion_tokens\n"
             "1,\"hello, \"\"world\"\"\",30,4\n"
             "2,plain,\" 31 \",5\n");
  EXPECT_EQ(column(csv, LengthFileFormat::kCsv, "prompt"), (std::vector<int64_t>{30, 31}));  // any case
  EXPECT_EQ(column(csv, LengthFileFormat::kCsv, "output"), (std::vector<int64_t>{4, 5}));
}

TEST(LengthFileTest, EmpiricalReplaysInFileOrderAndKeepsPairs) {
  TempDir dir;
  const std::string path = dir.file("l.jsonl");
  write_file(path,
             "{\"prompt_tokens\": 10, \"completion_tokens\": 1}\n"
             "{\"prompt_tokens\": 20, \"completion_tokens\": 2}\n"
             "{\"prompt_tokens\": 30, \"completion_tokens\": 3}\n");
  auto d = make_distribution(empirical(path, "jsonl", "prompt", "order = \"sequential\"\n"));
  core::Rng rng(1, "unused");
  std::vector<int64_t> got;
  for (int i = 0; i < 7; ++i) got.push_back(d->sample(rng));
  EXPECT_EQ(got, (std::vector<int64_t>{10, 20, 30, 10, 20, 30, 10}));
  // A generator with prompt and output from the file, in order: each request one row, cycling.
  const std::string section = "kind = \"empirical\"\npath = " + q(path) + "\nformat = \"jsonl\"\norder = \"sequential\"\n";
  auto source = make_workload("[workload]\nkind = \"poisson\"\nrate = 1.0\nmax_requests = 4\n[workload.prompt]\n" +
                              section + "field = \"prompt\"\n[workload.output]\n" + section + "field = \"output\"\n");
  const auto rows = drain(*source);
  ASSERT_EQ(rows.size(), 4u);
  const int64_t want_prompt[] = {10, 20, 30, 10}, want_output[] = {1, 2, 3, 1};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(rows[i].prompt_tokens, want_prompt[i]) << i;
    EXPECT_EQ(rows[i].output_tokens, want_output[i]) << i;
  }
}

TEST(LengthFileTest, MalformedFilesNameFileLineAndField) {
  TempDir dir;
  const std::string path = dir.file("bad.json");
  auto error = [&](const std::string& text, const std::string& format = "json", const std::string& field = "prompt",
                   const std::string& extra = "") {
    write_file(path, text);
    return catch_input_error([&] { make_distribution(empirical(path, format, field, extra)); });
  };
  expect_input_error(error("[\n{\"prompt_len\": 5},\n{\"other\": 1}\n]\n"), path, 3, "prompt_len",
                     "missing key 'prompt_len'");
  expect_input_error(error("[{\"prompt_len\": 5},\n {\"prompt_len\": \"6\"}]"), path, 2, "prompt_len",
                     "expected an integer token count, got a string");
  expect_input_error(error("[{\"prompt_len\": 5}, {\"prompt_len\": 2.5}]"), path, 1, "prompt_len",
                     "expected an integer token count, got '2.5'");
  expect_input_error(error("[{\"prompt_len\": 0}]"), path, 1, "prompt_len", "must be >= 1");
  expect_input_error(error("[{\"prompt_len\": 1, \"prompt_len\": 2}]"), path, 1, "prompt_len", "duplicate key");
  expect_input_error(error("[{\"id\": 1, \"text\": \"hi\"}]"), path, 1, "",
                     "no length column in the first object (looked for input_length, prompt_len");
  expect_input_error(error("[{\"prompt_len\": 1, \"input_length\": 2}]"), path, 1, "input_length",
                     "several length columns");
  expect_input_error(error("[{\"prompt_len\": 1},\n{\"prompt_len\": 2}\n"), path, 2, "",
                     "expected ',' or ']' after an element of the array, got the end of the file");
  expect_input_error(error("[{\"prompt_len\": 1}] x"), path, 1, "", "unexpected text after the array");
  expect_input_error(error("[{\"prompt_len\": 1}, 5]"), path, 1, "", "element 1 of the array is a number");
  expect_input_error(error("{\"prompt_len\": 1}\n"), path, 1, "", "format = \"jsonl\"");
  expect_input_error(error("[{\"prompt_len\": 1, \"t\": \"abc\n"), path, 1, "", "a string is not closed on its line");
  expect_input_error(error(""), path, 1, "", "empty file");
  expect_input_error(error("[]"), path, 1, "", "no records");
  expect_input_error(error("{\"prompt_len\": 1}\n[1]\n", "jsonl"), path, 2, "", "each line must be a JSON object");
  expect_input_error(error("{\"prompt_len\": 1}\n{\"prompt_len\" 2}\n", "jsonl"), path, 2, "",
                     "expected ':' after the key");
  expect_input_error(error("[{\"prompt_len\": 1}]", "json", "prompt", "column = \"tokens\"\n"), path, 1, "tokens",
                     "missing 'tokens' in the first object; it has 'prompt_len'");
  expect_input_error(error("a,prompt_len\n1,2\n3\n", "csv"), path, 3, "prompt_len",
                     "expected 2 comma-separated fields as in the header, got 1");
  expect_input_error(error("a,prompt_len\n1,x\n", "csv"), path, 2, "prompt_len", "got 'x'");
  expect_input_error(error("a,prompt_len\n\"1,2\n", "csv"), path, 2, "", "not closed on its line");
  expect_input_error(error("a,prompt_len,PROMPT_LEN\n1,2,3\n", "csv"), path, 1, "prompt_len", "appears twice");
  expect_input_error(error("a,prompt_len\n", "csv"), path, 1, "", "no rows");
  // Nesting deeper than the reader recurses is refused, not followed.
  expect_input_error(error("[{\"prompt_len\": 1, \"deep\": " + std::string(200, '[') + std::string(200, ']') + "}]"),
                     path, 1, "", "nested too deeply");
  // A trace format has fixed columns.
  write_file(path, "x");
  const std::string m = config_error([&] { make_distribution(empirical(path, "azure_csv", "prompt", "column = \"a\"\n")); });
  EXPECT_NE(m.find("dist.column"), std::string::npos) << m;
}

}  // namespace
}  // namespace servesim::traces
