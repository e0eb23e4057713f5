// least_outstanding: the replica with the fewest outstanding requests (queued + running), as a
// load balancer's "least outstanding requests" policy counts them; ties go to the one with fewer
// prompt tokens waiting to be prefilled, then to the lowest index. Everything it reads is what a
// real router observes (the engine's queue and batch, the prompts it sent). With oracle = true it
// ranks by the exact remaining work instead (prompt tokens not prefilled + output tokens not yet
// generated), which needs output lengths no router knows: an upper bound for studies, not a policy.
#include "policies/router/router.h"

namespace servesim::policies {
namespace {

class LeastOutstandingRouter final : public sim::Router {
 public:
  explicit LeastOutstandingRouter(bool oracle) : oracle_(oracle) {}
  uint32_t route(const sim::Request& /*request*/, std::span<const sim::ReplicaLoad> replicas) override {
    uint32_t best = 0;
    for (uint32_t i = 1; i < replicas.size(); ++i)
      if (lighter(replicas[i], replicas[best], oracle_)) best = i;
    return best;
  }
  bool ignores_decode_progress() const override { return !oracle_; }  // counts; an oracle reads tokens

 private:
  bool oracle_;
};

const bool kRegistered = router_registry().add(
    {"least_outstanding",
     "the replica with the fewest outstanding requests (queued + running), ties to fewer prompt tokens "
     "waiting, then the lowest index; oracle = true ranks by exact remaining tokens (an upper bound)",
     {oracle_param()}},
    [](const core::Params& p, uint64_t) { return std::make_unique<LeastOutstandingRouter>(p.get_bool("oracle")); });

}  // namespace
}  // namespace servesim::policies
