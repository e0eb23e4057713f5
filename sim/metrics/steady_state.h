#pragma once
// Steady state: which part of a run the metrics describe, and how sure they are.
//
// - The measurement window. A run starts empty and ends with a drain; neither is the steady state a
//   capacity question is about. The window is a range of arrivals [warm-up end, cool-down start]:
//   by time, by request count, or with the warm-up found automatically (MSER-5 on the number of
//   requests in the system). By default it is the arrival window [0, last arrival], the window the
//   summary's *_window figures have always used: latency percentiles and SLO attainment over the
//   requests that arrive in it, throughput, goodput and cost over the time it spans.
// - Batch means. Consecutive observations of one run are correlated, so a confidence interval from
//   their spread is too narrow; the means of k long consecutive batches are nearly independent, and
//   a Student-t interval over them is the classical within-run interval (Law, "Simulation Modeling
//   and Analysis", ch. 9).
// - Stationarity. A run whose queue still grows at the end of the window has not reached a steady
//   state: its figures depend on its length, and the rate is not sustainable. The test fits a line
//   to the requests in the system after the warm-up, with a standard error that allows for the
//   series' autocorrelation (linear_trend).
//
// LoadSeries keeps the series these need in constant memory, binned in time (bins double in width
// as the run grows), so runs that do not configure a window pay a few additions per signal.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sim/metrics/stats.h"

