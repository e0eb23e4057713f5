// The steady-state statistics (sim/metrics/steady_state.h) against values computed by hand, and the
// collector's measurement window against a hand-built run.
#include "sim/metrics/steady_state.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/rng.h"
#include "sim/metrics/collector.h"

namespace servesim::metrics {
namespace {

core::Time sec(double s) { return core::Time::from_ns(static_cast<int64_t>(std::llround(s * 1e9))); }

TEST(SteadyStateStatsTest, QuantilesMatchTheTables) {
  // Student's t table (two-sided 95%: 0.975 quantile) and the normal distribution.
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.7062, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.975, 4), 2.7764, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.975, 9), 2.2622, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.975, 19), 2.0930, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.99, 18), 2.5524, 1e-4);
  EXPECT_NEAR(normal_quantile(0.975), 1.95996, 1e-5);
  EXPECT_NEAR(normal_quantile(0.95), 1.64485, 1e-5);
  EXPECT_THROW(student_t_quantile(1.0, 3), core::Error);
}

TEST(SteadyStateStatsTest, TIntervalOfFiveValues) {
  // 1..5: mean 3, sd sqrt(2.5), t_{4, 0.975} = 2.776445.
  const std::vector<double> v = {1, 2, 3, 4, 5};
  const Interval i = t_interval(v);
  EXPECT_EQ(i.n, 5);
  EXPECT_DOUBLE_EQ(i.mean, 3);
  EXPECT_NEAR(i.half_width, 2.776445 * std::sqrt(2.5) / std::sqrt(5.0), 1e-5);
  EXPECT_TRUE(i.contains(4.9));
  EXPECT_FALSE(i.contains(5.0));
  // One value: a mean without an interval.
  const std::vector<double> one = {7};
  EXPECT_FALSE(t_interval(one).known());
  EXPECT_DOUBLE_EQ(t_interval(one).mean, 7);
}

TEST(SteadyStateStatsTest, BatchMeansDropTheFirstRemainder) {
  const std::vector<double> v = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(batch_means(v, 3), (std::vector<double>{3, 6, 9}));  // 1 dropped, then {2,3,4} {5,6,7} {8,9,10}
  EXPECT_EQ(batch_means(v, 5), (std::vector<double>{1.5, 3.5, 5.5, 7.5, 9.5}));
  EXPECT_TRUE(batch_means(v, 11).empty());
}

TEST(SteadyStateStatsTest, MserCutsAKnownTransient) {
  // 20 observations at 10, then 80 alternating 1 and -1: the steady state starts at 20.
  std::vector<double> y(20, 10.0);
  for (int i = 0; i < 80; ++i) y.push_back(i % 2 ? 1.0 : -1.0);
  const Truncation t = mser(y);
  EXPECT_EQ(t.d, 20u);
  EXPECT_FALSE(t.at_limit);
  // A series that only climbs never settles: MSER goes to its limit, half the series.
  std::vector<double> ramp;
  for (int i = 0; i < 60; ++i) ramp.push_back(i);
  const Truncation r = mser(ramp);
  EXPECT_EQ(r.d, 30u);
  EXPECT_TRUE(r.at_limit);
  // A flat series needs no truncation.
  EXPECT_EQ(mser(std::vector<double>(40, 3.0)).d, 0u);
}

TEST(SteadyStateStatsTest, LinearTrendSlopeAndT) {
  // y = 2 i + 1 with residuals +0.5, -0.5, ... over 10 points (i = 0..9). The residuals' own
  // regression on i has slope sum((i - 4.5) r_i) / 82.5 = -2.5 / 82.5, so the fitted slope is
  // 2 - 1/33 and the t statistic follows from the residual sum of squares by hand.
  std::vector<double> y;
  for (int i = 0; i < 10; ++i) y.push_back(2.0 * i + 1 + (i % 2 ? -0.5 : 0.5));
  const Trend t = linear_trend(y);
  const double b = 2.0 - 1.0 / 33.0;
  EXPECT_NEAR(t.slope, b, 1e-12);
  EXPECT_NEAR(t.mean, 10.0, 1e-12);
  // Residuals of the fit: r_i - (b - 2)(i - 4.5) with r_i = +-0.5; rss = sum r_i^2 - 82.5 (b - 2)^2.
  const double rss = 10 * 0.25 - 82.5 * (b - 2) * (b - 2);
  EXPECT_NEAR(t.t, b / std::sqrt(rss / 8 / 82.5), 1e-9);
  // A flat line: no trend.
  EXPECT_DOUBLE_EQ(linear_trend(std::vector<double>(8, 4.0)).t, 0);
}

