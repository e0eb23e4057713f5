#pragma once
// Simulated time is an integer count of nanoseconds in a strong type, so that event ordering is
// exact and results do not depend on floating-point accumulation.

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace servesim::core {

// The longest span the clock holds: INT64_MAX nanoseconds, about 292 years.
inline constexpr double kMaxClockSeconds = 9.223372036854775e9;

// Thrown (as a core::Error) when a time would not fit the clock; defined in time.cc.
[[noreturn]] void clock_overflow(double seconds, const char* what);

class Duration {
 public:
  constexpr Duration() = default;
  static constexpr Duration from_ns(int64_t ns) { return Duration(ns); }
  // Rounds to the nearest nanosecond. A value that is not finite or does not fit the clock is a
  // core::Error ("... is beyond the simulated clock"), never a wrapped or undefined count.
  static Duration from_seconds(double s) {
    if (!(std::fabs(s) < kMaxClockSeconds)) clock_overflow(s, "a duration");
    return Duration(round_half_away(s * 1e9));
  }
  // std::llround, inline (a libm call on every iteration otherwise), for |x| < 2^63: the truncating
  // conversion is then defined, and x minus its truncation is exact (0 when |x| >= 2^53, where
  // every double is an integer), so the comparison with 0.5 decides as llround does.
  static int64_t round_half_away(double x) {
    int64_t i = static_cast<int64_t>(x);
    const double frac = x - static_cast<double>(i);
    if (frac >= 0.5) {
      ++i;
    } else if (frac <= -0.5) {
      --i;
    }
    return i;
  }
  static Duration from_ms(double ms) { return from_seconds(ms * 1e-3); }
  constexpr int64_t ns() const { return ns_; }
  constexpr double seconds() const { return static_cast<double>(ns_) * 1e-9; }
  constexpr double ms() const { return static_cast<double>(ns_) * 1e-6; }
  constexpr auto operator<=>(const Duration&) const = default;
  constexpr Duration operator+(Duration o) const { return Duration(ns_ + o.ns_); }
  constexpr Duration operator-(Duration o) const { return Duration(ns_ - o.ns_); }
  constexpr Duration& operator+=(Duration o) { ns_ += o.ns_; return *this; }

 private:
  constexpr explicit Duration(int64_t ns) : ns_(ns) {}
  int64_t ns_ = 0;
};

// A point on the simulated clock, nanoseconds since the simulation started.
class Time {
 public:
  constexpr Time() = default;
  static constexpr Time from_ns(int64_t ns) { return Time(ns); }
  static constexpr Time max() { return Time(std::numeric_limits<int64_t>::max()); }
  constexpr int64_t ns() const { return ns_; }
  constexpr double seconds() const { return static_cast<double>(ns_) * 1e-9; }
  constexpr double ms() const { return static_cast<double>(ns_) * 1e-6; }
  constexpr auto operator<=>(const Time&) const = default;
  constexpr Time operator+(Duration d) const { return Time(ns_ + d.ns()); }
  constexpr Duration operator-(Time o) const { return Duration::from_ns(ns_ - o.ns_); }

 private:
  constexpr explicit Time(int64_t ns) : ns_(ns) {}
  int64_t ns_ = 0;
};

}  // namespace servesim::core
