#pragma once
// Synthetic workloads whose inter-arrival gaps are independent draws from one distribution (a
// renewal process: Poisson, gamma), with prompt and output lengths from length distributions.

#include <memory>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/rng.h"
#include "traces/length_distribution.h"
#include "traces/workload_common.h"

namespace servesim::traces {

// Parameters of a generator kind: `own` (its gap parameters), then prompt, output and the common
// ones.
std::vector<core::ParamSpec> generator_params(std::vector<core::ParamSpec> own);

// A generator would never end without a limit: a ConfigError at max_requests unless max_requests
// or window_end_s is set.
void require_generator_limit(const core::Params& p);

// `Gap` is a callable `double(core::Rng&)` giving one gap in seconds; a template parameter so that
// drawing a request costs no indirect call for the gap.
template <class Gap>
class RenewalGenerator final : public ShapedSource {
 public:
  RenewalGenerator(const core::Params& p, uint64_t seed, std::string name, Gap gap)
      : ShapedSource(p),
        name_(std::move(name)),
        gap_(std::move(gap)),
        arrival_rng_(seed, "arrivals"),
        lengths_(p, seed) {}

 protected:
  bool next_raw(RequestSpec& out) override {
    // The clock accumulates in double seconds and each arrival is rounded from it, so rounding
    // errors do not pile up over millions of gaps. The first request arrives after one gap, as in
    // the process started at time 0.
    clock_s_ += gap_(arrival_rng_);
    if (!(clock_s_ < kMaxClockS))
      throw core::Error(describe() + ": the generator's clock passed " + std::to_string(kMaxClockS) +
                        " s (the int64 nanosecond limit); lower max_requests or window_end_s");
    out.arrival = core::Time::from_ns(core::Duration::from_seconds(clock_s_).ns());
    lengths_.sample(out.prompt_tokens, out.output_tokens);
    out.block_hashes.clear();
    out.session = 0;
    return true;
  }
  std::string describe() const override { return name_ + " generator"; }

 private:
  static constexpr double kMaxClockS = 9.2e9;
  std::string name_;
  Gap gap_;
  core::Rng arrival_rng_;
  LengthPair lengths_;
  double clock_s_ = 0.0;
};

template <class Gap>
std::unique_ptr<ArrivalSource> make_renewal_generator(const core::Params& p, uint64_t run_seed,
                                                      std::string name, Gap gap) {
  require_generator_limit(p);  // before the length distributions load any file
  return std::make_unique<RenewalGenerator<Gap>>(p, workload_seed(p, run_seed), std::move(name),
                                                 std::move(gap));
}

}  // namespace servesim::traces
