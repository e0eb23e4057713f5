// Time-varying arrival rates (traces/rate_profile.cc, [workload.rate_profile]): counts of arrivals per
// interval against the integral of the rate (closed form for the sinusoid, by hand for tables), exact
// send times of time-changed traces computed by hand, determinism, and the combinations refused.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/test_paths.h"
#include "tests/traces/trace_test_util.h"

namespace servesim::traces {
namespace {

using servesim::testing::TempDir;
using namespace servesim::traces::testing;

constexpr double kPi = 3.14159265358979323846;
constexpr int64_t kMs = 1'000'000;
constexpr double kNsPerS = 1e9;

const char* kLengths = "[workload.prompt]\nkind = \"fixed\"\nvalue = 100\n[workload.output]\nkind = \"fixed\"\nvalue = 10\n";

std::vector<double> seconds(const std::vector<RequestSpec>& rows) {
  std::vector<double> out;
  for (const auto& r : rows) out.push_back(static_cast<double>(r.arrival.ns()) / kNsPerS);
  return out;
}

int64_t count_in(const std::vector<double>& t, double a, double b) {
  int64_t n = 0;
  for (double x : t) n += (x >= a && x < b) ? 1 : 0;
  return n;
}

// A Poisson count of mean mu lies within 6 standard deviations of it; for a correct sampler the chance
// of a miss is about 2e-9 per check (and the test is deterministic for its seed).
void expect_poisson_count(int64_t n, double mu, const std::string& what) {
  EXPECT_LE(std::fabs(static_cast<double>(n) - mu), 6 * std::sqrt(mu)) << what << ": " << n << " arrivals, expected " << mu;
}

// F(t) of the sinusoid, written out independently of the code under test:
// integral of 1 + A sin(2 pi (u - phase) / P) over [0, t].
double sinusoid_integral(double t, double a, double period, double phase) {
  return t + a * period / (2 * kPi) * (std::cos(2 * kPi * (0 - phase) / period) - std::cos(2 * kPi * (t - phase) / period));
}

// A mooncake trace whose rows arrive at `ms` (milliseconds).
std::string write_trace(const TempDir& dir, const std::vector<std::string>& ms) {
  std::string text;
  for (const auto& m : ms)
    text += "{\"timestamp\": " + m + ", \"input_length\": 100, \"output_length\": 10, \"hash_ids\": [1]}\n";
  const std::string path = dir.file("trace.jsonl");
  write_file(path, text);
  return path;
}

std::string write_table(const TempDir& dir, const std::string& rows, const std::string& name = "rates.csv") {
  const std::string path = dir.file(name);
  write_file(path, "time_s,factor\n" + rows);
  return path;
}

std::string trace_config(const std::string& trace, const std::string& profile, const std::string& extra = "") {
  return "[workload]\nkind = \"mooncake_jsonl\"\npath = " + q(trace) + "\n" + extra + "[workload.rate_profile]\n" +
         profile;
}

TEST(RateProfileTest, PoissonUnderASinusoidCountsTheIntegralOfTheRatePerInterval) {
  // rate(t) = 50 (1 + 0.8 sin(2 pi (t - 100) / 1000)) for 2,000 s: about 100,000 arrivals. Each 100 s
  // bin holds a Poisson count of mean 50 (F(b) - F(a)).
  const double rate = 50, a = 0.8, period = 1000, phase = 100;
  const std::string config = "[workload]\nkind = \"poisson\"\nrate = 50\nwindow_end_s = 2000\n" + std::string(kLengths) +
                             "[workload.rate_profile]\nkind = \"sinusoid\"\namplitude = 0.8\nperiod_s = 1000\n"
                             "phase_s = 100\n";
  const auto t = seconds(drain(*make_workload(config, 7)));
  // The window is 2,000 s of the unshaped process, two whole periods: F(2000) = 2000, so the shaped
  // arrivals end at 2,000 s too.
  ASSERT_FALSE(t.empty());
  EXPECT_LT(t.back(), 2000.0);
  double chi2 = 0;
  for (int k = 0; k < 20; ++k) {
    const double lo = 100.0 * k, hi = lo + 100;
    const double mu = rate * (sinusoid_integral(hi, a, period, phase) - sinusoid_integral(lo, a, period, phase));
    const int64_t n = count_in(t, lo, hi);
    expect_poisson_count(n, mu, "bin [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
    chi2 += (static_cast<double>(n) - mu) * (static_cast<double>(n) - mu) / mu;
  }
  // Chi-square with 20 degrees of freedom exceeds 60 with probability about 5e-6.
  EXPECT_LT(chi2, 60.0);
  // The peak bin (around phase + P/4 = 350 s) holds far more than the trough bin (around 850 s):
  // 50 x 100 x (1 +- 0.8 x ~0.98).
  EXPECT_GT(count_in(t, 300, 400), 4 * count_in(t, 800, 900));
  // Total: the integral over [0, 2000), 100,000.
  expect_poisson_count(static_cast<int64_t>(t.size()), rate * 2000, "total");
}

TEST(RateProfileTest, AStepTableSetsEachIntervalsCount) {
  TempDir dir;
  // Factor 1 on [0, 100), 3 on [100, 200), 0.5 on [200, 300), 0 after: at 20 req/s, Poisson counts of
  // mean 2,000, 6,000 and 1,000, and nothing after 300 s. The unshaped window is F(300) = 100 + 300 + 50.
  const std::string table = write_table(dir, "0,1\n100,3\n200,0.5\n300,0\n");
  const std::string config = "[workload]\nkind = \"poisson\"\nrate = 20\nwindow_end_s = 450\n" + std::string(kLengths) +
                             "[workload.rate_profile]\nkind = \"table\"\ninterpolation = \"step\"\npath = " + q(table) +
                             "\n";
  const auto t = seconds(drain(*make_workload(config, 3)));
  expect_poisson_count(count_in(t, 0, 100), 2000, "[0, 100)");
  expect_poisson_count(count_in(t, 100, 200), 6000, "[100, 200)");
  expect_poisson_count(count_in(t, 200, 300), 1000, "[200, 300)");
  EXPECT_EQ(count_in(t, 300, 1e9), 0);
  // Within an interval the rate is constant: the first and second halves of [100, 200) hold Poisson
  // counts of mean 3,000 each.
  expect_poisson_count(count_in(t, 100, 150), 3000, "[100, 150)");
  expect_poisson_count(count_in(t, 150, 200), 3000, "[150, 200)");
}

TEST(RateProfileTest, ALinearTableCountsItsTrapezoids) {
  TempDir dir;
  // Factor rising linearly 0 -> 2 over [0, 100), then 2 -> 0 over [100, 200), repeating every 200 s.
  // At 30 req/s: [0, 50) holds 30 x (50 x 1 / 2) = 750, [50, 100) 30 x 75 = 2,250, per cycle.
  const std::string table = write_table(dir, "0,0\n100,2\n200,0\n");
  const std::string config = "[workload]\nkind = \"poisson\"\nrate = 30\nwindow_end_s = 2000\n" + std::string(kLengths) +
                             "[workload.rate_profile]\nkind = \"table\"\nrepeat = true\npath = " + q(table) + "\n";
  const auto t = seconds(drain(*make_workload(config, 11)));
  int64_t first_quarter = 0, second_quarter = 0;
  for (int cycle = 0; cycle < 10; ++cycle) {
    const double c = 200.0 * cycle;
    first_quarter += count_in(t, c, c + 50);
    second_quarter += count_in(t, c + 50, c + 100);
    expect_poisson_count(count_in(t, c + 100, c + 150), 2250, "falling half, cycle " + std::to_string(cycle));
  }
  expect_poisson_count(first_quarter, 7500, "rising first quarters");
  expect_poisson_count(second_quarter, 22500, "rising second quarters");
  EXPECT_LT(t.back(), 2000.0);
}

TEST(RateProfileTest, ARepeatingStepTableSendsOnlyWhileItsFactorIsPositive) {
  TempDir dir;
  // 2 on [0, 10), 0 on [10, 20), repeating: every send falls in the first half of a 20 s cycle.
  const std::string table = write_table(dir, "0,2\n10,0\n20,0\n");
  const std::string config = "[workload]\nkind = \"gamma\"\nrate = 5\ncv = 3\nmax_requests = 5000\n" +
                             std::string(kLengths) + "[workload.rate_profile]\nkind = \"table\"\ninterpolation = "
                             "\"step\"\nrepeat = true\npath = " + q(table) + "\n";
  const auto t = seconds(drain(*make_workload(config)));
  ASSERT_EQ(t.size(), 5000u);
  for (double x : t) ASSERT_LT(std::fmod(x, 20.0), 10.0) << x;
  // 5,000 gamma gaps of mean 0.2 s and sd 0.6 s sum to 1,000 s of the unshaped process (sd 42 s);
  // a cycle of 20 s integrates to 20, so the last send is near 1,000 s: within 7 sd of it.
  EXPECT_GT(t.back(), 700.0);
  EXPECT_LT(t.back(), 1300.0);
}

TEST(RateProfileTest, AConstantFactorOfTwoHalvesEveryGapOfATrace) {
  TempDir dir;
  const std::string trace = write_trace(dir, {"0", "1000", "1500", "4000", "4002", "10000"});
  const std::string table = write_table(dir, "0,2\n");
  const auto rows = drain(*make_workload(trace_config(trace, "kind = \"table\"\npath = " + q(table) + "\n")));
  std::vector<int64_t> got;
  for (const auto& r : rows) got.push_back(r.arrival.ns());
  EXPECT_EQ(got, (std::vector<int64_t>{0, 500 * kMs, 750 * kMs, 2000 * kMs, 2001 * kMs, 5000 * kMs}));
  // With rate_scale 2 as well, the gaps are quartered (rate_scale first, then the profile).
  const auto both =
      drain(*make_workload(trace_config(trace, "kind = \"table\"\npath = " + q(table) + "\n", "rate_scale = 2\n")));
  got.clear();
  for (const auto& r : both) got.push_back(r.arrival.ns());
  EXPECT_EQ(got, (std::vector<int64_t>{0, 250 * kMs, 375 * kMs, 1000 * kMs, 1000500000, 2500 * kMs}));
}

TEST(RateProfileTest, ALinearTableTimeChangesATraceToHandComputedTimes) {
  TempDir dir;
  // Factor 1 -> 3 linearly over [0, 10 s), then 3: F(u) = u + u^2 / 10 on [0, 10] (F(10) = 20), then
  // 20 + 3 (t - 10). F(5) = 7.5, F(10) = 20, F(12) = 26: arrivals at 7.5, 20 and 26 s go to 5, 10, 12 s.
  const std::string trace = write_trace(dir, {"0", "7500", "20000", "26000"});
  const std::string table = write_table(dir, "0,1\n10,3\n");
  const auto rows = drain(*make_workload(trace_config(trace, "kind = \"table\"\npath = " + q(table) + "\n")));
  std::vector<int64_t> got;
  for (const auto& r : rows) got.push_back(r.arrival.ns());
  EXPECT_EQ(got, (std::vector<int64_t>{0, 5000 * kMs, 10000 * kMs, 12000 * kMs}));
}

TEST(RateProfileTest, ASinusoidTimeChangesATraceToHandComputedTimes) {
  TempDir dir;
  // A = 0.5, P = 100 s, phase 0: F(t) = t + (25 / pi) (1 - cos(2 pi t / 100)). F(25) = 25 + 25/pi,
  // F(50) = 50 + 50/pi, F(100) = 100, F(125) = 125 + 25/pi. The trace's times are those values in
  // milliseconds, rounded to the nanosecond when read; 1 / f <= 1 there, so the sends are within 1 ns.
  auto ms = [](double s) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6f", s * 1e3);
    return std::string(buf);
  };
  const std::string trace =
      write_trace(dir, {"0", ms(25 + 25 / kPi), ms(50 + 50 / kPi), ms(100), ms(125 + 25 / kPi)});
  const auto rows = drain(
      *make_workload(trace_config(trace, "kind = \"sinusoid\"\namplitude = 0.5\nperiod_s = 100\n")));
  const std::vector<double> want = {0, 25, 50, 100, 125};
  ASSERT_EQ(rows.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(static_cast<double>(rows[i].arrival.ns()), want[i] * kNsPerS, 2.0) << "row " << i;
}

TEST(RateProfileTest, AFlatSinusoidChangesNothing) {
  TempDir dir;
  const std::string trace = write_trace(dir, {"0", "1", "333.333333", "86400000", "90000000.5"});
  const auto plain = drain(*make_workload("[workload]\nkind = \"mooncake_jsonl\"\npath = " + q(trace) + "\n"));
  const auto flat = drain(*make_workload(trace_config(trace, "kind = \"sinusoid\"\namplitude = 0\n")));
  ASSERT_EQ(plain.size(), flat.size());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(plain[i].arrival.ns(), flat[i].arrival.ns()) << i;
}

TEST(RateProfileTest, ComposedArrivalsAreTimeChangedToo) {
  TempDir dir;
  // synthetic sent Poisson: with a constant factor 4 every send is the unshaped one divided by 4
  // (to the nanosecond of rounding).
  const std::string table = write_table(dir, "0,4\n");
  const std::string base = "[workload]\nkind = \"synthetic\"\n" + std::string(kLengths) +
                           "[workload.arrival]\nkind = \"poisson\"\nrate = 3\nrequests = 500\n";
  const auto plain = drain(*make_workload(base));
  const auto shaped = drain(*make_workload(base + "[workload.rate_profile]\nkind = \"table\"\npath = " + q(table) + "\n"));
  ASSERT_EQ(plain.size(), 500u);
  ASSERT_EQ(shaped.size(), 500u);
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_NEAR(static_cast<double>(shaped[i].arrival.ns()), static_cast<double>(plain[i].arrival.ns()) / 4, 1.0) << i;
  // And under a sinusoid, a composed Poisson count per bin is the integral of its rate: 20 req/s with
  // amplitude 0.9 over a 600 s period, two periods.
  const std::string day = "[workload]\nkind = \"synthetic\"\n" + std::string(kLengths) +
                          "[workload.arrival]\nkind = \"poisson\"\nrate = 20\nduration_s = 1200\n"
                          "[workload.rate_profile]\nkind = \"sinusoid\"\namplitude = 0.9\nperiod_s = 600\n";
  const auto t = seconds(drain(*make_workload(day, 5)));
  for (int k = 0; k < 12; ++k) {
    const double lo = 100.0 * k, hi = lo + 100;
    expect_poisson_count(count_in(t, lo, hi),
                         20 * (sinusoid_integral(hi, 0.9, 600, 0) - sinusoid_integral(lo, 0.9, 600, 0)),
                         "bin " + std::to_string(k));
  }
}

TEST(RateProfileTest, TheSameSeedGivesTheSameArrivals) {
  const std::string config = "[workload]\nkind = \"poisson\"\nrate = 5\nmax_requests = 2000\n" + std::string(kLengths) +
                             "[workload.rate_profile]\nkind = \"sinusoid\"\namplitude = 1\nperiod_s = 300\nphase_s = "
                             "-20\n";
  const auto a = drain(*make_workload(config, 9));
  const auto b = drain(*make_workload(config, 9));
  const auto c = drain(*make_workload(config, 10));
  ASSERT_EQ(a.size(), b.size());
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].arrival.ns(), b[i].arrival.ns());
    differs = differs || a[i].arrival.ns() != c[i].arrival.ns();
    if (i > 0) {
      EXPECT_GE(a[i].arrival.ns(), a[i - 1].arrival.ns());
    }
  }
  EXPECT_TRUE(differs);
}

