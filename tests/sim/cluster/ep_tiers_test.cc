// KV tiers on an expert-parallel replica (issue 16, docs/kv-tiers.md "Expert parallelism"): the
// replica's attention ranks share one KV pool, so a tier copy is spread evenly over all its GPUs
// (sim::tier_copy_share: each of the ranks x tp GPUs carries 1 / ranks of every block's bytes, over
// its own links), the bytes of a copy unchanged. Hand computations in the comments; the dense
// figures of the same cases are in unified_fabric_test.cc (one GPU per replica).
#include <gtest/gtest.h>

#include "sim/cluster/kv_store.h"
#include "sim/cluster/kv_tier.h"
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

struct Ignore final : TransferListener {
  void on_transfer_done(uint64_t) override {}
};

TEST(EpTiersTest, ACopyIsSpreadEvenlyOverTheReplicasGpus) {
  // A block of 4,000 bytes per GPU of the rank holding it. TP 1: its GPU copies 4,000 B; TP 2: each
  // GPU of the group its 4,000 B; EP 4 of TP 1 (4 ranks): the block's 4,000 B (on one rank's GPU)
  // spread over the replica's 4 GPUs, 1,000 each; EP 8 of TP 2 (4 ranks of 2): the block's 2 x
  // 4,000 B spread over 8 GPUs, 1,000 each.
  EXPECT_DOUBLE_EQ(tier_copy_share(4000, 1, 1).block_bytes_per_gpu, 4000);
  EXPECT_EQ(tier_copy_share(4000, 1, 1).gpus, 1);
  EXPECT_DOUBLE_EQ(tier_copy_share(4000, 2, 1).block_bytes_per_gpu, 4000);
  EXPECT_EQ(tier_copy_share(4000, 2, 1).gpus, 2);
  EXPECT_DOUBLE_EQ(tier_copy_share(4000, 1, 4).block_bytes_per_gpu, 1000);
  EXPECT_EQ(tier_copy_share(4000, 1, 4).gpus, 4);
  EXPECT_DOUBLE_EQ(tier_copy_share(4000, 2, 4).block_bytes_per_gpu, 1000);
  EXPECT_EQ(tier_copy_share(4000, 2, 4).gpus, 8);
}

// One EP 4 replica (4 attention ranks of TP 1, GPUs 0-3 of node 0, one KV pool of 16 blocks).
// Blocks of 4 tokens, units of 8 (2 blocks), 1,000 bytes per token on the GPU holding it (4,000 per
// block), iterations of 10 ms + 1 ms per prefilled token. One GPU per PCIe switch, so node 0's host
// attaches at each GPU's PCIe endpoint: host -> GPU k crosses "node 0 host - nic k (down)" and "gpu
// k pcie (down)", both 4 MB/s, 0.5 ms a hop, each GPU its own pair of links.
// The host tier (tier_copy_share(4000, 1, 4)): 1,000 bytes per block per GPU, 4 GPUs. A load of 16
// tokens (4 blocks, 16,000 B: what the rank holding them had) moves 4,000 B to each GPU.
ClusterSetup ep_host_case(bool fabric) {
  ClusterSetup s;
  s.gpus_per_replica = 4;
  s.attention_ranks = 4;
  s.prefix_unit_tokens = 8;
  s.kv_blocks = 16;
  s.per_token_s = 0.001;
  s.unified_network = fabric;
  s.topology.pcie_bytes_per_s = 4e6;
  s.topology.pcie_latency_s = 0.0005;
  const TierCopyShare share = tier_copy_share(4000, 1, 4);
  s.host_tier = host_tier_spec(tier_policies("on_eviction"), 100, share.block_bytes_per_gpu, share.gpus, 4e6, 0.001);
  return s;
}

// A1 (units 1, 2) and A2 (units 3, 4) run and leave their units in HBM (8 of the 16 blocks); B (56
// tokens, units 5-11: 14 blocks + 1 for its output) evicts all four to host memory. At 2 s C (units
// 1, 2, 19) and D (units 3, 4, 18) arrive, each with 16 tokens in host memory.
std::vector<traces::RequestSpec> host_trace() {
  return {hashed(0.0, 16, 2, {1, 2}), hashed(0.1, 16, 2, {3, 4}), hashed(0.5, 56, 2, {5, 6, 7, 8, 9, 10, 11}),
          hashed(2.0, 24, 2, {1, 2, 19}), hashed(2.0, 24, 2, {3, 4, 18})};
}

