// Kind "fixed": every request gets the same length.

#include <memory>

#include "traces/length_distribution.h"

namespace servesim::traces {
namespace {

class FixedDistribution final : public LengthDistribution {
 public:
  explicit FixedDistribution(const core::Params& p) : value_(p.get_int("value")) {}
  int64_t sample(core::Rng&) override { return value_; }

 private:
  int64_t value_;
};

const bool kRegistered = distribution_registry().add(
    {"fixed",
     "the same length every time",
     {core::ParamSpec::integer("value", 1, "tokens", "the length").range(1, 4294967296.0).required()}},
    [](const core::Params& p) -> std::unique_ptr<LengthDistribution> {
      return std::make_unique<FixedDistribution>(p);
    });

}  // namespace
}  // namespace servesim::traces
