// The shared KV store ([kv_tiers.store], issue 16) on hand-built cases: a prefix computed on one
// replica and loaded by another through the store, costed exactly; the load-vs-recompute decision
// for a store hit; one wait for a request's host and store units; the store's eviction order; a
// failed replica leaving the store as it was; and the conservation of prefix units across HBM, host
// and store over a long random run, against reference models of the tiers written here.
#include <gtest/gtest.h>

#include <list>
#include <map>
#include <set>

#include "policies/kvtier/kvtier.h"
#include "sim/cluster/kv_nvme.h"
#include "sim/cluster/kv_store.h"
#include "sim/core/config.h"
#include "sim/core/rng.h"
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

std::shared_ptr<StoreSpec> store_spec(double bandwidth, double latency_s, const std::string& load = "cost",
                                      const std::string& write = "on_eviction", const std::string& eviction = "lru") {
  auto s = std::make_shared<StoreSpec>();
  const TierPolicies p = tier_policies(write, eviction, load);
  s->write = p.write;
  s->eviction = p.eviction;
  s->load = p.load;
  s->capacity_blocks = 100;
  s->block_bytes_per_gpu = 4000;
  s->gpus = 1;
  s->link_bytes_per_s = bandwidth;
  s->latency_s = latency_s;
  return s;
}

// Two replicas, round-robin routing (requests go to replicas 0, 1, 0, 1), no host tier, a store
// below their HBM. Blocks of 4 tokens, units of 8 tokens (2 blocks), 1000 bytes per token per GPU
// (4000 per block), 8 HBM blocks per replica, iterations of 10 ms + 1 ms per token.
//   A (0 s, replica 0): 16 tokens, units 1 and 2.   X (0.5 s, replica 1): 4 tokens, unrelated.
//   B (1 s, replica 0): 24 tokens, units 5, 6, 7: it needs 7 of the 8 blocks, so replica 0's HBM
//     evicts A's two units (4 blocks), which (on_eviction, no host tier) are written to the store.
//   C (2 s, replica 1): 24 tokens, units 1, 2, 9: nothing in replica 1's HBM; units 1 and 2 (16
//     tokens, 4 blocks, 16,000 bytes) are in the store, written by replica 0.
// Loading saves the prefill of 16 tokens: 16 x 1 ms = 16 ms (the 10 ms base is paid anyway). The
// copy takes 16,000 B / bandwidth + latency.
ClusterSetup store_case(double bandwidth, double latency_s, const std::string& load = "cost") {
  ClusterSetup s;
  s.replicas = 2;
  s.prefix_unit_tokens = 8;
  s.kv_blocks = 8;
  s.per_token_s = 0.001;
  s.kv_store = store_spec(bandwidth, latency_s, load);
  return s;
}

std::vector<traces::RequestSpec> store_trace() {
  return {hashed(0.0, 16, 2, {1, 2}), hashed(0.5, 4, 2, {50}), hashed(1.0, 24, 2, {5, 6, 7}),
          hashed(2.0, 24, 2, {1, 2, 9})};
}

const uint64_t kUnit1 = KvCache::chain(0, 1), kUnit2 = KvCache::chain(KvCache::chain(0, 1), 2);

TEST(KvStoreTest, APrefixComputedOnOneReplicaIsLoadedOnAnotherCostedExactly) {
  // 4 MB/s, 1 ms: 16,000 / 4e6 + 0.001 = 5 ms < 16 ms saved: load. C's first token: its 5 ms copy,
  // then the prefill of its last 8 tokens, 10 + 8 = 18 ms: 2 s + 5 ms + 18 ms = 2.023 s.
  Harness h(store_trace(), store_case(4e6, 0.001));
  h.run();
  const SharedKvStore& store = *h.cluster->kv_store();
  ASSERT_EQ(h.obs.lookups.size(), 4u);
  EXPECT_EQ(h.obs.lookups[3].replica, 1u);
  EXPECT_EQ(h.obs.lookups[3].hit_tokens, 16);
  EXPECT_EQ(h.obs.lookups[3].store_hit_tokens, 16);
  EXPECT_EQ(h.obs.lookups[3].host_hit_tokens, 0);
  EXPECT_EQ(h.obs.find(3)->cached_tokens, 16);
  EXPECT_NEAR(static_cast<double>(h.obs.find(3)->first_token.ns()), 2023.0 * kMs, 1);
  // Replica 0 wrote A's two units; replica 1 loaded both, 16 tokens another replica wrote.
  EXPECT_EQ(store.writer_of(kUnit1), 0);
  EXPECT_EQ(store.writer_of(kUnit2), 0);
  const StoreStats& r1 = store.per_replica().at(1);
  EXPECT_EQ(r1.loads, 1u);
  EXPECT_EQ(r1.loaded_tokens, 16);
  EXPECT_EQ(r1.cross_loads, 1u);
  EXPECT_EQ(r1.cross_tokens, 16);
  EXPECT_DOUBLE_EQ(r1.load_bytes, 16000);
  EXPECT_NEAR(r1.load_seconds, 0.005, 1e-12);
  EXPECT_NEAR(r1.saved_prefill_seconds, 0.016, 1e-12);
  EXPECT_EQ(store.per_replica().at(0).loads, 0u);
  EXPECT_GE(store.per_replica().at(0).stores, 2u);
}