TEST(RateProfileTest, ClosedLoopsAreRefused) {
  const std::string closed = "[workload]\nkind = \"synthetic\"\n" + std::string(kLengths) +
                             "[workload.arrival]\nkind = \"closed_loop\"\nconcurrency = 2\nrequests = 10\n"
                             "[workload.rate_profile]\nkind = \"sinusoid\"\namplitude = 0.5\n";
  const std::string m = config_error([&] { make_workload(closed); });
  EXPECT_NE(m.find("workload.rate_profile"), std::string::npos) << m;
  EXPECT_NE(m.find("closed_loop"), std::string::npos) << m;
  const std::string drained = "[workload]\nkind = \"synthetic\"\n" + std::string(kLengths) +
                              "[workload.arrival]\nkind = \"stages\"\n[[workload.arrival.stages]]\nrate = 5\n"
                              "duration_s = 2\n[workload.rate_profile]\nkind = \"sinusoid\"\namplitude = 0.5\n";
  EXPECT_NE(config_error([&] { make_workload(drained); }).find("stages with drain"), std::string::npos);
}

TEST(RateProfileTest, ATableThatEndsAtZeroStopsClearlyWhenTheWorkloadOutlastsIt) {
  TempDir dir;
  // 10 req/s for 10 s, then factor 0: about 100 arrivals fit; the 1,000th never comes.
  const std::string table = write_table(dir, "0,1\n10,0\n");
  const std::string config = "[workload]\nkind = \"poisson\"\nrate = 10\nmax_requests = 1000\n" + std::string(kLengths) +
                             "[workload.rate_profile]\nkind = \"table\"\ninterpolation = \"step\"\npath = " + q(table) +
                             "\n";
  try {
    drain(*make_workload(config));
    ADD_FAILURE() << "expected an error";
  } catch (const core::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("never sent"), std::string::npos) << m;
    EXPECT_NE(m.find("rates.csv"), std::string::npos) << m;
  }
}