namespace servesim::metrics {

// ---- Statistics --------------------------------------------------------------------------------

// Quantile p of Student's t distribution with `dof` degrees of freedom (dof >= 1).
double student_t_quantile(double p, double dof);
// Quantile p of the standard normal distribution.
double normal_quantile(double p);

// A symmetric interval around an estimate.
struct Interval {
  double mean = 0;
  double half_width = std::numeric_limits<double>::quiet_NaN();  // NaN: fewer than two observations
  int64_t n = 0;
  double lo() const { return mean - half_width; }
  double hi() const { return mean + half_width; }
  bool known() const { return half_width == half_width; }
  bool contains(double v) const { return known() && v >= lo() && v <= hi(); }
};

// The Student-t interval of the mean of independent observations (replications, batch means):
// mean +- t_{n-1, (1+confidence)/2} x sd / sqrt(n).
Interval t_interval(std::span<const double> values, double confidence = 0.95);

// Batch means of a sequence: `batches` consecutive batches of equal size (the first n mod batches
// observations are left out: they are the nearest the warm-up). Empty when n < batches.
std::vector<double> batch_means(std::span<const double> sequence, size_t batches);

// MSER (White 1997) on `series`: the truncation d in [0, n/2] that minimises
// sum_{j >= d} (y_j - mean_d)^2 / (n - d)^2. MSER-5 applies it to batch means of 5 observations.
struct Truncation {
  size_t d = 0;           // observations to drop
  bool at_limit = false;  // d reached n/2: no steady state found in the series (it still drifts)
};
Truncation mser(std::span<const double> series);

// Least-squares line through (i, y_i), i = 0..n-1: slope per step and its t statistic. The
// slope's standard error allows for correlated residuals: the naive one (independent residuals)
// times sqrt(tau), tau the residuals' integrated autocorrelation time (1 + 2 sum of their
// autocorrelations, summed over Sokal's automatic window: the first M with M >= 5 tau(M); at
// least 1), and the t statistic has n / tau - 2 degrees of freedom. A queue's length is strongly
// correlated over time, and a test that took its samples as independent would call every slow
// swing of a stable queue a trend.
struct Trend {
  double slope = 0;
  double se = 0;          // its standard error
  double t = 0;           // slope / se (+-inf when the points lie on a line)
  double mean = 0;
  double tau = 1;         // integrated autocorrelation time of the residuals, in steps
  double dof = 0;         // degrees of freedom of t
};
Trend linear_trend(std::span<const double> y);
// Integrated autocorrelation time of a series (mean removed), with Sokal's window; at least 1.
double autocorrelation_time(std::span<const double> x);

// ---- The measurement window ----------------------------------------------------------------------

// [measurement] of a run configuration. Unset = the default window, [0, last arrival].
struct MeasurementConfig {
  std::optional<double> warmup_s;            // requests arriving before this time are left out
  std::optional<int64_t> warmup_requests;    // the first N arrivals are left out
  std::optional<double> cooldown_s;          // requests arriving in the last T s before the last arrival
  std::optional<int64_t> cooldown_requests;  // the last N arrivals
  bool auto_warmup = false;                  // warm-up end found by MSER-5 on the requests in the system
  int64_t batches = 20;                      // batch means for the intervals
  // Anything but the default window (the collector then keeps one record per request).
  bool custom() const { return warmup_s || warmup_requests || cooldown_s || cooldown_requests || auto_warmup; }
};

// The growth that matters: the requests in the system rising by this fraction of the arrival rate
// (2%: a queue that takes in 2 of 100 arrivals without serving them; the default tolerance of a
// capacity search). A run whose growth is significant and above it is not stationary; a run whose
// growth's upper confidence bound is below it has settled; in between, it is too short to tell.
inline constexpr double kMinGrowthFraction = 0.02;
// A run has only settled when its window spans at least this many of its slowest requests (p99
// E2E): a batching engine's state changes on that time scale (the batch fills with the longest
// requests as the short ones leave), and a shorter window can look flat while the queue is about
// to grow.
inline constexpr double kSettleSpans = 10;
// One-sided significance of the trend test (and 1 - the confidence of its upper bound).
inline constexpr double kTrendSignificance = 0.01;
// Bins the trend test needs after the warm-up (fewer: too short to tell; stationary).
inline constexpr size_t kMinTrendBins = 16;

// What a run's summary says of its window and steady state (columns of `runs`).
struct SteadyState {
  double window_start_s = 0;       // the warm-up's end (0 without one)
  uint64_t window_requests = 0;    // requests arriving in the window (rejected ones included)
  LatencyStats ttft_ms, tpot_ms, e2e_ms;  // of the completed requests that arrived in the window
  double slo_attainment = 0;       // of the requests that arrived in the window
  // 95% half-widths by batch means (`batches` batches): the latency means and the attainment over
  // the window's requests in the order they left; goodput and output throughput over equal time
  // slices of the window. NaN when the window is too short for the batches.
  int64_t batches = 0;
  double ttft_ms_mean_ci95 = 0, tpot_ms_mean_ci95 = 0, e2e_ms_mean_ci95 = 0;
  double slo_attainment_ci95 = 0, goodput_req_s_ci95 = 0, throughput_output_tok_s_ci95 = 0;
  // Stationarity: MSER-5's truncation point of the requests-in-system series (whether or not the
  // window uses it), and, after max(warm-up end, MSER-5's point), the mean requests in the system,
  // waiting and in all, and the trend of the requests in the system. A batching engine below its
  // capacity takes a rising load into its running batch, which may fill for a long while (the
  // figures of a run that ends before it settles depend on its length); past it, the batch is full
  // and the waiting queue grows. Either is growth of the requests in the system.
  double mser_warmup_s = 0;
  bool mser_at_limit = false;
  double in_system_mean = 0;        // over the tested span
  double queued_mean = 0;           // waiting requests (not yet holding KV), over the tested span
  double in_system_trend_req_s = 0; // requests per second
  double in_system_trend_t = 0;     // its t statistic (autocorrelation-corrected, Trend)
  double in_system_trend_upper_req_s = 0;  // its one-sided 99% upper confidence bound
  double arrival_rate_req_s = 0;    // arrivals in the window per second of it
  bool settled = false;             // the upper bound is below kMinGrowthFraction x the arrival rate
                                    // and the window spans kSettleSpans x its p99 E2E
  bool stationary = true;           // false: the queue still grows: not sustainable at this rate
};

// Requests in the system (queued + running, every replica) over time, and the completions, in time
// bins that double in width when the run outgrows them: at most kMaxBins bins of at least
// kInitialWidthNs. It keeps the integral of the level over the whole run (the collector's mean
// requests in the system) and closes a bin only when time passes its end, so a change of level
// costs what integrating it costs. Signals must come in time order.
class LoadSeries {
 public:
  static constexpr int64_t kInitialWidthNs = 10'000'000;  // 10 ms
  static constexpr size_t kMaxBins = 512;

