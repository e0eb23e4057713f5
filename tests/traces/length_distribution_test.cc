#include "traces/length_distribution.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "tests/test_paths.h"
#include "tests/traces/trace_test_util.h"

namespace servesim::traces {
namespace {

using servesim::testing::shared_file;
using servesim::testing::TempDir;
using namespace servesim::traces::testing;

std::vector<int64_t> samples(LengthDistribution& d, int n, uint64_t seed = 1) {
  core::Rng rng(seed, "test");
  std::vector<int64_t> out;
  for (int i = 0; i < n; ++i) out.push_back(d.sample(rng));
  return out;
}

double mean_of(const std::vector<int64_t>& v) {
  double s = 0;
  for (auto x : v) s += static_cast<double>(x);
  return s / static_cast<double>(v.size());
}

double sd_of(const std::vector<int64_t>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (auto x : v) s += (static_cast<double>(x) - m) * (static_cast<double>(x) - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

TEST(LengthDistributionTest, Fixed) {
  auto d = make_distribution("[dist]\nkind = \"fixed\"\nvalue = 77\n");
  for (int64_t x : samples(*d, 100)) ASSERT_EQ(x, 77);
  EXPECT_EQ(d->table_key(), "");
  EXPECT_NE(
      config_error([] { make_distribution("[dist]\nkind = \"fixed\"\nvalue = 0\n"); }).find("dist.value"),
      std::string::npos);
  EXPECT_NE(
      config_error([] { make_distribution("[dist]\nkind = \"fixed\"\n"); }).find("missing required key"),
      std::string::npos);
}

TEST(LengthDistributionTest, UniformBoundsInclusive) {
  auto d = make_distribution("[dist]\nkind = \"uniform\"\nmin = 3\nmax = 7\n");
  std::map<int64_t, int> counts;
  for (int64_t x : samples(*d, 50000)) ++counts[x];
  ASSERT_EQ(counts.size(), 5u);
  EXPECT_EQ(counts.begin()->first, 3);
  EXPECT_EQ(counts.rbegin()->first, 7);
  for (const auto& [v, c] : counts) EXPECT_NEAR(c, 10000, 400) << v;
  auto one = make_distribution("[dist]\nkind = \"uniform\"\nmin = 4\nmax = 4\n");
  for (int64_t x : samples(*one, 10)) ASSERT_EQ(x, 4);
}

TEST(LengthDistributionTest, UniformMaxBelowMinIsAConfigError) {
  const std::string m =
      config_error([] { make_distribution("[dist]\nkind = \"uniform\"\nmin = 10\nmax = 5\n"); });
  EXPECT_NE(m.find("test.toml:4"), std::string::npos) << m;
  EXPECT_NE(m.find("dist.max"), std::string::npos) << m;
  EXPECT_NE(m.find("max (5) must be >= min (10)"), std::string::npos) << m;
}

TEST(LengthDistributionTest, LognormalMatchesMeanAndSd) {
  // Parameters of the lengths themselves: mean 1000, sd 500 (not of their log).
  auto d = make_distribution("[dist]\nkind = \"lognormal\"\nmean = 1000.0\nsd = 500.0\n");
  const auto v = samples(*d, 200000);
  EXPECT_NEAR(mean_of(v), 1000.0, 30.0);
  EXPECT_NEAR(sd_of(v), 500.0, 15.0);
  for (int64_t x : v) ASSERT_GE(x, 1);
}

TEST(LengthDistributionTest, LognormalClipsToMinMax) {
  auto d =
      make_distribution("[dist]\nkind = \"lognormal\"\nmean = 1000.0\nsd = 2000.0\nmin = 200\nmax = 1500\n");
  std::set<int64_t> seen;
  for (int64_t x : samples(*d, 20000)) {
    ASSERT_GE(x, 200);
    ASSERT_LE(x, 1500);
    seen.insert(x);
  }
  EXPECT_TRUE(seen.count(200));  // both ends are hit with this wide a distribution
  EXPECT_TRUE(seen.count(1500));
  // Extreme tails never overflow.
  auto wide = make_distribution("[dist]\nkind = \"lognormal\"\nmean = 1e6\nsd = 1e15\n");
  for (int64_t x : samples(*wide, 20000)) {
    ASSERT_GE(x, 1);
    ASSERT_LE(x, 1000000);
  }
  const std::string m = config_error(
      [] { make_distribution("[dist]\nkind = \"lognormal\"\nmean = 10.0\nsd = 1.0\nmin = 50\nmax = 20\n"); });
  EXPECT_NE(m.find("dist.max"), std::string::npos) << m;
  EXPECT_NE(config_error([] {
              make_distribution("[dist]\nkind = \"lognormal\"\nmean = 10.0\nsd = 0.0\n");
            }).find("dist.sd"),
            std::string::npos);
}

TEST(LengthDistributionTest, UnknownKindNamesValidKinds) {
  const std::string m = config_error([] { make_distribution("[dist]\nkind = \"normal\"\nmean = 3.0\n"); });
  EXPECT_NE(m.find("unknown length_distributions kind 'normal'"), std::string::npos) << m;
  for (const char* kind : {"empirical", "fixed", "lognormal", "uniform"})
    EXPECT_NE(m.find(kind), std::string::npos) << kind << ": " << m;
}

TEST(LengthDistributionTest, EmpiricalSamplesAColumn) {
  TempDir dir;
  const std::string path = dir.file("t.csv");
  write_file(path,
             "TIMESTAMP,ContextTokens,GeneratedTokens\n"
             "2023-11-16 18:00:00,10,1\n"
             "2023-11-16 18:00:01,20,2\n"
             "2023-11-16 18:00:02,20,3\n"
             "2023-11-16 18:00:03,40,4\n");
  auto d = make_distribution("[dist]\nkind = \"empirical\"\npath = " + q(path) + "\nfield = \"prompt\"\n");
  std::map<int64_t, int> counts;
  for (int64_t x : samples(*d, 40000)) ++counts[x];
  ASSERT_EQ(counts.size(), 3u);
  EXPECT_NEAR(counts[10], 10000, 400);
  EXPECT_NEAR(counts[20], 20000, 400);  // two rows
  EXPECT_NEAR(counts[40], 10000, 400);
  EXPECT_EQ(d->table_rows(), 4u);
  auto out = make_distribution("[dist]\nkind = \"empirical\"\npath = " + q(path) + "\nfield = \"output\"\n");
  EXPECT_EQ(out->value_at(3), 4);
  EXPECT_EQ(out->table_key(), d->table_key());
}

// An empirical prompt and output over one trace share a single read of it (both columns read in
// one pass while a distribution holds them). The values are the file's, given here by hand; a
// file rewritten since is read afresh, never served from the earlier read.
TEST(LengthDistributionTest, EmpiricalPromptAndOutputShareOneReadOfTheTrace) {
  TempDir dir;
  const std::string path = dir.file("t.csv");
  // CRLF lines, a blank line, spaces around numbers, '+', and a last line without a newline.
  write_file(path,
             "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
             "2023-11-16 18:00:00.5,10, 1\r\n"
             "\r\n"
             "2023-11-16 18:00:01,+20 ,2\r\n"
             "2023-11-16 18:00:02,007,30");
  auto prompt = make_distribution("[dist]\nkind = \"empirical\"\npath = " + q(path) + "\nfield = \"prompt\"\n");
  auto output = make_distribution("[dist]\nkind = \"empirical\"\npath = " + q(path) + "\nfield = \"output\"\n");
  ASSERT_EQ(prompt->table_rows(), 3u);
  ASSERT_EQ(output->table_rows(), 3u);
  EXPECT_EQ(prompt->value_at(0), 10);
  EXPECT_EQ(prompt->value_at(1), 20);
  EXPECT_EQ(prompt->value_at(2), 7);
  EXPECT_EQ(output->value_at(0), 1);
  EXPECT_EQ(output->value_at(1), 2);
  EXPECT_EQ(output->value_at(2), 30);
  // Rewritten (another size, so another file version) while `prompt` still holds the first read.
  write_file(path,
             "TIMESTAMP,ContextTokens,GeneratedTokens\n"
             "2023-11-16 18:00:00,11,5\n"
             "2023-11-16 18:00:01,12,6\n");
  auto fresh = make_distribution("[dist]\nkind = \"empirical\"\npath = " + q(path) + "\nfield = \"output\"\n");
  ASSERT_EQ(fresh->table_rows(), 2u);
  EXPECT_EQ(fresh->value_at(0), 5);
  EXPECT_EQ(fresh->value_at(1), 6);
  EXPECT_EQ(prompt->value_at(2), 7);  // the earlier distribution keeps what it read
  // A bad row is refused with the same message whichever column the distribution wants.
  write_file(path, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00,11,5\n2023-11-16 18:00:01,12,0\n");
  for (const char* field : {"prompt", "output"}) {
    SCOPED_TRACE(field);
    try {
      make_distribution("[dist]\nkind = \"empirical\"\npath = " + q(path) + "\nfield = \"" + field + "\"\n");
      FAIL();
    } catch (const core::InputError& e) {
      EXPECT_EQ(std::string(e.what()), path + ":3: field 'GeneratedTokens': must be >= 1 (a token count), got 0");
    }
  }
}

TEST(LengthDistributionTest, EmpiricalOverMooncake) {
  TempDir dir;
  const std::string path = dir.file("t.jsonl");
  write_file(path, R"({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]})"
                   "\n"
                   R"({"timestamp": 1, "input_length": 30, "output_length": 6, "hash_ids": [2]})"
                   "\n");
  auto d = make_distribution("[dist]\nkind = \"empirical\"\nformat = \"mooncake_jsonl\"\npath = " + q(path) +
                             "\nfield = \"output\"\n");
  std::set<int64_t> seen;
  for (int64_t x : samples(*d, 100)) seen.insert(x);
  EXPECT_EQ(seen, (std::set<int64_t>{5, 6}));
}

TEST(LengthDistributionTest, EmpiricalOverRealTrace) {
  auto d = make_distribution("[dist]\nkind = \"empirical\"\npath = " +
                             q(shared_file("traces/azure-2023/AzureLLMInferenceTrace_conv.csv")) +
                             "\nfield = \"prompt\"\n");
  EXPECT_EQ(d->table_rows(), 19366u);
  EXPECT_NEAR(mean_of(samples(*d, 100000)), 1155.0, 1155.0 * 0.03);
}

TEST(LengthDistributionTest, EmpiricalErrors) {
  TempDir dir;
  const std::string missing = dir.file("none.csv");
  std::string m = config_error([&] {
    make_distribution("[dist]\nkind = \"empirical\"\npath = " + q(missing) + "\nfield = \"prompt\"\n");
  });
  EXPECT_NE(m.find("dist.path"), std::string::npos) << m;
  EXPECT_NE(m.find(missing), std::string::npos) << m;
  m = config_error([&] {
    make_distribution("[dist]\nkind = \"empirical\"\npath = " + q(missing) + "\nfield = \"input\"\n");
  });
  EXPECT_NE(m.find("dist.field"), std::string::npos) << m;
  m = config_error([&] { make_distribution("[dist]\nkind = \"empirical\"\npath = " + q(missing) + "\n"); });
  EXPECT_NE(m.find("dist.field"), std::string::npos) << m;
  m = config_error([&] {
    make_distribution("[dist]\nkind = \"empirical\"\npath = " + q(missing) +
                      "\nfield = \"prompt\"\nformat = \"xlsx\"\n");
  });
  EXPECT_NE(m.find("dist.format"), std::string::npos) << m;
  // Malformed files fail the same way as when they are replayed.
  const std::string bad = dir.file("bad.csv");
  write_file(bad,
             "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00,10,1\n2023-11-16 18:00:01,x,2\n");
  const Caught c = catch_input_error([&] {
    make_distribution("[dist]\nkind = \"empirical\"\npath = " + q(bad) + "\nfield = \"output\"\n");
  });
  expect_input_error(c, bad, 3, "ContextTokens", "got 'x'");
}

// A generator whose prompt and output are empirical over one file draws one row for both.
TEST(LengthDistributionTest, EmpiricalJointSamplingKeepsPairs) {
  TempDir dir;
  const std::string path = dir.file("pairs.csv");
  std::string text = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  for (int i = 1; i <= 500; ++i)
    text += "2023-11-16 18:00:00," + std::to_string(i * 7) + "," + std::to_string(i * 14) + "\n";
  write_file(path, text);
  // The same file spelled two ways still counts as one table.
  const std::string other_spelling = dir.path() + "/./pairs.csv";
  const std::string toml =
      "[workload]\nkind = \"poisson\"\nrate = 100.0\nmax_requests = 20000\n"
      "[workload.prompt]\nkind = \"empirical\"\npath = " +
      q(path) +
      "\nfield = \"prompt\"\n"
      "[workload.output]\nkind = \"empirical\"\npath = " +
      q(other_spelling) + "\nfield = \"output\"\n";
  const auto rows = drain(*make_workload(toml));
  ASSERT_EQ(rows.size(), 20000u);
  std::set<int64_t> prompts;
  for (const auto& r : rows) {
    ASSERT_EQ(r.output_tokens, 2 * r.prompt_tokens);
    prompts.insert(r.prompt_tokens);
  }
  EXPECT_GT(prompts.size(), 450u);  // rows are still drawn over the whole table

  // Without a shared table the draws are independent: pairs no longer match.
  const std::string path2 = dir.file("pairs2.csv");
  write_file(path2, text);
  const std::string indep =
      "[workload]\nkind = \"poisson\"\nrate = 100.0\nmax_requests = 2000\n"
      "[workload.prompt]\nkind = \"empirical\"\npath = " +
      q(path) +
      "\nfield = \"prompt\"\n"
      "[workload.output]\nkind = \"empirical\"\npath = " +
      q(path2) + "\nfield = \"output\"\n";
  int matching = 0;
  for (const auto& r : drain(*make_workload(indep))) matching += r.output_tokens == 2 * r.prompt_tokens;
  EXPECT_LT(matching, 50);
}

TEST(LengthDistributionTest, EmpiricalJointSamplingOnMooncake) {
  TempDir dir;
  const std::string path = dir.file("pairs.jsonl");
  std::string text;
  for (int i = 1; i <= 100; ++i)
    text += R"({"timestamp": 0, "input_length": )" + std::to_string(i) + R"(, "output_length": )" +
            std::to_string(1000 + i) +
            R"(, "hash_ids": []})"
            "\n";
  write_file(path, text);
  const std::string toml =
      "[workload]\nkind = \"gamma\"\nrate = 100.0\ncv = 2.0\nmax_requests = 5000\n"
      "[workload.prompt]\nkind = \"empirical\"\nformat = \"mooncake_jsonl\"\npath = " +
      q(path) +
      "\nfield = \"prompt\"\n"
      "[workload.output]\nkind = \"empirical\"\nformat = \"mooncake_jsonl\"\npath = " +
      q(path) + "\nfield = \"output\"\n";
  for (const auto& r : drain(*make_workload(toml))) ASSERT_EQ(r.output_tokens, 1000 + r.prompt_tokens);
}

}  // namespace
}  // namespace servesim::traces