TEST(RateProfileTest, BadTablesNameTheirFileLineAndField) {
  TempDir dir;
  auto load = [&](const std::string& text) {
    const std::string path = dir.file("t.csv");
    write_file(path, text);
    return catch_input_error([&] {
      make_workload("[workload]\nkind = \"poisson\"\nrate = 1\nmax_requests = 5\n" + std::string(kLengths) +
                    "[workload.rate_profile]\nkind = \"table\"\npath = " + q(path) + "\n");
    });
  };
  const std::string f = dir.file("t.csv");
  expect_input_error(load("time,rate\n0,1\n"), f, 1, "", "time_s,factor");
  expect_input_error(load("time_s,factor\n0,1\n5,x\n"), f, 3, "factor", "'x'");
  expect_input_error(load("time_s,factor\n0,1\n5,nan\n"), f, 3, "factor", "finite");
  expect_input_error(load("time_s,factor\n0,1\n5,-1\n"), f, 3, "factor", ">= 0");
  expect_input_error(load("time_s,factor\n0,1\n5,2\n5,3\n"), f, 4, "time_s", "must increase");
  expect_input_error(load("time_s,factor\n0,1\n5,2\n4,3\n"), f, 4, "time_s", "must increase");
  expect_input_error(load("time_s,factor\n2,1\n"), f, 2, "time_s", "time_s = 0");
  expect_input_error(load("time_s,factor\n0\n"), f, 2, "", "2 fields");
  expect_input_error(load("time_s,factor\n0,1,2\n"), f, 2, "", "2 fields");
  expect_input_error(load("time_s,factor\n0,0\n9,0\n"), f, 3, "factor", "every factor is 0");
  expect_input_error(load("time_s,factor\n"), f, 1, "", "no rows");
  expect_input_error(load("time_s,factor\n0,1e7\n"), f, 2, "factor", "at most");
  // Comments and blank lines are skipped; the line numbers stay the file's.
  expect_input_error(load("# a day\ntime_s,factor\n\n0,1\n# noon\n5,x\n"), f, 6, "factor", "'x'");
}

}  // namespace
}  // namespace servesim::traces
