// Tests of the generator kinds (poisson, gamma) and of what every workload shares: rate_scale,
// max_requests, the time window and seeds.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/test_paths.h"
#include "tests/traces/trace_test_util.h"

namespace servesim::traces {
namespace {

using servesim::testing::shared_file;
using servesim::testing::TempDir;
using namespace servesim::traces::testing;

std::string poisson(const std::string& extra, const std::string& lengths = "") {
  return "[workload]\nkind = \"poisson\"\nrate = 10.0\n" + extra + "\n" +
         (lengths.empty() ? "[workload.prompt]\nkind = \"fixed\"\nvalue = 100\n"
                            "[workload.output]\nkind = \"fixed\"\nvalue = 10\n"
                          : lengths);
}

struct GapStats {
  double mean = 0;
  double cv = 0;
};

GapStats gap_stats(const std::vector<RequestSpec>& rows) {
  double sum = 0, sum2 = 0;
  core::Time prev;
  for (const auto& r : rows) {
    const double gap = (r.arrival - prev).seconds();
    sum += gap;
    sum2 += gap * gap;
    prev = r.arrival;
  }
  const double n = static_cast<double>(rows.size());
  const double mean = sum / n;
  return {mean, std::sqrt(sum2 / n - mean * mean) / mean};
}

bool same_sequence(const std::vector<RequestSpec>& a, const std::vector<RequestSpec>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].arrival != b[i].arrival || a[i].prompt_tokens != b[i].prompt_tokens ||
        a[i].output_tokens != b[i].output_tokens)
      return false;
  return true;
}

TEST(PoissonTest, MeanGapMatchesRate) {
  auto source = make_workload(poisson("max_requests = 100000"));
  const auto rows = drain(*source);
  ASSERT_EQ(rows.size(), 100000u);
  const GapStats s = gap_stats(rows);
  EXPECT_NEAR(s.mean, 0.1, 0.1 * 0.02);
  EXPECT_NEAR(s.cv, 1.0, 0.03);        // exponential gaps
  EXPECT_GT(rows[0].arrival.ns(), 0);  // the first request comes after one gap
  for (size_t i = 1; i < rows.size(); ++i) ASSERT_GE(rows[i].arrival, rows[i - 1].arrival);
  EXPECT_EQ(rows[5].prompt_tokens, 100);
  EXPECT_EQ(rows[5].output_tokens, 10);
  EXPECT_TRUE(rows[5].block_hashes.empty());
  EXPECT_EQ(source->hash_block_tokens(), 0);
}

TEST(PoissonTest, CountInWindowMatchesRate) {
  // rate 10 over 1000 s: 10000 expected, standard deviation 100.
  const auto rows = drain(*make_workload(poisson("window_end_s = 1000.0")));
  EXPECT_NEAR(static_cast<double>(rows.size()), 10000.0, 400.0);
  EXPECT_LT(rows.back().arrival.ns(), 1'000'000'000'000);
}

TEST(GammaTest, GapCoefficientOfVariation) {
  for (const double cv : {2.0, 0.5}) {
    SCOPED_TRACE(cv);
    auto source = make_workload("[workload]\nkind = \"gamma\"\nrate = 4.0\ncv = " + std::to_string(cv) +
                                "\nmax_requests = 200000\n"
                                "[workload.prompt]\nkind = \"fixed\"\nvalue = 1\n"
                                "[workload.output]\nkind = \"fixed\"\nvalue = 1\n");
    const GapStats s = gap_stats(drain(*source));
    EXPECT_NEAR(s.mean, 0.25, 0.25 * 0.02);
    EXPECT_NEAR(s.cv, cv, cv * 0.05);
  }
}

TEST(GammaTest, NeedsAStop) {
  const std::string m = config_error([] {
    make_workload(
        "[workload]\nkind = \"gamma\"\nrate = 4.0\ncv = 2.0\n"
        "[workload.prompt]\nkind = \"fixed\"\nvalue = 1\n"
        "[workload.output]\nkind = \"fixed\"\nvalue = 1\n");
  });
  EXPECT_NE(m.find("workload.max_requests"), std::string::npos) << m;
  EXPECT_NE(m.find("never ends"), std::string::npos) << m;
}

