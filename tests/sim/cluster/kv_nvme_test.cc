// The local NVMe KV tier ([kv_tiers.nvme], issue 16) on hand-built cases: the load-vs-recompute
// decision for an NVMe hit (both outcomes, and the two stages of the bounce-buffer copy); one wait
// for a request's host, NVMe and store units; the tier's eviction order; a failed replica keeping
// its NVMe content. (Conservation across HBM, host, NVMe and store: kv_store_test.cc.)
#include <gtest/gtest.h>

#include "policies/kvtier/kvtier.h"
#include "sim/cluster/kv_nvme.h"
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

// 4,000 bytes per block per GPU, one GPU.
std::shared_ptr<NvmeTierSpec> nvme_spec(double read, double pcie, double latency_s, const std::string& load = "cost",
                                        const std::string& eviction = "lru", int64_t capacity = 100) {
  auto s = std::make_shared<NvmeTierSpec>();
  const TierPolicies p = tier_policies("on_eviction", eviction, load);
  s->write = p.write;
  s->eviction = p.eviction;
  s->load = p.load;
  s->capacity_blocks = capacity;
  s->block_bytes_per_gpu = 4000;
  s->gpus = 1;
  s->read_bytes_per_s = read;
  s->write_bytes_per_s = 1e6;
  s->pcie_bytes_per_s = pcie;
  s->latency_s = latency_s;
  return s;
}

// One replica, no host tier, NVMe below HBM. Blocks of 4 tokens, units of 8 tokens (2 blocks), 8
// HBM blocks, iterations of 10 ms + 1 ms per token.
//   A (0 s): 16 tokens, units 1 and 2.
//   B (1 s): 24 tokens, units 5, 6, 7: it needs 7 of the 8 blocks, so HBM evicts A's two units,
//     which (on_eviction, no host tier) are written to NVMe.
//   C (2 s): 24 tokens, units 1, 2, 9: units 1 and 2 (16 tokens, 4 blocks, 16,000 bytes) are on NVMe.
// Loading saves the prefill of 16 tokens: 16 x 1 ms = 16 ms (the 10 ms base is paid anyway). The
// copy, NVMe read then PCIe through the bounce buffer, pipelined, takes
// max(16,000 B / read, 16,000 B / PCIe) + latency.
ClusterSetup nvme_case(double read, double pcie, double latency_s, const std::string& load = "cost") {
  ClusterSetup s;
  s.prefix_unit_tokens = 8;
  s.kv_blocks = 8;
  s.per_token_s = 0.001;
  s.nvme_tier = nvme_spec(read, pcie, latency_s, load);
  return s;
}

std::vector<traces::RequestSpec> nvme_trace() {
  return {hashed(0.0, 16, 2, {1, 2}), hashed(1.0, 24, 2, {5, 6, 7}), hashed(2.0, 24, 2, {1, 2, 9})};
}

const uint64_t kUnit1 = KvCache::chain(0, 1), kUnit2 = KvCache::chain(KvCache::chain(0, 1), 2);

TEST(KvNvmeTest, AnNvmeHitIsLoadedWhenTheBounceCopyIsShorterThanThePrefillItSaves) {
  // Read 8 MB/s (2 ms), PCIe 4 MB/s (4 ms): the PCIe stage is the slower, 4 ms + 1 ms latency = 5 ms
  // < 16 ms saved: load. C's first token: its 5 ms copy, then the prefill of its last 8 tokens,
  // 10 + 8 = 18 ms: 2 s + 5 ms + 18 ms = 2.023 s.
  Harness h(nvme_trace(), nvme_case(8e6, 4e6, 0.001));
  h.run();
  ASSERT_EQ(h.obs.lookups.size(), 3u);
  EXPECT_EQ(h.obs.lookups[2].hit_tokens, 16);
  EXPECT_EQ(h.obs.lookups[2].nvme_hit_tokens, 16);
  EXPECT_EQ(h.obs.lookups[2].host_hit_tokens, 0);
  EXPECT_EQ(h.obs.lookups[2].store_hit_tokens, 0);
  EXPECT_NEAR(static_cast<double>(h.obs.find(2)->first_token.ns()), 2023.0 * kMs, 1);
  const NvmeKvTier& nvme = *h.cluster->replicas()[0]->nvme_tier();
  EXPECT_EQ(nvme.stats().loads, 1u);
  EXPECT_EQ(nvme.stats().loaded_tokens, 16);
  EXPECT_DOUBLE_EQ(nvme.stats().load_bytes, 16000);
  EXPECT_NEAR(nvme.stats().load_seconds, 0.005, 1e-12);
  EXPECT_NEAR(nvme.stats().saved_prefill_seconds, 0.016, 1e-12);
  EXPECT_EQ(nvme.stats().declined, 0u);
  // A's two units were written (4 blocks, 16,000 B at 1 MB/s of writes: 16 ms, off the critical
  // path); the copies stay on NVMe after the load.
  EXPECT_GE(nvme.stats().stores, 2u);
  EXPECT_TRUE(nvme.contains(kUnit1));
  EXPECT_TRUE(nvme.contains(kUnit2));
}

