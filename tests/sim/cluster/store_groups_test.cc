// Several KV stores, each shared by a group of replicas (kv_tiers.store.replicas_per_store), and
// where they sit on the topology (kv_tiers.store.attach): cross-replica reuse within a group only,
// the tier-aware router scoring each replica against its own group's store, and rack-local stores
// whose copies do not cross the spine. Hand computations in the comments. None of this can be
// expressed with one store per cluster (no Cluster::set_kv_stores, no TopologyConfig::store_at).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "policies/kvtier/kvtier.h"
#include "sim/cluster/kv_store.h"
#include "sim/cluster/network.h"
#include "sim/core/config.h"
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

// A store of 100 blocks of 4,000 B (1 GPU), a 4 MB/s path, 1 ms latency, on_eviction / lru / cost.
std::shared_ptr<StoreSpec> store_spec() {
  const TierPolicies p = tier_policies();
  auto s = std::make_shared<StoreSpec>();
  s->write = p.write;
  s->eviction = p.eviction;
  s->load = p.load;
  s->capacity_blocks = 100;
  s->block_bytes_per_gpu = 4000;
  s->gpus = 1;
  s->link_bytes_per_s = 4e6;
  s->latency_s = 0.001;
  return s;
}

// Three replicas, round-robin routing (requests go to replicas 0, 1, 2, 0, 1, 2), no host tier.
// Blocks of 4 tokens, units of 8 tokens (2 blocks), 1000 B per token per GPU (4000 per block), 8
// HBM blocks per replica, iterations of 10 ms + 1 ms per token. replicas_per_store = 2: replicas 0
// and 1 share store 0, replica 2 has store 1 alone.
//   A (0 s, replica 0): 16 tokens, units 1 and 2.  X (0.2 s, replica 1), Y (0.4 s, replica 2): 4
//     tokens each, unrelated.
//   B (1 s, replica 0): 24 tokens, units 5, 6, 7: 7 of the 8 blocks, so replica 0's HBM evicts A's
//     two units (4 blocks), which go (on_eviction, no host tier) to replica 0's store, store 0.
//   C (2 s, replica 1): 24 tokens, units 1, 2, 9: units 1 and 2 (16 tokens, 4 blocks, 16,000 B)
//     are in store 0, replica 1's store. Copy 16,000 / 4e6 + 0.001 = 5 ms < 16 x 1 ms of prefill
//     saved: loaded; then the prefill of its last 8 tokens, 10 + 8 = 18 ms: first token at 2 s + 5
//     + 18 ms = 2.023 s.
//   D (3 s, replica 2): the same prompt as C. Store 1 holds nothing replica 0 wrote: a miss, the
//     whole prefill, 10 + 24 = 34 ms: first token at 3.034 s. (With one store for the three, D
//     would load units 1 and 2 as C did: 3.023 s.)
std::vector<traces::RequestSpec> groups_trace() {
  return {hashed(0.0, 16, 2, {1, 2}),    hashed(0.2, 4, 2, {50}),       hashed(0.4, 4, 2, {51}),
          hashed(1.0, 24, 2, {5, 6, 7}), hashed(2.0, 24, 2, {1, 2, 9}), hashed(3.0, 24, 2, {1, 2, 9})};
}

ClusterSetup groups_case(int replicas_per_store) {
  ClusterSetup s;
  s.replicas = 3;
  s.prefix_unit_tokens = 8;
  s.kv_blocks = 8;
  s.per_token_s = 0.001;
  s.kv_store = store_spec();
  s.replicas_per_store = replicas_per_store;
  return s;
}