TEST(PoissonTest, NeedsAStop) {
  const std::string m = config_error([] { make_workload(poisson("")); });
  EXPECT_NE(m.find("workload.max_requests"), std::string::npos) << m;
  EXPECT_NE(m.find("a generator needs max_requests or window_end_s"), std::string::npos) << m;
  EXPECT_NE(m.find("test.toml"), std::string::npos) << m;
}

TEST(PoissonTest, MissingLengthSectionIsAConfigError) {
  const std::string m =
      config_error([] { make_workload("[workload]\nkind = \"poisson\"\nrate = 1.0\nmax_requests = 5\n"); });
  EXPECT_NE(m.find("workload.prompt"), std::string::npos) << m;
}

TEST(WorkloadSeedTest, SameSeedSameSequenceDifferentSeedDifferent) {
  const auto a = drain(
      *make_workload(poisson("max_requests = 1000\nseed = 7",
                             "[workload.prompt]\nkind = \"uniform\"\nmin = 1\nmax = "
                             "1000\n[workload.output]\nkind = \"lognormal\"\nmean = 100.0\nsd = 50.0\n")));
  const auto b = drain(
      *make_workload(poisson("max_requests = 1000\nseed = 7",
                             "[workload.prompt]\nkind = \"uniform\"\nmin = 1\nmax = "
                             "1000\n[workload.output]\nkind = \"lognormal\"\nmean = 100.0\nsd = 50.0\n"),
                     999));
  const auto c = drain(
      *make_workload(poisson("max_requests = 1000\nseed = 8",
                             "[workload.prompt]\nkind = \"uniform\"\nmin = 1\nmax = "
                             "1000\n[workload.output]\nkind = \"lognormal\"\nmean = 100.0\nsd = 50.0\n")));
  EXPECT_TRUE(same_sequence(a, b));  // the workload's seed wins over the run's
  EXPECT_FALSE(same_sequence(a, c));
  EXPECT_NE(a[0].arrival, c[0].arrival);
  EXPECT_NE(a[0].prompt_tokens, c[0].prompt_tokens);
}

TEST(WorkloadSeedTest, RunSeedUsedWhenUnset) {
  const auto a = drain(*make_workload(poisson("max_requests = 100"), 1));
  const auto b = drain(*make_workload(poisson("max_requests = 100"), 1));
  const auto c = drain(*make_workload(poisson("max_requests = 100"), 2));
  const auto d = drain(*make_workload(poisson("max_requests = 100\nseed = 1"), 2));
  EXPECT_TRUE(same_sequence(a, b));
  EXPECT_FALSE(same_sequence(a, c));
  EXPECT_TRUE(same_sequence(a, d));
}

TEST(WorkloadSeedTest, StreamsAreIndependent) {
  // Changing the output distribution changes neither the arrivals nor the prompts.
  const std::string prompt = "[workload.prompt]\nkind = \"uniform\"\nmin = 1\nmax = 1000\n";
  const auto a = drain(*make_workload(
      poisson("max_requests = 500", prompt + "[workload.output]\nkind = \"fixed\"\nvalue = 3\n")));
  const auto b = drain(*make_workload(poisson(
      "max_requests = 500", prompt + "[workload.output]\nkind = \"lognormal\"\nmean = 50.0\nsd = 10.0\n")));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].arrival, b[i].arrival);
    ASSERT_EQ(a[i].prompt_tokens, b[i].prompt_tokens);
  }
  // And a different arrival process keeps the lengths.
  const auto g =
      drain(*make_workload("[workload]\nkind = \"gamma\"\nrate = 3.0\ncv = 3.0\nmax_requests = 500\n" +
                           prompt + "[workload.output]\nkind = \"fixed\"\nvalue = 3\n"));
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i].prompt_tokens, g[i].prompt_tokens);
}

TEST(WorkloadShapingTest, RateScaleDividesArrivals) {
  const auto a = drain(*make_workload(poisson("max_requests = 1000")));
  const auto b = drain(*make_workload(poisson("max_requests = 1000\nrate_scale = 2.0")));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(b[i].arrival.ns(), std::llround(static_cast<double>(a[i].arrival.ns()) / 2.0));
    ASSERT_EQ(b[i].prompt_tokens, a[i].prompt_tokens);
  }
}

