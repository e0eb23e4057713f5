#include "traces/rate_profile.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/format.h"
#include "traces/field_parse.h"
#include "traces/line_reader.h"

namespace servesim::traces {

using core::ParamSpec;

RateProfileRegistry& rate_profile_registry() {
  static RateProfileRegistry registry(
      "rate_profiles",
      "a factor of simulated time multiplying an open-loop workload's arrival rate ([workload.rate_profile]): "
      "a diurnal sinusoid or a table of time_s,factor from a CSV file");
  return registry;
}

ParamSpec rate_profile_spec() {
  return ParamSpec::section("rate_profile", "rate_profiles", "",
                            "a time-varying factor of the arrival rate (sinusoid or table): arrivals are time-changed "
                            "through its integral (docs/workloads.md, \"Time-varying rates\"); unset: none")
      .optional();
}

std::unique_ptr<RateProfile> read_rate_profile(const core::Params& p) {
  if (!p.has("rate_profile")) return nullptr;
  return rate_profile_registry().make(p.section("rate_profile"));
}

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kMaxTimeS = 3e9;    // profile times stay well inside the int64 nanosecond clock
constexpr double kMaxFactor = 1e6;
constexpr int64_t kMaxRows = 10'000'000;

// f(t) = 1 + amplitude sin(2 pi (t - phase) / period): mean 1 over every whole period.
class Sinusoid final : public RateProfile {
 public:
  Sinusoid(double amplitude, double period_s, double phase_s)
      : a_(amplitude), period_(period_s), phase_(phase_s), k_(amplitude * period_s / (2 * kPi)) {
    cos0_ = std::cos(angle(0));
  }

  double factor(double t) const override { return 1 + a_ * std::sin(angle(t)); }
  // F(t) = t + (A P / 2 pi) (cos(theta(0)) - cos(theta(t))).
  double integral(double t) const override { return t + k_ * (cos0_ - std::cos(angle(t))); }

  double inverse(double s) const override {
    if (s <= 0) return 0;
    // |F(t) - t| <= A P / pi, so the root lies in [s - A P / pi, s + A P / pi]. Newton's method from
    // t = s, kept inside the bracket (a step that leaves it bisects instead): F is increasing, f >= 0.
    double lo = std::max(0.0, s - 2 * k_);
    double hi = s + 2 * k_;
    double t = s;
    for (int i = 0; i < 200; ++i) {
      const double g = integral(t) - s;
      if (g == 0) return t;
      if (g > 0) hi = t;
      else lo = t;
      const double f = factor(t);
      double next = f > 0 ? t - g / f : lo;
      if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
      if (std::fabs(next - t) <= 1e-12 * std::max(1.0, t) || hi - lo <= 1e-12 * std::max(1.0, t)) return next;
      t = next;
    }
    return t;
  }

  std::string describe() const override { return "rate profile sinusoid"; }

 private:
  double angle(double t) const { return 2 * kPi * (std::fmod(t - phase_, period_) / period_); }
  double a_, period_, phase_, k_;
  double cos0_ = 1;
};

// Rows (t_i, v_i) from t_0 = 0; linear between rows or a step (v_i holds on [t_i, t_i+1)). Without
// repeat the last factor holds after the last row; with repeat the profile on [0, T) (T the last
// row's time) repeats.
class Table final : public RateProfile {
 public:
  Table(std::vector<double> times, std::vector<double> values, bool linear, bool repeat, std::string name)
      : t_(std::move(times)), v_(std::move(values)), linear_(linear), repeat_(repeat), name_(std::move(name)) {
    cum_.assign(t_.size(), 0.0);
    for (size_t i = 0; i + 1 < t_.size(); ++i) cum_[i + 1] = cum_[i] + segment_integral(i, t_[i + 1] - t_[i]);
  }

  double period() const { return t_.back(); }
  double total() const { return cum_.back(); }

  double factor(double t) const override {
    if (repeat_) t = std::fmod(t, period());
    else if (t >= period()) return v_.back();
    const size_t k = segment(t);
    const double u = t - t_[k];
    return linear_ ? v_[k] + (v_[k + 1] - v_[k]) * (u / (t_[k + 1] - t_[k])) : v_[k];
  }

  double integral(double t) const override {
    if (t <= 0) return 0;
    if (repeat_) {
      const double n = std::floor(t / period());
      return n * total() + within(t - n * period());
    }
    if (t >= period()) return total() + v_.back() * (t - period());
    return within(t);
  }

  double inverse(double s) const override {
    if (s <= 0) return 0;
    if (repeat_) {
      const double n = std::floor(s / total());
      const double r = std::clamp(s - n * total(), 0.0, total());
      return n * period() + inverse_within(r);
    }
    if (s > total()) {
      if (!(v_.back() > 0)) return std::numeric_limits<double>::infinity();
      return period() + (s - total()) / v_.back();
    }
    return inverse_within(s);
  }