TEST(SteadyStateStatsTest, AutocorrelationTimeOfIndependentAndBlockedValues) {
  // Independent draws: tau = 1. Each draw repeated k = 10 times: rho_j = 1 - j / k for j < k, so
  // tau = 1 + 2 sum (1 - j / k) = k. Sokal's window on 20,000 values estimates it within about 10%.
  core::Rng rng(3, "tau");
  std::vector<double> independent, blocked;
  for (int i = 0; i < 20000; ++i) independent.push_back(rng.normal());
  for (int b = 0; b < 2000; ++b) {
    const double v = rng.normal();
    for (int k = 0; k < 10; ++k) blocked.push_back(v);
  }
  EXPECT_NEAR(autocorrelation_time(independent), 1.0, 0.15);
  EXPECT_NEAR(autocorrelation_time(blocked), 10.0, 2.0);
  // The trend test's standard error grows by sqrt(tau): the same blocked values, no trend, give a
  // t with n / tau - 2 degrees of freedom.
  const Trend t = linear_trend(blocked);
  EXPECT_NEAR(t.tau, autocorrelation_time(blocked), 1.0);
  EXPECT_NEAR(t.dof, 20000 / t.tau - 2, 1e-6);
  EXPECT_LT(std::fabs(t.t), 3.0);
}

TEST(LoadSeriesTest, IntegratesLevelsAndMergesBins) {
  LoadSeries s;
  const int64_t ms = 1'000'000;
  s.add_level(0, 3, 2);
  s.add_level(25 * ms, -2, -2);  // 3 in the system (2 waiting) from 0 to 25 ms, then 1 (none waiting)
  s.done(27 * ms, true, 5);
  s.finish(30 * ms);
  EXPECT_EQ(s.width_ns(), 10 * ms);
  EXPECT_DOUBLE_EQ(s.bin(0).level_ns, 30.0 * ms);
  EXPECT_DOUBLE_EQ(s.bin(1).level_ns, 30.0 * ms);
  EXPECT_DOUBLE_EQ(s.bin(2).level_ns, 15.0 * ms + 5.0 * ms);
  EXPECT_DOUBLE_EQ(s.bin(1).queued_ns, 20.0 * ms);
  EXPECT_DOUBLE_EQ(s.bin(2).queued_ns, 10.0 * ms);
  EXPECT_DOUBLE_EQ(s.bin(2).meeting, 1);
  EXPECT_DOUBLE_EQ(s.bin(2).output_tokens, 5);
  // Past 512 bins of 10 ms the bins double: bin 0 now holds 0-20 ms, bin 1 20-40 ms.
  s.finish(5125 * ms);
  EXPECT_EQ(s.width_ns(), 20 * ms);
  EXPECT_DOUBLE_EQ(s.bin(0).level_ns, 60.0 * ms);
  EXPECT_DOUBLE_EQ(s.bin(1).level_ns, 3.0 * 5 * ms + 1.0 * 15 * ms);
  EXPECT_DOUBLE_EQ(s.bin(1).queued_ns, 2.0 * 5 * ms);
  EXPECT_DOUBLE_EQ(s.bin(1).meeting, 1);
  EXPECT_DOUBLE_EQ(s.bin(256).level_ns, 5.0 * ms);  // 5120-5140 ms: level 1 up to 5125 ms so far
  EXPECT_EQ(s.whole_bins(5125 * ms), 256u);
  // The whole integral: 3 x 25 ms + 1 x 5100 ms.
  EXPECT_EQ(s.level(), 1);
  EXPECT_DOUBLE_EQ(static_cast<double>(s.integral_ns(5125 * ms)), 5175.0 * ms);
  EXPECT_DOUBLE_EQ(static_cast<double>(s.queued_integral_ns(5125 * ms)), 50.0 * ms);
}

core::RequestRecord done(uint64_t id, double arrival, double first, double finish, int64_t out) {
  core::RequestRecord r;
  r.id = id;
  r.arrival = sec(arrival);
  r.first_token = r.client_first_token = sec(first);
  r.finish = r.client_finish = sec(finish);
  r.prompt_tokens = 10;
  r.output_tokens = out;
  return r;
}

// Five requests arrive at 0, 1, 2, 3, 4 s; the first and the last are the warm-up and the cool-down.
RunSummary five_requests(const MeasurementConfig& m) {
  CollectorConfig cfg;
  cfg.slo.ttft_ms = 1000;
  ReplicaHardware hw;
  hw.usd_per_hour = 3.6;  // $0.001 per second
  cfg.replicas = {hw};
  cfg.measurement = m;
  MetricsCollector c(cfg, {});
  c.on_arrival(0, sec(0));
  c.on_arrival(1, sec(1));
  c.on_request_done(done(0, 0, 0.5, 1.5, 11));   // TTFT 500: meets; leaves at 1.5 s
  c.on_arrival(2, sec(2));
  c.on_request_done(done(1, 1, 2.5, 2.5, 1));    // TTFT 1500: misses; leaves at 2.5 s
  c.on_arrival(3, sec(3));
  c.on_request_done(done(2, 2, 2.8, 3.8, 6));    // TTFT 800: meets; leaves at 3.8 s
  c.on_arrival(4, sec(4));
  c.on_request_done(done(3, 3, 3.9, 4.9, 5));    // TTFT 900: meets; leaves at 4.9 s
  c.on_request_done(done(4, 4, 6.0, 7.0, 3));    // TTFT 2000: misses
  return c.finish(sec(7), 10, 0);
}