TEST(KvNvmeTest, CostPolicyRecomputesAnNvmeHitWhoseReadIsSlowerThanThePrefillItSaves) {
  // Read 1 MB/s (16 ms), PCIe 4 MB/s (4 ms): the read is the slower stage, 16 + 1 = 17 ms > 16 ms
  // saved: recompute. C prefills all 24 tokens: 10 + 24 = 34 ms, its first token at 2.034 s.
  Harness slow(nvme_trace(), nvme_case(1e6, 4e6, 0.001));
  slow.run();
  const NvmeKvTier& nvme = *slow.cluster->replicas()[0]->nvme_tier();
  EXPECT_EQ(nvme.stats().loads, 0u);
  EXPECT_EQ(nvme.stats().declined, 1u);
  EXPECT_EQ(nvme.stats().declined_tokens, 16);
  EXPECT_EQ(slow.obs.lookups[2].hit_tokens, 0);
  EXPECT_NEAR(static_cast<double>(slow.obs.find(2)->first_token.ns()), 2034.0 * kMs, 1);
  // `always` loads the slow copy: 17 + 18 ms, 2.035 s (later than recomputing).
  Harness always(nvme_trace(), nvme_case(1e6, 4e6, 0.001, "always"));
  always.run();
  EXPECT_EQ(always.cluster->replicas()[0]->nvme_tier()->stats().loads, 1u);
  EXPECT_NEAR(static_cast<double>(always.obs.find(2)->first_token.ns()), 2035.0 * kMs, 1);
  // `never`: C as without the tier.
  Harness never(nvme_trace(), nvme_case(8e6, 4e6, 0.001, "never"));
  never.run();
  EXPECT_NEAR(static_cast<double>(never.obs.find(2)->first_token.ns()), 2034.0 * kMs, 1);
}

TEST(KvNvmeTest, HostNvmeAndStoreUnitsOfOneRequestAreOneWait) {
  // One replica, 12 HBM blocks; a host tier of 2 blocks (one unit), an NVMe tier of 2 blocks below
  // it, the store below that. A (0 s, 24 tokens, units 1, 2, 3) runs; B (1 s, 40 tokens + 2 = 11
  // blocks) makes HBM evict A's three units, which go down the chain one tier per eviction: after
  // the three, one is in host memory, one on NVMe, one in the store. C (2 s, 32 tokens, units 1, 2,
  // 3, 9) finds them there: 8 tokens (2 blocks, 8,000 B) in each tier; 24 tokens of prefill saved
  // (24 ms).
  //   local copy: host and NVMe bytes share the GPU's PCIe link (2 MB/s): 16,000 B / 2e6 = 8 ms;
  //               the NVMe read (4 MB/s) 8,000 / 4e6 = 2 ms overlaps it; latency max(1, 2) ms:
  //               max(8, 2) + 2 = 10 ms
  //   store copy: 8,000 B / 2 MB/s + 3 ms = 7 ms, on the NIC, at the same time
  // C waits max(10, 7) = 10 ms < 24 ms (the store's cost policy decides for the whole chain), then
  // prefills its last 8 tokens in 18 ms: 2 s + 10 + 18 = 2.028 s. (Host and NVMe on separate
  // links would give max(5, 6) = 6 ms; the three copies one after another 5 + 6 + 7 = 18 ms.)
  ClusterSetup s;
  s.prefix_unit_tokens = 8;
  s.kv_blocks = 12;
  s.per_token_s = 0.001;
  s.host_tier = host_tier_spec(tier_policies("on_eviction", "lru", "cost"), 2, 4000, 1, 2e6, 0.001);
  s.nvme_tier = nvme_spec(4e6, 2e6, 0.002, "cost", "lru", 2);
  auto store = std::make_shared<StoreSpec>();
  const TierPolicies sp = tier_policies("on_eviction", "lru", "cost");
  store->write = sp.write;
  store->eviction = sp.eviction;
  store->load = sp.load;
  store->capacity_blocks = 100;
  store->block_bytes_per_gpu = 4000;
  store->link_bytes_per_s = 2e6;
  store->latency_s = 0.003;
  s.kv_store = store;
  Harness h({hashed(0.0, 24, 2, {1, 2, 3}), hashed(1.0, 40, 2, {5, 6, 7, 8, 10}),
             hashed(2.0, 32, 2, {1, 2, 3, 9})},
            s);
  h.run();
  ASSERT_EQ(h.obs.lookups.size(), 3u);
  EXPECT_EQ(h.obs.lookups[2].hit_tokens, 24);
  EXPECT_EQ(h.obs.lookups[2].host_hit_tokens, 8);
  EXPECT_EQ(h.obs.lookups[2].nvme_hit_tokens, 8);
  EXPECT_EQ(h.obs.lookups[2].store_hit_tokens, 8);
  EXPECT_NEAR(static_cast<double>(h.obs.find(2)->first_token.ns()), 2028.0 * kMs, 1);
  const Replica& r = *h.cluster->replicas()[0];
  // Each tier counts its own copy: host 8,000 / 2e6 + 1 ms = 5 ms; NVMe max(8,000 / 2e6, 8,000 /
  // 4e6) + 2 ms = 6 ms; store 7 ms. The 24 ms saved are shared by tokens: 8 ms each.
  EXPECT_NEAR(r.host_tier()->stats().load_seconds, 0.005, 1e-12);
  EXPECT_NEAR(r.nvme_tier()->stats().load_seconds, 0.006, 1e-12);
  EXPECT_NEAR(h.cluster->kv_store()->per_replica().at(0).load_seconds, 0.007, 1e-12);
  EXPECT_NEAR(r.host_tier()->stats().saved_prefill_seconds, 0.008, 1e-12);
  EXPECT_NEAR(r.nvme_tier()->stats().saved_prefill_seconds, 0.008, 1e-12);
  EXPECT_NEAR(h.cluster->kv_store()->per_replica().at(0).saved_prefill_seconds, 0.008, 1e-12);
  EXPECT_NEAR(r.nvme_tier()->local_copy_seconds(2, 2, 0.001), 0.010, 1e-12);
}

