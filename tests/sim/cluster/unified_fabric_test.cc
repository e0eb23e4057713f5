// KV tier traffic on the fabric of a unified cluster (issue 16, "one fabric"): a unified cluster
// with a KV tier has a topology too (experiments/run.cc builds it unless kv_tiers.copies =
// "analytic"), and its tiers' copies are flows that share the links max-min, as on a PD cluster.
// Without the fabric, two loads of one replica would each take the analytic bytes / bandwidth +
// latency as if alone. Hand computations in the comments.
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
using testing::tier_policies;
using testing::TierPolicies;

constexpr int64_t kMs = 1000000;

std::shared_ptr<const KvTierLoadPolicy> load_policy(const std::string& kind) {
  const std::vector<core::ParamSpec> schema = {core::ParamSpec::section("l", "kv_tier_loads", "cost", "l")};
  return policies::kv_tier_load_registry().make(
      core::parse_config("[l]\nkind = \"" + kind + "\"\n", "t.toml", schema).section("l"));
}

// Blocks of 4 tokens, units of 8 tokens (2 blocks), 1000 bytes per token per GPU (4,000 per block,
// 8,000 per unit), iterations of 10 ms + 1 ms per prefilled token. One GPU per PCIe switch, so the
// node's host attaches at each GPU's PCIe endpoint: a host -> GPU 0 load crosses "node 0 host - nic 0
// (down)" and "gpu 0 pcie (down)", both 4 MB/s (the host link is pcie_bytes_per_s when unset) and
// 0.5 ms a hop: 16,000 B alone takes 16,000 / 4e6 + 2 x 0.5 ms = 5 ms, the analytic tier's 4 MB/s
// + 1 ms (so the `cost` policy, 5 ms < the 16 ms of prefill saved, loads).
ClusterSetup host_case() {
  ClusterSetup s;
  s.prefix_unit_tokens = 8;
  s.kv_blocks = 16;
  s.per_token_s = 0.001;
  s.unified_network = true;
  s.topology.pcie_bytes_per_s = 4e6;
  s.topology.pcie_latency_s = 0.0005;
  s.host_tier = host_tier_spec(tier_policies("on_eviction"), 100, 4000, 1, 4e6, 0.001);
  return s;
}

// A1 (units 1, 2) and A2 (units 3, 4) run and leave their units cached in HBM (8 of its 16 blocks);
// B (56 tokens, units 5-11: 14 blocks, + 1 for its output) evicts all four to host memory. At 2 s C
// (units 1, 2, 9) and D (units 3, 4, 8) arrive together, each with 16 tokens in host memory.
std::vector<traces::RequestSpec> host_trace() {
  return {hashed(0.0, 16, 2, {1, 2}), hashed(0.1, 16, 2, {3, 4}), hashed(0.5, 56, 2, {5, 6, 7, 8, 9, 10, 11}),
          hashed(2.0, 24, 2, {1, 2, 19}), hashed(2.0, 24, 2, {3, 4, 18})};
}