TEST(StoreGroupsTest, APrefixIsAStoreHitInItsWritersGroupAndAMissInAnother) {
  Harness h(groups_trace(), groups_case(2));
  h.run();
  ASSERT_EQ(h.cluster->kv_stores().size(), 2u);
  const SharedKvStore& s0 = *h.cluster->kv_stores()[0];
  const SharedKvStore& s1 = *h.cluster->kv_stores()[1];
  EXPECT_EQ(h.cluster->replicas()[0]->kv_store(), &s0);
  EXPECT_EQ(h.cluster->replicas()[1]->kv_store(), &s0);
  EXPECT_EQ(h.cluster->replicas()[2]->kv_store(), &s1);
  // C on replica 1: 16 tokens from store 0, written by replica 0.
  EXPECT_EQ(h.obs.find(4)->cached_tokens, 16);
  EXPECT_NEAR(static_cast<double>(h.obs.find(4)->first_token.ns()), 2023.0 * kMs, 1);
  const StoreStats& r1 = s0.per_replica().at(1);
  EXPECT_EQ(r1.loads, 1u);
  EXPECT_EQ(r1.cross_tokens, 16);
  EXPECT_EQ(s0.writer_of(KvCache::chain(0, 1)), 0);
  // D on replica 2: nothing cached, the whole prefill.
  EXPECT_EQ(h.obs.find(5)->cached_tokens, 0);
  EXPECT_NEAR(static_cast<double>(h.obs.find(5)->first_token.ns()), 3034.0 * kMs, 1);
  EXPECT_FALSE(s1.contains(KvCache::chain(0, 1)));
  EXPECT_EQ(s1.per_replica().at(2).loads, 0u);
  EXPECT_EQ(s1.per_replica().at(2).declined, 0u);  // not a declined hit: no hit at all

  // One store for the three (replicas_per_store unset): D loads as C did, 3 s + 5 + 18 ms.
  Harness one(groups_trace(), groups_case(0));
  one.run();
  ASSERT_EQ(one.cluster->kv_stores().size(), 1u);
  EXPECT_EQ(one.obs.find(5)->cached_tokens, 16);
  EXPECT_NEAR(static_cast<double>(one.obs.find(5)->first_token.ns()), 3023.0 * kMs, 1);
  // Groups of 3 (every replica in one group) are exactly one store.
  Harness three(groups_trace(), groups_case(3));
  three.run();
  ASSERT_EQ(three.cluster->kv_stores().size(), 1u);
  EXPECT_EQ(three.obs.find(5)->first_token, one.obs.find(5)->first_token);
}

// The tier-aware router scores each replica against its own group's store. Four replicas in groups
// {0, 1} and {2, 3}; store 1 holds units 1 and 2 (written there by replica 2 before the run), store
// 0 nothing. R (1 s): 24 tokens, units 1, 2, 9: three keys. store_weight = 1: replicas 2 and 3 score
// 1 + 1 = 2 (unit 9 is nowhere: the chain stops), a share of 2/3 > cache_threshold 0.5; replicas 0
// and 1 score 0. Equal scores and loads: the first, replica 2. It loads the two units from store 1
// (5 ms, as above) and prefills 8 tokens (18 ms): first token at 1.023 s. Scoring every replica
// against replica 0's store (store 0, empty) would score 0 everywhere and send R to replica 0 (the
// fewest blocks in view, the first), where it would prefill all 24 tokens.
TEST(StoreGroupsTest, TheTieredRouterScoresEachReplicaAgainstItsGroupsStore) {
  ClusterSetup s = groups_case(2);
  s.replicas = 4;
  s.router = "kind = \"tiered_prefix_affinity\"\nstore_weight = 1.0\n";
  Harness h({hashed(1.0, 24, 2, {1, 2, 9})}, s);
  ASSERT_EQ(h.cluster->kv_stores().size(), 2u);
  SharedKvStore& store1 = *h.cluster->kv_stores()[1];
  ASSERT_TRUE(store1.store(KvCache::chain(0, 1), 2, 2));
  ASSERT_TRUE(store1.store(KvCache::chain(KvCache::chain(0, 1), 2), 2, 2));
  h.run();
  ASSERT_EQ(h.obs.lookups.size(), 1u);
  EXPECT_EQ(h.obs.lookups[0].replica, 2u);
  EXPECT_EQ(h.obs.lookups[0].store_hit_tokens, 16);
  EXPECT_NEAR(static_cast<double>(h.obs.find(0)->first_token.ns()), 1023.0 * kMs, 1);
  EXPECT_EQ(store1.per_replica().at(2).loads, 1u);
}