TEST(KvNvmeTest, ADeclinedStoreLoadFallsBackToTheLocalUnitsBeforeItDecidedByNvme) {
  // The tiers of the test above, a store too slow to pay (0.3 MB/s), and D (0.5 s, 20 tokens,
  // units 1, 2 and a partial third) between A and B: D hits units 1 and 2 in HBM, so unit 3 becomes
  // HBM's least recently used and B's admission evicts 3, then 1, then 2. Down the chain (one unit
  // per tier): host memory holds unit 2, NVMe unit 1, the store unit 3. C's chain: unit 1 on NVMe,
  // unit 2 in host memory, unit 3 in the store.
  //   whole chain (store's policy): local max(16,000 / 2e6 = 8 ms, 8,000 / 4e6 = 2 ms) + 2 = 10 ms,
  //     store 8,000 / 0.3e6 + 3 = 29.67 ms: waits 29.67 ms > 24 ms saved: declined (8 tokens).
  //   the units before the store unit (NVMe's policy, as there is an NVMe unit among them): 10 ms
  //     < 16 ms saved (16 tokens): loaded. C: 2 s + 10 ms + prefill of 16 tokens (26 ms) = 2.036 s.
  // With NVMe's policy `never` the chain falls back to before its first NVMe unit, unit 1: nothing
  // (the host unit behind it is not reachable): C prefills all 32 tokens, 42 ms: 2.042 s.
  for (const char* nvme_load_name : {"cost", "never"}) {
    const std::string nvme_load = nvme_load_name;
    ClusterSetup s;
    s.prefix_unit_tokens = 8;
    s.kv_blocks = 12;
    s.per_token_s = 0.001;
    s.host_tier = host_tier_spec(tier_policies("on_eviction", "lru", "cost"), 2, 4000, 1, 2e6, 0.001);
    s.nvme_tier = nvme_spec(4e6, 2e6, 0.002, nvme_load, "lru", 2);
    auto store = std::make_shared<StoreSpec>();
    const TierPolicies sp = tier_policies("on_eviction", "lru", "cost");
    store->write = sp.write;
    store->eviction = sp.eviction;
    store->load = sp.load;
    store->capacity_blocks = 100;
    store->block_bytes_per_gpu = 4000;
    store->link_bytes_per_s = 0.3e6;
    store->latency_s = 0.003;
    s.kv_store = store;
    Harness h({hashed(0.0, 24, 2, {1, 2, 3}), hashed(0.5, 20, 2, {1, 2, 11}), hashed(1.0, 40, 2, {5, 6, 7, 8, 10}),
               hashed(2.0, 32, 2, {1, 2, 3, 9})},
              s);
    h.run();
    ASSERT_EQ(h.obs.lookups.size(), 4u) << nvme_load;
    const Replica& r = *h.cluster->replicas()[0];
    const StoreStats& st = h.cluster->kv_store()->per_replica().at(0);
    EXPECT_EQ(st.loads, 0u) << nvme_load;
    EXPECT_EQ(st.declined, 1u) << nvme_load;
    EXPECT_EQ(st.declined_tokens, 8) << nvme_load;
    if (nvme_load == "cost") {
      EXPECT_EQ(h.obs.lookups[3].hit_tokens, 16);
      EXPECT_EQ(h.obs.lookups[3].nvme_hit_tokens, 8);
      EXPECT_EQ(h.obs.lookups[3].host_hit_tokens, 8);
      EXPECT_EQ(r.nvme_tier()->stats().loads, 1u);
      EXPECT_EQ(r.host_tier()->stats().loads, 1u);
      EXPECT_NEAR(static_cast<double>(h.obs.find(3)->first_token.ns()), 2036.0 * kMs, 1);
    } else {
      EXPECT_EQ(h.obs.lookups[3].hit_tokens, 0);
      EXPECT_EQ(r.nvme_tier()->stats().declined, 1u);
      EXPECT_EQ(r.nvme_tier()->stats().declined_tokens, 8);  // its own unit (the host unit behind it is lost with it)
      EXPECT_EQ(r.host_tier()->stats().loads, 0u);
      EXPECT_NEAR(static_cast<double>(h.obs.find(3)->first_token.ns()), 2042.0 * kMs, 1);
    }
  }
}

