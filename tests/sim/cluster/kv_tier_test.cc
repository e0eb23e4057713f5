// The host-DRAM KV tier (issue 16, first slice) on hand-built cases: the load-vs-recompute decision
// and the time a load costs, worked out on paper; the host tier's eviction order by policy; and
// the conservation of prefix units across HBM and host over a long random run, against a reference
// model of the tier written here.
#include <gtest/gtest.h>

#include <list>
#include <map>
#include <set>

#include "policies/kvtier/kvtier.h"
#include "sim/core/config.h"
#include "sim/core/rng.h"
#include "tests/sim/cluster/cluster_harness.h"
#include "tests/sim/cluster/tier_harness.h"

namespace servesim::sim {
namespace {

using testing::ClusterSetup;
using testing::Harness;
using testing::hashed;
using testing::spec;
using testing::tier_policies;
using testing::TierPolicies;

constexpr int64_t kMs = 1000000;

// A host tier's policies by kind name, as [kv_tiers.host] would select them.
std::shared_ptr<HostTierSpec> tier_spec(const std::string& write, const std::string& eviction, const std::string& load) {
  const TierPolicies p = tier_policies(write, eviction, load);
  auto s = std::make_shared<HostTierSpec>();
  s->write = p.write;
  s->eviction = p.eviction;
  s->load = p.load;
  return s;
}

// Blocks of 4 tokens, units of 8 tokens (2 blocks), 1000 bytes per token per GPU (4000 per block),
// iterations of 10 ms + 1 ms per token. A (16 tokens, units 1 and 2) runs first; B (24 tokens,
// units 5, 6, 7) needs 7 of the 8 HBM blocks, so HBM evicts A's two units (4 blocks) and, with
// on_eviction, they go to host memory; C (24 tokens, units 1, 2, 9) at 2 s then finds 16 tokens
// (4 blocks, 16,000 bytes) in host memory and none in HBM.
//
// Loading saves the prefill of 16 tokens: with the linear cost model that is 16 x 1 ms = 16 ms
// (the 10 ms base is paid with or without the hit). The load takes 16,000 B / bandwidth + latency.
ClusterSetup tier_case(double bandwidth, double latency_s, const std::string& load = "cost") {
  ClusterSetup s;
  s.prefix_unit_tokens = 8;
  s.kv_blocks = 8;
  s.per_token_s = 0.001;
  auto t = tier_spec("on_eviction", "lru", load);
  t->capacity_blocks = 100;
  t->block_bytes_per_gpu = 4000;
  t->gpus = 1;
  t->link_bytes_per_s = bandwidth;
  t->latency_s = latency_s;
  s.host_tier = t;
  return s;
}

std::vector<traces::RequestSpec> tier_trace() {
  return {hashed(0.0, 16, 2, {1, 2}), hashed(1.0, 24, 2, {5, 6, 7}), hashed(2.0, 24, 2, {1, 2, 9})};
}

TEST(KvTierTest, CostPolicyLoadsWhenTheCopyIsFasterThanThePrefillItSaves) {
  // 4 MB/s, 1 ms: 16,000 / 4e6 + 0.001 = 5 ms < 16 ms saved: load.
  Harness fast(tier_trace(), tier_case(4e6, 0.001));
  fast.run();
  const KvTierStats& st = fast.cluster->replicas()[0]->host_tier()->stats();
  // A's two units when B pushed them out, then B's three as C's load (2 blocks free, 4 needed: unit 5)
  // and C's prefill (unit 9 and a private block: units 6 and 7) made room.
  EXPECT_EQ(st.stores, 5u);
  EXPECT_EQ(st.loads, 1u);
  EXPECT_EQ(st.loaded_tokens, 16);
  EXPECT_DOUBLE_EQ(st.load_bytes, 16000);
  EXPECT_NEAR(st.load_seconds, 0.005, 1e-12);
  EXPECT_NEAR(st.saved_prefill_seconds, 0.016, 1e-12);
  EXPECT_EQ(st.declined, 0u);
  ASSERT_EQ(fast.obs.lookups.size(), 3u);
  EXPECT_EQ(fast.obs.lookups[2].hit_tokens, 16);
  EXPECT_EQ(fast.obs.lookups[2].host_hit_tokens, 16);
  EXPECT_EQ(fast.obs.find(2)->cached_tokens, 16);

  // 1 MB/s, 1 ms: 16,000 / 1e6 + 0.001 = 17 ms > 16 ms saved: recompute.
  Harness slow(tier_trace(), tier_case(1e6, 0.001));
  slow.run();
  const KvTierStats& sl = slow.cluster->replicas()[0]->host_tier()->stats();
  EXPECT_EQ(sl.loads, 0u);
  EXPECT_EQ(sl.declined, 1u);
  EXPECT_EQ(sl.declined_tokens, 16);
  EXPECT_EQ(slow.obs.lookups[2].hit_tokens, 0);
  EXPECT_EQ(slow.obs.find(2)->cached_tokens, 0);

  // `always` loads even the slow copy, `never` recomputes even the fast one.
  Harness always(tier_trace(), tier_case(1e6, 0.001, "always"));
  always.run();
  EXPECT_EQ(always.cluster->replicas()[0]->host_tier()->stats().loads, 1u);
  Harness never(tier_trace(), tier_case(4e6, 0.001, "never"));
  never.run();
  EXPECT_EQ(never.cluster->replicas()[0]->host_tier()->stats().loads, 0u);
  EXPECT_EQ(never.cluster->replicas()[0]->host_tier()->stats().declined, 1u);
}

TEST(KvTierTest, AHostHitFinishesItsPrefillTheLoadTimeLaterThanAnHbmHitAndBeforeARecompute) {
  // C arrives at 2 s to an idle replica.
  //  HBM hit (HBM large enough to keep A's units): prefill of 24 - 16 = 8 tokens, 10 + 8 = 18 ms:
  //    first token at 2.018 s.
  //  Host hit, loaded: the 5 ms load, then the same 18 ms prefill: 2.023 s (the load time later).
  //  Recompute (load = never): 24 tokens, 10 + 24 = 34 ms: 2.034 s.
  ClusterSetup big = tier_case(4e6, 0.001);
  big.kv_blocks = 100;
  Harness hbm(tier_trace(), big);
  hbm.run();
  EXPECT_EQ(hbm.obs.lookups[2].hit_tokens, 16);
  EXPECT_EQ(hbm.obs.lookups[2].host_hit_tokens, 0);
  EXPECT_EQ(hbm.cluster->replicas()[0]->host_tier()->stats().loads, 0u);
  Harness host(tier_trace(), tier_case(4e6, 0.001));
  host.run();
  Harness recompute(tier_trace(), tier_case(4e6, 0.001, "never"));
  recompute.run();
  EXPECT_NEAR(static_cast<double>(hbm.obs.find(2)->first_token.ns()), 2018.0 * kMs, 1);
  EXPECT_NEAR(static_cast<double>(host.obs.find(2)->first_token.ns()), 2023.0 * kMs, 1);
  EXPECT_NEAR(static_cast<double>(recompute.obs.find(2)->first_token.ns()), 2034.0 * kMs, 1);
}

TEST(KvTierTest, OnAPdClusterThePrefillReplicasLoadIsAFlowOnTheFabric) {
  // The case above on a disaggregated cluster: replica 0 prefills (the tier's), replica 1 decodes
  // (room for all), both on node 0 of a topology whose PCIe links carry 4 MB/s at 0.5 ms a hop. A
  // prefill replica holds prompts only, so it gets 7 blocks: B's 24 prompt tokens (6 blocks, 3
  // free) evict both of A's cached units (2 + 2 blocks) to host, as the 8 blocks did above. The host attaches at GPU 0's PCIe endpoint (one GPU per PCIe switch): a load crosses
  // "node 0 host - nic 0 (down)" and "gpu 0 pcie (down)": 16,000 B / 4 MB/s + 2 x 0.5 ms = 5 ms,
  // the analytic tier's 4 MB/s + 1 ms of the case above, so C's first token (the end of its
  // prefill on replica 0) comes at 2.023 s again. A's units went down when B's prefill evicted them
  // (two 8,000-byte stores at ~1 s, 2 ms each: the fabric is idle again at 2 s); the PD transfers
  // go over NVLink (not the host's links).
  ClusterSetup s = tier_case(4e6, 0.001);
  s.replicas = 2;
  s.prefill_replicas = 1;
  s.kv_blocks_of = {7, 1000};
  s.topology.pcie_bytes_per_s = 4e6;
  s.topology.pcie_latency_s = 0.0005;
  Harness pd(tier_trace(), s);
  pd.run();
  ASSERT_NE(pd.cluster->replicas()[0]->host_tier(), nullptr);
  EXPECT_EQ(pd.cluster->replicas()[1]->host_tier(), nullptr);  // decode replicas have no tier
  const KvTierStats& st = pd.cluster->replicas()[0]->host_tier()->stats();
  EXPECT_EQ(st.loads, 1u);
  EXPECT_EQ(st.loaded_tokens, 16);
  EXPECT_NEAR(st.load_seconds, 0.005, 1e-9);  // the flow's time
  EXPECT_GE(st.stores, 2u);
  EXPECT_EQ(pd.obs.find(2)->cached_tokens, 16);
  EXPECT_EQ(pd.obs.find(2)->decode_replica, 1u);
  EXPECT_NEAR(static_cast<double>(pd.obs.find(2)->first_token.ns()), 2023.0 * kMs, 1);
  // The fabric carried the 3 PD transfers and the tier's copies, the load's 16,000 bytes among them.
  EXPECT_GE(pd.network->bytes_delivered(), st.load_bytes + st.store_bytes);

  // Slower PCIe (2 MB/s): the flow takes 16,000 / 2e6 + 1 ms = 9 ms while the policy's analytic
  // estimate (4 MB/s + 1 ms = 5 ms < 16 ms saved) still says load: first token at 2.000 + 0.009 +
  // 0.018 = 2.027 s.
  s.topology.pcie_bytes_per_s = 2e6;
  Harness slow(tier_trace(), s);
  slow.run();
  EXPECT_NEAR(slow.cluster->replicas()[0]->host_tier()->stats().load_seconds, 0.009, 1e-9);
  EXPECT_NEAR(static_cast<double>(slow.obs.find(2)->first_token.ns()), 2027.0 * kMs, 1);
}

TEST(KvTierTest, ARequestWaitingForItsLoadDoesNotStallTheOthers) {
  // D (4 tokens, no prefix) arrives with C: while C's 500 ms load runs (16,000 B at 32 kB/s), D is
  // prefilled (10 + 4 = 14 ms) and its first token comes at 2.014 s; C's prefill follows its load.
  auto trace = tier_trace();
  trace.push_back(hashed(2.0, 4, 2, {42}));
  ClusterSetup s = tier_case(32000, 0.0, "always");
  Harness h(trace, s);
  h.run();
  EXPECT_EQ(h.cluster->replicas()[0]->host_tier()->stats().loads, 1u);
  EXPECT_NEAR(static_cast<double>(h.obs.find(3)->first_token.ns()), 2014.0 * kMs, 1);
  EXPECT_GE(h.obs.find(2)->first_token.ns(), 2500 * kMs);
}

TEST(KvTierTest, HostTierEvictsByItsPolicy) {
  // Capacity 6 blocks, units of 2 blocks: k1, k2, k3 fill it; k1 is read (a load); k4 comes.
  // LRU evicts the least recently used, k2; FIFO the first stored, k1.
  for (const char* policy : {"lru", "fifo"}) {
    auto spec = tier_spec("on_eviction", policy, "cost");
    spec->capacity_blocks = 6;
    spec->block_bytes_per_gpu = 100;
    spec->link_bytes_per_s = 1e9;
    HostKvTier tier(*spec);
    tier.store(1, 2);
    tier.store(2, 2);
    tier.store(3, 2);
    tier.touch(1);
    tier.store(4, 2);
    tier.check();
    EXPECT_EQ(tier.stats().evictions, 1u);
    if (std::string(policy) == "lru")
      EXPECT_EQ(tier.eviction_order(), (std::vector<uint64_t>{3, 1, 4}));
    else
      EXPECT_EQ(tier.eviction_order(), (std::vector<uint64_t>{2, 3, 4}));
    EXPECT_EQ(tier.used(), 6);
    EXPECT_DOUBLE_EQ(tier.stats().store_bytes, 4 * 2 * 100.0);
  }
}

TEST(KvTierTest, HbmEvictionsWriteDownThroughTheCache) {
  // A KvCache of 6 blocks with the tier below it: three 2-block units released in order 1, 2, 3;
  // a 4-block allocation evicts 1 and 2 (least recently released first), which go down in that order.
  auto spec = tier_spec("on_eviction", "lru", "cost");
  spec->capacity_blocks = 100;
  spec->block_bytes_per_gpu = 100;
  spec->link_bytes_per_s = 1e9;
  HostKvTier tier(*spec);
  KvCache kv(6, 4, 8);
  kv.set_tier(&tier);
  for (uint64_t k : {1, 2, 3}) kv.unref(kv.insert(k, 2));
  EXPECT_EQ(tier.units(), 0u);
  ASSERT_TRUE(kv.try_allocate(4));
  EXPECT_EQ(tier.eviction_order(), (std::vector<uint64_t>{1, 2}));
  EXPECT_NE(kv.find(3), KvCache::kNone);
  // write_through copies at registration instead.
  auto wt = tier_spec("write_through", "lru", "cost");
  wt->capacity_blocks = 100;
  wt->block_bytes_per_gpu = 100;
  wt->link_bytes_per_s = 1e9;
  HostKvTier through(*wt);
  KvCache kv2(6, 4, 8);
  kv2.set_tier(&through);
  kv2.unref(kv2.insert(7, 2));
  EXPECT_TRUE(through.contains(7));
}

// A reference of the host tier: a list in eviction order, no slots, no index.
struct ReferenceTier {
  int64_t capacity;
  bool lru;
  std::list<std::pair<uint64_t, int64_t>> order;
  uint64_t evictions = 0;
  std::set<uint64_t> evicted;  // keys the tier has evicted (and not stored again since)
  void store(uint64_t key, int64_t blocks) {
    for (auto it = order.begin(); it != order.end(); ++it)
      if (it->first == key) {
        if (lru) order.splice(order.end(), order, it);
        return;
      }
    int64_t used = 0;
    for (const auto& e : order) used += e.second;
    while (used + blocks > capacity) {
      used -= order.front().second;
      evicted.insert(order.front().first);
      order.pop_front();
      ++evictions;
    }
    order.emplace_back(key, blocks);
    evicted.erase(key);
  }
  std::vector<uint64_t> keys() const {
    std::vector<uint64_t> out;
    for (const auto& e : order) out.push_back(e.first);
    return out;
  }
};

// Mirrors HBM's registrations and evictions into the reference (a CacheListener sees them).
struct Mirror final : CacheListener {
  ReferenceTier* ref = nullptr;
  bool write_through = false;
  std::set<uint64_t> in_hbm;
  std::map<uint64_t, int64_t> blocks;
  void on_unit_cached(uint32_t, uint64_t key) override {
    in_hbm.insert(key);
    if (write_through) ref->store(key, blocks.at(key));
  }
  void on_unit_evicted(uint32_t, uint64_t key) override {
    in_hbm.erase(key);
    if (!write_through) ref->store(key, blocks.at(key));
  }
};

TEST(KvTierTest, UnitsAreConservedAcrossHbmAndHostOverALongRandomRun) {
  for (const auto& [write, eviction] : std::vector<std::pair<std::string, std::string>>{
           {"on_eviction", "lru"}, {"on_eviction", "fifo"}, {"write_through", "lru"}, {"write_through", "fifo"}}) {
    auto spec = tier_spec(write, eviction, "cost");
    spec->capacity_blocks = 23;
    spec->block_bytes_per_gpu = 10;
    spec->link_bytes_per_s = 1e9;
    HostKvTier tier(*spec);
    KvCache kv(40, 4, 8);
    kv.set_tier(&tier);
    ReferenceTier ref{23, eviction == "lru", {}, 0, {}};
    Mirror mirror;
    mirror.ref = &ref;
    mirror.write_through = write == "write_through";
    kv.set_listener(&mirror, 0);
    core::Rng rng(7, "kv-tier-conservation-" + write + eviction);
    std::vector<uint32_t> held;
    int64_t private_blocks = 0;
    std::set<uint64_t> ever;
    for (int step = 0; step < 20000; ++step) {
      const uint64_t op = rng.uniform_int(5);
      if (op <= 1) {  // register a unit (1 to 3 blocks), or take a reference on it when cached
        const uint64_t key = 1 + rng.uniform_int(60);
        const uint32_t u = kv.find(key);
        if (u != KvCache::kNone) {
          kv.acquire(u);
          held.push_back(u);
        } else {
          const int64_t b = 1 + static_cast<int64_t>(key % 3);
          if (b > kv.available()) continue;
          mirror.blocks[key] = b;
          held.push_back(kv.insert(key, b));
          ever.insert(key);
        }
      } else if (op == 2 && !held.empty()) {  // release a reference
        const size_t i = rng.uniform_int(held.size());
        kv.unref(held[i]);
        held[i] = held.back();
        held.pop_back();
      } else if (op == 3) {  // private blocks come and go, evicting units
        const int64_t b = 1 + static_cast<int64_t>(rng.uniform_int(6));
        if (kv.try_allocate(b)) private_blocks += b;
      } else if (private_blocks > 0) {
        const int64_t b = 1 + static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(private_blocks)));
        kv.release(b);
        private_blocks -= b;
      }
      kv.check();
      tier.check();
      ASSERT_EQ(tier.eviction_order(), ref.keys()) << write << "/" << eviction << " at step " << step;
    }
    EXPECT_EQ(tier.stats().evictions, ref.evictions);
    EXPECT_GT(ref.evictions, 100u);  // the tier did fill up and evict
    // Every unit ever registered is in HBM, in host memory (both, for write-through), or was evicted
    // from host memory after HBM let it go: none is lost or duplicated.
    for (uint64_t key : ever) {
      const bool hbm = kv.find(key) != KvCache::kNone, host = tier.contains(key);
      EXPECT_EQ(hbm, mirror.in_hbm.count(key) > 0) << key;
      EXPECT_TRUE(hbm || host || ref.evicted.count(key)) << key << " vanished";
      if (host) {
        EXPECT_EQ(tier.blocks_of(key), mirror.blocks.at(key));
      }
    }
  }
}

