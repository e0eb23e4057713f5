// The measurement window, batch means and the stationarity check on simulated queues whose answers
// are known: an M/D/1 queue (one replica serving one request at a time, equal prompts, one output
// token: every service takes the same time S), a backlog that drains at a known time, and a queue
// fed faster than it is served.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "experiments/run.h"
#include "sim/core/config.h"
#include "sim/metrics/steady_state.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

using servesim::testing::TempDir;

// One replica, one request at a time (max_num_seqs = 1), 512-token prompts and one output token:
// each request is one prefill iteration of S; no engine, so TTFT = queueing delay + S exactly.
const char* kSingleServer = R"(
seed = 1
[workload]
kind = "poisson"
rate = 1.0
max_requests = 2000
[workload.prompt]
kind = "fixed"
value = 512
[workload.output]
kind = "fixed"
value = 1
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
[engine]
kind = "none"
[cluster]
replicas = 1
[scheduler]
kind = "continuous"
max_num_seqs = 1
[slo]
ttft_ms = 1000
[output]
sample_interval_ms = 0
)";

core::Params single_server(const std::vector<std::string>& sets) {
  return core::parse_config(kSingleServer, "single.toml", run_schema(), sets, ".");
}

// S in seconds: the TTFT of requests that never wait (far apart).
double service_s() {
  const RunResult r = run_simulation(single_server({"workload.max_requests=3", "workload.rate=0.01"}), RunOutputs{});
  EXPECT_DOUBLE_EQ(r.summary.ttft_ms.p50, r.summary.ttft_ms.p99);
  return r.summary.ttft_ms.mean / 1000.0;
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Pollaczek-Khinchine for deterministic service: the mean wait in an M/D/1 queue at load rho is
// rho S / (2 (1 - rho)). The batch-means interval of the mean TTFT over the steady-state window
// must cover S + that wait about 95% of the time; over 40 independent runs we require 32 (the
// binomial's 1.3% tail at the 91% measured on 100 runs: batch means under-cover slightly).
TEST(SteadyStateRunTest, MD1QueueingDelayAndItsIntervalCoverTheFormula) {
  const double s = service_s();
  ASSERT_GT(s, 0.001);
  const double rho = 0.5;
  const double expected_ms = 1000 * (s + rho * s / (2 * (1 - rho)));
  int covered = 0;
  double sum_ms = 0;
  const int runs = 40;
  for (int seed = 1; seed <= runs; ++seed) {
    const RunResult r = run_simulation(single_server({"seed=" + std::to_string(seed), "workload.rate=" + num(rho / s),
                                                      "measurement.auto_warmup=true"}),
                                       RunOutputs{});
    const metrics::SteadyState& st = r.summary.steady;
    EXPECT_TRUE(st.stationary) << "seed " << seed;
    ASSERT_EQ(st.batches, 20);
    ASSERT_FALSE(std::isnan(st.ttft_ms_mean_ci95));
    if (std::fabs(st.ttft_ms.mean - expected_ms) <= st.ttft_ms_mean_ci95) ++covered;
    sum_ms += st.ttft_ms.mean;
  }
  EXPECT_GE(covered, 32) << "of " << runs << " intervals covered " << expected_ms << " ms";
  // The pooled mean of 80,000 requests is within 2% of the formula.
  EXPECT_NEAR(sum_ms / runs / expected_ms, 1.0, 0.02);
}

// A backlog of K requests at time 0, then arrivals every 2 S (load 0.5): the backlog drains at
// 1/S - 1/(2S) = 1/(2S) per second, so the transient ends at 2 K S; after it the queue alternates
// between 0 and 1. MSER-5 on the requests in the system must put the warm-up's end there.
TEST(SteadyStateRunTest, MserFindsTheEndOfAKnownTransient) {
  const double s = service_s();
  const int backlog = 200, steady = 1200;
  TempDir dir;
  const std::string trace = dir.file("burst.csv");
  {
    std::ofstream out(trace);
    out << "TIMESTAMP,ContextTokens,GeneratedTokens\n";
    auto stamp = [](double seconds) {
      const int64_t us = std::llround(seconds * 1e6);
      char buf[64];
      std::snprintf(buf, sizeof buf, "2023-11-16 18:%02lld:%02lld.%06lld", static_cast<long long>(us / 60'000'000),
                    static_cast<long long>(us / 1'000'000 % 60), static_cast<long long>(us % 1'000'000));
      return std::string(buf);
    };
    for (int i = 0; i < backlog; ++i) out << stamp(0) << ",512,1\n";
    for (int i = 1; i <= steady; ++i) out << stamp(i * 2 * s) << ",512,1\n";
  }
  const double transient_s = 2 * backlog * s;
  const RunResult r = run_simulation(
      single_server({"workload={ kind = \"azure_csv\", path = \"" + trace + "\" }", "measurement.auto_warmup=true"}),
      RunOutputs{});
  const metrics::SteadyState& st = r.summary.steady;
  ASSERT_EQ(r.summary.requests_total, static_cast<uint64_t>(backlog + steady));
  // Within one MSER batch (5 bins of the series: the run's length / 512 x 5) of the known end.
  const double batch_s = 5 * r.summary.sim_seconds / metrics::LoadSeries::kMaxBins * 2;
  EXPECT_NEAR(st.window_start_s, transient_s, batch_s) << "transient ends at " << transient_s << " s";
  EXPECT_DOUBLE_EQ(st.mser_warmup_s, st.window_start_s);
  EXPECT_FALSE(st.mser_at_limit);
  EXPECT_TRUE(st.stationary);
  // After the warm-up no request waits: every TTFT is S, and all meet the SLO.
  EXPECT_NEAR(st.ttft_ms.p99, 1000 * s, 1e-6);
  EXPECT_DOUBLE_EQ(st.slo_attainment, 1.0);
  EXPECT_LT(r.summary.slo_attainment, 1.0);  // the backlog's requests waited up to 200 S
}

// Fed at 1.2 / S the queue grows by 0.2 / S per second: not stationary, with a trend near that.
// At 0.8 / S (Poisson) it is stationary.
TEST(SteadyStateRunTest, AGrowingQueueIsNotStationary) {
  const double s = service_s();
  const RunResult over = run_simulation(single_server({"workload.rate=" + num(1.2 / s)}), RunOutputs{});
  const metrics::SteadyState& o = over.summary.steady;
  EXPECT_FALSE(o.stationary);
  EXPECT_NEAR(o.in_system_trend_req_s, 0.2 / s, 0.15 * 0.2 / s);
  EXPECT_GT(o.in_system_trend_t, 5);
  EXPECT_TRUE(o.mser_at_limit);  // no steady state in the series
  const RunResult under = run_simulation(single_server({"workload.rate=" + num(0.8 / s)}), RunOutputs{});
  EXPECT_TRUE(under.summary.steady.stationary);
  EXPECT_FALSE(under.summary.steady.mser_at_limit);
}

}  // namespace
}  // namespace servesim::experiments
