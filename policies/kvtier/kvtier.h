#pragma once
// KV-tier policies (issue 16): what goes down to the host tier, what it evicts, what comes back.
// The interfaces are in sim/cluster/kv_tier.h (the mechanism); implementations sit in kvtier.cc
// and register themselves in three families, selected in TOML under [kv_tiers.host]:
//   write    (kv_tier_writes):    on_eviction, write_through
//   eviction (kv_tier_evictions): lru, fifo
//   load     (kv_tier_loads):     cost, always, never
// and, for the shared store only ([kv_tiers.store.prefetch]):
//   prefetch (kv_tier_prefetches): none, best_effort, wait_complete, timeout

#include "sim/cluster/kv_tier.h"
#include "sim/core/params.h"

namespace servesim::policies {

using KvTierWriteRegistry = core::Registry<sim::KvTierWritePolicy>;
using KvTierEvictionRegistry = core::Registry<sim::KvTierEvictionPolicy>;
using KvTierLoadRegistry = core::Registry<sim::KvTierLoadPolicy>;
using KvTierPrefetchRegistry = core::Registry<sim::KvTierPrefetchPolicy>;
KvTierWriteRegistry& kv_tier_write_registry();
KvTierEvictionRegistry& kv_tier_eviction_registry();
KvTierLoadRegistry& kv_tier_load_registry();
// Its `none` kind makes a null policy (no prefetch).
KvTierPrefetchRegistry& kv_tier_prefetch_registry();

}  // namespace servesim::policies