  std::string describe() const override { return "rate profile table " + name_; }

 private:
  // The segment [t_k, t_k+1) holding t, for t in [0, T).
  size_t segment(double t) const {
    const auto it = std::upper_bound(t_.begin(), t_.end(), t);
    const size_t k = static_cast<size_t>(it - t_.begin());
    return std::min(k == 0 ? 0 : k - 1, t_.size() - 2);
  }
  // The integral over [t_k, t_k + u] of segment k. Linear: in the fraction x = u / len of the
  // segment, so rows a denormal time apart give no infinite slope (and no NaN from inf * 0).
  double segment_integral(size_t k, double u) const {
    if (!linear_) return v_[k] * u;
    const double x = u / (t_[k + 1] - t_[k]);
    return u * (v_[k] + 0.5 * (v_[k + 1] - v_[k]) * x);
  }
  double within(double t) const {
    if (t >= period()) return total();
    const size_t k = segment(t);
    return cum_[k] + segment_integral(k, t - t_[k]);
  }
  // The earliest t in [0, T] with F(t) >= s, for s in [0, total()].
  double inverse_within(double s) const {
    if (s <= 0) return 0;
    // The first row k + 1 whose cumulative integral reaches s: s falls in segment k.
    const auto it = std::lower_bound(cum_.begin() + 1, cum_.end(), s);
    if (it == cum_.end()) return period();
    const size_t k = static_cast<size_t>(it - cum_.begin()) - 1;
    const double d = s - cum_[k];
    const double len = t_[k + 1] - t_[k];
    if (d <= 0) return t_[k];
    double u = 0;
    const double a = v_[k];
    const double b = linear_ ? v_[k + 1] : v_[k];
    if (a == b) {
      u = d / a;
    } else {
      // In the fraction x = u / len: a x + c x^2 = e with c = (b - a) / 2 and e = d / len (<= max(a, b),
      // as d is at most the segment's integral); the root in the stable form.
      const double c = 0.5 * (b - a);
      const double e = d / len;
      u = len * (2 * e / (a + std::sqrt(std::max(0.0, a * a + 4 * c * e))));
    }
    return t_[k] + std::clamp(u, 0.0, len);
  }