// On a PD fabric a replica's store copies go to its group's store endpoint. Prefill replicas 0 and
// 1 (GPUs 0, 1), decode replica 2 (GPU 2), one node on one leaf (no spine); groups of 1: store 0
// for replica 0, store 1 for replica 1, both on the leaf ("store 0 - leaf 0", "store 1 - leaf 0"),
// PCIe and NIC 1 GB/s, each store's link 2 MB/s; latencies PCIe 1 us, NIC - leaf 2 us, store -
// leaf 1 us. Store 0's link is down for the whole run: any copy replica 1 sent there would never
// arrive (the run would not drain). Prefill round-robin: replica 0 gets three 4-token requests (no
// full unit: nothing to write), replica 1 gets A (16 tokens, units 1, 2), B (24 tokens, units 5, 6,
// 7: with 7 HBM blocks its prompt evicts A's two units, written to store 1), then C (2 s, units 1, 2,
// 9). C's store copy: 16,000 B over "store 1 - leaf 0 (down)", "node 0 nic 1 - leaf (down)", "gpu 1
// pcie (down)", its bytes moving after the store's 1 ms lookup (latency_us): 1 ms + 16,000 / 2 MB/s =
// 8 ms + 1 + 2 + 1 us = 9.004 ms (loaded: the `cost` estimate on the idle fabric is that time, under
// the 16 ms saved; at 1 MB/s it would be 17.004 ms and C recomputes); then 8 tokens of prefill,
// 18 ms: first token at 2 s + 9.004 + 18 ms = 2.027004 s.
TEST(StoreGroupsTest, OnAPdFabricAReplicasStoreCopiesGoToItsGroupsStore) {
  ClusterSetup s;
  s.replicas = 3;
  s.prefill_replicas = 2;
  s.prefix_unit_tokens = 8;
  s.kv_blocks = 8;
  s.kv_blocks_of = {7, 7, 8};
  s.per_token_s = 0.001;
  s.topology.pcie_bytes_per_s = 1e9;
  s.topology.nic_bytes_per_s = 1e9;
  s.topology.store = true;
  s.topology.store_bytes_per_s = 2e6;
  s.topology.store_at = {-1, -1};
  s.kv_store = store_spec();
  s.replicas_per_store = 1;
  Harness h({hashed(0.0, 4, 2, {50}), hashed(0.1, 16, 2, {1, 2}), hashed(0.2, 4, 2, {51}),
             hashed(1.0, 24, 2, {5, 6, 7}), hashed(1.5, 4, 2, {52}), hashed(2.0, 24, 2, {1, 2, 9})},
            s);
  const Topology& t = h.network->topology();
  ASSERT_EQ(t.links_named("store 0 - leaf 0").size(), 2u);
  h.network->set_links_down(t.links_named("store 0 - leaf 0"), true);
  h.run();
  const SharedKvStore& s1 = *h.cluster->kv_stores()[1];
  EXPECT_EQ(h.obs.find(5)->cached_tokens, 16);
  EXPECT_EQ(h.obs.find(5)->first_token.ns(), 2'027'004'000);
  EXPECT_EQ(s1.per_replica().at(1).loads, 1u);
  EXPECT_NEAR(s1.per_replica().at(1).load_seconds, 0.009004, 1e-12);
  EXPECT_EQ(h.cluster->kv_stores()[0]->units(), 0u);
  EXPECT_EQ(h.cluster->replicas()[2]->kv_store(), nullptr);  // the decode replica has none
}

// ---- on the topology ---------------------------------------------------------------------------

struct Done : TransferListener {
  Simulation* sim = nullptr;
  std::vector<std::pair<uint64_t, int64_t>> at;
  void on_transfer_done(uint64_t tag) override { at.emplace_back(tag, sim->now().ns()); }
};

std::vector<std::string> names(const Topology& t, const Topology::Path& p) {
  std::vector<std::string> out;
  for (uint32_t l : p.links) out.push_back(t.link_name(l));
  return out;
}

// Two nodes of 2 GPUs, each GPU on its own NIC (PCIe 50 GB/s, 1 us), NICs 100 GB/s and 2 us, each
// node on its own leaf (nodes_per_switch = 1) under a spine (1 us a hop; uplinks the leaf's NICs,
// 200 GB/s); every store's link 40 GB/s. Two stores: store 0 for the replicas on node 0, store 1
// for those on node 1.
TopologyConfig two_racks(std::vector<int64_t> store_at) {
  TopologyConfig c;
  c.num_gpus = 4;
  c.gpus_per_node = 2;
  c.nics_per_node = 2;
  c.nvlink_bytes_per_s = 400e9;
  c.nvlink_latency_s = 1e-6;
  c.pcie_bytes_per_s = 50e9;
  c.pcie_latency_s = 1e-6;
  c.nic_bytes_per_s = 100e9;
  c.nic_latency_s = 2e-6;
  c.nodes_per_switch = 1;
  c.switch_latency_s = 1e-6;
  c.store = true;
  c.store_bytes_per_s = 40e9;
  c.store_at = std::move(store_at);
  return c;
}

TEST(StoreGroupsTest, ALeafStoresCopiesStayInItsRackAndTwoGroupsShareNoLink) {
  Topology t(two_racks({0, 1}));  // attach = "leaf": store 0 on node 0's leaf, store 1 on node 1's
  // Endpoints: GPUs 0-3, hosts 4-5, stores 6 and 7.
  ASSERT_EQ(t.num_stores(), 2);
  EXPECT_EQ(t.store_endpoint(0), 6);
  EXPECT_EQ(t.store_endpoint(1), 7);
  EXPECT_TRUE(t.is_store(7));
  EXPECT_FALSE(t.is_host(6));
  // GPU 1 -> store 0 (a write): PCIe, NIC -> leaf 0, leaf 0 -> store 0; no spine. Latency 1 + 2 + 1
  // = 4 us.
  const auto& write = t.path(1, t.store_endpoint(0));
  EXPECT_EQ(names(t, write), (std::vector<std::string>{"gpu 1 pcie (up)", "node 0 nic 1 - leaf (up)",
                                                       "store 0 - leaf 0 (up)"}));
  EXPECT_NEAR(write.latency_s, 4e-6, 1e-15);
  const auto& load = t.path(t.store_endpoint(1), 3);
  EXPECT_EQ(names(t, load), (std::vector<std::string>{"store 1 - leaf 1 (down)", "node 1 nic 1 - leaf (down)",
                                                      "gpu 3 pcie (down)"}));
  EXPECT_TRUE(t.links_named("store - spine").empty());
  EXPECT_EQ(t.links_named("store 1 - leaf 1").size(), 2u);
  // The two groups' loads share no link.
  std::vector<uint32_t> a = t.path(t.store_endpoint(0), 0).links, b = load.links;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  std::vector<uint32_t> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  EXPECT_TRUE(both.empty());

  // Rates: 1 GB store 0 -> GPU 0 and 1 GB store 1 -> GPU 2 at once: each alone on its links,
  // min(40 store, 100 NIC, 50 PCIe) = 40 GB/s: 25 ms, + 4 us.
  {
    Simulation sim;
    Done done;
    done.sim = &sim;
    Network net(sim, Topology(two_racks({0, 1})));
    net.start_transfer(1, {{net.topology().store_endpoint(0), 0}}, 1e9, &done);
    net.start_transfer(2, {{net.topology().store_endpoint(1), 2}}, 1e9, &done);
    const auto rates = net.flow_rates();
    ASSERT_EQ(rates.size(), 2u);
    EXPECT_DOUBLE_EQ(rates[0].second, 40e9);
    EXPECT_DOUBLE_EQ(rates[1].second, 40e9);
    sim.run();
    ASSERT_EQ(done.at.size(), 2u);
    EXPECT_EQ(done.at[0].second, 25'000'000 + 4'000);
    EXPECT_EQ(done.at[1].second, 25'000'000 + 4'000);
  }
  // One store on the spine (as without the keys): both loads cross its 40 GB/s link, 20 GB/s each:
  // 50 ms, + the path's latency 1 (store - spine) + 1 (spine - leaf) + 2 + 1 = 5 us.
  {
    Simulation sim;
    Done done;
    done.sim = &sim;
    Network net(sim, Topology(two_racks({})));
    const int64_t store = net.topology().store_endpoint();
    EXPECT_EQ(names(net.topology(), net.topology().path(store, 0)),
              (std::vector<std::string>{"store - spine (down)", "leaf 0 - spine (down)", "node 0 nic 0 - leaf (down)",
                                        "gpu 0 pcie (down)"}));
    net.start_transfer(1, {{store, 0}}, 1e9, &done);
    net.start_transfer(2, {{store, 2}}, 1e9, &done);
    sim.run();
    ASSERT_EQ(done.at.size(), 2u);
    EXPECT_EQ(done.at[0].second, 50'000'000 + 5'000);
    EXPECT_EQ(done.at[1].second, 50'000'000 + 5'000);
  }
  // Two stores on the spine (replicas_per_store without attach = "leaf"): each its own 40 GB/s
  // link, both through the spine: 25 ms + 5 us each, and "store 1 - spine" names store 1's cable.
  {
    Simulation sim;
    Done done;
    done.sim = &sim;
    Network net(sim, Topology(two_racks({-1, -1})));
    EXPECT_EQ(names(net.topology(), net.topology().path(net.topology().store_endpoint(1), 2)).front(),
              "store 1 - spine (down)");
    net.start_transfer(1, {{net.topology().store_endpoint(0), 0}}, 1e9, &done);
    net.start_transfer(2, {{net.topology().store_endpoint(1), 2}}, 1e9, &done);
    sim.run();
    ASSERT_EQ(done.at.size(), 2u);
    EXPECT_EQ(done.at[0].second, 25'000'000 + 5'000);
    EXPECT_EQ(done.at[1].second, 25'000'000 + 5'000);
  }
}

// On a rail-optimised fabric (NIC k of each node on its group's leaf k) a leaf store has a port on
// each rail leaf of its group ("store s nic k - leaf l", a NIC's 100 GB/s each) behind its own link
// ("store s", 40 GB/s): GPU 1's copy goes by its rail (NIC 1, leaf 1), no spine; GPUs 0 and 1
// loading at once share the store's 40 GB/s, 20 GB/s each, though their rails differ.
TEST(StoreGroupsTest, OnRailsALeafStoreHasAPortOnEveryRailOfItsGroup) {
  TopologyConfig c = two_racks({0, 1});
  c.rails = true;  // leaves 0, 1 (node 0's group), 2, 3 (node 1's)
  Topology t(c);
  EXPECT_EQ(names(t, t.path(1, t.store_endpoint(0))),
            (std::vector<std::string>{"gpu 1 pcie (up)", "node 0 nic 1 - leaf (up)", "store 0 nic 1 - leaf 1 (up)",
                                      "store 0 (up)"}));
  EXPECT_EQ(names(t, t.path(t.store_endpoint(1), 2)),
            (std::vector<std::string>{"store 1 (down)", "store 1 nic 0 - leaf 2 (down)", "node 1 nic 0 - leaf (down)",
                                      "gpu 2 pcie (down)"}));
  EXPECT_NEAR(t.path(1, t.store_endpoint(0)).latency_s, 4e-6, 1e-15);  // 1 + 2 + 1 + 0 us
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(c));
  // 2 GB split over GPUs 0 and 1: 1 GB each at 20 GB/s = 50 ms, + 4 us.
  net.start_transfer(1, {{net.topology().store_endpoint(0), 0}, {net.topology().store_endpoint(0), 1}}, 2e9, &done);
  sim.run();
  ASSERT_EQ(done.at.size(), 1u);
  EXPECT_EQ(done.at[0].second, 50'000'000 + 4'000);
}

}  // namespace
}  // namespace servesim::sim