TEST(KvStoreTest, CostPolicyRecomputesAStoreHitWhoseCopyIsSlowerThanThePrefillItSaves) {
  // 1 MB/s, 1 ms: 16,000 / 1e6 + 0.001 = 17 ms > 16 ms saved: recompute. C prefills all 24 tokens:
  // 10 + 24 = 34 ms, its first token at 2.034 s.
  Harness slow(store_trace(), store_case(1e6, 0.001));
  slow.run();
  const StoreStats& r1 = slow.cluster->kv_store()->per_replica().at(1);
  EXPECT_EQ(r1.loads, 0u);
  EXPECT_EQ(r1.declined, 1u);
  EXPECT_EQ(r1.declined_tokens, 16);
  EXPECT_EQ(slow.obs.lookups[3].hit_tokens, 0);
  EXPECT_NEAR(static_cast<double>(slow.obs.find(3)->first_token.ns()), 2034.0 * kMs, 1);
  // `always` loads the slow copy: 17 + 18 ms, 2.035 s (later than recomputing).
  Harness always(store_trace(), store_case(1e6, 0.001, "always"));
  always.run();
  EXPECT_EQ(always.cluster->kv_store()->per_replica().at(1).loads, 1u);
  EXPECT_NEAR(static_cast<double>(always.obs.find(3)->first_token.ns()), 2035.0 * kMs, 1);
  // Total store bandwidth: 16,000 B at 2 MB/s for the whole copy is 8 ms > 4 ms over the GPU's
  // 4 MB/s path: 8 + 1 = 9 ms, still < 16 ms: loaded, first token at 2 s + 9 + 18 ms.
  ClusterSetup capped = store_case(4e6, 0.001);
  auto spec = std::make_shared<StoreSpec>(*capped.kv_store);
  spec->total_bytes_per_s = 2e6;
  capped.kv_store = spec;
  Harness total(store_trace(), capped);
  total.run();
  EXPECT_NEAR(total.cluster->kv_store()->per_replica().at(1).load_seconds, 0.009, 1e-12);
  EXPECT_NEAR(static_cast<double>(total.obs.find(3)->first_token.ns()), 2027.0 * kMs, 1);
}