TEST(EpTiersTest, AHostHitOnAnExpertParallelReplicaLoadsOverEveryGpusLink) {
  // C and D load together from 2 s: each GPU's two links carry one flow of each, 2 MB/s each:
  // 4,000 / 2e6 = 2 ms + 2 x 0.5 ms = 3 ms, both done at 2.003 s (the dense replica of
  // unified_fabric_test, 16,000 B over one GPU's links: 9 ms). C goes on first: its last 8 tokens
  // in 10 + 8 = 18 ms, first token at 2.003 + 0.018 = 2.021 s. (The `cost` estimates: C decides
  // first, on idle links, 4,000 / 4e6 + 1 ms = 2 ms; D with C's flows on every link, 3 ms; both
  // under the 16 ms of prefill saved: both load.)
  Harness h(host_trace(), ep_host_case(true));
  h.run();
  const KvTierStats& st = h.cluster->replicas()[0]->host_tier()->stats();
  ASSERT_EQ(st.loads, 2u);
  EXPECT_EQ(st.loaded_tokens, 32);
  EXPECT_DOUBLE_EQ(st.load_bytes, 32000);  // the bytes are the ranks', not divided by the spread
  EXPECT_NEAR(st.load_seconds, 2 * 0.003, 1e-9);
  EXPECT_EQ(h.obs.find(3)->cached_tokens, 16);
  EXPECT_EQ(h.obs.find(4)->cached_tokens, 16);
  EXPECT_EQ(h.obs.find(3)->first_token.ns(), 2021 * kMs);
  EXPECT_GE(h.obs.find(4)->first_token.ns(), 2021 * kMs);

  // D alone (C a second later): 4,000 / 4e6 = 1 ms + 1 ms = 2 ms, first token 2.002 + 0.018 =
  // 2.020 s.
  auto alone = host_trace();
  std::swap(alone[3], alone[4]);
  alone[4].arrival = core::Time::from_ns(3000 * kMs);
  Harness a(alone, ep_host_case(true));
  a.run();
  const KvTierStats& sa = a.cluster->replicas()[0]->host_tier()->stats();
  ASSERT_EQ(sa.loads, 2u);
  EXPECT_NEAR(sa.load_seconds, 2 * 0.002, 1e-9);
  EXPECT_EQ(a.obs.find(3)->first_token.ns(), 2020 * kMs);

  // Analytic copies (no topology): blocks x bytes per block per GPU / bandwidth + latency = 4 x
  // 1,000 / 4e6 + 1 ms = 2 ms each, C and D alike (no link shared): C's first token at 2.020 s.
  Harness n(host_trace(), ep_host_case(false));
  n.run();
  const KvTierStats& sn = n.cluster->replicas()[0]->host_tier()->stats();
  ASSERT_EQ(sn.loads, 2u);
  EXPECT_NEAR(sn.load_seconds, 2 * 0.002, 1e-9);
  EXPECT_EQ(n.obs.find(3)->first_token.ns(), 2020 * kMs);
}

// Two EP 4 replicas (4 ranks of TP 1 each): replica 0 on node 0 (GPUs 0-3), replica 1 on node 1
// (GPUs 4-7), round robin; a store written through, on the one leaf by a 1 GB/s link (never
// binding); PCIe 1 GB/s, each GPU its NIC at 4 MB/s; PCIe 1 us, NIC - leaf 2 us, store - leaf 1 us;
// the store's lookup 1 ms. A (units 1, 2) runs on replica 0 and A' (units 3, 4) on replica 1; at 2 s C
// (units 3, 4, 9) comes to replica 0 and D (units 1, 2, 8) to replica 1: each finds 16 tokens in the
// store that the other replica wrote: 4 blocks, 16,000 B, 4,000 B to each GPU of the replica. A
// store -> GPU k load crosses "store - leaf 0 (down)", "node n nic k - leaf (down)" and "gpu k pcie
// (down)": alone 4,000 / 4e6 = 1 ms, + 4 us of path, + the 1 ms lookup before.
ClusterSetup ep_store_case() {
  ClusterSetup s;
  s.replicas = 2;
  s.gpus_per_replica = 4;
  s.attention_ranks = 4;
  s.prefix_unit_tokens = 8;
  s.per_token_s = 0.001;
  s.unified_network = true;
  s.topology.gpus_per_node = 4;
  s.topology.nics_per_node = 4;
  s.topology.pcie_bytes_per_s = 1e9;
  s.topology.nic_bytes_per_s = 4e6;
  s.topology.pcie_latency_s = 1e-6;
  s.topology.nic_latency_s = 2e-6;
  s.topology.switch_latency_s = 1e-6;
  s.topology.store = true;
  s.topology.store_bytes_per_s = 1e9;
  const TierPolicies p = tier_policies("write_through");
  auto st = std::make_shared<StoreSpec>();
  st->write = p.write;
  st->eviction = p.eviction;
  st->load = p.load;
  st->capacity_blocks = 100;
  const TierCopyShare share = tier_copy_share(4000, 1, 4);
  st->block_bytes_per_gpu = share.block_bytes_per_gpu;
  st->gpus = share.gpus;
  st->link_bytes_per_s = 4e6;
  st->latency_s = 0.001;
  s.kv_store = st;
  return s;
}

