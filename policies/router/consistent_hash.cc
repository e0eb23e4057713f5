// consistent_hash: a hash ring with virtual nodes. Each request goes to the first replica point
// clockwise of its key's hash, so a session (or every request starting with the same prefix block)
// keeps landing on the same replica, and adding a replica moves only 1/N of the keys.
#include <algorithm>
#include <vector>

#include "policies/router/router.h"
#include "sim/core/rng.h"

namespace servesim::policies {
namespace {

uint64_t mix(uint64_t x) { return core::splitmix64(x); }

class ConsistentHashRouter final : public sim::Router {
 public:
  ConsistentHashRouter(bool by_session, int64_t virtual_nodes)
      : by_session_(by_session), virtual_nodes_(virtual_nodes) {}

  uint32_t route(const sim::Request& request, std::span<const sim::ReplicaLoad> replicas) override {
    if (ring_size_ != replicas.size()) build(replicas.size());
    // The key: the session, or the first prefix block; requests with neither fall back to their id
    // (spread like random).
    uint64_t key = request.id ^ 0xabcdef1234567890ULL;
    if (by_session_ && request.session != 0) {
      key = request.session;
    } else if (!by_session_ && !request.block_hashes.empty()) {
      key = request.block_hashes.front();
    }
    const uint64_t h = mix(key);
    auto it = std::lower_bound(ring_.begin(), ring_.end(), std::make_pair(h, uint32_t{0}));
    if (it == ring_.end()) it = ring_.begin();
    return it->second;
  }
  bool ignores_decode_progress() const override { return true; }  // the request's key alone

 private:
  void build(size_t n) {
    ring_.clear();
    for (uint32_t r = 0; r < n; ++r)
      for (int64_t v = 0; v < virtual_nodes_; ++v)
        ring_.emplace_back(mix((static_cast<uint64_t>(r) << 32) ^ static_cast<uint64_t>(v) ^ 0x5bd1e995ULL), r);
    std::sort(ring_.begin(), ring_.end());
    ring_size_ = n;
  }

  bool by_session_;
  int64_t virtual_nodes_;
  std::vector<std::pair<uint64_t, uint32_t>> ring_;
  size_t ring_size_ = 0;
};

const bool kRegistered = router_registry().add(
    {"consistent_hash",
     "a hash ring with virtual nodes keyed on the session or on the first prefix block; requests "
     "without that key are spread by their id",
     {core::ParamSpec::string("key", "session", "what to hash").one_of({"session", "first_block"}),
      core::ParamSpec::integer("virtual_nodes", 100, "points", "ring points per replica (more: smoother spread)")
          .range(1, 100000)}},
    [](const core::Params& p, uint64_t) {
      return std::make_unique<ConsistentHashRouter>(p.get_string("key") == "session", p.get_int("virtual_nodes"));
    });

}  // namespace
}  // namespace servesim::policies