TEST(KvStoreTest, HostAndStoreUnitsOfOneRequestAreOneWaitOnTwoLinks) {
  // One replica with a host tier of 2 blocks (one unit) and the store below it. A (16 tokens, units
  // 1 and 2) runs; B (24 tokens, 7 blocks) evicts both of A's units from HBM: the first goes to host
  // memory, the second to host memory too, pushing the first out to the store. C (24 tokens, units
  // 1, 2, 9) finds one unit (8 tokens, 2 blocks, 8,000 B) in host memory and the other in the store.
  //   host copy:  8,000 B / 4 MB/s + 1 ms = 3 ms (PCIe)
  //   store copy: 8,000 B / 1 MB/s + 2 ms = 10 ms (NIC)
  // Both run at once: C waits max(3, 10) = 10 ms < 16 ms of prefill saved (the store's cost policy
  // decides for the whole chain), then prefills its last 8 tokens in 18 ms: 2 s + 10 + 18 = 2.028 s
  // (sequential copies would give 2.031 s).
  ClusterSetup s;
  s.prefix_unit_tokens = 8;
  s.kv_blocks = 8;
  s.per_token_s = 0.001;
  s.host_tier = host_tier_spec(tier_policies("on_eviction", "lru", "cost"), 2, 4000, 1, 4e6, 0.001);
  s.kv_store = store_spec(1e6, 0.002);
  Harness h({hashed(0.0, 16, 2, {1, 2}), hashed(1.0, 24, 2, {5, 6, 7}), hashed(2.0, 24, 2, {1, 2, 9})}, s);
  h.run();
  ASSERT_EQ(h.obs.lookups.size(), 3u);
  EXPECT_EQ(h.obs.lookups[2].hit_tokens, 16);
  EXPECT_EQ(h.obs.lookups[2].host_hit_tokens, 8);
  EXPECT_EQ(h.obs.lookups[2].store_hit_tokens, 8);
  EXPECT_NEAR(static_cast<double>(h.obs.find(2)->first_token.ns()), 2028.0 * kMs, 1);
  const Replica& r = *h.cluster->replicas()[0];
  EXPECT_EQ(r.host_tier()->stats().loads, 1u);
  EXPECT_NEAR(r.host_tier()->stats().load_seconds, 0.003, 1e-12);
  const StoreStats& st = h.cluster->kv_store()->per_replica().at(0);
  EXPECT_EQ(st.loads, 1u);
  EXPECT_NEAR(st.load_seconds, 0.010, 1e-12);
  EXPECT_EQ(st.cross_tokens, 0);  // it wrote that unit itself
  // The prefill saved (16 ms) is shared by tokens: 8 ms each.
  EXPECT_NEAR(r.host_tier()->stats().saved_prefill_seconds, 0.008, 1e-12);
  EXPECT_NEAR(st.saved_prefill_seconds, 0.008, 1e-12);
  EXPECT_DOUBLE_EQ(tier_load_seconds(0.003, 0.010), 0.010);
}

