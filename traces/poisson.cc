// Kind "poisson": arrivals of a Poisson process (exponential gaps).

#include "sim/core/rng.h"
#include "traces/renewal_generator.h"

namespace servesim::traces {
namespace {

struct ExponentialGap {
  double rate;
  double operator()(core::Rng& rng) const { return rng.exponential(rate); }
  // Memoryless: from any moment, the next arrival is one gap away.
  double excess(core::Rng& rng) const { return rng.exponential(rate); }
};

const bool kRegistered = workload_registry().add(
    {"poisson",
     "synthetic Poisson arrivals (exponential gaps) at a fixed rate, lengths from distributions; "
     "needs max_requests or window_end_s",
     generator_params({core::ParamSpec::real("rate", 1, "req/s", "mean arrival rate").range(1e-6, 1e9).required()})},
    [](const core::Params& p, uint64_t run_seed) {
      return make_renewal_generator(p, run_seed, "poisson", ExponentialGap{p.get_float("rate")});
    });

}  // namespace
}  // namespace servesim::traces