TEST(WorkloadShapingTest, RateScaleOnTrace) {
  const std::string path = shared_file("traces/azure-2023/AzureLLMInferenceTrace_conv.csv");
  const auto rows = drain(*make_workload("[workload]\nkind = \"azure_csv\"\npath = " + q(path) +
                                         "\nrate_scale = 2.0\nmax_requests = 2\n"));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].arrival.ns(), 4'314'579'000 / 2);
}

TEST(WorkloadShapingTest, MaxRequests) {
  EXPECT_EQ(drain(*make_workload(poisson("max_requests = 1"))).size(), 1u);
  EXPECT_EQ(drain(*make_workload(poisson("max_requests = 37"))).size(), 37u);
  const std::string path = shared_file("traces/azure-2023/AzureLLMInferenceTrace_conv.csv");
  auto source =
      make_workload("[workload]\nkind = \"azure_csv\"\npath = " + q(path) + "\nmax_requests = 10\n");
  EXPECT_EQ(drain(*source).size(), 10u);
  RequestSpec r;
  EXPECT_FALSE(source->next(r));
  // The limit and the window together: whichever ends first.
  EXPECT_EQ(drain(*make_workload(poisson("max_requests = 5\nwindow_end_s = 1000.0"))).size(), 5u);
  const auto few = drain(*make_workload(poisson("max_requests = 100000\nwindow_end_s = 10.0")));
  EXPECT_LT(few.size(), 200u);
  const std::string m = config_error([] { make_workload(poisson("max_requests = 0")); });
  EXPECT_NE(m.find("workload.max_requests"), std::string::npos) << m;
}