// The same request on a disaggregated cluster, its copies flows on the topology (one prefill
// replica on GPU 0, one decode replica on GPU 1, both in node 0: the PD transfers go over NVLink).
// Links: the host's to GPU 0's PCIe endpoint 4 MB/s, the store's (on the one leaf) 1 MB/s, PCIe and
// NIC 1 GB/s (never binding); latencies PCIe 1 us, NIC - leaf 2 us, store - leaf 1 us.
//   host copy:  host -> GPU 0 ("node 0 host - nic 0 (down)", "gpu 0 pcie (down)"):
//               8,000 B / 4 MB/s = 2 ms, + 2 us = 2.002 ms
//   store copy: store -> GPU 0 ("store - leaf 0 (down)", "node 0 nic 0 - leaf (down)", "gpu 0 pcie
//               (down)"), its bytes moving after the store's 2 ms lookup (latency_us):
//               2 ms + 8,000 B / 1 MB/s = 8 ms, + 4 us = 10.004 ms
// The prefill replica has 7 HBM blocks, the decode replica 8 (a prefill replica holds B's prompt only,
// 6 blocks: with 7, B still evicts both of A's units, one to host memory, one through it to the store).
// Both copies start at 2 s and share only GPU 0's PCIe link, far from full (5 MB/s of 1 GB/s). C waits for
// the later, 10.004 ms (the `cost` estimate on the idle fabric is these times: max(2.002, 10.004) ms
// < 16 ms saved), then prefills its last 8 tokens in 18 ms: first token at 2 s + 10.004 + 18 =
// 2.028004 s.
// Each tier counts its own copy's time.
TEST(KvStoreTest, OnAPdFabricAMixedLoadWaitsForTheLaterOfItsHostAndStoreFlows) {
  ClusterSetup s;
  s.replicas = 2;
  s.prefill_replicas = 1;
  s.prefix_unit_tokens = 8;
  s.kv_blocks = 8;
  s.kv_blocks_of = {7, 8};  // a prefill replica holds B's prompt only (6 blocks): 7 evicts both of A's units
  s.per_token_s = 0.001;
  s.topology.pcie_bytes_per_s = 1e9;
  s.topology.nic_bytes_per_s = 1e9;
  s.topology.host_bytes_per_s = 4e6;
  s.topology.store = true;
  s.topology.store_bytes_per_s = 1e6;
  s.host_tier = host_tier_spec(tier_policies("on_eviction", "lru", "cost"), 2, 4000, 1, 4e6, 0.001);
  s.kv_store = store_spec(1e6, 0.002);
  Harness h({hashed(0.0, 16, 2, {1, 2}), hashed(1.0, 24, 2, {5, 6, 7}), hashed(2.0, 24, 2, {1, 2, 9})}, s);
  h.run();
  ASSERT_EQ(h.obs.lookups.size(), 3u);
  EXPECT_EQ(h.obs.lookups[2].host_hit_tokens, 8);
  EXPECT_EQ(h.obs.lookups[2].store_hit_tokens, 8);
  EXPECT_EQ(h.obs.find(2)->first_token.ns(), 2'028'004'000);
  const Replica& r = *h.cluster->replicas()[0];
  EXPECT_EQ(r.host_tier()->stats().loads, 1u);
  // Within the clock's nanosecond: the host flow drains at 2.002 s, the instant the store copy's
  // bytes start (its lookup over), so its drain event is rescheduled at that instant's rounding.
  EXPECT_NEAR(r.host_tier()->stats().load_seconds, 0.002002, 1.5e-9);
  const StoreStats& st = h.cluster->kv_store()->per_replica().at(0);
  EXPECT_EQ(st.loads, 1u);
  EXPECT_NEAR(st.load_seconds, 0.010004, 1e-12);
  // Writes: the unit host memory pushed out at B, then more as C's and later insertions evict B's.
  EXPECT_GT(st.stores, 0u);
  // The decode replica has no tier and no store.
  EXPECT_EQ(h.cluster->replicas()[1]->kv_store(), nullptr);
  EXPECT_EQ(h.cluster->kv_store()->per_replica().size(), 1u);
}

TEST(KvStoreTest, StoreEvictsByItsPolicyAndForgetsTheWritersOfWhatItEvicts) {
  // Capacity 6 blocks, units of 2 blocks: k1 (replica 0), k2 (replica 1), k3 (replica 0) fill it;
  // k1 is read; k4 (replica 1) comes. LRU evicts the least recently used, k2; FIFO the first stored,
  // k1. Storing k3 again (replica 1) refreshes it and keeps its writer.
  for (const char* policy_name : {"lru", "fifo"}) {
    const std::string policy = policy_name;
    auto spec = store_spec(1e9, 0, "cost", "on_eviction", policy);
    spec->capacity_blocks = 6;
    SharedKvStore store(*spec);
    store.store(1, 2, 0);
    store.store(2, 2, 1);
    store.store(3, 2, 0);
    store.touch(1);
    store.store(4, 2, 1);
    store.check();
    EXPECT_EQ(store.totals().evictions, 1u);
    if (policy == "lru") {
      EXPECT_EQ(store.eviction_order(), (std::vector<uint64_t>{3, 1, 4}));
      EXPECT_EQ(store.writer_of(2), -1);
    } else {
      EXPECT_EQ(store.eviction_order(), (std::vector<uint64_t>{2, 3, 4}));
      EXPECT_EQ(store.writer_of(1), -1);
    }
    store.store(3, 2, 1);
    EXPECT_EQ(store.writer_of(3), 0);
    EXPECT_EQ(store.per_replica().at(0).stores, 2u);
    EXPECT_EQ(store.per_replica().at(1).stores, 2u);
    EXPECT_DOUBLE_EQ(store.per_replica().at(1).store_bytes, 2 * 2 * 4000.0);
    store.check();
  }
}

TEST(KvStoreTest, AFailedReplicaLosesItsHbmButNotWhatItWroteToTheStore) {
  // Write-through: A's two units go to the store as replica 0 computes them.
  ClusterSetup s = store_case(4e6, 0.001);
  s.kv_store = store_spec(4e6, 0.001, "cost", "write_through");
  Harness h({hashed(0.0, 16, 2, {1, 2})}, s);
  h.run();
  Replica& r0 = *h.cluster->replicas()[0];
  ASSERT_NE(r0.kv().find(kUnit1), KvCache::kNone);
  std::vector<RequestId> lost;
  r0.fail(lost);
  EXPECT_EQ(r0.kv().find(kUnit1), KvCache::kNone);
  EXPECT_TRUE(h.cluster->kv_store()->contains(kUnit1));
  EXPECT_TRUE(h.cluster->kv_store()->contains(kUnit2));
  EXPECT_EQ(h.cluster->kv_store()->totals().stores, 2u);  // dropping HBM wrote nothing more
  h.cluster->kv_store()->check();
}

// A reference of a tier: a list in eviction order; store() returns what it evicted, in order.
struct RefQueue {
  int64_t capacity;
  bool lru;
  std::list<std::pair<uint64_t, int64_t>> order;
  std::set<uint64_t> evicted;  // keys evicted (and not stored again since)
  uint64_t evictions = 0;
  std::vector<std::pair<uint64_t, int64_t>> store(uint64_t key, int64_t blocks) {
    std::vector<std::pair<uint64_t, int64_t>> out;
    for (auto it = order.begin(); it != order.end(); ++it)
      if (it->first == key) {
        if (lru) order.splice(order.end(), order, it);
        return out;
      }
    int64_t used = 0;
    for (const auto& e : order) used += e.second;
    while (used + blocks > capacity) {
      used -= order.front().second;
      evicted.insert(order.front().first);
      out.push_back(order.front());
      order.pop_front();
      ++evictions;
    }
    order.emplace_back(key, blocks);
    evicted.erase(key);
    return out;
  }
  std::vector<uint64_t> keys() const {
    std::vector<uint64_t> out;
    for (const auto& e : order) out.push_back(e.first);
    return out;
  }
};

// HBM's registrations and evictions (seen as a CacheListener) fed to the references as the replica's
// tiers see them: host first, then NVMe, then the store; what a tier evicts goes to the next one down
// when that one writes on eviction (host -> NVMe -> store; without NVMe host -> store).
struct Mirror final : CacheListener {
  RefQueue* host = nullptr;  // null: no host tier
  RefQueue* nvme = nullptr;  // null: no NVMe tier
  RefQueue* store = nullptr;
  bool host_through = false, nvme_through = false, store_through = false;
  std::set<uint64_t> in_hbm;
  std::map<uint64_t, int64_t> blocks;
  void to_store(uint64_t key) { store->store(key, blocks.at(key)); }
  void to_nvme(uint64_t key) {
    for (const auto& e : nvme->store(key, blocks.at(key)))
      if (!store_through) to_store(e.first);
  }
  void to_host(uint64_t key) {
    for (const auto& e : host->store(key, blocks.at(key)))
      if (nvme) {
        if (!nvme_through) to_nvme(e.first);
      } else if (!store_through) {
        to_store(e.first);
      }
  }
  void on_unit_cached(uint32_t, uint64_t key) override {
    in_hbm.insert(key);
    if (host && host_through) to_host(key);
    if (nvme && nvme_through) to_nvme(key);
    if (store_through) to_store(key);
  }
  void on_unit_evicted(uint32_t, uint64_t key) override {
    in_hbm.erase(key);
    if (host) {
      if (!host_through) to_host(key);
    } else if (nvme) {
      if (!nvme_through) to_nvme(key);
    } else if (!store_through) {
      to_store(key);
    }
  }
};

TEST(KvStoreTest, UnitsAreConservedAcrossHbmHostNvmeAndStoreOverALongRandomRun) {
  struct Case {
    std::string host_write;  // "" = no host tier
    std::string store_write, eviction;
    std::string nvme_write = "";  // "" = no NVMe tier
  };
  for (const Case& c : std::vector<Case>{{"", "on_eviction", "lru"},
                                          {"", "write_through", "fifo"},
                                          {"on_eviction", "on_eviction", "lru"},
                                          {"on_eviction", "on_eviction", "fifo"},
                                          {"write_through", "on_eviction", "lru"},
                                          {"on_eviction", "write_through", "lru"},
                                          {"write_through", "write_through", "fifo"},
                                          {"on_eviction", "on_eviction", "lru", "on_eviction"},
                                          {"on_eviction", "on_eviction", "fifo", "on_eviction"},
                                          {"", "on_eviction", "lru", "on_eviction"},
                                          {"", "write_through", "fifo", "write_through"},
                                          {"write_through", "on_eviction", "lru", "on_eviction"},
                                          {"on_eviction", "on_eviction", "lru", "write_through"},
                                          {"on_eviction", "write_through", "fifo", "on_eviction"}}) {
    const std::string name = (c.host_write.empty() ? "none" : c.host_write) + "/" +
                             (c.nvme_write.empty() ? "none" : c.nvme_write) + "/" + c.store_write + "/" + c.eviction;
    std::unique_ptr<HostKvTier> host;
    if (!c.host_write.empty()) {
      host = std::make_unique<HostKvTier>(
          *host_tier_spec(tier_policies(c.host_write, c.eviction, "cost"), 13, 10, 1, 1e9, 0));
    }
    std::unique_ptr<NvmeKvTier> nvme;
    if (!c.nvme_write.empty()) {
      NvmeTierSpec ns;
      const TierPolicies p = tier_policies(c.nvme_write, c.eviction, "cost");
      ns.write = p.write;
      ns.eviction = p.eviction;
      ns.load = p.load;
      ns.capacity_blocks = 19;
      ns.block_bytes_per_gpu = 10;
      ns.read_bytes_per_s = ns.write_bytes_per_s = ns.pcie_bytes_per_s = 1e9;
      nvme = std::make_unique<NvmeKvTier>(ns);
    }
    auto ss = store_spec(1e9, 0, "cost", c.store_write, c.eviction);
    ss->capacity_blocks = 29;
    SharedKvStore store(*ss);
    // The replica's wiring (Replica's constructor and attach_store): HBM -> host / NVMe -> store.
    std::unique_ptr<LocalKvTiers> local;
    KvTierSink* top = host.get();
    if (nvme) {
      if (host) {
        host->set_below(nvme.get());
        local = std::make_unique<LocalKvTiers>(*host, *nvme);
        top = local.get();
      } else {
        top = nvme.get();
      }
    }
    StoreWriter writer(store, 0, top);
    KvCache kv(40, 4, 8);
    kv.set_tier(&writer);
    if (nvme) nvme->set_below(&writer);
    else if (host) host->set_below(&writer);
    RefQueue ref_host{13, c.eviction == "lru", {}, {}, 0}, ref_store{29, c.eviction == "lru", {}, {}, 0},
        ref_nvme{19, c.eviction == "lru", {}, {}, 0};
    Mirror mirror;
    mirror.host = host ? &ref_host : nullptr;
    mirror.nvme = nvme ? &ref_nvme : nullptr;
    mirror.store = &ref_store;
    mirror.host_through = c.host_write == "write_through";
    mirror.nvme_through = c.nvme_write == "write_through";
    mirror.store_through = c.store_write == "write_through";
    kv.set_listener(&mirror, 0);
    core::Rng rng(11, "kv-store-conservation-" + name);
    std::vector<uint32_t> held;
    int64_t private_blocks = 0;
    std::set<uint64_t> ever;
    for (int step = 0; step < 20000; ++step) {
      const uint64_t op = rng.uniform_int(5);
      if (op <= 1) {  // register a unit (1 to 3 blocks), or take a reference on it when cached
        const uint64_t key = 1 + rng.uniform_int(80);
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
      store.check();
      if (host) {
        host->check();
        ASSERT_EQ(host->eviction_order(), ref_host.keys()) << name << " at step " << step;
      }
      if (nvme) {
        nvme->check();
        ASSERT_EQ(nvme->eviction_order(), ref_nvme.keys()) << name << " at step " << step;
      }
      ASSERT_EQ(store.eviction_order(), ref_store.keys()) << name << " at step " << step;
    }
    EXPECT_EQ(store.totals().evictions, ref_store.evictions) << name;
    EXPECT_GT(store.totals().evictions, 50u) << name;  // the store did fill up and evict
    if (nvme) {
      EXPECT_EQ(nvme->totals().evictions, ref_nvme.evictions) << name;
      EXPECT_GT(nvme->totals().evictions, 50u) << name;
    }
    // Every unit ever registered is in HBM, in host memory, on NVMe or in the store, or the store
    // evicted it (after the tiers above let it go): none is lost.
    for (uint64_t key : ever) {
      const bool hbm = kv.find(key) != KvCache::kNone, in_host = host && host->contains(key),
                 in_nvme = nvme && nvme->contains(key), in_store = store.contains(key);
      EXPECT_EQ(hbm, mirror.in_hbm.count(key) > 0) << name << " " << key;
      EXPECT_TRUE(hbm || in_host || in_nvme || in_store || ref_store.evicted.count(key))
          << name << " " << key << " vanished";
      if (in_store) {
        EXPECT_EQ(store.blocks_of(key), mirror.blocks.at(key));
      }
      if (in_nvme) {
        EXPECT_EQ(nvme->blocks_of(key), mirror.blocks.at(key));
      }
    }
  }
}

}  // namespace
}  // namespace servesim::sim