  struct Bin {
    double level_ns = 0;         // integral of the requests in the system over the bin
    double queued_ns = 0;        // integral of the waiting requests (not yet holding KV) over the bin
    double meeting = 0;          // completed within the SLO
    double output_tokens = 0;    // of the completed ones
  };

  LoadSeries() : bins_(kMaxBins) {}

  // The requests in the system change by `delta` and the waiting ones by `queued_delta` at time t.
  void add_level(int64_t t_ns, int64_t delta, int64_t queued_delta) {
    if (t_ns > bin_end_) close_until(t_ns);
    integral_ns_ += static_cast<long double>(level_) * (t_ns - since_);
    queued_ns_ += static_cast<long double>(queued_) * (t_ns - since_);
    level_ += delta;
    queued_ += queued_delta;
    since_ = t_ns;
  }
  // A request left at time t.
  void done(int64_t t_ns, bool meeting, int64_t output_tokens) {
    if (t_ns > bin_end_) close_until(t_ns);
    Bin& b = bins_[current_];
    if (meeting) b.meeting += 1;
    b.output_tokens += static_cast<double>(output_tokens);
  }
  // Ends the series at t: every bin up to t closed, the one holding t filled up to t.
  void finish(int64_t t_ns);

  int64_t level() const { return level_; }
  // The integral of the level over [0, t] (t at or after the last change).
  long double integral_ns(int64_t t_ns) const { return integral_ns_ + static_cast<long double>(level_) * (t_ns - since_); }
  long double queued_integral_ns(int64_t t_ns) const {
    return queued_ns_ + static_cast<long double>(queued_) * (t_ns - since_);
  }
  int64_t width_ns() const { return width_; }
  // Bins [0, end_ns / width) — the whole bins before end_ns.
  size_t whole_bins(int64_t end_ns) const;
  const Bin& bin(size_t i) const { return bins_[i]; }

 private:
  void close_until(int64_t t_ns);
  void merge();

  std::vector<Bin> bins_;
  int64_t width_ = kInitialWidthNs;
  size_t current_ = 0;
  int64_t bin_end_ = kInitialWidthNs;  // end of the current bin
  long double integral_ns_ = 0;        // of the level over [0, since_]
  long double closed_ns_ = 0;          // of the level over [0, the current bin's start]
  long double queued_ns_ = 0, queued_closed_ns_ = 0;  // the same for the waiting requests
  int64_t level_ = 0;
  int64_t queued_ = 0;
  int64_t since_ = 0;                  // the last change of level
};

// What the analysis needs of the window, found by the collector.
struct WindowBounds {
  int64_t start_ns = 0;   // warm-up end
  int64_t end_ns = 0;     // cool-down start (the last arrival in the window)
  double arrivals = 0;    // requests arriving in the window
};

// MSER-5 on the series' requests in the system over [0, end_ns): the warm-up end in ns.
Truncation mser5_warmup(const LoadSeries& series, int64_t end_ns, int64_t* warmup_ns);

// Fills the stationarity fields of `out` (trend over [test_start_ns, end_ns]) and the time-sliced
// half-widths (goodput, output throughput) over [window.start_ns, window.end_ns].
void analyse_series(const LoadSeries& series, const WindowBounds& window, int64_t test_start_ns, size_t batches,
                    SteadyState& out);

// The summary columns of SteadyState, in order (appended to flatten(RunSummary)).
struct NamedValue;
void append_named(const SteadyState& s, std::vector<NamedValue>& out);

}  // namespace servesim::metrics