TEST(MeasurementWindowTest, ByRequestCountsLeavesOutTheFirstAndLast) {
  MeasurementConfig m;
  m.warmup_requests = 1;
  m.cooldown_requests = 1;
  const RunSummary s = five_requests(m);
  const SteadyState& st = s.steady;
  // Requests 1, 2, 3 arrive in the window [1 s, 3 s]: TTFT 1500, 800, 900 ms; two meet the SLO.
  EXPECT_DOUBLE_EQ(st.window_start_s, 1.0);
  EXPECT_DOUBLE_EQ(s.arrival_window_s, 2.0);
  EXPECT_EQ(st.window_requests, 3u);
  EXPECT_EQ(st.ttft_ms.count, 3u);
  EXPECT_NEAR(st.ttft_ms.mean, (1500.0 + 800 + 900) / 3, 1e-9);
  EXPECT_NEAR(st.ttft_ms.p50, 900, 1e-9);
  EXPECT_DOUBLE_EQ(st.slo_attainment, 2.0 / 3.0);
  // TPOT: request 1 has one output token (none); 2: (1000 ms) / 5; 3: 1000 / 4.
  EXPECT_EQ(st.tpot_ms.count, 2u);
  EXPECT_NEAR(st.tpot_ms.mean, (200.0 + 250.0) / 2, 1e-9);
  // What left within [1 s, 3 s]: request 0 (1.5 s, 11 tokens, meets) and 1 (2.5 s, 1 token, misses).
  EXPECT_DOUBLE_EQ(s.throughput_req_s_window, 2.0 / 2.0);
  EXPECT_DOUBLE_EQ(s.goodput_req_s_window, 1.0 / 2.0);
  EXPECT_DOUBLE_EQ(s.throughput_output_tok_s_window, 12.0 / 2.0);
  EXPECT_DOUBLE_EQ(s.cost_usd_per_mtok_output_window, 0.002 / 12.0 * 1e6);
  // The whole-run figures are untouched.
  EXPECT_EQ(s.ttft_ms.count, 5u);
  EXPECT_DOUBLE_EQ(s.slo_attainment, 3.0 / 5.0);
}

TEST(MeasurementWindowTest, ByTimeAndTheDefaultWindow) {
  MeasurementConfig m;
  m.warmup_s = 1.5;   // requests 2, 3, 4 arrive after it
  m.cooldown_s = 1.0; // the window ends at 4 - 1 = 3 s: request 4 is out
  const RunSummary s = five_requests(m);
  EXPECT_DOUBLE_EQ(s.steady.window_start_s, 1.5);
  EXPECT_EQ(s.steady.window_requests, 2u);
  EXPECT_DOUBLE_EQ(s.steady.slo_attainment, 1.0);
  EXPECT_DOUBLE_EQ(s.arrival_window_s, 1.5);
  // Left in [1.5 s, 3 s]: requests 0 and 1.
  EXPECT_DOUBLE_EQ(s.throughput_req_s_window, 2.0 / 1.5);

  // The default window is the arrival window [0, 4 s]: every request, and what left by 4 s.
  const RunSummary d = five_requests(MeasurementConfig{});
  EXPECT_DOUBLE_EQ(d.steady.window_start_s, 0);
  EXPECT_EQ(d.steady.window_requests, 5u);
  EXPECT_DOUBLE_EQ(d.steady.slo_attainment, d.slo_attainment);
  EXPECT_DOUBLE_EQ(d.steady.ttft_ms.p90, d.ttft_ms.p90);
  EXPECT_DOUBLE_EQ(d.arrival_window_s, 4.0);
  EXPECT_DOUBLE_EQ(d.throughput_req_s_window, 3.0 / 4.0);
}

TEST(MeasurementWindowTest, AnEmptyWindowIsAnErrorNamingTheKey) {
  MeasurementConfig m;
  m.warmup_requests = 4;
  m.cooldown_requests = 2;
  try {
    five_requests(m);
    FAIL() << "expected an error";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("[measurement]: warmup_requests = 4 leaves no request"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace servesim::metrics
