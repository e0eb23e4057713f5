// Prefetch of a queued request's shared-store units into its replica's host tier
// ([kv_tiers.store.prefetch], issue 16), on hand-built cases whose times are worked out below: the
// three policies (best_effort cuts the prefetch off at the head of the queue, wait_complete waits
// for all of it, timeout for part of it: the units that arrived are host hits, the rest store hits),
// a request that queued long enough for its prefetch to arrive paying only the PCIe copy, and a
// replica failure while a prefetch is on the way.
#include <gtest/gtest.h>

#include "policies/kvtier/kvtier.h"
#include "sim/cluster/kv_store.h"
#include "sim/core/config.h"
#include "tests/sim/cluster/cluster_harness.h"
#include "tests/sim/cluster/tier_harness.h"

namespace servesim::sim {
namespace {

using testing::ClusterSetup;
using testing::Harness;
using testing::hashed;
using testing::host_tier_spec;
using testing::spec;
using testing::tier_policies;
using testing::TierPolicies;

constexpr int64_t kMs = 1000000;

// Two replicas, round-robin routing (requests go to replicas 0, 1, 0, 1), blocks of 4 tokens, units
// of 8 tokens (2 blocks), 4,000 bytes per block, 8 HBM blocks per replica, iterations of 10 ms + 1
// ms per token. Each replica has a host tier of 100 blocks at 16 MB/s and no latency (a unit of 2
// blocks, 8,000 B, copies in 0.5 ms; two units in 1 ms); below them a store at 4 MB/s and 1 ms
// (two units: 16,000 / 4e6 + 0.001 = 5 ms) that every unit is written to as HBM computes it
// (write_through), so A's units 1 and 2, computed on replica 0, are in the store at once.
// A prefetch of both units: 1 ms latency, then 4 ms of bytes: unit 1 has arrived at 1 + 4 x 2/4 =
// 3 ms, unit 2 at 5 ms.
ClusterSetup prefetch_case(const std::string& prefetch) {
  ClusterSetup s;
  s.replicas = 2;
  s.prefix_unit_tokens = 8;
  s.kv_blocks = 8;
  s.per_token_s = 0.001;
  s.host_tier = host_tier_spec(tier_policies("on_eviction"), 100, 4000, 1, 16e6, 0);
  const TierPolicies sp = tier_policies("write_through", "lru", "cost", prefetch);
  auto store = std::make_shared<StoreSpec>();
  store->write = sp.write;
  store->eviction = sp.eviction;
  store->load = sp.load;
  store->prefetch = sp.prefetch;
  store->capacity_blocks = 100;
  store->block_bytes_per_gpu = 4000;
  store->link_bytes_per_s = 4e6;
  store->latency_s = 0.001;
  s.kv_store = store;
  return s;
}

// A (0 s, replica 0): units 1, 2. X (0.5 s, replica 1): 4 tokens, no full unit. B (1 s, replica 0):
// unrelated. C (2 s, replica 1): 24 tokens, units 1, 2, 9: replica 1 holds none of them; 1 and 2
// are in the store. Replica 1 is idle, so C is at the head of its queue at once, 0 ms into its
// prefetch. Loading its 16 tokens saves 16 ms of prefill; the rest (8 tokens) takes 10 + 8 = 18 ms.
std::vector<traces::RequestSpec> idle_trace() {
  return {hashed(0.0, 16, 2, {1, 2}), hashed(0.5, 4, 2, {50}), hashed(1.0, 24, 2, {5, 6, 7}),
          hashed(2.0, 24, 2, {1, 2, 9})};
}

TEST(KvPrefetchTest, BestEffortCutsThePrefetchOffAtTheHeadOfTheQueue) {
  // Nothing has arrived at 0 ms: both units are cut off (16 tokens) and stay store hits, loaded
  // straight from the store (5 ms < 16 ms saved): first token 2 s + 5 + 18 ms = 2.023 s, as
  // without prefetch.
  Harness h(idle_trace(), prefetch_case("kind = \"best_effort\""));
  h.run();
  const StoreStats& st = h.cluster->kv_store()->per_replica().at(1);
  EXPECT_EQ(st.prefetches, 1u);
  EXPECT_EQ(st.prefetched_tokens, 0);
  EXPECT_EQ(st.prefetch_cut_tokens, 16);
  EXPECT_EQ(st.prefetch_waits, 0u);
  EXPECT_EQ(st.loads, 1u);
  EXPECT_EQ(h.obs.lookups[3].store_hit_tokens, 16);
  EXPECT_EQ(h.obs.lookups[3].host_hit_tokens, 0);
  EXPECT_NEAR(static_cast<double>(h.obs.find(3)->first_token.ns()), 2023.0 * kMs, 1);
}

TEST(KvPrefetchTest, WaitCompleteWaitsForTheWholePrefetchThenLoadsFromHostMemory) {
  // C leaves the queue for the 5 ms the prefetch has left; at 2.005 s both units are in replica
  // 1's host memory: a host load of 1 ms (< 16 ms saved), then 18 ms of prefill: 2.024 s.
  Harness h(idle_trace(), prefetch_case("kind = \"wait_complete\""));
  h.run();
  const StoreStats& st = h.cluster->kv_store()->per_replica().at(1);
  EXPECT_EQ(st.prefetches, 1u);
  EXPECT_EQ(st.prefetched_tokens, 16);
  EXPECT_DOUBLE_EQ(st.prefetch_bytes, 16000);
  EXPECT_EQ(st.prefetch_cut_tokens, 0);
  EXPECT_EQ(st.prefetch_waits, 1u);
  EXPECT_NEAR(st.prefetch_wait_seconds, 0.005, 1e-12);
  EXPECT_EQ(st.loads, 0u);
  const HostKvTier& host = *h.cluster->replicas()[1]->host_tier();
  EXPECT_EQ(host.stats().loads, 1u);
  EXPECT_EQ(host.stats().loaded_tokens, 16);
  EXPECT_NEAR(host.stats().load_seconds, 0.001, 1e-12);
  EXPECT_EQ(host.stats().stores, 0u);  // a unit arriving from the store is no write to host memory
  EXPECT_EQ(h.obs.lookups[3].host_hit_tokens, 16);
  EXPECT_EQ(h.obs.lookups[3].store_hit_tokens, 0);
  EXPECT_NEAR(static_cast<double>(h.obs.find(3)->first_token.ns()), 2024.0 * kMs, 1);
}

TEST(KvPrefetchTest, TimeoutWaitsUntilThePrefetchHasRunItsTimeAndUsesTheUnitsThatArrived) {
  // timeout 3 ms: C waits 3 ms (min(3 - 0, 5)). Unit 1 has arrived at 3 ms, unit 2 has not (cut:
  // 8 tokens). Then unit 1 is a host hit (0.5 ms over PCIe) and unit 2 a store hit (8,000 / 4e6 +
  // 1 ms = 3 ms over the NIC), one wait of max(0.5, 3) = 3 ms: 2 s + 3 + 3 + 18 ms = 2.024 s.
  Harness h(idle_trace(), prefetch_case("kind = \"timeout\"\ntimeout_ms = 3"));
  h.run();
  const StoreStats& st = h.cluster->kv_store()->per_replica().at(1);
  EXPECT_EQ(st.prefetched_tokens, 8);
  EXPECT_EQ(st.prefetch_cut_tokens, 8);
  EXPECT_EQ(st.prefetch_waits, 1u);
  EXPECT_NEAR(st.prefetch_wait_seconds, 0.003, 1e-12);
  EXPECT_EQ(st.loads, 1u);
  EXPECT_EQ(st.loaded_tokens, 8);
  EXPECT_NEAR(st.load_seconds, 0.003, 1e-12);
  EXPECT_EQ(h.cluster->replicas()[1]->host_tier()->stats().loaded_tokens, 8);
  EXPECT_EQ(h.obs.lookups[3].host_hit_tokens, 8);
  EXPECT_EQ(h.obs.lookups[3].store_hit_tokens, 8);
  EXPECT_NEAR(static_cast<double>(h.obs.find(3)->first_token.ns()), 2024.0 * kMs, 1);
  // A timeout longer than the prefetch waits for all of it, as wait_complete (2.024 s, 16 host tokens).
  Harness longer(idle_trace(), prefetch_case("kind = \"timeout\"\ntimeout_ms = 50"));
  longer.run();
  EXPECT_NEAR(longer.cluster->kv_store()->per_replica().at(1).prefetch_wait_seconds, 0.005, 1e-12);
  EXPECT_EQ(longer.obs.lookups[3].host_hit_tokens, 16);
  EXPECT_NEAR(static_cast<double>(longer.obs.find(3)->first_token.ns()), 2024.0 * kMs, 1);
}

TEST(KvPrefetchTest, ARequestThatQueuesLongerThanItsPrefetchPaysOnlyThePcieCopy) {
  // X (1.99 s, replica 1): 24 tokens, 2 output tokens (7 of the 8 blocks at its decode step; a
  // longer prompt would not fit the replica with prefix caching's spare block): its prefill takes
  // 10 + 24 = 34 ms (to 2.024 s), its one decode step 10 + 1 = 11 ms (to 2.035 s). C (2 s, replica
  // 1) queues behind it: at 2.024 s it needs 4 blocks for its units and 1 is free; at 2.035 s X is
  // done. C's prefetch (best_effort) arrived in full at 2.005 s, so at 2.035 s its two units are in
  // host memory: a 1 ms PCIe copy, then 18 ms of prefill: first token at 2.054 s. Without prefetch
  // the units come from the store then: 5 ms, 2.058 s: 4 ms (5 - 1) later.
  auto trace = [] {
    return std::vector<traces::RequestSpec>{hashed(0.0, 16, 2, {1, 2}), hashed(1.99, 24, 2, {60, 61, 62}),
                                            hashed(1.995, 4, 2, {70}), hashed(2.0, 24, 2, {1, 2, 9})};
  };
  Harness h(trace(), prefetch_case("kind = \"best_effort\""));
  h.run();
  const StoreStats& st = h.cluster->kv_store()->per_replica().at(1);
  EXPECT_EQ(st.prefetches, 1u);
  EXPECT_EQ(st.prefetched_tokens, 16);
  EXPECT_EQ(st.prefetch_cut_tokens, 0);
  EXPECT_EQ(st.prefetch_waits, 0u);
  EXPECT_EQ(st.loads, 0u);
  EXPECT_EQ(h.cluster->replicas()[1]->host_tier()->stats().loaded_tokens, 16);
  EXPECT_NEAR(static_cast<double>(h.obs.find(3)->first_token.ns()), 2054.0 * kMs, 1);
  Harness none(trace(), prefetch_case(""));
  none.run();
  EXPECT_EQ(none.cluster->kv_store()->per_replica().at(1).prefetches, 0u);
  EXPECT_EQ(none.cluster->kv_store()->per_replica().at(1).loaded_tokens, 16);
  EXPECT_NEAR(static_cast<double>(none.obs.find(3)->first_token.ns()), 2058.0 * kMs, 1);
}

TEST(KvPrefetchTest, AFailedReplicaLosesItsPrefetchesAndTheirCompletionsFindNothing) {
  // Replica 1 fails 1 ms into C's prefetch (wait_complete: C is out of the queue, waiting): C is
  // lost with the rest of the replica's requests, nothing lands in its (cleared) host memory, and
  // the prefetch's completion at 2.005 s changes nothing.
  Harness h(idle_trace(), prefetch_case("kind = \"wait_complete\""));
  struct Fail final : EventHandler {
    Replica* replica = nullptr;
    std::vector<RequestId> lost;
    size_t loading = 0;
    void on_event(uint64_t) override {
      loading = replica->loading();
      replica->fail(lost);
    }
  } fail;
  Replica& r1 = *h.cluster->replicas()[1];
  fail.replica = &r1;
  h.cluster->start();
  h.sim.schedule_at(core::Time::from_ns(2001 * kMs), &fail);
  h.sim.run();
  EXPECT_EQ(fail.loading, 1u);  // C, waiting for its prefetch
  EXPECT_EQ(fail.lost.size(), 1u);
  EXPECT_EQ(r1.host_tier()->units(), 0u);
  EXPECT_EQ(h.cluster->kv_store()->per_replica().at(1).prefetched_tokens, 0);
  r1.host_tier()->check();
}

}  // namespace
}  // namespace servesim::sim
