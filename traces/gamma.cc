// Kind "gamma": arrivals with gamma-distributed gaps, whose coefficient of variation sets the
// burstiness (cv = 1 is Poisson; cv > 1 bursty; cv < 1 more regular).

#include "sim/core/rng.h"
#include "traces/renewal_generator.h"

namespace servesim::traces {
namespace {

struct GammaGap {
  double shape;
  double scale_s;
  double operator()(core::Rng& rng) const { return rng.gamma(shape, scale_s); }
  // The equilibrium forward recurrence time: a uniform fraction of a length-biased gap, which for
  // gamma(k, theta) gaps is gamma(k + 1, theta).
  double excess(core::Rng& rng) const { return rng.uniform() * rng.gamma(shape + 1.0, scale_s); }
};

const bool kRegistered = workload_registry().add(
    {"gamma",
     "synthetic arrivals with gamma-distributed gaps (shape 1/cv^2, mean 1/rate), lengths from "
     "distributions; needs max_requests or window_end_s",
     generator_params(
         {core::ParamSpec::real("rate", 1, "req/s", "mean arrival rate").range(1e-6, 1e9).required(),
          core::ParamSpec::real("cv", 1, "", "coefficient of variation of the gaps (1 = Poisson)")
              .range(0.01, 100)
              .required()})},
    [](const core::Params& p, uint64_t run_seed) {
      const double cv = p.get_float("cv");
      const double shape = 1.0 / (cv * cv);
      return make_renewal_generator(p, run_seed, "gamma",
                                    GammaGap{shape, 1.0 / (p.get_float("rate") * shape)});
    });

}  // namespace
}  // namespace servesim::traces