TEST(WorkloadShapingTest, WindowFiltersAndShiftsGenerator) {
  const auto all = drain(*make_workload(poisson("window_end_s = 30.0")));
  const auto cut = drain(*make_workload(poisson("window_start_s = 10.0\nwindow_end_s = 20.0")));
  std::vector<RequestSpec> expected;
  for (const auto& r : all)
    if (r.arrival.ns() >= 10'000'000'000 && r.arrival.ns() < 20'000'000'000) expected.push_back(r);
  ASSERT_FALSE(expected.empty());
  ASSERT_EQ(cut.size(), expected.size());
  for (size_t i = 0; i < cut.size(); ++i) {
    ASSERT_EQ(cut[i].arrival.ns(), expected[i].arrival.ns() - 10'000'000'000);
    ASSERT_EQ(cut[i].prompt_tokens, expected[i].prompt_tokens);
  }
  // rate_scale applies after the window: the same cut, twice as fast.
  const auto fast =
      drain(*make_workload(poisson("window_start_s = 10.0\nwindow_end_s = 20.0\nrate_scale = 2.0")));
  ASSERT_EQ(fast.size(), cut.size());
  for (size_t i = 0; i < cut.size(); ++i)
    ASSERT_EQ(fast[i].arrival.ns(), std::llround(static_cast<double>(cut[i].arrival.ns()) / 2.0));
}

TEST(WorkloadShapingTest, WindowOnTrace) {
  TempDir dir;
  const std::string path = dir.file("t.csv");
  write_file(path,
             "TIMESTAMP,ContextTokens,GeneratedTokens\n"
             "2023-11-16 18:00:00,1,1\n"
             "2023-11-16 18:00:01.5,2,2\n"
             "2023-11-16 18:00:02,3,3\n"
             "2023-11-16 18:00:03.25,4,4\n"
             "2023-11-16 18:00:04,5,5\n"
             "2023-11-16 18:00:05,6,6\n");
  const std::string base = "[workload]\nkind = \"azure_csv\"\npath = " + q(path) + "\n";
  const auto rows = drain(*make_workload(base + "window_start_s = 1.5\nwindow_end_s = 4.0\n"));
  ASSERT_EQ(rows.size(), 3u);  // [1.5, 4): the rows at 1.5, 2 and 3.25 s
  EXPECT_EQ(rows[0].arrival.ns(), 0);
  EXPECT_EQ(rows[0].prompt_tokens, 2);
  EXPECT_EQ(rows[1].arrival.ns(), 500'000'000);
  EXPECT_EQ(rows[2].arrival.ns(), 1'750'000'000);
  EXPECT_EQ(rows[2].prompt_tokens, 4);
  const auto tail = drain(*make_workload(base + "window_start_s = 4.5\n"));
  ASSERT_EQ(tail.size(), 1u);
  EXPECT_EQ(tail[0].prompt_tokens, 6);
  EXPECT_EQ(tail[0].arrival.ns(), 500'000'000);
}

TEST(WorkloadShapingTest, EmptyWindowIsAnError) {
  TempDir dir;
  const std::string path = dir.file("t.csv");
  write_file(path,
             "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00,1,1\n2023-11-16 18:00:03,1,1\n");
  auto source =
      make_workload("[workload]\nkind = \"azure_csv\"\npath = " + q(path) + "\nwindow_start_s = 100.0\n");
  RequestSpec r;
  try {
    source->next(r);
    FAIL() << "expected an error";
  } catch (const core::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(path), std::string::npos) << m;
    EXPECT_NE(m.find("no requests in the window [100, end) s"), std::string::npos) << m;
    EXPECT_NE(m.find("last arrival is at 3 s"), std::string::npos) << m;
  }
}

TEST(WorkloadShapingTest, WindowEndNotAfterStartIsAConfigError) {
  for (const char* window :
       {"window_start_s = 5.0\nwindow_end_s = 5.0", "window_start_s = 5.0\nwindow_end_s = 2.0"}) {
    const std::string m = config_error([&] { make_workload(poisson(window)); });
    EXPECT_NE(m.find("test.toml:5"), std::string::npos) << m;  // the window_end_s line
    EXPECT_NE(m.find("workload.window_end_s"), std::string::npos) << m;
    EXPECT_NE(m.find("must be greater than window_start_s"), std::string::npos) << m;
  }
}

TEST(WorkloadShapingTest, OutOfRangeCommonParams) {
  EXPECT_NE(
      config_error([] { make_workload(poisson("max_requests = 5\nrate_scale = 0.0")); }).find("rate_scale"),
      std::string::npos);
  EXPECT_NE(config_error([] {
              make_workload(poisson("max_requests = 5\nwindow_start_s = -1.0"));
            }).find("window_start_s"),
            std::string::npos);
  EXPECT_NE(config_error([] { make_workload(poisson("max_requests = 5\nseed = -1")); }).find("seed"),
            std::string::npos);
  EXPECT_NE(config_error([] { make_workload(poisson("max_requests = 5\nrate = 0.0")); }).find("rate"),
            std::string::npos);
}

TEST(WorkloadRegistryTest, KindsAreRegistered) {
  for (const char* kind : {"azure_csv", "mooncake_jsonl", "poisson", "gamma"})
    EXPECT_NE(workload_registry().find(kind), nullptr) << kind;
  for (const char* kind : {"fixed", "uniform", "lognormal", "empirical"})
    EXPECT_NE(distribution_registry().find(kind), nullptr) << kind;
  EXPECT_EQ(core::find_family("workloads"), &workload_registry());
  EXPECT_EQ(core::find_family("length_distributions"), &distribution_registry());
  // Every kind declares the common parameters: traces and generators those of with_common_params,
  // composed kinds (an [arrival] section and request content) those of composed_params.
  for (const core::KindInfo* info : workload_registry().kinds()) {
    auto has = [&](const char* key) {
      for (const auto& spec : info->params)
        if (spec.name == key) return true;
      return false;
    };
    for (const char* key : {"max_requests", "seed", "client_timeout_s"})
      EXPECT_TRUE(has(key)) << info->name << " lacks " << key;
    const bool composed = has("arrival");
    for (const char* key : {"rate_scale", "window_start_s", "window_end_s"})
      EXPECT_EQ(has(key), !composed) << info->name << (composed ? " has " : " lacks ") << key;
  }
}

TEST(WorkloadRegistryTest, UnknownKindListsValidKinds) {
  const std::string m = config_error([] { make_workload("[workload]\nkind = \"poison\"\n"); });
  EXPECT_NE(m.find("did you mean 'poisson'"), std::string::npos) << m;
  EXPECT_NE(m.find("azure_csv"), std::string::npos) << m;
  EXPECT_NE(m.find("mooncake_jsonl"), std::string::npos) << m;
}

}  // namespace
}  // namespace servesim::traces