TEST(KvTierTest, ARequestAdmittedInTheSameStepAsTheHeadOfTheQueueHasItsHostHitDecidedToo) {
  // vLLM V1 asks its KV connector about every waiting request its scheduler considers, not only the
  // first. 16 HBM blocks (64 tokens), 4 MB/s and 1 ms to host. A (0 s, units 1, 2) runs; B (1 s, 56
  // tokens, units 5-11, 14 blocks + 1) makes HBM evict A's units to host memory. E (1.99 s, 4
  // tokens) keeps the replica busy until 1.99 + 10 + 4 ms = 2.004 s, so D (2 s, 4 tokens, no unit)
  // and C (2 s, units 1, 2, 9) wait together. At 2.004 s the (continuous) scheduler admits D, then
  // considers C: its 16 host tokens are loaded (16,000 B / 4 MB/s + 1 ms = 5 ms < 16 ms saved) and
  // C leaves the queue until 2.009 s while D prefills alone (10 + 4 = 14 ms, to 2.018 s). At 2.018 s
  // C prefills its last 8 tokens: 10 + 8 = 18 ms, first token at 2.036 s. (Deciding only the head
  // of the queue, C would prefill all 24 tokens with D: 10 + 28 ms, first token at 2.042 s.)
  ClusterSetup s = tier_case(4e6, 0.001);
  s.kv_blocks = 16;
  const std::vector<traces::RequestSpec> trace = {
      hashed(0.0, 16, 2, {1, 2}), hashed(1.0, 56, 2, {5, 6, 7, 8, 9, 10, 11}), hashed(1.99, 4, 2, {90}),
      hashed(2.0, 4, 2, {80}), hashed(2.0, 24, 2, {1, 2, 9})};
  Harness h(trace, s);
  h.run();
  const KvTierStats& st = h.cluster->replicas()[0]->host_tier()->stats();
  EXPECT_EQ(st.loads, 1u);
  EXPECT_EQ(st.loaded_tokens, 16);
  EXPECT_EQ(h.obs.find(4)->cached_tokens, 16);
  EXPECT_NEAR(static_cast<double>(h.obs.find(3)->first_token.ns()), 2018.0 * kMs, 1);
  EXPECT_NEAR(static_cast<double>(h.obs.find(4)->first_token.ns()), 2036.0 * kMs, 1);
  // The same under chunked prefill: C's host hit is decided when the scheduler reaches it.
  ClusterSetup chunked = s;
  chunked.scheduler = "kind = \"chunked\"\nwatermark = 0.0\n";
  Harness c(trace, chunked);
  c.run();
  EXPECT_EQ(c.cluster->replicas()[0]->host_tier()->stats().loaded_tokens, 16);
  EXPECT_EQ(c.obs.find(4)->cached_tokens, 16);
}