TEST(UnifiedFabricTest, TwoHostLoadsOfOneReplicaShareItsPcieLink) {
  // C's and D's loads start at 2 s together, one flow each on the same two 4 MB/s links: 2 MB/s
  // each, 16,000 / 2e6 = 8 ms, + 1 ms of latency: both arrive at 2.009 s (the analytic model gave
  // each 5 ms, as if alone). C goes on first: its last 8 tokens in 10 + 8 = 18 ms, first token at
  // 2.009 + 0.018 = 2.027 s (analytic: 2.023 s).
  Harness h(host_trace(), host_case());
  h.run();
  const KvTierStats& st = h.cluster->replicas()[0]->host_tier()->stats();
  ASSERT_EQ(st.loads, 2u);
  EXPECT_EQ(st.loaded_tokens, 32);
  EXPECT_DOUBLE_EQ(st.load_bytes, 32000);
  EXPECT_NEAR(st.load_seconds, 2 * 0.009, 1e-9);  // the flows' times, 9 ms each
  EXPECT_EQ(h.obs.find(3)->cached_tokens, 16);
  EXPECT_EQ(h.obs.find(4)->cached_tokens, 16);
  EXPECT_EQ(h.obs.find(3)->first_token.ns(), 2027 * kMs);
  EXPECT_GE(h.obs.find(4)->first_token.ns(), 2027 * kMs);

  // D alone (C arrives a second later): its flow has the links to itself, 5 ms, as analytic.
  // D (request 3 here) loads alone at 2 s, 5 ms, first token 2.005 + 0.018 = 2.023 s; C at 3 s too.
  auto alone = host_trace();
  std::swap(alone[3], alone[4]);
  alone[4].arrival = core::Time::from_ns(3000 * kMs);
  Harness a(alone, host_case());
  a.run();
  const KvTierStats& sa = a.cluster->replicas()[0]->host_tier()->stats();
  ASSERT_EQ(sa.loads, 2u);
  EXPECT_NEAR(sa.load_seconds, 2 * 0.005, 1e-9);
  EXPECT_EQ(a.obs.find(3)->first_token.ns(), 2023 * kMs);
}

// Two unified replicas (GPUs 0 and 1 of node 0, round robin) and a store written through (a unit is
// in the store as soon as HBM registers it), on the one leaf by a 4 MB/s link; PCIe and NICs 1 GB/s
// (never binding), PCIe 1 us, NIC - leaf 2 us, store - leaf 1 us. A (units 1, 2) runs on replica 0
// and A' (units 3, 4) on replica 1; at 2 s C (units 3, 4, 9) comes to replica 0 and D (units 1, 2,
// 8) to replica 1: each finds 16 tokens (16,000 B) in the store that the other replica wrote.
// A store -> GPU k load crosses "store - leaf 0 (down)", "node 0 nic k - leaf (down)" and "gpu k
// pcie (down)": alone 16,000 / 4e6 = 4 ms + 1 + 2 + 1 us = 4.004 ms. The policy's estimate is the
// analytic 16,000 / 4 MB/s + 1 ms = 5 ms < 16 ms saved: load.
ClusterSetup store_case(double lookup_s = 0.001) {
  ClusterSetup s;
  s.replicas = 2;
  s.prefix_unit_tokens = 8;
  s.per_token_s = 0.001;
  s.unified_network = true;
  s.topology.pcie_bytes_per_s = 1e9;
  s.topology.nic_bytes_per_s = 1e9;
  s.topology.pcie_latency_s = 1e-6;
  s.topology.nic_latency_s = 2e-6;
  s.topology.switch_latency_s = 1e-6;
  s.topology.store = true;
  s.topology.store_bytes_per_s = 4e6;
  const TierPolicies p = tier_policies("write_through");
  auto st = std::make_shared<StoreSpec>();
  st->write = p.write;
  st->eviction = p.eviction;
  st->load = p.load;
  st->capacity_blocks = 100;
  st->block_bytes_per_gpu = 4000;
  st->gpus = 1;
  st->link_bytes_per_s = 4e6;
  st->latency_s = lookup_s;
  s.kv_store = st;
  return s;
}

std::vector<traces::RequestSpec> store_trace() {
  return {hashed(0.0, 16, 2, {1, 2}), hashed(0.0, 16, 2, {3, 4}), hashed(2.0, 24, 2, {3, 4, 9}),
          hashed(2.0, 24, 2, {1, 2, 8})};
}

