#include "sim/metrics/steady_state.h"

#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>

#include <algorithm>
#include <cmath>

#include "sim/core/error.h"
#include "sim/metrics/summary.h"

namespace servesim::metrics {

double student_t_quantile(double p, double dof) {
  if (!(dof >= 1) || !(p > 0 && p < 1)) throw core::Error("internal: Student-t quantile of p outside (0, 1) or dof < 1");
  return boost::math::quantile(boost::math::students_t_distribution<double>(dof), p);
}

double normal_quantile(double p) {
  if (!(p > 0 && p < 1)) throw core::Error("internal: normal quantile of p outside (0, 1)");
  return boost::math::quantile(boost::math::normal_distribution<double>(), p);
}

Interval t_interval(std::span<const double> values, double confidence) {
  Interval out;
  out.n = static_cast<int64_t>(values.size());
  if (values.empty()) return out;
  long double sum = 0;
  for (double v : values) sum += v;
  const double mean = static_cast<double>(sum / static_cast<long double>(values.size()));
  out.mean = mean;
  if (values.size() < 2) return out;
  long double ss = 0;
  for (double v : values) ss += static_cast<long double>(v - mean) * (v - mean);
  const double n = static_cast<double>(values.size());
  const double sd = std::sqrt(static_cast<double>(ss / (n - 1)));
  out.half_width = student_t_quantile(0.5 + confidence / 2, n - 1) * sd / std::sqrt(n);
  return out;
}

std::vector<double> batch_means(std::span<const double> sequence, size_t batches) {
  std::vector<double> out;
  if (batches == 0 || sequence.size() < batches) return out;
  const size_t size = sequence.size() / batches;
  const size_t skip = sequence.size() - size * batches;
  out.reserve(batches);
  for (size_t b = 0; b < batches; ++b) {
    long double sum = 0;
    for (size_t i = 0; i < size; ++i) sum += sequence[skip + b * size + i];
    out.push_back(static_cast<double>(sum / static_cast<long double>(size)));
  }
  return out;
}

Truncation mser(std::span<const double> y) {
  Truncation out;
  const size_t n = y.size();
  if (n < 2) return out;
  // Suffix sums, so every candidate costs O(1).
  std::vector<long double> s1(n + 1, 0), s2(n + 1, 0);
  for (size_t i = n; i-- > 0;) {
    s1[i] = s1[i + 1] + y[i];
    s2[i] = s2[i + 1] + static_cast<long double>(y[i]) * y[i];
  }
  long double best = 0;
  for (size_t d = 0; d <= n / 2; ++d) {
    const long double m = static_cast<long double>(n - d);
    const long double ss = std::max<long double>(0, s2[d] - s1[d] * s1[d] / m);
    const long double v = ss / (m * m);
    if (d == 0 || v < best) {
      best = v;
      out.d = d;
    }
  }
  out.at_limit = out.d == n / 2 && n >= 4;
  return out;
}

double autocorrelation_time(std::span<const double> x) {
  const size_t n = x.size();
  if (n < 4) return 1;
  long double mean = 0;
  for (double v : x) mean += v;
  mean /= static_cast<long double>(n);
  auto cov = [&](size_t k) {
    long double c = 0;
    for (size_t i = 0; i + k < n; ++i) c += (x[i] - mean) * (x[i + k] - mean);
    return c / static_cast<long double>(n);
  };
  const long double c0 = cov(0);
  if (!(c0 > 0)) return 1;
  long double tau = 1;
  for (size_t m = 1; m < n / 2; ++m) {
    tau += 2 * cov(m) / c0;
    if (static_cast<long double>(m) >= 5 * tau) break;
  }
  return std::max(1.0, static_cast<double>(tau));
}

Trend linear_trend(std::span<const double> y) {
  Trend out;
  const size_t n = y.size();
  if (n == 0) return out;
  long double sy = 0;
  for (double v : y) sy += v;
  const long double ybar = sy / static_cast<long double>(n);
  out.mean = static_cast<double>(ybar);
  if (n < 3) return out;
  const long double xbar = static_cast<long double>(n - 1) / 2;
  long double sxx = 0, sxy = 0;
  for (size_t i = 0; i < n; ++i) {
    const long double dx = static_cast<long double>(i) - xbar;
    sxx += dx * dx;
    sxy += dx * (y[i] - ybar);
  }
  const long double b = sxy / sxx;
  std::vector<double> residuals(n);
  long double rss = 0;
  for (size_t i = 0; i < n; ++i) {
    const long double r = y[i] - (ybar + b * (static_cast<long double>(i) - xbar));
    residuals[i] = static_cast<double>(r);
    rss += r * r;
  }
  out.slope = static_cast<double>(b);
  out.tau = autocorrelation_time(residuals);
  out.dof = std::max(1.0, static_cast<double>(n) / out.tau - 2);
  const long double se = std::sqrt(rss / static_cast<long double>(n - 2) / sxx * out.tau);
  out.se = static_cast<double>(se);
  // A residual sum that is rounding noise against the data's scale: the points lie on the line.
  const long double scale = std::max<long double>(std::fabs(ybar), std::fabs(b) * static_cast<long double>(n));
  if (se <= 1e-12L * scale || se == 0)
    out.t = b > 0 ? std::numeric_limits<double>::infinity() : (b < 0 ? -std::numeric_limits<double>::infinity() : 0);
  else
    out.t = static_cast<double>(b / se);
  return out;
}

// ---- LoadSeries ------------------------------------------------------------------------------------

void LoadSeries::merge() {
  for (size_t i = 0; i < kMaxBins / 2; ++i) {
    Bin a = bins_[2 * i];
    const Bin& b = bins_[2 * i + 1];
    a.level_ns += b.level_ns;
    a.queued_ns += b.queued_ns;
    a.meeting += b.meeting;
    a.output_tokens += b.output_tokens;
    bins_[i] = a;
  }
  for (size_t i = kMaxBins / 2; i < kMaxBins; ++i) bins_[i] = Bin{};
  width_ *= 2;
}

void LoadSeries::close_until(int64_t t_ns) {
  while (t_ns > bin_end_) {
    const long double at_end = integral_ns(bin_end_), queued_at_end = queued_integral_ns(bin_end_);
    bins_[current_].level_ns += static_cast<double>(at_end - closed_ns_);
    bins_[current_].queued_ns += static_cast<double>(queued_at_end - queued_closed_ns_);
    closed_ns_ = at_end;
    queued_closed_ns_ = queued_at_end;
    size_t next = current_ + 1;
    if (next == kMaxBins) {
      merge();
      next = kMaxBins / 2;
    }
    current_ = next;
    bin_end_ = static_cast<int64_t>(current_ + 1) * width_;
  }
}

void LoadSeries::finish(int64_t t_ns) {
  close_until(t_ns);
  const long double at = integral_ns(t_ns), queued_at = queued_integral_ns(t_ns);
  bins_[current_].level_ns += static_cast<double>(at - closed_ns_);
  bins_[current_].queued_ns += static_cast<double>(queued_at - queued_closed_ns_);
  closed_ns_ = at;
  queued_closed_ns_ = queued_at;
}

size_t LoadSeries::whole_bins(int64_t end_ns) const {
  return std::min(kMaxBins, static_cast<size_t>(std::max<int64_t>(0, end_ns) / width_));
}

Truncation mser5_warmup(const LoadSeries& series, int64_t end_ns, int64_t* warmup_ns) {
  constexpr size_t kBatch = 5;
  const size_t bins = series.whole_bins(end_ns);
  std::vector<double> z;
  for (size_t i = 0; i + kBatch <= bins; i += kBatch) {
    double level = 0;
    for (size_t k = 0; k < kBatch; ++k) level += series.bin(i + k).level_ns;
    z.push_back(level / static_cast<double>(kBatch * series.width_ns()));
  }
  const Truncation t = mser(z);
  *warmup_ns = static_cast<int64_t>(t.d * kBatch) * series.width_ns();
  return t;
}

namespace {

// Bins wholly inside [start_ns, end_ns]: [first, last).
std::pair<size_t, size_t> bins_within(const LoadSeries& series, int64_t start_ns, int64_t end_ns) {
  const int64_t w = series.width_ns();
  const size_t first = static_cast<size_t>((std::max<int64_t>(0, start_ns) + w - 1) / w);
  const size_t last = series.whole_bins(end_ns);
  return {first, std::max(first, last)};
}

double half_width(const std::vector<double>& means) {
  if (means.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  return t_interval(means).half_width;
}

}  // namespace

void analyse_series(const LoadSeries& series, const WindowBounds& window, int64_t test_start_ns, size_t batches,
                    SteadyState& out) {
  const double w_s = static_cast<double>(series.width_ns()) * 1e-9;
  const double nan = std::numeric_limits<double>::quiet_NaN();

  // Time-sliced batch means over the window.
  {
    const auto [first, last] = bins_within(series, window.start_ns, window.end_ns);
    const size_t n = last - first;
    out.goodput_req_s_ci95 = out.throughput_output_tok_s_ci95 = nan;
    if (batches >= 2 && n >= batches) {
      const size_t size = n / batches, skip = n - size * batches;
      std::vector<double> goodput, tokens;
      for (size_t b = 0; b < batches; ++b) {
        double meeting = 0, tok = 0;
        for (size_t i = 0; i < size; ++i) {
          const LoadSeries::Bin& bin = series.bin(first + skip + b * size + i);
          meeting += bin.meeting;
          tok += bin.output_tokens;
        }
        const double span = w_s * static_cast<double>(size);
        goodput.push_back(meeting / span);
        tokens.push_back(tok / span);
      }
      out.goodput_req_s_ci95 = half_width(goodput);
      out.throughput_output_tok_s_ci95 = half_width(tokens);
    }
  }

  // After the warm-up, bin by bin: the requests in the system and their trend, and the waiting ones.
  const auto [first, last] = bins_within(series, test_start_ns, window.end_ns);
  const size_t n = last - first;
  out.stationary = true;
  out.settled = false;
  out.in_system_mean = out.queued_mean = out.in_system_trend_req_s = out.in_system_trend_t = 0;
  out.in_system_trend_upper_req_s = 0;
  const double span_s = static_cast<double>(window.end_ns - window.start_ns) * 1e-9;
  const double arrival_rate = span_s > 0 ? window.arrivals / span_s : 0;
  out.arrival_rate_req_s = arrival_rate;
  if (n < kMinTrendBins) return;  // too short to tell
  std::vector<double> level(n);
  long double queued = 0;
  for (size_t i = 0; i < n; ++i) {
    level[i] = series.bin(first + i).level_ns / static_cast<double>(series.width_ns());
    queued += series.bin(first + i).queued_ns;
  }
  out.queued_mean = static_cast<double>(queued / static_cast<long double>(n * series.width_ns()));
  const Trend trend = linear_trend(level);
  out.in_system_mean = trend.mean;
  out.in_system_trend_req_s = trend.slope / w_s;
  // A line through the points has t = +-infinity; the columns hold a finite stand-in.
  out.in_system_trend_t = std::clamp(trend.t, -1e6, 1e6);
  const double t_crit = student_t_quantile(1 - kTrendSignificance, trend.dof);
  const bool significant = trend.t > t_crit;
  out.stationary = !(significant && out.in_system_trend_req_s > kMinGrowthFraction * arrival_rate);
  out.in_system_trend_upper_req_s = (trend.slope + t_crit * trend.se) / w_s;
  out.settled = out.in_system_trend_upper_req_s <= kMinGrowthFraction * arrival_rate;
}

void append_named(const SteadyState& s, std::vector<NamedValue>& out) {
  auto f = [&](const std::string& n, double v) { out.push_back({n, v, false}); };
  auto i = [&](const std::string& n, double v) { out.push_back({n, v, true}); };
  auto ci = [&](const std::string& n, double v) { out.push_back({n, v, false, true, false}); };
  auto sign = [&](const std::string& n, double v) { out.push_back({n, v, false, false, true}); };
  f("window_start_s", s.window_start_s);
  i("window_requests", static_cast<double>(s.window_requests));
  auto latency = [&](const std::string& name, const LatencyStats& l) {
    f(name + "_mean", l.mean);
    f(name + "_p50", l.p50);
    f(name + "_p90", l.p90);
    f(name + "_p99", l.p99);
  };
  latency("ttft_ms_window", s.ttft_ms);
  latency("tpot_ms_window", s.tpot_ms);
  latency("e2e_ms_window", s.e2e_ms);
  f("slo_attainment_window", s.slo_attainment);
  i("batches", static_cast<double>(s.batches));
  ci("ttft_ms_window_mean_ci95", s.ttft_ms_mean_ci95);
  ci("tpot_ms_window_mean_ci95", s.tpot_ms_mean_ci95);
  ci("e2e_ms_window_mean_ci95", s.e2e_ms_mean_ci95);
  ci("slo_attainment_window_ci95", s.slo_attainment_ci95);
  ci("goodput_req_s_window_ci95", s.goodput_req_s_ci95);
  ci("throughput_output_tok_s_window_ci95", s.throughput_output_tok_s_ci95);
  f("mser_warmup_s", s.mser_warmup_s);
  i("mser_at_limit", s.mser_at_limit ? 1 : 0);
  f("in_system_mean", s.in_system_mean);
  f("queued_mean", s.queued_mean);
  sign("in_system_trend_req_s", s.in_system_trend_req_s);
  sign("in_system_trend_t", s.in_system_trend_t);
  sign("in_system_trend_upper_req_s", s.in_system_trend_upper_req_s);
  f("arrival_rate_req_s_window", s.arrival_rate_req_s);
  i("settled", s.settled ? 1 : 0);
  i("stationary", s.stationary ? 1 : 0);
}

}  // namespace servesim::metrics
