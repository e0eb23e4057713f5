#pragma once
// A rate profile (family "rate_profiles", the optional `[workload.rate_profile]` section of every
// open-loop workload): a factor f(t) >= 0 of simulated time that multiplies the workload's arrival
// rate, so that a flat workload becomes a day with a peak and a trough. Kinds: "sinusoid" (a
// formula) and "table" (a CSV file of time_s,factor, linear or step, optionally repeating).
//
// It is applied as a time change: an arrival that the unshaped workload sends at offset s (after
// the window and rate_scale) is sent at t = F^-1(s), the earliest t with F(t) = integral of f over
// [0, t] >= s. Poisson arrivals at rate r become exactly a non-homogeneous Poisson process of rate
// r f(t) (the time-change theorem); a renewal process (gamma) becomes the same renewal process run
// on the clock F(t): locally its rate is r f(t) and its cv holds where f changes little over a gap;
// a trace's gaps are divided by the factor in force. No randomness is drawn: the same arrivals in,
// the same arrivals out.

#include <cstdint>
#include <memory>
#include <string>

#include "sim/core/params.h"

namespace servesim::traces {

class RateProfile {
 public:
  virtual ~RateProfile() = default;
  // f(t), t >= 0 in seconds.
  virtual double factor(double t) const = 0;
  // F(t): the integral of f over [0, t].
  virtual double integral(double t) const = 0;
  // The earliest t >= 0 with F(t) >= s, for s >= 0; +infinity when F never reaches s (a profile
  // that ends at factor 0).
  virtual double inverse(double s) const = 0;
  // Names the profile in errors ("rate profile sinusoid", "rate profile table day.csv").
  virtual std::string describe() const = 0;
};

// Family "rate_profiles". No factory arguments.
using RateProfileRegistry = core::Registry<RateProfile>;
RateProfileRegistry& rate_profile_registry();

// The declaration of the optional `rate_profile` section.
core::ParamSpec rate_profile_spec();
// The profile of `p` (a workload section); nullptr when it has none.
std::unique_ptr<RateProfile> read_rate_profile(const core::Params& p);

// The send time in nanoseconds of an arrival at `offset_ns` of the unshaped workload, never before
// `previous_ns` (so that rounding cannot reorder two arrivals). A core::Error naming `who` when the
// profile never reaches the offset or the time passes the int64 nanosecond clock.
int64_t shape_arrival_ns(const RateProfile& profile, int64_t offset_ns, int64_t previous_ns, const std::string& who);

}  // namespace servesim::traces