TEST(UnifiedFabricTest, TwoReplicasStoreLoadsShareTheStoresLink) {
  // Both loads start at 2 s; their bytes move after the store's 1 ms lookup (latency_us): from
  // 2.001 s on the store's 4 MB/s link, 2 MB/s each, 8 ms, + 4 us of path: 9.004 ms each (analytic:
  // 5 ms each, the link shared by nothing). Then each prefills its last 8 tokens alone on its
  // replica, 18 ms: first tokens at 2.027004 s. (Each `cost` estimate at 2 s: the other copy is
  // still in its lookup, so 16,000 / 4 MB/s + 4 us + 1 ms = 5.004 ms < 16 ms: both load.)
  Harness h(store_trace(), store_case());
  h.run();
  const auto& per = h.cluster->kv_store()->per_replica();
  for (uint32_t r : {0u, 1u}) {
    EXPECT_EQ(per.at(r).loads, 1u) << r;
    EXPECT_EQ(per.at(r).loaded_tokens, 16) << r;
    EXPECT_EQ(per.at(r).cross_tokens, 16) << r;  // written by the other replica
    EXPECT_NEAR(per.at(r).load_seconds, 0.009004, 1e-12) << r;
  }
  EXPECT_EQ(h.obs.find(2)->replica, 0u);
  EXPECT_EQ(h.obs.find(3)->replica, 1u);
  EXPECT_EQ(h.obs.find(2)->first_token.ns(), 2'027'004'000);
  EXPECT_EQ(h.obs.find(3)->first_token.ns(), 2'027'004'000);
}

TEST(UnifiedFabricTest, AReplicaFailingWithALoadInFlightStopsItsFlows) {
  // As above without the store's lookup latency (latency_us = 0), but replica 1 fails at 2.004 s: both flows have moved 4 ms x 2 MB/s = 8,000 B. D's
  // flow stops with its replica (its copying process is gone); C's has the store's link alone for
  // its last 8,000 B: 2 ms, drained at 2.006 s, arrived 4 us later: 6.004 ms of load (8.004 if the
  // dead replica's flow went on). D goes to replica 0 at 2.004 s, idle (C is out of the queue for its
  // load), where units 1 and 2 are in HBM (A's): D prefills its last 8 tokens at once, [2.004,
  // 2.022); C is back at 2.006004 and prefills next, 18 ms: first tokens D 2.022 s, C 2.040 s.
  Harness h(store_trace(), store_case(0));
  FaultPlan plan;
  FaultEvent e;
  e.replica = 1;
  e.at = core::Time::from_ns(2'004'000'000);
  plan.events = {e};
  h.cluster->set_faults(plan);
  h.run();
  const auto& per = h.cluster->kv_store()->per_replica();
  EXPECT_NEAR(per.at(0).load_seconds, 0.006004, 1e-12);
  EXPECT_EQ(h.obs.find(3)->first_token.ns(), 2022 * kMs);
  EXPECT_EQ(h.obs.find(2)->first_token.ns(), 2040 * kMs);
  EXPECT_EQ(h.obs.find(3)->outcome, core::RequestOutcome::kCompleted);
  EXPECT_EQ(h.obs.find(2)->outcome, core::RequestOutcome::kCompleted);
}

TEST(UnifiedFabricTest, ARequestTimingOutWhileLoadingStopsItsFlow) {
  // The store case without the lookup latency (latency_us = 0), a 200 kB/s store link, loads `always` (the `cost` estimate on the fabric,
  // 32,000 B / 200 kB/s = 160 ms, would recompute D's hit)
  // and clients giving up 200 ms after arrival; round robin. A (0 s, units 3, 4) runs on replica
  // 0, A' (0 s, 40 tokens, units 1, 2, 5, 6, 7) on replica 1 (done at 60 ms). D (1 s, units 1, 2,
  // 5, 6, 8) comes to replica 0: units 1, 2, 5, 6 are in the store (unit 7 ends at the last prompt
  // token): 32,000 B. C (1.05 s, units 3, 4, 9) comes to replica 1: 16,000 B. Store -> GPU latency
  // 4 us.
  //   [1.00, 1.05) D alone at 200 kB/s: 10,000 B.
  //   [1.05, 1.20) both at 100 kB/s: C 15,000 B, D 15,000 B (D has 7,000 left).
  //   1.20 s: D's client gives up (1 s + 200 ms); its flow stops. C alone: 1,000 B in 5 ms, drained
  //   at 1.205 s, arrived at 1.205004 s: 155.004 ms of load (160.004 ms if D's flow went on).
  //   C prefills its last 8 tokens, 18 ms: first token 1.223004 s; one decode, done 1.233004 s,
  //   before its deadline (1.25 s).
  ClusterSetup s = store_case(0);
  s.topology.store_bytes_per_s = 0.2e6;
  auto always = std::make_shared<StoreSpec>(*s.kv_store);
  always->load = load_policy("always");
  s.kv_store = always;
  s.client_timeout = core::Duration::from_ns(200 * kMs);
  Harness h({hashed(0.0, 16, 2, {3, 4}), hashed(0.0, 40, 2, {1, 2, 5, 6, 7}), hashed(1.0, 40, 2, {1, 2, 5, 6, 8}),
             hashed(1.05, 24, 2, {3, 4, 9})},
            s);
  h.run();
  const auto& per = h.cluster->kv_store()->per_replica();
  EXPECT_EQ(per.at(0).loads, 1u);               // D's, started
  EXPECT_DOUBLE_EQ(per.at(0).load_seconds, 0);  // and never finished
  EXPECT_EQ(h.obs.find(2)->outcome, core::RequestOutcome::kTimedOut);
  EXPECT_EQ(per.at(1).loads, 1u);
  EXPECT_NEAR(per.at(1).load_seconds, 0.155004, 1e-12);
  EXPECT_EQ(h.obs.find(3)->first_token.ns(), 1'223'004'000);
  EXPECT_EQ(h.obs.find(3)->outcome, core::RequestOutcome::kCompleted);
}

// The `cost` policy's estimate on the fabric (Network::transfer_seconds_now): the host case with
// 8,000 B a block, so C's hit (units 1, 2) is 32,000 B; prefill saved 16 tokens x 1 ms = 16 ms.
// On an idle PCIe path the estimate is 32,000 / 4 MB/s + 2 x 0.5 ms = 9 ms < 16 ms: C loads
// (9 ms; as the flow takes), then prefills 8 tokens (18 ms): first token 2.027 s. With one other
// flow on the path's links (host -> GPU 0, 20 MB started at 0 s: 5 s alone, still running at 2 s)
// each link gives a new flow 4 MB/s / 2: 32,000 / 2e6 + 1 ms = 17 ms > 16 ms: C recomputes, all 24
// tokens in one iteration, 10 + 24 ms: first token 2.034 s. The analytic estimate (32,000 / 4 MB/s
// + 1 ms = 9 ms) would have loaded it, 17 ms on the shared link: first token 2.035 s.
TEST(UnifiedFabricTest, TheCostEstimateSeesAnotherFlowOnThePcieLink) {
  auto trace = host_trace();
  trace.pop_back();  // C alone at 2 s
  auto one_case = [] {
    ClusterSetup s = host_case();
    auto t = std::make_shared<HostTierSpec>(*s.host_tier);
    t->block_bytes_per_gpu = 8000;
    s.host_tier = t;
    return s;
  };
  Harness idle(trace, one_case());
  idle.run();
  const KvTierStats& si = idle.cluster->replicas()[0]->host_tier()->stats();
  ASSERT_EQ(si.loads, 1u);
  EXPECT_EQ(si.declined, 0u);
  EXPECT_NEAR(si.load_seconds, 0.009, 1e-9);
  EXPECT_EQ(idle.obs.find(3)->first_token.ns(), 2027 * kMs);

  Harness busy(trace, one_case());
  busy.network->start_transfer(7, {{busy.network->topology().host_endpoint(0), 0}}, 20e6, nullptr);
  busy.run();
  const KvTierStats& sb = busy.cluster->replicas()[0]->host_tier()->stats();
  EXPECT_EQ(sb.loads, 0u);
  EXPECT_EQ(sb.declined, 1u);
  EXPECT_EQ(sb.declined_tokens, 16);
  EXPECT_EQ(busy.obs.find(3)->cached_tokens, 0);
  EXPECT_EQ(busy.obs.find(3)->first_token.ns(), 2034 * kMs);
}

}  // namespace
}  // namespace servesim::sim
