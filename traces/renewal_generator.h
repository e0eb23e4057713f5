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
// or window_end_s is set. Then refuses up front (a ConfigError naming the keys) a generator whose
// requests cannot fit the clock or are too many to simulate: `rate` (the key "rate", events per
// second) with max_requests, the window and rate_scale set how long the arrivals span.
void require_generator_limit(const core::Params& p);

// How long a generator's arrivals are expected to span, in its own time (before rate_scale): from
// max_requests and the rate, or the window, whichever ends first.
double generator_span_s(const core::Params& p);

// Arrivals before the window are not drawn one by one when there would be more than this many:
// the generator starts at the window instead (see RenewalGenerator).
inline constexpr double kMaxDrawsBeforeWindow = 1e5;

// `Gap` is a callable `double(core::Rng&)` giving one gap in seconds, with `double excess(core::Rng&)`
// giving the time from an arbitrary moment of the running process to its next arrival (the
// equilibrium forward recurrence time); a template parameter so that drawing a request costs no
// indirect call for the gap.
//
// Skipping to the window: when more than kMaxDrawsBeforeWindow arrivals would fall before
// window_start_s, the process starts at the window with an excess as its first gap instead of being
// drawn from time 0. For Poisson arrivals this is exactly the same process (memoryless); for other
// renewal processes it is the process in equilibrium, which a process that has run for that many
// gaps is, to any measurable precision. Below the threshold every arrival is drawn, as before.
template <class Gap>
class RenewalGenerator final : public ShapedSource {
 public:
  RenewalGenerator(const core::Params& p, uint64_t seed, std::string name, Gap gap)
      : ShapedSource(p, seed),
        name_(std::move(name)),
        gap_(std::move(gap)),
        arrival_rng_(seed, "arrivals"),
        lengths_(p, seed) {
    const double start_s = p.get_float("window_start_s");
    expected_span_s_ = shaped_span_s(generator_span_s(p) / p.get_float("rate_scale"));
    if (start_s * p.get_float("rate") > kMaxDrawsBeforeWindow) {
      origin_ns_ = core::Duration::from_seconds(start_s).ns();
      clock_s_ = gap_.excess(arrival_rng_);
      skipped_ = true;
    }
  }

 protected:
  bool next_raw(RequestSpec& out) override {
    // The clock accumulates in double seconds (from the origin: 0, or the window when skipped to
    // it) and each arrival is rounded from it, so rounding errors do not pile up over millions of
    // gaps. The first request arrives after one gap, as in the process started at time 0.
    if (skipped_) skipped_ = false;  // the excess drawn at construction is the first gap
    else clock_s_ += gap_(arrival_rng_);
    if (!(clock_s_ + static_cast<double>(origin_ns_) * 1e-9 < kMaxClockS))
      throw core::Error(describe() + ": the generator's clock passed " + std::to_string(kMaxClockS) +
                        " s (the int64 nanosecond limit); workload.rate, max_requests and the window set how long "
                        "the arrivals span");
    out.arrival = core::Time::from_ns(origin_ns_ + core::Duration::from_seconds(clock_s_).ns());
    lengths_.sample(out.prompt_tokens, out.output_tokens);
    out.block_hashes.clear();
    out.session = 0;
    return true;
  }
  std::string describe() const override { return name_ + " generator"; }
  double expected_span_s() const override { return expected_span_s_; }

 private:
  static constexpr double kMaxClockS = 9.2e9;
  double expected_span_s_ = 0;
  std::string name_;
  Gap gap_;
  core::Rng arrival_rng_;
  LengthPair lengths_;
  double clock_s_ = 0.0;
  int64_t origin_ns_ = 0;
  bool skipped_ = false;
};

template <class Gap>
std::unique_ptr<ArrivalSource> make_renewal_generator(const core::Params& p, uint64_t run_seed,
                                                      std::string name, Gap gap) {
  require_generator_limit(p);  // before the length distributions load any file
  return std::make_unique<RenewalGenerator<Gap>>(p, workload_seed(p, run_seed), std::move(name),
                                                 std::move(gap));
}

}  // namespace servesim::traces
