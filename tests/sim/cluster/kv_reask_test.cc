// A waiting fresh request's HBM and tier hits are asked again each time the scheduler considers it
// and cannot admit it, until it is admitted or a load for it starts (issue 16; vLLM V1 asks its
// prefix cache and its KV connector about a waiting request at every step): on hand-built cases
// whose times are worked out below, a request whose HBM prefix is evicted to host memory while it
// waits for blocks loads it back, one whose prefix another replica writes to the store while it
// waits loads it from the store, and the first lookup and the declines are counted once however
// often the request is asked; a request whose store prefetch is cut off at its first ask, asked
// again while it waits, loads what arrived from host memory and the rest from the store once.
#include <gtest/gtest.h>

#include "policies/kvtier/kvtier.h"
#include "sim/cluster/kv_store.h"
#include "tests/sim/cluster/cluster_harness.h"
#include "tests/sim/cluster/tier_harness.h"

namespace servesim::sim {
namespace {

using testing::ClusterSetup;
using testing::Harness;
using testing::hashed;
using testing::host_tier_spec;
using testing::tier_policies;
using testing::TierPolicies;

constexpr int64_t kMs = 1000000;

// One replica of 8 HBM blocks of 4 tokens, units of 8 tokens (2 blocks), 1000 bytes per token per
// GPU (4,000 per block), iterations of 10 ms + 1 ms per token; a host tier (on_eviction, LRU, 100
// blocks) at 4 MB/s and 1 ms: a unit (8,000 B) copies in 8,000 / 4e6 + 1 ms = 3 ms.
ClusterSetup host_case(const std::string& load) {
  ClusterSetup s;
  s.prefix_unit_tokens = 8;
  s.kv_blocks = 8;
  s.per_token_s = 0.001;
  s.host_tier = host_tier_spec(tier_policies("on_eviction", "lru", load), 100, 4000, 1, 4e6, 0.001);
  return s;
}

// P (0 s, 16 tokens, units 1 and 2, 1 output) prefills 0-26 ms and leaves its two units (4 blocks)
// in HBM, unreferenced. A (30 ms, 4 tokens, 16 outputs) prefills 30-44 ms (1 block), then decodes
// 15 steps of 11 ms, the k-th planned at 44 + 11 (k - 1) ms and holding ceil((4 + k) / 4) blocks:
// done at 44 + 165 = 209 ms. C (100 ms, 24 tokens, units 1, 2, 9, 2 outputs) is first considered
// at 110 ms (step 7): units 1 and 2 in HBM, nothing in the tier. Admitting it takes the hit's 4
// evictable blocks and 2 more (6); A holds 3, so 8 - 4 - 3 free + 4 evictable = 5: it waits, and
// waits at every step after (A grows). At step 13 (176 ms) A's 5th block evicts the least recently
// used unit, unit 1 (registered first), to host memory (1 block left free); unit 2 stays (A never
// holds more than 5 blocks).
std::vector<traces::RequestSpec> host_trace() {
  return {hashed(0.0, 16, 1, {1, 2}), hashed(0.030, 4, 16, {90}), hashed(0.100, 24, 2, {1, 2, 9})};
}

TEST(KvReaskTest, AFreshRequestWhoseHbmPrefixIsEvictedWhileItWaitsLoadsItFromHostMemory) {
  // Asked again from step 14 (187 ms) on: unit 1 in host memory, unit 2 in HBM behind it. The load
  // (3 ms) against the 16 ms of prefill it saves (24 tokens from 0 less 8 from 16): load, but it
  // needs unit 1's 2 blocks and unit 2's 2 evictable ones (4) while 1 free + 2 evictable = 3 are
  // available: it waits for blocks (admitting nothing). A leaves at 209 ms: the load, 209-212 ms;
  // C back at the head, admitted with units 1 and 2 cached (16 tokens): a prefill of 8 tokens, 10 +
  // 8 = 18 ms: first token at 230 ms, its second at 241 ms.
  // (Asked once, as before: its answer at 110 ms, nothing in the tier, was final; admitted at 209
  // ms with unit 1 gone from HBM, so no hit (unit 2 alone breaks the chain): 24 tokens, 10 + 24 =
  // 34 ms, first token at 243 ms.)
  Harness h(host_trace(), host_case("cost"));
  h.run();  // under the invariant checker (the harness's)
  EXPECT_EQ(h.obs.find(1)->finish.ns(), 209 * kMs);
  EXPECT_EQ(h.obs.find(2)->first_token.ns(), 230 * kMs);
  EXPECT_EQ(h.obs.find(2)->finish.ns(), 241 * kMs);
  const KvTierStats& st = h.cluster->replicas()[0]->host_tier()->stats();
  EXPECT_EQ(st.loads, 1u);
  EXPECT_EQ(st.loaded_tokens, 8);
  EXPECT_DOUBLE_EQ(st.load_bytes, 8000);
  EXPECT_NEAR(st.load_seconds, 0.003, 1e-12);
  EXPECT_NEAR(st.saved_prefill_seconds, 0.016, 1e-12);
  EXPECT_EQ(st.declined, 0u);
  // One first lookup for C, however often it was asked: 16 tokens hit (its cached tokens), 8 of
  // them from host memory; no reload.
  ASSERT_EQ(h.obs.lookups.size(), 3u);
  EXPECT_FALSE(h.obs.lookups[2].reload);
  EXPECT_EQ(h.obs.lookups[2].hit_tokens, 16);
  EXPECT_EQ(h.obs.lookups[2].host_hit_tokens, 8);
  EXPECT_EQ(h.obs.find(2)->cached_tokens, 16);
}

TEST(KvReaskTest, DeclinesOfARequestAskedAtEveryStepAreCountedOnce) {
  // load = "never": C's host hit (unit 1, 8 tokens) is declined at steps 14 and 15 and at 209 ms,
  // when it is admitted on that answer: one decline of 8 tokens, the results those of no tier (C
  // recomputes its 24 tokens: first token at 243 ms), and C's first lookup hit nothing.
  Harness h(host_trace(), host_case("never"));
  h.run();
  const KvTierStats& st = h.cluster->replicas()[0]->host_tier()->stats();
  EXPECT_EQ(st.loads, 0u);
  EXPECT_EQ(st.declined, 1u);
  EXPECT_EQ(st.declined_tokens, 8);
  EXPECT_EQ(h.obs.find(2)->first_token.ns(), 243 * kMs);
  ASSERT_EQ(h.obs.lookups.size(), 3u);
  EXPECT_EQ(h.obs.lookups[2].hit_tokens, 0);
  EXPECT_EQ(h.obs.find(2)->cached_tokens, 0);
}

// Two replicas (round-robin: requests go to 0, 1, 0, 1), each 8 HBM blocks, no host tier; a store
// below them that every unit is written to as HBM registers it (write_through), at 4 MB/s and 1 ms:
// two units (16,000 B) copy in 16,000 / 4e6 + 1 ms = 5 ms.
//   A (0 s, replica 0): 4 tokens, 20 outputs: prefill 0-14 ms, then 19 decode steps of 11 ms, the
//     k-th planned at 14 + 11 (k - 1) ms holding ceil((4 + k) / 4) blocks: done at 14 + 209 = 223 ms.
//   F (1 ms, replica 1): 4 tokens, 1 output (replica 1 idle again at 15 ms).
//   C (100 ms, replica 0): 24 tokens, units 1, 2, 9, 2 outputs: first considered at 102 ms (step
//     9): nothing in replica 0's HBM nor in the store. Admitting it takes 6 blocks; A holds 3 or
//     more from then on (8 - 3 = 5 < 6): it waits until A leaves.
//   W (150 ms, replica 1): 16 tokens, units 1 and 2, 1 output: prefilled 150-176 ms on the idle
//     replica 1, which writes units 1 and 2 to the store.
ClusterSetup store_case() {
  ClusterSetup s;
  s.replicas = 2;
  s.prefix_unit_tokens = 8;
  s.kv_blocks = 8;
  s.per_token_s = 0.001;
  const TierPolicies p = tier_policies("write_through", "lru", "cost");
  auto st = std::make_shared<StoreSpec>();
  st->write = p.write;
  st->eviction = p.eviction;
  st->load = p.load;
  st->capacity_blocks = 100;
  st->block_bytes_per_gpu = 4000;
  st->gpus = 1;
  st->link_bytes_per_s = 4e6;
  st->latency_s = 0.001;
  s.kv_store = st;
  return s;
}

TEST(KvReaskTest, AFreshRequestWhosePrefixAnotherReplicaWritesToTheStoreWhileItWaitsLoadsItFromTheStore) {
  // Asked again at every step: from the first after W's units reach the store (by 190 ms, step
  // 17) it finds units 1 and 2 there: the 5 ms copy against 16 ms of prefill saved: load, but the 4
  // blocks it needs are more than the 8 - 5 (A's blocks from step 13 on) = 3 available: it waits
  // for blocks. A leaves at 223 ms: the load, 223-228 ms; then C is admitted with 16 tokens cached
  // and prefills 8: 10 + 8 = 18 ms, first token at 246 ms.
  // (Asked once, as before: its answer at 102 ms, nothing anywhere, was final: admitted at 223 ms
  // with no hit, 10 + 24 = 34 ms, first token at 257 ms.)
  const std::vector<traces::RequestSpec> trace = {hashed(0.0, 4, 20, {90}), hashed(0.001, 4, 1, {91}),
                                                  hashed(0.100, 24, 2, {1, 2, 9}),
                                                  hashed(0.150, 16, 1, {1, 2})};
  Harness h(trace, store_case());
  h.run();
  EXPECT_EQ(h.obs.find(0)->finish.ns(), 223 * kMs);
  EXPECT_EQ(h.obs.find(2)->first_token.ns(), 246 * kMs);
  const StoreStats& st = h.cluster->kv_store()->per_replica().at(0);
  EXPECT_EQ(st.loads, 1u);
  EXPECT_EQ(st.loaded_tokens, 16);
  EXPECT_DOUBLE_EQ(st.load_bytes, 16000);
  EXPECT_NEAR(st.load_seconds, 0.005, 1e-12);
  EXPECT_EQ(st.cross_tokens, 16);  // written by replica 1
  EXPECT_EQ(st.declined, 0u);
  ASSERT_EQ(h.obs.lookups.size(), 4u);
  const core::PrefixLookup* c = nullptr;
  for (const auto& l : h.obs.lookups)
    if (l.replica == 0 && l.prompt_tokens == 24) c = &l;
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->reload);
  EXPECT_EQ(c->hit_tokens, 16);
  EXPECT_EQ(c->store_hit_tokens, 16);
  EXPECT_EQ(h.obs.find(2)->cached_tokens, 16);
}

// Two replicas (round-robin), 8 HBM blocks each; a host tier per replica (100 blocks, 16 MB/s, no
// latency: a unit copies in 0.5 ms) and a store below (write_through, 4 MB/s, 1 ms: a unit copies in
// 8,000 / 4e6 + 1 ms = 3 ms) that prefetches a queued request's units into host memory
// (best_effort: cut off at its first ask). A prefetch of two units: 1 ms latency, then 4 ms of
// bytes: unit 1 arrives 3 ms after it starts, unit 2 at 5 ms.
ClusterSetup prefetch_case() {
  ClusterSetup s = store_case();
  s.host_tier = host_tier_spec(tier_policies("on_eviction"), 100, 4000, 1, 16e6, 0);
  auto st = std::make_shared<StoreSpec>(*s.kv_store);
  st->prefetch = tier_policies("write_through", "lru", "cost", "kind = \"best_effort\"").prefetch;
  s.kv_store = st;
  return s;
}

TEST(KvReaskTest, APrefetchCutOffAtTheFirstAskIsNeitherLostNorCopiedAgainWhenTheRequestIsAskedAgain) {
  // A (0 s, replica 0): units 1 and 2, written to the store. Y (1.901 s, replica 1): 16 tokens
  // (units 70, 71), 12 outputs (7 blocks at its last step; 8 would not fit with prefix caching's
  // spare block): prefill to 1.927 s, then 11 decode steps of 11 ms, the k-th ending at 1.927 +
  // 0.011 k s and holding ceil((16 + k) / 4) blocks: done at 2.048 s. W (1.95 s, replica
  // 0): a filler. C (2 s, replica 1): units 1, 2, 9; its prefetch of units 1 and 2 starts at 2 s.
  // First asked at 2.004 s (the end of Y's 7th step), 4 ms into its prefetch: unit 1 has arrived
  // and lands in host memory, unit 2 is cut off (8 tokens). Its chain: unit 1 in host memory, unit
  // 2 in the store: load (one wait of max(0.5, 3) = 3 ms against 16 ms of prefill saved), but the 4
  // blocks are more than the 8 - 6 (Y's) available: it waits, asked again at each of Y's steps,
  // its prefetch already over (no second wait, no second copy). Y leaves at 2.048 s: the load,
  // unit 1 from host memory and unit 2 from the store, to 2.051 s; a prefill of 8 tokens, 10 + 8 =
  // 18 ms: first token at 2.069 s.
  const std::vector<traces::RequestSpec> trace = {hashed(0.0, 16, 1, {1, 2}), hashed(1.901, 16, 12, {70, 71}),
                                                  hashed(1.95, 4, 1, {80}), hashed(2.0, 24, 2, {1, 2, 9})};
  Harness h(trace, prefetch_case());
  h.run();
  EXPECT_EQ(h.obs.find(1)->finish.ns(), 2048 * kMs);
  const StoreStats& st = h.cluster->kv_store()->per_replica().at(1);
  EXPECT_EQ(st.prefetches, 1u);
  EXPECT_EQ(st.prefetched_tokens, 8);
  EXPECT_EQ(st.prefetch_cut_tokens, 8);
  EXPECT_EQ(st.prefetch_waits, 0u);
  EXPECT_EQ(st.loads, 1u);
  EXPECT_EQ(st.loaded_tokens, 8);  // unit 2 only: unit 1 came with the prefetch
  const KvTierStats& host = h.cluster->replicas()[1]->host_tier()->stats();
  EXPECT_EQ(host.loads, 1u);
  EXPECT_EQ(host.loaded_tokens, 8);
  const core::PrefixLookup* c = nullptr;
  for (const auto& l : h.obs.lookups)
    if (l.replica == 1 && l.prompt_tokens == 24) c = &l;
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->hit_tokens, 16);
  EXPECT_EQ(c->host_hit_tokens, 8);
  EXPECT_EQ(c->store_hit_tokens, 8);
  EXPECT_EQ(h.obs.find(3)->first_token.ns(), 2069 * kMs);
}

}  // namespace
}  // namespace servesim::sim
