// [output] percentiles end to end (issue 18, S6): a run past auto's size (made small here) or in
// sketch mode gives every percentile within the stated bound of the same run kept exact, the same
// means and counts, names the mode in its summary, and is deterministic; below the size nothing
// changes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "experiments/run.h"
#include "sim/core/error.h"
#include "sim/metrics/stats.h"
#include "tests/cli_driver.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

using servesim::testing::cli;

std::string quickstart() { return servesim::testing::source_dir() + "/experiments/quickstart.toml"; }
std::string two_tenants() { return servesim::testing::source_dir() + "/experiments/fleet/two_tenants.toml"; }

RunResult run(const std::string& path, std::vector<std::string> sets) {
  return run_simulation(load_run_config(path, sets), RunOutputs{});
}

void expect_within(const metrics::LatencyStats& got, const metrics::LatencyStats& exact, const char* what) {
  SCOPED_TRACE(what);
  ASSERT_GT(exact.count, 0u);
  EXPECT_EQ(got.count, exact.count);
  const double eps = metrics::kSketchRelativeError * (1 + 1e-12);
  EXPECT_LE(std::abs(got.p50 - exact.p50), eps * exact.p50) << got.p50 << " vs " << exact.p50;
  EXPECT_LE(std::abs(got.p90 - exact.p90), eps * exact.p90) << got.p90 << " vs " << exact.p90;
  EXPECT_LE(std::abs(got.p99 - exact.p99), eps * exact.p99) << got.p99 << " vs " << exact.p99;
  EXPECT_NEAR(got.mean, exact.mean, 1e-12 * exact.mean);  // means stay exact (summed in another order)
}

TEST(PercentilesRunTest, AutoSwitchPastASmallSizeStaysWithinTheBoundOfExact) {
  const RunResult exact = run(quickstart(), {"output.percentiles=\"exact\""});
  const RunResult deflt = run(quickstart(), {});
  const RunResult switched = run(quickstart(), {"output.exact_percentiles_max=150"});
  const RunResult sketch = run(quickstart(), {"output.percentiles=\"sketch\""});
  ASSERT_GT(exact.summary.requests_completed, 1000u);
  EXPECT_EQ(exact.summary.percentiles, "exact");
  EXPECT_EQ(exact.summary.percentile_relative_error, 0);
  // The default (auto, 10 M) below its size is the exact run, bit for bit.
  EXPECT_EQ(deflt.summary.percentiles, "exact");
  EXPECT_EQ(deflt.summary.ttft_ms.p99, exact.summary.ttft_ms.p99);
  EXPECT_EQ(deflt.summary.e2e_ms.p50, exact.summary.e2e_ms.p50);
  EXPECT_EQ(deflt.summary.steady.ttft_ms_mean_ci95, exact.summary.steady.ttft_ms_mean_ci95);
  for (const RunResult* r : {&switched, &sketch}) {
    EXPECT_EQ(r->summary.percentiles, "sketch");
    EXPECT_EQ(r->summary.percentile_relative_error, 1.0 / 512);
    expect_within(r->summary.ttft_ms, exact.summary.ttft_ms, "ttft");
    expect_within(r->summary.tpot_ms, exact.summary.tpot_ms, "tpot");
    expect_within(r->summary.e2e_ms, exact.summary.e2e_ms, "e2e");
    // The simulation itself is untouched.
    EXPECT_EQ(r->summary.output_tokens, exact.summary.output_tokens);
    EXPECT_EQ(r->summary.sim_seconds, exact.summary.sim_seconds);
    EXPECT_EQ(r->summary.slo_attainment, exact.summary.slo_attainment);
    // Under 4,096 requests the streamed batch means are the exact ones (BatchSums of width 1).
    EXPECT_NEAR(r->summary.steady.ttft_ms_mean_ci95, exact.summary.steady.ttft_ms_mean_ci95,
                1e-12 * exact.summary.steady.ttft_ms_mean_ci95);
    EXPECT_EQ(r->summary.steady.slo_attainment_ci95, exact.summary.steady.slo_attainment_ci95);
  }
  // Switching after 150 requests or sketching from the start: the same sketch.
  EXPECT_EQ(switched.summary.ttft_ms.p90, sketch.summary.ttft_ms.p90);
  EXPECT_EQ(switched.summary.e2e_ms.p99, sketch.summary.e2e_ms.p99);
}