TEST(KvNvmeTest, NvmeEvictsByItsPolicy) {
  // Capacity 6 blocks, units of 2 blocks: k1, k2, k3 fill it; k1 is read; k4 comes. LRU evicts the
  // least recently used, k2; FIFO the first stored, k1. Stores are counted in bytes and write time:
  // 2 blocks x 4,000 B = 8,000 B at 1 MB/s = 8 ms each.
  for (const char* policy_name : {"lru", "fifo"}) {
    const std::string policy = policy_name;
    NvmeKvTier nvme(*nvme_spec(1e9, 1e9, 0, "cost", policy, 6));
    nvme.store(1, 2);
    nvme.store(2, 2);
    nvme.store(3, 2);
    nvme.touch(1);
    nvme.store(4, 2);
    nvme.check();
    EXPECT_EQ(nvme.totals().evictions, 1u);
    EXPECT_EQ(nvme.eviction_order(),
              policy == "lru" ? (std::vector<uint64_t>{3, 1, 4}) : (std::vector<uint64_t>{2, 3, 4}));
    EXPECT_EQ(nvme.stats().stores, 4u);
    EXPECT_DOUBLE_EQ(nvme.stats().store_bytes, 32000);
    EXPECT_NEAR(nvme.stats().store_seconds, 0.032, 1e-12);
    nvme.store(3, 2);  // here already: a refresh (LRU), no write
    EXPECT_EQ(nvme.stats().stores, 4u);
    nvme.store(9, 7);  // larger than the whole tier
    EXPECT_EQ(nvme.totals().dropped, 1u);
    nvme.check();
  }
  // The copy's two stages: 8 blocks x 4,000 B = 32,000 B, read 8 MB/s (4 ms), PCIe 16 MB/s (2 ms),
  // 0.1 ms: 4.1 ms; with 2 GPUs the bytes double but the PCIe stage stays per GPU: read 8 ms.
  NvmeKvTier one(*nvme_spec(8e6, 16e6, 1e-4));
  EXPECT_NEAR(one.local_copy_seconds(8), 0.0041, 1e-12);
  auto two_spec = nvme_spec(8e6, 16e6, 1e-4);
  two_spec->gpus = 2;
  NvmeKvTier two(*two_spec);
  EXPECT_NEAR(two.local_copy_seconds(8), 0.0081, 1e-12);
  EXPECT_DOUBLE_EQ(two.copy_bytes(8), 64000);
}

TEST(KvNvmeTest, AFailedReplicaKeepsItsNvmeContent) {
  // A's units go to NVMe when B evicts them; the replica then fails: HBM is gone, the NVMe files
  // stay (docs/kv-tiers.md: a process or GPU failure, not a node loss).
  Harness h(nvme_trace(), nvme_case(8e6, 4e6, 0.001));
  h.run();
  Replica& r0 = *h.cluster->replicas()[0];
  ASSERT_TRUE(r0.nvme_tier()->contains(kUnit1));
  const size_t units = r0.nvme_tier()->units();
  const uint64_t stores = r0.nvme_tier()->stats().stores;
  std::vector<RequestId> lost;
  r0.fail(lost);
  EXPECT_EQ(r0.kv().find(kUnit1), KvCache::kNone);
  EXPECT_TRUE(r0.nvme_tier()->contains(kUnit1));
  EXPECT_TRUE(r0.nvme_tier()->contains(kUnit2));
  EXPECT_EQ(r0.nvme_tier()->units(), units);
  EXPECT_EQ(r0.nvme_tier()->stats().stores, stores);  // dropping HBM wrote nothing down
  r0.nvme_tier()->check();
}

}  // namespace
}  // namespace servesim::sim
