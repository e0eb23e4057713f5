// Kind "lognormal": lengths from a lognormal given by its own mean and standard deviation in
// tokens (what a person reads off a trace), rounded and clipped to [min, max].

#include <algorithm>
#include <cmath>
#include <memory>

#include "traces/length_distribution.h"

namespace servesim::traces {
namespace {

class LognormalDistribution final : public LengthDistribution {
 public:
  explicit LognormalDistribution(const core::Params& p) : min_(p.get_int("min")), max_(p.get_int("max")) {
    if (max_ < min_)
      p.fail("max", "max (" + std::to_string(max_) + ") must be >= min (" + std::to_string(min_) + ")");
    const double mean = p.get_float("mean");
    const double sd = p.get_float("sd");
    // Moments of the distribution itself, not of its log: E = exp(mu + s^2/2),
    // Var = (exp(s^2) - 1) E^2.
    const double s2 = std::log1p((sd / mean) * (sd / mean));
    sigma_ = std::sqrt(s2);
    mu_ = std::log(mean) - s2 / 2;
  }
  int64_t sample(core::Rng& rng) override {
    // Clipping in double first keeps llround defined when exp() overflows to inf.
    const double x = std::min(rng.lognormal(mu_, sigma_), static_cast<double>(max_));
    return std::clamp<int64_t>(std::llround(x), min_, max_);
  }

 private:
  int64_t min_;
  int64_t max_;
  double mu_ = 0;
  double sigma_ = 0;
};

const bool kRegistered = distribution_registry().add(
    {"lognormal",
     "lognormal lengths with the given mean and standard deviation (of the lengths, not of their "
     "log), rounded to the nearest integer and clipped to [min, max]",
     {core::ParamSpec::real("mean", 1, "tokens", "mean length before rounding and clipping")
          .range(1e-3, 4294967296.0)
          .required(),
      core::ParamSpec::real("sd", 1, "tokens", "standard deviation of the length before clipping (a very wide one "
                                                "spreads the lengths over [min, max])")
          .range(1e-3, 1e18)
          .required(),
      core::ParamSpec::integer("min", 1, "tokens", "smallest length (clip)").range(1, 4294967296.0),
      core::ParamSpec::integer("max", 1000000, "tokens", "largest length (clip)").range(1, 4294967296.0)}},
    [](const core::Params& p) -> std::unique_ptr<LengthDistribution> {
      return std::make_unique<LognormalDistribution>(p);
    });

}  // namespace
}  // namespace servesim::traces
