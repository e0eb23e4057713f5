#pragma once
// Simulated time is an integer count of nanoseconds in a strong type, so that event ordering is
// exact and results do not depend on floating-point accumulation.

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace servesim::core {

class Duration {
 public:
  constexpr Duration() = default;
  static constexpr Duration from_ns(int64_t ns) { return Duration(ns); }
  // Rounds to the nearest nanosecond; callers validate that `s` is finite and in range.
  static Duration from_seconds(double s) { return Duration(static_cast<int64_t>(std::llround(s * 1e9))); }
  static Duration from_ms(double ms) { return Duration(static_cast<int64_t>(std::llround(ms * 1e6))); }
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