TEST(PercentilesRunTest, SwitchesOnlyPastTheSize) {
  const RunResult exact = run(quickstart(), {"output.percentiles=\"exact\""});
  const uint64_t n = exact.summary.requests_completed;
  const RunResult at = run(quickstart(), {"output.exact_percentiles_max=" + std::to_string(n)});
  const RunResult past = run(quickstart(), {"output.exact_percentiles_max=" + std::to_string(n - 1)});
  EXPECT_EQ(at.summary.percentiles, "exact");
  EXPECT_EQ(at.summary.ttft_ms.p90, exact.summary.ttft_ms.p90);
  EXPECT_EQ(past.summary.percentiles, "sketch");
  // Exact is exact whatever the size.
  const RunResult forced = run(quickstart(), {"output.percentiles=\"exact\"", "output.exact_percentiles_max=1"});
  EXPECT_EQ(forced.summary.percentiles, "exact");
  EXPECT_EQ(forced.summary.ttft_ms.p90, exact.summary.ttft_ms.p90);
}

TEST(PercentilesRunTest, PerClassFiguresAreSketchedToo) {
  const RunResult exact = run(two_tenants(), {"output.percentiles=\"exact\""});
  const RunResult sketch = run(two_tenants(), {"output.exact_percentiles_max=100"});
  EXPECT_EQ(sketch.summary.percentiles, "sketch");
  ASSERT_EQ(exact.summary.classes.size(), 2u);
  ASSERT_EQ(sketch.summary.classes.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    expect_within(sketch.summary.classes[i].ttft_ms, exact.summary.classes[i].ttft_ms, "class ttft");
    expect_within(sketch.summary.classes[i].e2e_ms, exact.summary.classes[i].e2e_ms, "class e2e");
  }
}

TEST(PercentilesRunTest, Deterministic) {
  const RunResult a = run(quickstart(), {"output.exact_percentiles_max=300"});
  const RunResult b = run(quickstart(), {"output.exact_percentiles_max=300"});
  EXPECT_EQ(a.summary.ttft_ms.p99, b.summary.ttft_ms.p99);
  EXPECT_EQ(a.summary.tpot_ms.p50, b.summary.tpot_ms.p50);
  EXPECT_EQ(a.summary.e2e_ms.p90, b.summary.e2e_ms.p90);
  EXPECT_EQ(a.summary.e2e_ms.mean, b.summary.e2e_ms.mean);
  EXPECT_EQ(a.summary.steady.e2e_ms_mean_ci95, b.summary.steady.e2e_ms_mean_ci95);
}

TEST(PercentilesRunTest, TheSummaryNamesTheMode) {
  const auto text_exact = cli({"run", quickstart(), "--no-db", "--set", "workload.max_requests=200"});
  ASSERT_EQ(text_exact.code, 0) << text_exact.err;
  EXPECT_NE(text_exact.out.find("percentiles  exact"), std::string::npos) << text_exact.out;
  const auto text = cli({"run", quickstart(), "--no-db", "--set", "workload.max_requests=200", "--set",
                         "output.exact_percentiles_max=50"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("percentiles  sketch: each TTFT, TPOT and E2E percentile within 0.20% of the exact one"),
            std::string::npos)
      << text.out;
  const auto json = cli({"run", quickstart(), "--no-db", "--json", "--set", "workload.max_requests=200", "--set",
                         "output.percentiles=\"sketch\""});
  ASSERT_EQ(json.code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["percentiles"], "sketch");
  EXPECT_EQ(j["percentile_relative_error"], 1.0 / 512);
}

TEST(PercentilesRunTest, BadModeIsAnErrorNamingTheField) {
  try {
    run(quickstart(), {"output.percentiles=\"fast\""});
    FAIL() << "no error";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("output.percentiles"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run(quickstart(), {"output.exact_percentiles_max=0"}), core::Error);
}

}  // namespace
}  // namespace servesim::experiments
