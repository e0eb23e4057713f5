// least_outstanding: the replica with the fewest outstanding tokens, queued plus running (prompt
// tokens not yet prefilled + output tokens not yet generated). Ties go to the lowest index.
#include "policies/router/router.h"

namespace servesim::policies {
namespace {

class LeastOutstandingRouter final : public sim::Router {
 public:
  uint32_t route(const sim::Request& /*request*/, std::span<const sim::ReplicaLoad> replicas) override {
    uint32_t best = 0;
    int64_t best_load = replicas[0].outstanding_tokens;
    for (uint32_t i = 1; i < replicas.size(); ++i) {
      if (replicas[i].outstanding_tokens < best_load) {
        best_load = replicas[i].outstanding_tokens;
        best = i;
      }
    }
    return best;
  }
};

const bool kRegistered = router_registry().add(
    {"least_outstanding",
     "the replica with the fewest outstanding tokens (queued + running: prompt tokens not yet "
     "prefilled plus output tokens not yet generated); ties to the lowest index",
     {}},
    [](const core::Params&, uint64_t) { return std::make_unique<LeastOutstandingRouter>(); });

}  // namespace
}  // namespace servesim::policies