std::vector<traces::RequestSpec> store_trace() {
  return {hashed(0.0, 16, 2, {1, 2}), hashed(0.0, 16, 2, {3, 4}), hashed(2.0, 24, 2, {3, 4, 9}),
          hashed(2.0, 24, 2, {1, 2, 8})};
}

TEST(EpTiersTest, AStoreHitOnAnExpertParallelReplicaSharesANicWithAPdTransferMaxMin) {
  // Quiet fabric: every flow alone on its NIC: 1 ms + 4 us after the 1 ms lookup: 2.004 ms for each
  // load; 18 ms of prefill (8 tokens): first tokens at 2.020004 s. (A dense replica of one GPU
  // would move all 16,000 B over one NIC: 4 ms.)
  {
    Harness h(store_trace(), ep_store_case());
    h.run();
    const auto& per = h.cluster->kv_store()->per_replica();
    for (uint32_t r : {0u, 1u}) {
      EXPECT_EQ(per.at(r).loads, 1u) << r;
      EXPECT_EQ(per.at(r).loaded_tokens, 16) << r;
      EXPECT_EQ(per.at(r).cross_tokens, 16) << r;
      EXPECT_NEAR(per.at(r).load_seconds, 0.002004, 1e-12) << r;
    }
    EXPECT_EQ(h.obs.find(2)->replica, 0u);
    EXPECT_EQ(h.obs.find(2)->first_token.ns(), 2'020'004'000);
    EXPECT_EQ(h.obs.find(3)->first_token.ns(), 2'020'004'000);
  }
  // A KV transfer (a PD transfer's flow, 12 MB) from GPU 4 (node 1) to GPU 0 (node 0) from time 0:
  // GPU 4's PCIe and NIC (up), the leaf, node 0's NIC 0 (down) and GPU 0's PCIe (down). It runs at
  // 4 MB/s (3 s alone). C's store flow to GPU 0 crosses NIC 0 (down) too: from 2.001 s (after the
  // lookup) the two share it max-min, 2 MB/s each (the transfer is limited nowhere else), so C's
  // 4,000 B to GPU 0 take 2 ms: drained at 2.003 s, arrived 4 us later; C's flows to GPUs 1-3 take
  // 1 ms alone. C waits for the last: 1 + 2 ms + 4 us = 3.004 ms, first token 2.003004 + 0.018 =
  // 2.021004 s. D (replica 1, GPUs 4-7) meets the transfer on no link (it leaves GPU 4 upwards):
  // 2.004 ms, as on a quiet fabric. (C's `cost` estimate: 1 ms + 4,000 B at the 2 MB/s a new flow
  // would get on NIC 0 + 4 us = 3.004 ms < 16 ms saved: load.)
  Harness h(store_trace(), ep_store_case());
  Ignore ignore;
  h.network->start_transfer(1, {{4, 0}}, 12e6, &ignore);
  h.run();
  const auto& per = h.cluster->kv_store()->per_replica();
  EXPECT_EQ(per.at(0).loads, 1u);
  EXPECT_NEAR(per.at(0).load_seconds, 0.003004, 1e-12);
  EXPECT_NEAR(per.at(1).load_seconds, 0.002004, 1e-12);
  EXPECT_EQ(h.obs.find(2)->first_token.ns(), 2'021'004'000);
  EXPECT_EQ(h.obs.find(3)->first_token.ns(), 2'020'004'000);
}

}  // namespace
}  // namespace servesim::sim