  std::vector<double> t_, v_, cum_;
  bool linear_, repeat_;
  std::string name_;
};

// A finite decimal number in a field of the table (no sign check here).
double parse_number(std::string_view text, const FieldRef& at, const char* what) {
  const std::string_view t = trim(text);
  if (t.empty()) field_error(at, std::string("empty value; expected ") + what);
  const char* first = t.data();
  const char* last = t.data() + t.size();
  if (*first == '+' && t.size() > 1) ++first;
  double v = 0;
  const auto [ptr, ec] = std::from_chars(first, last, v);
  if (ec != std::errc() || ptr != last || !std::isfinite(v))
    field_error(at, std::string("expected ") + what + " (a finite number), got " + excerpt(t));
  return v;
}

std::unique_ptr<RateProfile> load_table(const core::Params& p) {
  const std::string& path = p.readable_file("path", "a rate table");
  const std::string name = p.written("path").empty() ? path : p.written("path");
  const bool linear = p.get_string("interpolation") == "linear";
  const bool repeat = p.get_bool("repeat");
  LineReader lines(path);
  std::vector<double> times, values;
  std::string_view line;
  bool header = false;
  int64_t last_line = 0;
  while (lines.next_data_line(line)) {
    const int64_t n = lines.line_number();
    const std::string_view body = trim(line);
    if (!body.empty() && body.front() == '#') continue;  // a comment
    const size_t comma = line.find(',');
    if (!header) {
      header = true;
      const std::string_view first = comma == std::string_view::npos ? line : line.substr(0, comma);
      const std::string_view second = comma == std::string_view::npos ? std::string_view() : line.substr(comma + 1);
      std::string_view second_trimmed = trim(second);
      while (!second_trimmed.empty() && second_trimmed.back() == '\r') second_trimmed.remove_suffix(1);
      if (trim(first) != "time_s" || trim(second_trimmed) != "factor")
        throw core::InputError(path, n, "", "expected the header 'time_s,factor', got " + excerpt(line));
      continue;
    }
    if (static_cast<int64_t>(times.size()) >= kMaxRows)
      throw core::InputError(path, n, "", "more than " + std::to_string(kMaxRows) + " rows");
    if (comma == std::string_view::npos || line.find(',', comma + 1) != std::string_view::npos)
      throw core::InputError(path, n, "", "expected 2 fields (time_s,factor), got " + excerpt(line));
    std::string_view value_text = line.substr(comma + 1);
    while (!value_text.empty() && value_text.back() == '\r') value_text.remove_suffix(1);
    const double t = parse_number(line.substr(0, comma), FieldRef{path, n, "time_s"}, "a time in seconds");
    const double v = parse_number(value_text, FieldRef{path, n, "factor"}, "a rate factor");
    if (times.empty() && t != 0)
      field_error(FieldRef{path, n, "time_s"},
                  "the first row must be at time_s = 0 (the start of the run), got " + core::format_double(t));
    if (!times.empty() && !(t > times.back()))
      field_error(FieldRef{path, n, "time_s"}, "times must increase: " + core::format_double(t) + " after " +
                                                   core::format_double(times.back()) + " on line " +
                                                   std::to_string(last_line));
    if (t > kMaxTimeS)
      field_error(FieldRef{path, n, "time_s"},
                  "at most " + core::format_double(kMaxTimeS) + " s (95 years), got " + core::format_double(t));
    if (v < 0) field_error(FieldRef{path, n, "factor"}, "must be >= 0 (a rate factor), got " + core::format_double(v));
    if (v > kMaxFactor)
      field_error(FieldRef{path, n, "factor"},
                  "at most " + core::format_double(kMaxFactor) + ", got " + core::format_double(v));
    times.push_back(t);
    values.push_back(v);
    last_line = n;
  }
  if (!header) throw core::InputError(path, 1, "", "empty file; expected the header 'time_s,factor' and rows");
  if (times.empty()) throw core::InputError(path, lines.line_number(), "", "no rows after the header");
  if (repeat && times.size() < 2)
    throw core::InputError(path, last_line, "",
                           "a repeating table needs at least 2 rows: the last row's time is the period");
  if (times.size() == 1) {  // one row: a constant factor
    times.push_back(1.0);
    values.push_back(values.front());
  }
  auto table = std::make_unique<Table>(std::move(times), std::move(values), linear, repeat, name);
  if (!(table->total() > 0) && (repeat || !(table->factor(table->period()) > 0)))
    throw core::InputError(path, last_line, "factor",
                           "every factor is 0: the profile would send nothing (a silent zero-request run)");
  return table;
}

const bool kSinusoid = rate_profile_registry().add(
    {"sinusoid",
     "a diurnal rate: factor(t) = 1 + amplitude sin(2 pi (t - phase_s) / period_s), so the rate is the workload's "
     "rate times that (mean 1 over whole periods; the peak is at phase_s + period_s / 4)",
     {ParamSpec::real("amplitude", 0.5, "", "relative swing of the rate around its mean").range(0, 1).required(),
      ParamSpec::real("period_s", 86400, "s", "length of one cycle (a day by default)").above(0).range(0, kMaxTimeS),
      ParamSpec::real("phase_s", 0, "s", "shift of the cycle: the rate crosses its mean going up at phase_s")
          .range(-kMaxTimeS, kMaxTimeS)}},
    [](const core::Params& p) -> std::unique_ptr<RateProfile> {
      return std::make_unique<Sinusoid>(p.get_float("amplitude"), p.get_float("period_s"), p.get_float("phase_s"));
    });

const bool kTable = rate_profile_registry().add(
    {"table",
     "a factor read from a CSV file with the header time_s,factor (the first row at time 0, times increasing, "
     "factors >= 0), linear between rows or a step; after the last row its factor holds, or with repeat the table "
     "repeats with the last row's time as the period",
     {ParamSpec::path("path", "the CSV file of time_s,factor rows").required(),
      ParamSpec::string("interpolation", "linear",
                        "linear: the factor goes linearly from row to row; step: a row's factor holds until the next "
                        "row")
          .one_of({"linear", "step"}),
      ParamSpec::boolean("repeat", false, "repeat the table: the last row's time is the period")}},
    [](const core::Params& p) { return load_table(p); });

}  // namespace

int64_t shape_arrival_ns(const RateProfile& profile, int64_t offset_ns, int64_t previous_ns, const std::string& who) {
  const double s = static_cast<double>(offset_ns) * 1e-9;
  const double t = profile.inverse(s);
  if (!std::isfinite(t))
    throw core::Error(who + ": the arrival at " + core::format_double(s) + " s of the unshaped workload is never sent: " +
                      profile.describe() + " ends at factor 0 before its integral reaches " + core::format_double(s) +
                      " s; end the workload sooner (max_requests, window_end_s, requests, duration_s), end the table "
                      "with a positive factor, or repeat it");
  if (!(t < 9.2e9))
    throw core::Error(who + ": the arrival at " + core::format_double(s) + " s of the unshaped workload is sent at " +
                      core::format_double(t) + " s under " + profile.describe() +
                      ", beyond the int64 nanosecond clock (292 years)");
  return std::max<int64_t>(previous_ns, std::llround(t * 1e9));
}

}  // namespace servesim::traces
