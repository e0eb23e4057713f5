#pragma once
// What the KV-tier tests share (tests/sim/cluster/kv_*_test.cc, store_*_test.cc, tier_flows_test.cc,
// unified_fabric_test.cc): requests with block hashes, and the tier policy families by kind name,
// made as the CLI makes them from [kv_tiers.<tier>.write], .eviction, .load and .prefetch.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "policies/kvtier/kvtier.h"
#include "sim/core/config.h"
#include "tests/sim/cluster/cluster_harness.h"

namespace servesim::testing {

// A request whose prompt's blocks hash to `hashes` (one per prefix unit).
inline traces::RequestSpec hashed(double t, int64_t prompt, int64_t output, std::vector<uint64_t> hashes) {
  traces::RequestSpec s = spec(t, prompt, output);
  s.block_hashes = std::move(hashes);
  return s;
}

struct TierPolicies {
  std::shared_ptr<const sim::KvTierWritePolicy> write;
  std::shared_ptr<const sim::KvTierEvictionPolicy> eviction;
  std::shared_ptr<const sim::KvTierLoadPolicy> load;
  std::shared_ptr<const sim::KvTierPrefetchPolicy> prefetch;  // null without a prefetch table
};

// The four families by kind; `prefetch` is the body of a [kv_tiers.store.prefetch] table (e.g.
// "kind = \"timeout\"\ntimeout_ms = 3"), empty for none.
inline TierPolicies tier_policies(const std::string& write = "on_eviction", const std::string& eviction = "lru",
                                  const std::string& load = "cost", const std::string& prefetch = "") {
  const std::vector<core::ParamSpec> schema = {core::ParamSpec::section("w", "kv_tier_writes", "on_eviction", "w"),
                                               core::ParamSpec::section("e", "kv_tier_evictions", "lru", "e"),
                                               core::ParamSpec::section("l", "kv_tier_loads", "cost", "l"),
                                               core::ParamSpec::section("p", "kv_tier_prefetches", "none", "p")};
  const core::Params cfg = core::parse_config("[w]\nkind = \"" + write + "\"\n[e]\nkind = \"" + eviction +
                                                  "\"\n[l]\nkind = \"" + load + "\"\n[p]\n" + prefetch + "\n",
                                              "t.toml", schema);
  return {policies::kv_tier_write_registry().make(cfg.section("w")),
          policies::kv_tier_eviction_registry().make(cfg.section("e")),
          policies::kv_tier_load_registry().make(cfg.section("l")),
          policies::kv_tier_prefetch_registry().make(cfg.section("p"))};
}

// A host tier with the policies `p` (tier_policies): each of `gpus` GPUs copies `block_bytes_per_gpu`
// of a block over its own link of `link_bytes_per_s`, `latency_s` a copy.
inline std::shared_ptr<sim::HostTierSpec> host_tier_spec(const TierPolicies& p, int64_t capacity_blocks,
                                                         double block_bytes_per_gpu, int64_t gpus,
                                                         double link_bytes_per_s, double latency_s) {
  auto t = std::make_shared<sim::HostTierSpec>();
  t->write = p.write;
  t->eviction = p.eviction;
  t->load = p.load;
  t->capacity_blocks = capacity_blocks;
  t->block_bytes_per_gpu = block_bytes_per_gpu;
  t->gpus = gpus;
  t->link_bytes_per_s = link_bytes_per_s;
  t->latency_s = latency_s;
  return t;
}

}  // namespace servesim::testing
