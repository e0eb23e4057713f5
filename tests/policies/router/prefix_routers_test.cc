// power_of_two, consistent_hash and prefix_affinity on hand-built loads and prompts.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "policies/kvtier/kvtier.h"
#include "policies/router/router.h"
#include "sim/core/config.h"
#include "tests/policies/router/make_router.h"
#include "tests/sim/cluster/cluster_harness.h"

namespace servesim::policies {
namespace {

std::unique_ptr<sim::Router> make(const std::string& toml, uint64_t seed = 1) {
  return testing::make_router(toml, seed);
}

sim::Request with(uint64_t id, uint64_t session, std::vector<uint64_t> hashes, int64_t prompt = 0) {
  sim::Request r;
  r.id = id;
  r.session = session;
  r.block_hashes = std::move(hashes);
  r.prompt_tokens = prompt ? prompt : static_cast<int64_t>(r.block_hashes.size()) * 16;
  return r;
}

TEST(PowerOfTwoRouterTest, PicksTheLessLoadedOfTwoDistinctReplicas) {
  auto r = make("kind = \"power_of_two\"\n", 3);
  std::vector<sim::ReplicaLoad> loads(4);
  loads[0].running = 100;  // never the less loaded of a pair
  loads[1].running = 1;
  loads[2].running = 2;
  loads[3].running = 3;
  std::map<uint32_t, int> picks;
  for (int i = 0; i < 3000; ++i) ++picks[r->route(with(static_cast<uint64_t>(i), 0, {}), loads)];
  EXPECT_EQ(picks.count(0), 0u);
  // Replica 1 wins every pair it is in: pairs with 1 are 3 of the 6 equally likely pairs.
  EXPECT_NEAR(picks[1], 1500, 150);
  EXPECT_NEAR(picks[2], 1000, 120);  // wins against 0 and 3
  EXPECT_NEAR(picks[3], 500, 100);   // wins only against 0
}

TEST(ConsistentHashRouterTest, SessionsStickAndSpread) {
  auto r = make("kind = \"consistent_hash\"\nkey = \"session\"\n");
  std::vector<sim::ReplicaLoad> loads(8);
  std::map<uint64_t, uint32_t> home;
  std::map<uint32_t, int> per_replica;
  for (uint64_t i = 0; i < 8000; ++i) {
    const uint64_t session = 1 + i % 800;
    const uint32_t pick = r->route(with(i, session, {}), loads);
    auto [it, fresh] = home.emplace(session, pick);
    EXPECT_EQ(it->second, pick);
    if (fresh) ++per_replica[pick];
  }
  for (const auto& [replica, n] : per_replica) EXPECT_NEAR(n, 100, 45) << replica;
  // By first block: the same first block lands on the same replica whatever the session.
  auto b = make("kind = \"consistent_hash\"\nkey = \"first_block\"\n");
  EXPECT_EQ(b->route(with(1, 5, {42, 1}), loads), b->route(with(2, 9, {42, 7, 8}), loads));
}

TEST(PrefixAffinityRouterTest, LongestMatchUnlessImbalanced) {
  auto r = make("kind = \"prefix_affinity\"\ncache_threshold = 0.5\nbalance_abs_threshold = 4\n");
  std::vector<sim::ReplicaLoad> loads(3);
  // A new prompt with no match anywhere goes to the replica whose tree is smallest (all empty:
  // replica 0), then its prefix is remembered there.
  EXPECT_EQ(r->route(with(0, 0, {1, 2, 3, 4}), loads), 0u);
  loads[0].running = 1;
  // Something else: no match; trees: replica 0 holds 4 blocks, others 0 -> replica 1.
  EXPECT_EQ(r->route(with(1, 0, {9, 9, 9, 9}), loads), 1u);
  loads[1].running = 1;
  // Shares 3 of 4 blocks with the first prompt (75% > 50%): back to replica 0.
  EXPECT_EQ(r->route(with(2, 0, {1, 2, 3, 5}), loads), 0u);
  // Shares 1 of 4 (25%): no affinity; the smallest tree is replica 2's.
  EXPECT_EQ(r->route(with(3, 0, {1, 7, 7, 7}), loads), 2u);
  // Imbalance (max - min > 4 and max > min): the least loaded wins regardless of the match.
  loads[0].running = 10;
  loads[1].running = 3;
  loads[2].running = 2;
  EXPECT_EQ(r->route(with(4, 0, {1, 2, 3, 4}), loads), 2u);
}

TEST(PrefixAffinityRouterTest, ReplicaEventsArriveLate) {
  // Two replicas with prefix caching; the router learns their caches from insert events 50 ms late.
  testing::ClusterSetup s;
  s.replicas = 2;
  s.prefix_unit_tokens = 8;
  s.router = "kind = \"prefix_affinity\"\ncache_view = \"replica_events\"\nstaleness_ms = 50\ncache_threshold = 0.3\n";
  auto req = [](double t, std::vector<uint64_t> h) {
    traces::RequestSpec sp = testing::spec(t, static_cast<int64_t>(h.size()) * 8, 2);
    sp.block_hashes = std::move(h);
    return sp;
  };
  // The first request lands on replica 0 (both empty). The second, 20 ms later, finds no event yet
  // (stale view): it goes to replica 1 (tie on view size, lower load). The third, 100 ms later,
  // sees replica 0's cache and follows its prefix there.
  testing::Harness h({req(0.0, {1, 2, 3, 4}), req(0.020, {1, 2, 3, 4}), req(0.100, {1, 2, 3, 4})}, s);
  h.run();
  EXPECT_EQ(h.obs.find(0)->replica, 0u);
  EXPECT_EQ(h.obs.find(1)->replica, 1u);
  EXPECT_EQ(h.obs.find(2)->replica, 0u);
  EXPECT_EQ(h.obs.find(2)->cached_tokens, 24);
}

// tiered_prefix_affinity on replicas whose tiers are filled by hand: 3 replicas, each with a host
// tier (on_eviction), and a shared store written through (every unit HBM registers is copied there).
// Units of 8 tokens; a prompt of 16 tokens is 2 units. With the default weights a replica scores
// 1 per unit in its HBM, 0.75 in its host memory, 0.5 in the store:
//   prefix P: in replica 0's HBM (2.0), in replica 1's host memory (1.5), replica 2 only through the
//             store (1.0): replica 0, though it is the busiest.
//   prefix Q: in replica 1's host memory (1.5), elsewhere in the store (1.0): replica 1.
//   prefix S: only in the store, for every replica (1.0 each, 0.5 of the prompt > cache_threshold
//             0.4): the least loaded, replica 1, not replica 0 which computed it.
TEST(TieredPrefixAffinityRouterTest, PrefersHbmThenHostThenStoreAndSpreadsStoreHits) {
  testing::ClusterSetup s;
  s.replicas = 3;
  s.prefix_unit_tokens = 8;
  s.kv_blocks = 100;
  const std::vector<core::ParamSpec> schema = {core::ParamSpec::section("w", "kv_tier_writes", "on_eviction", "w"),
                                               core::ParamSpec::section("t", "kv_tier_writes", "write_through", "t"),
                                               core::ParamSpec::section("e", "kv_tier_evictions", "lru", "e"),
                                               core::ParamSpec::section("l", "kv_tier_loads", "cost", "l")};
  const core::Params cfg = core::parse_config("[w]\n[t]\n[e]\n[l]\n", "t.toml", schema);
  auto host = std::make_shared<sim::HostTierSpec>();
  host->write = kv_tier_write_registry().make(cfg.section("w"));
  host->eviction = kv_tier_eviction_registry().make(cfg.section("e"));
  host->load = kv_tier_load_registry().make(cfg.section("l"));
  host->capacity_blocks = 100;
  host->block_bytes_per_gpu = 100;
  host->link_bytes_per_s = 1e9;
  s.host_tier = host;
  auto store = std::make_shared<sim::StoreSpec>();
  store->write = kv_tier_write_registry().make(cfg.section("t"));
  store->eviction = host->eviction;
  store->load = host->load;
  store->capacity_blocks = 1000;
  store->block_bytes_per_gpu = 100;
  store->link_bytes_per_s = 1e9;
  s.kv_store = store;
  testing::Harness h(std::vector<traces::RequestSpec>{}, s);
  std::vector<sim::Replica*> reps;
  for (const auto& r : h.cluster->replicas()) reps.push_back(r.get());
  auto router = make("kind = \"tiered_prefix_affinity\"\ncache_threshold = 0.4\n");
  router->bind(reps, h.sim);
  // Registers a prompt's units in a replica's HBM; `evict`: then pushes them out (to its host tier).
  auto cache = [&](uint32_t replica, std::vector<uint64_t> hashes, bool evict) {
    sim::KvCache& kv = reps[replica]->kv_cache();
    uint64_t key = 0;
    for (uint64_t hsh : hashes) {
      key = sim::KvCache::chain(key, hsh);
      kv.unref(kv.insert(key, 2));
    }
    if (evict) {
      const int64_t all = kv.available();
      ASSERT_TRUE(kv.try_allocate(all));
      kv.release(all);
    }
  };
  cache(1, {1, 2}, true);   // P to replica 1's host memory (and the store)
  cache(1, {3, 4}, true);   // Q likewise
  cache(0, {5, 6}, true);   // S to replica 0's host memory and the store ...
  cache(0, {1, 2}, false);  // P in replica 0's HBM
  ASSERT_TRUE(reps[1]->host_tier()->contains(sim::KvCache::chain(0, 1)));
  std::vector<sim::ReplicaLoad> loads(3);
  loads[0].queued = 3;  // replica 0 is the busiest (not imbalanced: within 32 requests)
  loads[2].queued = 1;
  EXPECT_EQ(router->route(with(1, 0, {1, 2}, 16), loads), 0u);
  EXPECT_EQ(router->route(with(2, 0, {3, 4}, 16), loads), 1u);
  // ... S in the store only: replica 0's host memory is lost (a failure; the store keeps S).
  std::vector<sim::RequestId> lost;
  reps[0]->fail(lost);
  reps[0]->repair();
  ASSERT_TRUE(h.cluster->kv_store()->contains(sim::KvCache::chain(0, 5)));
  ASSERT_FALSE(reps[0]->host_tier()->contains(sim::KvCache::chain(0, 5)));
  EXPECT_EQ(router->route(with(3, 0, {5, 6}, 16), loads), 1u);
}

// tiered_prefix_affinity with NVMe tiers (no host tier): 2 replicas, each with an NVMe tier written
// on HBM's evictions, and a store written through. Prefix P (2 units) is evicted from replica 1's
// HBM to its NVMe; it is in the store for both. Replica 1 is the busier (1 queued vs 0):
//   default nvme_weight (0.625): replica 1 scores 2 x 0.625 = 1.25, replica 0 2 x 0.5 = 1.0 (the
//     store): replica 1.
//   nvme_weight = 0.5: 1.0 each, equal scores go to the least loaded: replica 0.
TEST(TieredPrefixAffinityRouterTest, NvmeUnitsCountNvmeWeightBetweenHostAndStore) {
  testing::ClusterSetup s;
  s.replicas = 2;
  s.prefix_unit_tokens = 8;
  s.kv_blocks = 100;
  const std::vector<core::ParamSpec> schema = {core::ParamSpec::section("w", "kv_tier_writes", "on_eviction", "w"),
                                               core::ParamSpec::section("t", "kv_tier_writes", "write_through", "t"),
                                               core::ParamSpec::section("e", "kv_tier_evictions", "lru", "e"),
                                               core::ParamSpec::section("l", "kv_tier_loads", "cost", "l")};
  const core::Params cfg = core::parse_config("[w]\n[t]\n[e]\n[l]\n", "t.toml", schema);
  auto nvme = std::make_shared<sim::NvmeTierSpec>();
  nvme->write = kv_tier_write_registry().make(cfg.section("w"));
  nvme->eviction = kv_tier_eviction_registry().make(cfg.section("e"));
  nvme->load = kv_tier_load_registry().make(cfg.section("l"));
  nvme->capacity_blocks = 100;
  nvme->block_bytes_per_gpu = 100;
  nvme->read_bytes_per_s = nvme->write_bytes_per_s = nvme->pcie_bytes_per_s = 1e9;
  s.nvme_tier = nvme;
  auto store = std::make_shared<sim::StoreSpec>();
  store->write = kv_tier_write_registry().make(cfg.section("t"));
  store->eviction = nvme->eviction;
  store->load = nvme->load;
  store->capacity_blocks = 1000;
  store->block_bytes_per_gpu = 100;
  store->link_bytes_per_s = 1e9;
  s.kv_store = store;
  for (const char* weight : {"", "nvme_weight = 0.5\n"}) {
    testing::Harness h(std::vector<traces::RequestSpec>{}, s);
    std::vector<sim::Replica*> reps;
    for (const auto& r : h.cluster->replicas()) reps.push_back(r.get());
    auto router = make(std::string("kind = \"tiered_prefix_affinity\"\ncache_threshold = 0.4\n") + weight);
    router->bind(reps, h.sim);
    sim::KvCache& kv = reps[1]->kv_cache();
    uint64_t key = 0;
    for (uint64_t hsh : {1, 2}) {
      key = sim::KvCache::chain(key, hsh);
      kv.unref(kv.insert(key, 2));
    }
    const int64_t all = kv.available();
    ASSERT_TRUE(kv.try_allocate(all));
    kv.release(all);
    ASSERT_TRUE(reps[1]->nvme_tier()->contains(sim::KvCache::chain(0, 1)));
    ASSERT_TRUE(h.cluster->kv_store()->contains(sim::KvCache::chain(0, 1)));
    std::vector<sim::ReplicaLoad> loads(2);
    loads[1].queued = 1;
    EXPECT_EQ(router->route(with(1, 0, {1, 2}, 16), loads), *weight ? 0u : 1u) << weight;
  }
}

}  // namespace
}  // namespace servesim::policies
