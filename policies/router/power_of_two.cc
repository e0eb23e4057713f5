// power_of_two: the less loaded of two distinct replicas drawn at random, by least_outstanding's
// rule (outstanding requests, then prompt tokens waiting; with oracle = true, exact remaining
// tokens): most of least_outstanding's balance for two probes instead of a scan of every replica.
#include "policies/router/router.h"
#include "sim/core/rng.h"

namespace servesim::policies {
namespace {

class PowerOfTwoRouter final : public sim::Router {
 public:
  PowerOfTwoRouter(uint64_t seed, bool oracle) : rng_(seed, "router"), oracle_(oracle) {}
  uint32_t route(const sim::Request& /*request*/, std::span<const sim::ReplicaLoad> replicas) override {
    const uint64_t n = replicas.size();
    if (n == 1) return 0;
    const uint32_t a = static_cast<uint32_t>(rng_.uniform_int(n));
    uint32_t b = static_cast<uint32_t>(rng_.uniform_int(n - 1));
    if (b >= a) ++b;  // distinct
    const uint32_t lo = std::min(a, b), hi = std::max(a, b);
    return lighter(replicas[hi], replicas[lo], oracle_) ? hi : lo;  // ties to the lower index
  }
  bool ignores_decode_progress() const override { return !oracle_; }  // counts; an oracle reads tokens

 private:
  core::Rng rng_;
  bool oracle_;
};

const bool kRegistered = router_registry().add(
    {"power_of_two",
     "two distinct random replicas, the less loaded by least_outstanding's rule (ties to the lower index)",
     {core::ParamSpec::integer("seed", 0, "", "router random stream seed; unset = the run seed").at_least(0).optional(),
      oracle_param()}},
    [](const core::Params& p, uint64_t run_seed) {
      return std::make_unique<PowerOfTwoRouter>(p.has("seed") ? static_cast<uint64_t>(p.get_int("seed")) : run_seed,
                                                p.get_bool("oracle"));
    });

}  // namespace
}  // namespace servesim::policies
