// Request classes ([[workload.classes]], issue 17): trace readers take each request's class from an
// optional class column/key; generators draw it from the shares on their own stream, so the rest of
// the workload is the same with or without classes.
#include <gtest/gtest.h>

#include <string>

#include "tests/test_paths.h"
#include "tests/traces/trace_test_util.h"

namespace servesim::traces {
namespace {

using servesim::testing::TempDir;
using testing::catch_input_error;
using testing::config_error;
using testing::drain;
using testing::expect_input_error;
using testing::make_workload;
using testing::q;
using testing::write_file;

const char* kClasses = R"(
[[workload.classes]]
name = "premium"
priority = 0
[[workload.classes]]
name = "batch"
priority = 1
)";

TEST(RequestClassesTest, AzureCsvClassColumnNamesEachRequestsClass) {
  TempDir dir;
  const std::string path = dir.file("t.csv");
  write_file(path,
             "TIMESTAMP,ContextTokens,class,GeneratedTokens\n"
             "2023-11-16 18:15:46.000,10,batch,5\n"
             "2023-11-16 18:15:47.000,11, premium ,6\n"
             "2023-11-16 18:15:48.000,12,batch,7\n");
  auto src = make_workload("[workload]\nkind = \"azure_csv\"\npath = " + q(path) + kClasses);
  ASSERT_EQ(src->classes().size(), 2u);
  EXPECT_EQ(src->classes()[1].name, "batch");
  EXPECT_EQ(src->classes()[1].priority, 1);
  const auto reqs = drain(*src);
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].request_class, 1);
  EXPECT_EQ(reqs[1].request_class, 0);
  EXPECT_EQ(reqs[2].request_class, 1);
  EXPECT_EQ(reqs[1].prompt_tokens, 11);  // the class column moves no other field
  EXPECT_EQ(reqs[2].output_tokens, 7);

  // Without classes in the configuration the column is not read: every request is class 0.
  auto plain = make_workload("[workload]\nkind = \"azure_csv\"\npath = " + q(path));
  for (const auto& r : drain(*plain)) EXPECT_EQ(r.request_class, 0);
}

TEST(RequestClassesTest, UnknownClassInATraceNamesFileLineAndField) {
  TempDir dir;
  const std::string csv = dir.file("t.csv");
  write_file(csv,
             "TIMESTAMP,ContextTokens,GeneratedTokens,class\n"
             "2023-11-16 18:15:46.000,10,5,batch\n"
             "2023-11-16 18:15:47.000,10,5,gold\n");
  expect_input_error(catch_input_error([&] {
                       auto src = make_workload("[workload]\nkind = \"azure_csv\"\npath = " + q(csv) + kClasses);
                       drain(*src);
                     }),
                     csv, 3, "class", "unknown request class 'gold'");

  const std::string jsonl = dir.file("t.jsonl");
  write_file(jsonl,
             "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [1], \"class\": \"premium\"}\n"
             "{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [1], \"class\": 3}\n");
  expect_input_error(catch_input_error([&] {
                       auto src = make_workload("[workload]\nkind = \"mooncake_jsonl\"\npath = " + q(jsonl) + kClasses);
                       drain(*src);
                     }),
                     jsonl, 2, "class", "expected a string naming a request class");
}

TEST(RequestClassesTest, MooncakeClassKeyAndRowsWithoutAClassDrawFromShares) {
  TempDir dir;
  const std::string jsonl = dir.file("t.jsonl");
  write_file(jsonl,
             "{\"timestamp\": 0, \"class\": \"batch\", \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [1]}\n"
             "{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [1]}\n"
             "{\"timestamp\": 9, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [1], \"class\": null}\n");
  // Without shares a row that names no class is an error naming the request.
  const std::string msg = [&] {
    try {
      auto src = make_workload("[workload]\nkind = \"mooncake_jsonl\"\npath = " + q(jsonl) + kClasses);
      drain(*src);
    } catch (const core::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_NE(msg.find("request 1 names no class"), std::string::npos) << msg;
  // With shares premium 1 : batch 0+ (a tiny share), every unnamed row draws premium.
  auto src = make_workload("[workload]\nkind = \"mooncake_jsonl\"\npath = " + q(jsonl) +
                           "\n[[workload.classes]]\nname = \"premium\"\nshare = 1\n"
                           "[[workload.classes]]\nname = \"batch\"\nshare = 1e-9\n");
  const auto reqs = drain(*src);
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].request_class, 1);
  EXPECT_EQ(reqs[1].request_class, 0);
  EXPECT_EQ(reqs[2].request_class, 0);
}

// The classes are drawn on their own stream: arrivals and lengths are those of the same workload
// without classes, and the shares come out near their weights (3:1 over 4,000 draws: 3,000 premium
// expected, binomial sd 27; 200 is over 7 sd).
TEST(RequestClassesTest, GeneratorsDrawClassesOnTheirOwnStream) {
  const std::string base = R"(
[workload]
kind = "poisson"
rate = 10
max_requests = 4000
[workload.prompt]
kind = "uniform"
min = 1
max = 100
[workload.output]
kind = "uniform"
min = 1
max = 100
)";
  const std::string classes = R"(
[[workload.classes]]
name = "premium"
share = 3
[[workload.classes]]
name = "batch"
share = 1
)";
  auto plain = make_workload(base);
  auto classed = make_workload(base + classes);
  const auto a = drain(*plain), b = drain(*classed);
  ASSERT_EQ(a.size(), b.size());
  int premium = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].arrival, b[i].arrival);
    EXPECT_EQ(a[i].prompt_tokens, b[i].prompt_tokens);
    EXPECT_EQ(a[i].output_tokens, b[i].output_tokens);
    EXPECT_EQ(a[i].request_class, 0);
    premium += b[i].request_class == 0;
  }
  EXPECT_NEAR(premium, 3000, 200);
  // The same seed draws the same classes.
  auto again = make_workload(base + classes);
  const auto c = drain(*again);
  for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b[i].request_class, c[i].request_class);

  // A composed generator needs shares; a class list must be consistent.
  const std::string synthetic = R"(
[workload]
kind = "synthetic"
[workload.arrival]
kind = "constant"
rate = 1
requests = 10
[workload.prompt]
kind = "fixed"
value = 10
[workload.output]
kind = "fixed"
value = 10
)";
  EXPECT_NE(config_error([&] { make_workload(synthetic + kClasses); }).find("give every [[workload.classes]] a share"),
            std::string::npos);
  EXPECT_NE(config_error([&] {
              make_workload(synthetic + "[[workload.classes]]\nname = \"a\"\nshare = 1\n[[workload.classes]]\nname = \"a\"\nshare = 1\n");
            }).find("defined twice"),
            std::string::npos);
  EXPECT_NE(config_error([&] {
              make_workload(synthetic + "[[workload.classes]]\nname = \"a\"\nshare = 1\n[[workload.classes]]\nname = \"b\"\n");
            }).find("give every class a share or none"),
            std::string::npos);
  auto composed = make_workload(synthetic + "[[workload.classes]]\nname = \"only\"\nshare = 2\n");
  for (const auto& r : drain(*composed)) EXPECT_EQ(r.request_class, 0);
}

}  // namespace
}  // namespace servesim::traces