TEST(KvTierTest, ARequestPreemptedByRecomputeReloadsItsPrefixFromHostMemory) {
  // vLLM V1 asks its KV connector again about a preempted request (num_computed_tokens = 0). 6 HBM
  // blocks of 4 tokens, units of 8 tokens, host 4 MB/s + 1 ms, iterations 10 ms + 1 ms a token.
  //   A (0 s, 4 tokens, 12 outputs) prefills 0-14 ms (1 block). B (1 ms, 16 tokens, units 1, 2;
  //   4 outputs) prefills 14-40 ms (10 + 16; 4 blocks), its first token at 40 ms. At 40 ms A's
  //   next token needs its 2nd block and B's its 5th, 1 is free: B (the newest) is preempted by
  //   recompute, its two units left in HBM unreferenced. A decodes alone, 11 steps of 11 ms, to
  //   161 ms; its KV grows to 15 tokens (4 blocks), so HBM evicts one of B's units (2 blocks), unit
  //   1 (registered first), and writes it to host memory (on_eviction).
  //   At 161 ms B is decided again: unit 1 in host memory, unit 2 in HBM behind it. The load,
  //   8,000 B / 4 MB/s + 1 ms = 3 ms, against 16 ms of prefill saved (17 tokens from 0 less 1 from
  //   16: loading unit 1 makes unit 2 an HBM hit too): loaded, to 164 ms; then the
  //   prefill of its 16 + 1 generated tokens less the 16 cached: 10 + 1 = 11 ms, its next token at
  //   175 ms; 2 decode steps more: done at 197 ms.
  //   Before (decided once): the whole 17 tokens recomputed at 161 ms, 10 + 17 = 27 ms: token at
  //   188 ms, done at 210 ms (unit 2 alone is no HBM hit: the chain breaks at unit 1).
  ClusterSetup s = tier_case(4e6, 0.001);
  s.kv_blocks = 6;
  Harness h({hashed(0.0, 4, 12, {90}), hashed(0.001, 16, 4, {1, 2})}, s);
  h.run();  // under the invariant checker (the harness's)
  EXPECT_EQ(h.obs.preempted, (std::vector<uint64_t>{1}));
  bool reprefill = false;
  for (const auto& it : h.obs.iterations)
    if (it.start.ns() == 164 * kMs) {
      reprefill = true;
      EXPECT_EQ(it.prefill_tokens, 1);
      EXPECT_EQ(it.duration.ns(), 11 * kMs);
    }
  EXPECT_TRUE(reprefill) << "no prefill starting at 164 ms (the load's end)";
  EXPECT_EQ(h.obs.find(1)->first_token.ns(), 40 * kMs);
  EXPECT_EQ(h.obs.find(1)->finish.ns(), 197 * kMs);
  EXPECT_EQ(h.obs.find(0)->finish.ns(), 161 * kMs);
  // The counters: the tier's load counts the reload (bytes, time, tokens); the lookups report B's
  // first lookup (nothing cached: its cached_tokens and the hit rates) and then its reload, marked as
  // one: 16 tokens hit, 8 of them from host memory.
  const KvTierStats& st = h.cluster->replicas()[0]->host_tier()->stats();
  EXPECT_EQ(st.loads, 1u);
  EXPECT_EQ(st.loaded_tokens, 8);
  EXPECT_DOUBLE_EQ(st.load_bytes, 8000);
  EXPECT_NEAR(st.load_seconds, 0.003, 1e-12);
  EXPECT_NEAR(st.saved_prefill_seconds, 0.016, 1e-12);
  ASSERT_EQ(h.obs.lookups.size(), 3u);
  EXPECT_FALSE(h.obs.lookups[1].reload);
  EXPECT_EQ(h.obs.lookups[1].hit_tokens, 0);
  EXPECT_TRUE(h.obs.lookups[2].reload);
  EXPECT_EQ(h.obs.lookups[2].hit_tokens, 16);
  EXPECT_EQ(h.obs.lookups[2].host_hit_tokens, 8);
  EXPECT_EQ(h.obs.find(1)->cached_tokens, 0);
  // Swap preemption keeps the KV in host memory: nothing is decided again, no reload lookup.
  ClusterSetup swap = s;
  swap.preemption = PreemptionMode::kSwap;
  Harness w({hashed(0.0, 4, 12, {90}), hashed(0.001, 16, 4, {1, 2})}, swap);
  w.run();
  EXPECT_FALSE(w.obs.preempted.empty());
  for (const auto& l : w.obs.lookups) EXPECT_FALSE(l.reload);
  EXPECT_EQ(w.cluster->replicas()[0]->host_tier()->stats().loads, 0u);
}

}  // namespace
}  // namespace servesim::sim
