// round_robin: replicas in turn, regardless of load.
#include "policies/router/router.h"

namespace servesim::policies {
namespace {

class RoundRobinRouter final : public sim::Router {
 public:
  uint32_t route(const sim::Request& /*request*/, std::span<const sim::ReplicaLoad> replicas) override {
    const uint32_t pick = next_;
    next_ = (next_ + 1) % static_cast<uint32_t>(replicas.size());
    return pick;
  }
  int64_t next_in_turn(size_t replicas) const override { return replicas > 0 ? next_ % replicas : -1; }

 private:
  uint32_t next_ = 0;
};

const bool kRegistered = router_registry().add(
    {"round_robin", "each request to the next replica in turn", {}},
    [](const core::Params&, uint64_t) { return std::make_unique<RoundRobinRouter>(); });

}  // namespace
}  // namespace servesim::policies
