#include "policies/kvtier/kvtier.h"

#include <algorithm>

namespace servesim::policies {

KvTierWriteRegistry& kv_tier_write_registry() {
  static KvTierWriteRegistry registry("kv_tier_writes", "when a prefix unit is written to a host KV tier");
  return registry;
}

KvTierEvictionRegistry& kv_tier_eviction_registry() {
  static KvTierEvictionRegistry registry("kv_tier_evictions", "which unit a full host KV tier evicts");
  return registry;
}

KvTierLoadRegistry& kv_tier_load_registry() {
  static KvTierLoadRegistry registry("kv_tier_loads", "whether a prefix hit in a host KV tier is loaded or recomputed");
  return registry;
}

KvTierPrefetchRegistry& kv_tier_prefetch_registry() {
  static KvTierPrefetchRegistry registry(
      "kv_tier_prefetches", "how long a queued request waits for its store units' prefetch into host memory");
  return registry;
}

namespace {

class OnEviction final : public sim::KvTierWritePolicy {
 public:
  bool store_on_compute() const override { return false; }
  bool store_on_eviction() const override { return true; }
};

class WriteThrough final : public sim::KvTierWritePolicy {
 public:
  bool store_on_compute() const override { return true; }
  bool store_on_eviction() const override { return false; }
};

class Lru final : public sim::KvTierEvictionPolicy {
 public:
  bool refresh_on_access() const override { return true; }
};

class Fifo final : public sim::KvTierEvictionPolicy {
 public:
  bool refresh_on_access() const override { return false; }
};

class CostLoad final : public sim::KvTierLoadPolicy {
 public:
  bool load(double load_s, double recompute_s) const override { return load_s < recompute_s; }
};

class AlwaysLoad final : public sim::KvTierLoadPolicy {
 public:
  bool load(double, double) const override { return true; }
  bool weighs_copy_time() const override { return false; }
};

class NeverLoad final : public sim::KvTierLoadPolicy {
 public:
  bool load(double, double) const override { return false; }
  bool weighs_copy_time() const override { return false; }
};

const bool kWrites =
    kv_tier_write_registry().add({"on_eviction",
                                  "a unit is copied to host memory when HBM evicts it (vLLM's offloading "
                                  "connector, SGLang HiCache's write_back); host keeps what HBM dropped",
                                  {}},
                                 [](const core::Params&) { return std::make_unique<OnEviction>(); }) &&
    kv_tier_write_registry().add({"write_through",
                                  "every unit is copied to host memory as soon as HBM registers it (LMCache's "
                                  "store on compute, HiCache's write_through): more PCIe bytes, host holds HBM's "
                                  "units too",
                                  {}},
                                 [](const core::Params&) { return std::make_unique<WriteThrough>(); });

const bool kEvictions =
    kv_tier_eviction_registry().add({"lru", "least recently stored or loaded first", {}},
                                    [](const core::Params&) { return std::make_unique<Lru>(); }) &&
    kv_tier_eviction_registry().add({"fifo", "first stored first, whatever was loaded since", {}},
                                    [](const core::Params&) { return std::make_unique<Fifo>(); });

const bool kLoads =
    kv_tier_load_registry().add({"cost",
                                 "load when the copy (bytes per GPU / bandwidth + latency) takes less than the "
                                 "prefill time the hit saves, by the replica's cost model; recompute otherwise",
                                 {}},
                                [](const core::Params&) { return std::make_unique<CostLoad>(); }) &&
    kv_tier_load_registry().add({"always", "load every host hit", {}},
                                [](const core::Params&) { return std::make_unique<AlwaysLoad>(); }) &&
    kv_tier_load_registry().add({"never", "recompute every host hit (the tier only counts what it could save)", {}},
                                [](const core::Params&) { return std::make_unique<NeverLoad>(); });

// A request at the head of the queue never waits: what has arrived is used, the rest is cut off.
class BestEffortPrefetch final : public sim::KvTierPrefetchPolicy {
 public:
  double wait_seconds(double, double) const override { return 0; }
};

class WaitCompletePrefetch final : public sim::KvTierPrefetchPolicy {
 public:
  double wait_seconds(double, double remaining_s) const override { return remaining_s; }
};

// Waits until the prefetch has run `timeout_ms` in all (counted from its start, as HiCache counts
// its prefetch timeout), or until it ends if sooner.
class TimeoutPrefetch final : public sim::KvTierPrefetchPolicy {
 public:
  explicit TimeoutPrefetch(double timeout_s) : timeout_s_(timeout_s) {}
  double wait_seconds(double elapsed_s, double remaining_s) const override {
    return std::clamp(timeout_s_ - elapsed_s, 0.0, remaining_s);
  }

 private:
  double timeout_s_;
};

const bool kPrefetches =
    kv_tier_prefetch_registry().add({"none", "no prefetch: store units are loaded (or not) when the request is "
                                             "at the head of the queue, straight from the store",
                                     {}},
                                    [](const core::Params&) { return std::unique_ptr<sim::KvTierPrefetchPolicy>(); }) &&
    kv_tier_prefetch_registry().add(
        {"best_effort",
         "copy a request's store units into host memory while it is queued; at the head of the queue use what "
         "has arrived and cut the rest off (SGLang HiCache's best_effort)",
         {}},
        [](const core::Params&) { return std::make_unique<BestEffortPrefetch>(); }) &&
    kv_tier_prefetch_registry().add(
        {"wait_complete",
         "as best_effort, but the request at the head of the queue waits (out of the queue) until its prefetch "
         "has arrived (HiCache's wait_complete)",
         {}},
        [](const core::Params&) { return std::make_unique<WaitCompletePrefetch>(); }) &&
    kv_tier_prefetch_registry().add(
        {"timeout",
         "as wait_complete, but the wait ends when the prefetch has run timeout_ms since it started (HiCache's "
         "timeout)",
         {core::ParamSpec::real("timeout_ms", 50, "ms", "how long a prefetch may run before it is cut off")
              .range(0, 1e7)}},
        [](const core::Params& p) { return std::make_unique<TimeoutPrefetch>(p.get_float("timeout_ms") * 1e-3); });

}  // namespace
}  // namespace servesim::policies
