// random: a uniformly random replica, from the run's seeded "router" stream.
#include "policies/router/router.h"
#include "sim/core/rng.h"

namespace servesim::policies {
namespace {

class RandomRouter final : public sim::Router {
 public:
  explicit RandomRouter(uint64_t seed) : rng_(seed, "router") {}
  uint32_t route(const sim::Request& /*request*/, std::span<const sim::ReplicaLoad> replicas) override {
    return static_cast<uint32_t>(rng_.uniform_int(replicas.size()));
  }
  bool ignores_decode_progress() const override { return true; }

 private:
  core::Rng rng_;
};

const bool kRegistered = router_registry().add(
    {"random",
     "each request to a uniformly random replica (seeded by `seed`, or the run seed when unset)",
     {core::ParamSpec::integer("seed", 0, "", "router random stream seed; unset = the run seed")
          .at_least(0)
          .optional()}},
    [](const core::Params& p, uint64_t run_seed) {
      const uint64_t seed = p.has("seed") ? static_cast<uint64_t>(p.get_int("seed")) : run_seed;
      return std::make_unique<RandomRouter>(seed);
    });

}  // namespace
}  // namespace servesim::policies
