// Kind "uniform": lengths drawn uniformly from an inclusive integer range.

#include <memory>

#include "traces/length_distribution.h"

namespace servesim::traces {
namespace {

class UniformDistribution final : public LengthDistribution {
 public:
  explicit UniformDistribution(const core::Params& p) : min_(p.get_int("min")) {
    const int64_t max = p.get_int("max");
    if (max < min_)
      p.fail("max", "max (" + std::to_string(max) + ") must be >= min (" + std::to_string(min_) + ")");
    span_ = static_cast<uint64_t>(max - min_) + 1;
  }
  int64_t sample(core::Rng& rng) override { return min_ + static_cast<int64_t>(rng.uniform_int(span_)); }

 private:
  int64_t min_;
  uint64_t span_;
};

const bool kRegistered = distribution_registry().add(
    {"uniform",
     "lengths uniform over the integers min..max, both included",
     {core::ParamSpec::integer("min", 1, "tokens", "smallest length").range(1, 4294967296.0).required(),
      core::ParamSpec::integer("max", 1, "tokens", "largest length (>= min)").range(1, 4294967296.0).required()}},
    [](const core::Params& p) -> std::unique_ptr<LengthDistribution> {
      return std::make_unique<UniformDistribution>(p);
    });

}  // namespace
}  // namespace servesim::traces
