// Prefix caching, chunked prefill, swap preemption and prefill/decode disaggregation on hand-built
// cases whose numbers can be worked out on paper.
#include <gtest/gtest.h>

#include "sim/core/rng.h"
#include "tests/sim/cluster/cluster_harness.h"
#include "tests/sim/cluster/tier_harness.h"

namespace servesim::sim {
namespace {

using testing::ClusterSetup;
using testing::Harness;
using testing::hashed;
using testing::spec;

constexpr int64_t kMs = 1000000;

// ---- prefix caching -----------------------------------------------------------------------------

TEST(PrefixCacheTest, HitsOnAHandBuiltTraceAreExact) {
  ClusterSetup s;
  s.prefix_unit_tokens = 8;  // 2 blocks of 4 tokens per unit
  // A: 3 full units [1,2,3]. B shares units 1 and 2, then differs. C shares nothing. D repeats A
  // exactly: all 3 units match, but a hit must leave one token to compute, so only 2 are used.
  Harness h({hashed(0.0, 24, 2, {1, 2, 3}), hashed(1.0, 24, 2, {1, 2, 4}), hashed(2.0, 20, 2, {9, 8, 7}),
             hashed(3.0, 24, 2, {1, 2, 3})},
            s);
  h.run();
  ASSERT_EQ(h.obs.lookups.size(), 4u);
  EXPECT_EQ(h.obs.lookups[0].matched_units, 0);
  EXPECT_EQ(h.obs.lookups[0].hit_tokens, 0);
  EXPECT_EQ(h.obs.lookups[1].matched_units, 2);
  EXPECT_EQ(h.obs.lookups[1].hit_tokens, 16);
  EXPECT_EQ(h.obs.lookups[2].prompt_units, 3);
  EXPECT_EQ(h.obs.lookups[2].matched_units, 0);
  EXPECT_EQ(h.obs.lookups[3].matched_units, 3);
  EXPECT_EQ(h.obs.lookups[3].hit_tokens, 16);
  EXPECT_GT(h.obs.lookups[1].saved_flops, 0);
  // The hit is not computed again: B's prefill is 24 - 16 = 8 tokens attending to 16 cached ones.
  bool saw = false;
  for (const auto& sh : h.cost.shapes)
    if (sh.prefill_tokens == 8 && sh.prefill_context_tokens == 16) {
      saw = true;
      EXPECT_EQ(sh.prefill_attention_pairs, 8 * 16 + 8 * 9 / 2);
    }
  EXPECT_TRUE(saw);
  EXPECT_EQ(h.obs.find(1)->cached_tokens, 16);
  EXPECT_EQ(h.obs.find(3)->cached_tokens, 16);
}

TEST(PrefixCacheTest, PartialLastBlocksMatchButAreNotSkipped) {
  ClusterSetup s;
  s.prefix_unit_tokens = 8;
  // 20 tokens = units of 8, 8 and 4; the second request repeats it.
  Harness h({hashed(0.0, 20, 2, {1, 2, 3}), hashed(1.0, 20, 2, {1, 2, 3})}, s);
  h.run();
  EXPECT_EQ(h.obs.lookups[1].matched_units, 3);
  EXPECT_EQ(h.obs.lookups[1].hit_tokens, 16);
}

TEST(PrefixCacheTest, UnreferencedUnitsAreEvictedWhenSpaceIsNeeded) {
  ClusterSetup s;
  s.prefix_unit_tokens = 8;
  s.kv_blocks = 8;  // 32 tokens: room for one 24-token request and its growth, not two caches
  Harness h({hashed(0.0, 16, 2, {1, 2}), hashed(1.0, 24, 2, {5, 6, 7}), hashed(2.0, 16, 2, {1, 2})}, s);
  h.run();
  // The third request's prefix was evicted to make room for the second's.
  EXPECT_EQ(h.obs.lookups[2].matched_units, 0);
  EXPECT_EQ(h.cluster->replicas()[0]->kv().evictions() > 0, true);
}

TEST(PrefixCacheTest, SharedUnitsAreCountedOnce) {
  ClusterSetup s;
  s.prefix_unit_tokens = 8;
  s.base_s = 0.010;
  // Two requests share two units and run together: 4 shared blocks + their own.
  Harness h({hashed(0.0, 16, 20, {1, 2}), hashed(0.0, 17, 20, {1, 2, 3})}, s);
  h.run();
  int64_t peak = 0;
  for (const auto& st : h.obs.states) peak = std::max(peak, st.kv_blocks_used);
  // Alone, A peaks at 16+19 = 35 tokens (9 blocks) and B at 36 (9 blocks); shared, the 16-token
  // prefix (4 blocks) is held once: at most 4 + 5 + 6 = 15 blocks, not 18.
  EXPECT_LE(peak, 15);
}

// ---- chunked prefill ----------------------------------------------------------------------------

TEST(ChunkedSchedulerTest, SarathiBatchComposition) {
  ClusterSetup s;
  s.scheduler = "kind = \"chunked\"\nmax_num_batched_tokens = 8\nwatermark = 0.0\n";
  // A (4-token prompt, 10 outputs) is decoding when B's 20-token prompt arrives: each iteration
  // takes A's decode first, then a chunk of B up to the 8-token budget.
  Harness h({spec(0.0, 4, 10), spec(0.015, 20, 3)}, s);
  h.run();
  const auto& sh = h.cost.shapes;
  ASSERT_GE(sh.size(), 6u);
  EXPECT_EQ(sh[0].prefill_tokens, 4);                     // A's prompt
  EXPECT_EQ(sh[1].decode_seqs, 1);                        // A decodes; B not yet arrived
  EXPECT_EQ(sh[1].prefill_tokens, 0);
  EXPECT_EQ(sh[2].decode_seqs, 1);                        // A decodes ...
  EXPECT_EQ(sh[2].prefill_tokens, 7);                     // ... and B's first chunk fills the budget
  EXPECT_EQ(sh[2].prefill_context_tokens, 0);
  EXPECT_EQ(sh[2].prefill_logits, 0);
  EXPECT_EQ(sh[3].prefill_tokens, 7);                     // second chunk attends to the first
  EXPECT_EQ(sh[3].prefill_context_tokens, 7);
  EXPECT_EQ(sh[3].prefill_attention_pairs, 7 * 7 + 7 * 8 / 2);
  EXPECT_EQ(sh[4].prefill_tokens, 6);                     // the rest of B's prompt
  EXPECT_EQ(sh[4].prefill_context_tokens, 14);
  EXPECT_EQ(sh[4].prefill_logits, 1);
  EXPECT_EQ(sh[5].decode_seqs, 2);                        // both decode
  // B's first token comes with its last chunk, at the end of the fifth iteration; A's tokens never
  // wait for B's prefill (one per 10 ms iteration).
  EXPECT_EQ(h.obs.find(1)->first_token.ns(), 50 * kMs);
  EXPECT_EQ(h.obs.find(0)->finish.ns(), 100 * kMs);
}

TEST(ChunkedSchedulerTest, ChunkSizeCapsOneRequestPerIteration) {
  ClusterSetup s;
  s.scheduler = "kind = \"chunked\"\nmax_num_batched_tokens = 100\nchunk_size = 5\nwatermark = 0.0\n";
  Harness h({spec(0.0, 12, 1), spec(0.0, 12, 1)}, s);
  h.run();
  // Arrival of the first starts an iteration with its first chunk alone; then both progress in
  // chunks of at most 5 tokens each.
  EXPECT_EQ(h.cost.shapes[0].prefill_tokens, 5);
  EXPECT_EQ(h.cost.shapes[1].prefill_seqs, 2);
  EXPECT_EQ(h.cost.shapes[1].prefill_tokens, 10);
  for (const auto& sh : h.cost.shapes) EXPECT_LE(sh.prefill_tokens, 10);
}

// ---- swap preemption ----------------------------------------------------------------------------

TEST(SwapTest, PreemptedRequestsResumeWithoutRecompute) {
  ClusterSetup s;
  s.kv_blocks = 6;
  s.preemption = PreemptionMode::kSwap;
  s.kv_bytes_per_token = 1e6;     // 1 MB per token
  s.host_link_bytes_per_s = 1e9;  // 1 GB/s: 1 ms per token moved
  Harness h({spec(0, 8, 10), spec(0.005, 8, 10)}, s);
  h.run();
  ASSERT_EQ(h.obs.done.size(), 2u);
  EXPECT_EQ(h.obs.find(1)->preemptions, 1u);
  for (const auto& sh : h.cost.shapes) EXPECT_LE(sh.prefill_tokens, 8);  // no recompute prefill
  // Swapping out and back in adds the copy time to iterations: some last longer than 10 ms.
  bool slower = false;
  for (const auto& it : h.obs.iterations) slower = slower || it.duration.ns() > 10 * kMs;
  EXPECT_TRUE(slower);
}

TEST(SwapTest, FallsBackToRecomputeWhenHostMemoryIsFull) {
  ClusterSetup s;
  s.kv_blocks = 6;
  s.preemption = PreemptionMode::kSwap;
  s.swap_capacity_bytes = 0;
  Harness h({spec(0, 8, 10), spec(0.005, 8, 10)}, s);
  h.run();
  bool recompute = false;
  for (const auto& sh : h.cost.shapes) recompute = recompute || sh.prefill_tokens > 8;
  EXPECT_TRUE(recompute);
}

// ---- prefill/decode disaggregation --------------------------------------------------------------

TEST(DisaggregationTest, FirstTokenOnPrefillReplicaThenKvMovesToDecode) {
  ClusterSetup s;
  s.replicas = 2;
  s.prefill_replicas = 1;
  s.kv_bytes_per_token = 1e6;                // 100 tokens -> 100 MB
  s.topology.gpus_per_node = 1;              // the two replicas sit on different nodes
  s.topology.pcie_bytes_per_s = 10e9;        // bottleneck: 10 GB/s -> 10 ms
  s.topology.nic_bytes_per_s = 50e9;
  s.topology.pcie_latency_s = 1e-6;
  s.topology.nic_latency_s = 2e-6;
  Harness h({spec(0, 100, 4)}, s);
  h.run();
  ASSERT_EQ(h.obs.done.size(), 1u);
  const auto& r = h.obs.done[0];
  EXPECT_EQ(r.replica, 0u);
  EXPECT_EQ(r.decode_replica, 1u);
  EXPECT_EQ(r.first_token.ns(), 10 * kMs);  // the prefill replica's iteration produces token 1
  ASSERT_EQ(h.obs.transfers.size(), 1u);
  const auto& t = h.obs.transfers[0];
  EXPECT_DOUBLE_EQ(t.bytes, 100e6);
  // 100 MB over the 10 GB/s PCIe links (GPU -> NIC -> switch -> NIC -> GPU): 10 ms, plus the path
  // latency 1 + 2 + 2 + 1 us.
  EXPECT_EQ((t.end - t.start).ns(), 10 * kMs + 6000);
  // Then three decode iterations on the decode replica.
  EXPECT_EQ(r.finish.ns(), 10 * kMs + 10 * kMs + 6000 + 3 * 10 * kMs);
  EXPECT_DOUBLE_EQ(r.kv_transfer_bytes, 100e6);
}

TEST(DisaggregationTest, OneTokenRequestsFinishOnThePrefillReplica) {
  ClusterSetup s;
  s.replicas = 2;
  s.prefill_replicas = 1;
  Harness h({spec(0, 10, 1)}, s);
  h.run();
  EXPECT_TRUE(h.obs.transfers.empty());
  EXPECT_EQ(h.obs.done[0].decode_replica, 0u);
}

TEST(DisaggregationTest, LayerwiseStreamingOverlapsTheTransfer) {
  ClusterSetup s;
  s.replicas = 2;
  s.prefill_replicas = 1;
  s.kv_bytes_per_token = 1e6;
  s.topology.gpus_per_node = 1;
  s.topology.pcie_bytes_per_s = 10e9;
  s.layerwise = true;
  Harness h({spec(0, 100, 2)}, s);
  h.run();
  // The 10 ms transfer overlaps the 10 ms prefill: what remains is the last layer's share (the
  // test model has one layer, so all of it) -> no gain with one layer; with the overlap counted,
  // the remaining bytes are max(100 MB - 10 ms x 10 GB/s, 100 MB / 1 layer) = 100 MB.
  EXPECT_EQ((h.obs.transfers[0].end - h.obs.transfers[0].start).ns(), 10 * kMs + 6000);
}

// ---- conservation under every policy ------------------------------------------------------------

TEST(PolicyPropertyTest, RequestsAndBlocksAreConservedForEveryPolicy) {
  const char* schedulers[] = {"kind = \"continuous\"\nmax_num_seqs = 4\n",
                              "kind = \"chunked\"\nmax_num_batched_tokens = 64\nmax_num_seqs = 4\n"};
  const char* routers[] = {"kind = \"round_robin\"\n", "kind = \"least_outstanding\"\n",
                           "kind = \"power_of_two\"\n", "kind = \"consistent_hash\"\nkey = \"first_block\"\n",
                           "kind = \"prefix_affinity\"\n",
                           "kind = \"prefix_affinity\"\ncache_view = \"replica_events\"\nstaleness_ms = 20\n"};
  int runs = 0;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    for (const char* sched : schedulers) {
      for (const char* router : routers) {
        core::Rng rng(seed, "policy-property");
        ClusterSetup s;
        s.replicas = 2 + static_cast<int>(rng.uniform_int(3));
        s.prefill_replicas = rng.uniform() < 0.4 ? 1 : 0;
        s.kv_blocks = 40 + static_cast<int64_t>(rng.uniform_int(60));
        s.block_size = 4;
        s.max_context = 512;
        s.prefix_unit_tokens = rng.uniform() < 0.6 ? 8 : 0;
        s.preemption = rng.uniform() < 0.5 ? PreemptionMode::kSwap : PreemptionMode::kRecompute;
        s.swap_capacity_bytes = rng.uniform() < 0.5 ? 1e12 : 2e4;
        s.kv_bytes_per_token = 100;
        s.host_link_bytes_per_s = 1e7;
        s.per_token_s = 1e-4;
        s.scheduler = sched;
        s.router = router;
        std::vector<traces::RequestSpec> specs;
        double t = 0;
        for (int i = 0; i < 40; ++i) {
          t += rng.exponential(100.0);
          const int64_t p = 1 + static_cast<int64_t>(rng.uniform_int(120));
          traces::RequestSpec sp = spec(t, p, 1 + static_cast<int64_t>(rng.uniform_int(60)));
          const uint64_t family = rng.uniform_int(3);  // a few shared prefixes
          for (int64_t b = 0; b * 8 < p; ++b) sp.block_hashes.push_back(b < 4 ? family * 100 + static_cast<uint64_t>(b) : rng.next_u64());
          specs.push_back(sp);
        }
        Harness h(specs, s);
        ASSERT_NO_THROW(h.run()) << "seed " << seed << " " << sched << router;
        ASSERT_EQ(h.obs.done.size(), specs.size());
        size_t gaps = 0;
        for (const auto& r : h.obs.done)
          if (r.outcome == core::RequestOutcome::kCompleted) gaps += static_cast<size_t>(r.output_tokens - 1);
        EXPECT_EQ(h.obs.gaps.size(), gaps) << "seed " << seed;
        for (auto& rep : h.cluster->replicas()) rep->kv().check();
        ++runs;
      }
    }
  }
  EXPECT_EQ(runs, 24 * 2 * 6);
}

// ---- hybrid models: the KV cache per layer group -----------------------------------------------

// A model of sliding-window layers only (Mistral-7B-v0.1's shape): 1000 bytes per token, a window
// of 16 tokens, blocks of 4.
ClusterSetup window_only(int64_t kv_blocks) {
  ClusterSetup s;
  s.kv_blocks = kv_blocks;
  s.kv_layout.window_bytes_per_token = 1000;
  s.kv_layout.window = 16;
  s.attention_pattern = "S";
  s.sliding_window = 16;
  return s;
}

TEST(HybridKvTest, WindowBlocksAreFreedAsTheContextGrows) {
  // A 400-token prompt and 200 outputs. The prefill writes all 400 tokens' K and V (100 blocks);
  // every decode step after it keeps the pages of the last 15 computed tokens and the new one:
  // at most ceil(16 / 4) + 1 = 5 blocks, where full attention would end on 150.
  Harness h({spec(0.0, 400, 200)}, window_only(200));
  h.run();
  ASSERT_EQ(h.obs.done.size(), 1u);
  int64_t peak = 0, peak_after_first_step = 0;
  for (size_t i = 0; i < h.obs.states.size(); ++i) {
    peak = std::max(peak, h.obs.states[i].kv_blocks_used);
    if (h.obs.states[i].time.ns() > 10 * kMs) peak_after_first_step = std::max(peak_after_first_step, h.obs.states[i].kv_blocks_used);
  }
  EXPECT_EQ(peak, 100);
  EXPECT_LE(peak_after_first_step, 5);
  // The cost model saw each decode's attention capped at the window.
  for (const auto& sh : h.cost.shapes)
    if (sh.decode_seqs == 1) {
      EXPECT_EQ(sh.decode_window_context_tokens, 16);
      EXPECT_GT(sh.decode_context_tokens, 400);
    }
}

TEST(HybridKvTest, AdmissionAndGrowthChargeWhatTheGroupsNeed) {
  // Two requests of 40 prompt and 200 output tokens on 70 blocks. With every layer full each ends
  // on 60 blocks: they cannot both finish without preemptions. With window layers each holds at
  // most 10 blocks (its prompt) and 5 while decoding: both run side by side, never preempted.
  ClusterSetup full;
  full.kv_blocks = 70;
  Harness dense({spec(0.0, 40, 200), spec(0.0, 40, 200)}, full);
  dense.run();
  EXPECT_FALSE(dense.obs.preempted.empty());
  Harness hybrid({spec(0.0, 40, 200), spec(0.0, 40, 200)}, window_only(70));
  hybrid.run();
  EXPECT_TRUE(hybrid.obs.preempted.empty());
  EXPECT_EQ(hybrid.obs.find(0)->finish, hybrid.obs.find(1)->finish);  // decoded together throughout
  for (const auto& st : hybrid.obs.states) EXPECT_LE(st.kv_blocks_used, 20);
}

TEST(HybridKvTest, StateSnapshotsArePrefixCachedAtUnitBoundariesOnly) {
  // Full layers of 1000 bytes per token beside a 4000-byte state: a block (4 tokens) is 4000 bytes,
  // so a state is one block. Units of 8 tokens cache 2 blocks of full-layer KV and the state at
  // their end: 3 blocks.
  ClusterSetup s;
  s.prefix_unit_tokens = 8;
  s.kv_layout.full_bytes_per_token = 1000;
  s.kv_layout.state_bytes = 4000;
  s.attention_pattern = "LF";
  // A caches units [1,2,3]. B's prompt is 20 tokens, units [1,2,3']: its hit resumes at the end of
  // unit 2 (16 tokens), where a snapshot was taken. C's first 12 tokens match A's (unit 1 and half
  // of unit 2, hashed differently): the hit ends at 8, the last boundary with a snapshot.
  Harness h({hashed(0.0, 24, 2, {1, 2, 3}), hashed(1.0, 20, 2, {1, 2, 4}), hashed(2.0, 12, 2, {1, 5})}, s);
  h.run();
  ASSERT_EQ(h.obs.lookups.size(), 3u);
  EXPECT_EQ(h.obs.lookups[1].hit_tokens, 16);
  EXPECT_EQ(h.obs.lookups[2].hit_tokens, 8);
  // What stays cached: A's three units, B's unit 3' (4 tokens: 1 block + a state), C's unit 5
  // (4 tokens) = 3 x 3 + 2 + 2 blocks.
  const KvCache& kv = h.cluster->replicas()[0]->kv();
  EXPECT_EQ(kv.unit_blocks_for(8), 3);
  EXPECT_EQ(kv.cached_blocks(), 3 * 3 + 2 + 2);
  kv.check();
}

}  // namespace
}  // namespace servesim::sim
