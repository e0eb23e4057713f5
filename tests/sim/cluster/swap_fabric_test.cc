// Swap preemption on the fabric (issue 16, "every byte on the same links"): on a cluster with a
// topology, a swap-out is a flow per GPU of the replica, that GPU's share of the request's KV, from
// the GPU to its node's host, and a swap-in the reverse: the links a host tier's copies use (the
// GPU's PCIe link, the PCIe switch's host uplink), shared max-min fairly with them and PD transfers.
// The iteration planned with the copies computes once they have drained (vLLM v0 swaps before the
// model step). Without a topology (or with swap_flows off) the analytic bytes / host link time is
// added to that iteration, as before. Hand computations in the comments.
#include <gtest/gtest.h>

#include "tests/sim/cluster/cluster_harness.h"

namespace servesim::sim {
namespace {

using testing::ClusterSetup;
using testing::Harness;
using testing::spec;

constexpr int64_t kMs = 1000000;

// One replica (TP 1) of 4 blocks of 4 tokens, 1 MB of KV per token per GPU, iterations of 10 ms.
// A and B (4-token prompts, 12 output tokens each; ids 0 and 1) arrive at 0: A prefills alone in
// [0, 10] ms (the replica starts at A's arrival), B in [10, 20] (a step prefills or decodes, as
// vLLM v0's), then both decode, each a token per step, gens 2..5 at 30, 40, 50, 60 ms (8 tokens,
// 2 blocks each). At the plan of 60 ms A needs 9 tokens (3 blocks): 5 > 4, so B (the newest) is
// preempted by swap: 8 tokens = 8 MB per GPU to host memory. A then has the cache alone until its
// gen 12; B comes back (a swap-in of 8 MB) once A has left, needing 9 tokens (3 blocks).
// The fabric: PCIe 1 GB/s (host link the same), 0.5 ms a hop; a GPU -> host path is two hops
// ("gpu 0 pcie (up)", "node 0 host - nic 0 (up)"): 1 ms of latency.
ClusterSetup swap_case() {
  ClusterSetup s;
  s.kv_blocks = 4;
  s.block_size = 4;
  s.preemption = PreemptionMode::kSwap;
  s.kv_bytes_per_token = 1e6;
  s.host_link_bytes_per_s = 1e9;
  s.unified_network = true;
  s.topology.pcie_bytes_per_s = 1e9;
  s.topology.pcie_latency_s = 0.0005;
  return s;
}

std::vector<traces::RequestSpec> swap_trace() { return {spec(0, 4, 12), spec(0, 4, 12)}; }

struct Done : TransferListener {
  Simulation* sim = nullptr;
  std::vector<int64_t> at;
  void on_transfer_done(uint64_t) override { at.push_back(sim->now().ns()); }
};

// Starts, when its event comes, what a host tier's store of `bytes` from a one-GPU replica on GPU 0
// starts on the fabric (Cluster::tier_copy, kGpu -> kHost): one flow GPU 0 -> node 0's host.
struct HostStore : EventHandler {
  Network* net = nullptr;
  Done* done = nullptr;
  double bytes = 0;
  void on_event(uint64_t) override {
    net->start_transfer(99, {{0, net->topology().host_endpoint(0)}}, bytes, done);
  }
};

TEST(SwapFabricTest, ASwapOutSharesThePcieLinkWithAHostTierStore) {
  // At 60 ms B's swap-out (8 MB) and a 4 MB host store start on the same two 1 GB/s links: 0.5 GB/s
  // each. The store drains at 60 + 4e6 / 0.5e9 = 68 ms (arrives 69 ms with the latency); the swap
  // has moved 4 MB then, the 4 MB left take 4 ms alone: drained at 72 ms, arrived 73 ms. A's step
  // planned at 60 ms computes from 73 ms to 83 ms (the analytic model: [60, 78] ms, 8 ms of copy;
  // the swap alone on the fabric: 60 + 8 + 1 = 69 ms).
  // Then A decodes gen 6..12 at 83, 93, ..., 143 ms and leaves; B swaps in at 143 ms alone (8 ms +
  // 1 ms: 152 ms), decodes gen 6 at 162 ms and gen 12 at 222 ms. Waits: 13 + 9 = 22 ms.
  Harness h(swap_trace(), swap_case());
  Done done;
  done.sim = &h.sim;
  HostStore store;
  store.net = h.network.get();
  store.done = &done;
  store.bytes = 4e6;
  h.sim.schedule_at(core::Time::from_ns(60 * kMs), &store);
  h.run();
  ASSERT_EQ(h.obs.preempted.size(), 1u);
  EXPECT_EQ(h.obs.preempted[0], 1u);
  ASSERT_EQ(done.at.size(), 1u);
  EXPECT_EQ(done.at[0], 69 * kMs);
  ASSERT_GE(h.obs.iterations.size(), 8u);
  EXPECT_EQ(h.obs.iterations[5].start.ns(), 50 * kMs);
  EXPECT_EQ(h.obs.iterations[6].start.ns(), 73 * kMs);
  EXPECT_EQ(h.obs.iterations[6].duration.ns(), 10 * kMs);
  EXPECT_EQ(h.obs.find(0)->finish.ns(), 143 * kMs);
  EXPECT_EQ(h.obs.find(1)->finish.ns(), 222 * kMs);
  const Replica::SwapStats& st = h.cluster->replicas()[0]->swap_stats();
  EXPECT_EQ(st.swap_outs, 1u);
  EXPECT_EQ(st.swap_ins, 1u);
  EXPECT_DOUBLE_EQ(st.out_bytes, 8e6);
  EXPECT_DOUBLE_EQ(st.in_bytes, 8e6);
  EXPECT_NEAR(st.wait_seconds, 0.022, 1e-12);
  EXPECT_DOUBLE_EQ(h.network->bytes_delivered(), 8e6 + 4e6 + 8e6);
}

TEST(SwapFabricTest, ATensorParallelReplicaMovesEachGpusShareOverItsSwitch) {
  // The same requests on one TP = 2 replica, GPUs 0 and 1 behind one PCIe switch whose host uplink
  // (1 GB/s) both cross. Each GPU holds 1 MB per token: B's swap-out is 8 MB from each GPU, two flows
  // sharing the uplink at 0.5 GB/s: 16 ms + 1 ms of latency. A's step planned at 60 ms computes in
  // [77, 87] ms; A's gen 12 at 147 ms; B's swap-in at 147 ms the same 17 ms (the uplink's down
  // direction): its gen 6 at 174 ms, gen 12 at 234 ms. Waits: 17 + 17 ms; bytes 2 x 8 MB each way.
  ClusterSetup s = swap_case();
  s.gpus_per_replica = 2;
  s.topology.gpus_per_pcie_switch = 2;
  Harness h(swap_trace(), s);
  h.run();
  ASSERT_GE(h.obs.iterations.size(), 8u);
  EXPECT_EQ(h.obs.iterations[6].start.ns(), 77 * kMs);
  EXPECT_EQ(h.obs.iterations[6].duration.ns(), 10 * kMs);
  EXPECT_EQ(h.obs.find(0)->finish.ns(), 147 * kMs);
  EXPECT_EQ(h.obs.find(1)->finish.ns(), 234 * kMs);
  const Replica::SwapStats& st = h.cluster->replicas()[0]->swap_stats();
  EXPECT_DOUBLE_EQ(st.out_bytes, 16e6);
  EXPECT_DOUBLE_EQ(st.in_bytes, 16e6);
  EXPECT_NEAR(st.wait_seconds, 0.034, 1e-12);
  EXPECT_DOUBLE_EQ(h.network->bytes_delivered(), 32e6);
}

TEST(SwapFabricTest, AnExpertParallelReplicasSwapIsSpreadOverItsRanksLikeItsTierCopies) {
  // The same requests on one expert-parallel replica of two attention ranks of TP 1 (GPUs 0 and 1,
  // each behind its own PCIe switch and host uplink). The replica keeps one KV pool, so B's 8 MB
  // (8 tokens x 1 MB on the one GPU of the rank that holds it) is spread over both GPUs' links as
  // its tier copies are (sim::tier_copy_share): 4 MB each at 1 GB/s, 4 ms + 1 ms of latency. A's
  // step planned at 60 ms computes in [65, 75] ms: gen 6 at 75, gen 12 at 135 ms; B's swap-in at
  // 135 ms the same 5 ms: its step [140, 150], gen 6 at 150, gen 12 at 210 ms. Waits 5 + 5 ms;
  // 8 MB each way (one rank's share, not one per GPU of the replica: 16 MB would take 9 ms).
  ClusterSetup s = swap_case();
  s.gpus_per_replica = 2;
  s.attention_ranks = 2;
  Harness h(swap_trace(), s);
  h.run();
  ASSERT_EQ(h.obs.preempted.size(), 1u);
  ASSERT_GE(h.obs.iterations.size(), 8u);
  EXPECT_EQ(h.obs.iterations[6].start.ns(), 65 * kMs);
  EXPECT_EQ(h.obs.iterations[6].duration.ns(), 10 * kMs);
  EXPECT_EQ(h.obs.find(0)->finish.ns(), 135 * kMs);
  EXPECT_EQ(h.obs.find(1)->finish.ns(), 210 * kMs);
  const Replica::SwapStats& st = h.cluster->replicas()[0]->swap_stats();
  EXPECT_DOUBLE_EQ(st.out_bytes, 8e6);
  EXPECT_DOUBLE_EQ(st.in_bytes, 8e6);
  EXPECT_NEAR(st.wait_seconds, 0.010, 1e-12);
  EXPECT_DOUBLE_EQ(h.network->bytes_delivered(), 16e6);
}

struct Probe : EventHandler {
  Harness* h = nullptr;
  size_t flows = 99;
  double delivered = -1, swap_used = -1, in_flight = 99;
  void on_event(uint64_t) override {
    flows = h->network->active_flows();
    delivered = h->network->bytes_delivered();
    swap_used = h->cluster->replicas()[0]->swap_used_bytes();
    in_flight = static_cast<double>(h->cluster->replicas()[0]->swap_copies_in_flight());
  }
};

TEST(SwapFabricTest, AFailureMidSwapCancelsTheFlowsAndReturnsTheSwapSpace) {
  // Two replicas (GPUs 0 and 1); round robin sends A and B (ids 0, 2) to replica 0, X (id 1, 4 + 1
  // tokens) to replica 1. Replica 0 runs as above: B's swap-out (8 MB at 1 GB/s) starts at 60 ms
  // and would drain at 68 ms. Replica 0 fails at 65 ms: the flow leaves the network (at 66 ms no
  // flow is active, where without the cancel the swap would move until 68 ms; it is never
  // delivered: 0 bytes), the swap space is empty, and A and B are routed again to replica 1
  // (recomputed there, from their prompts): all complete.
  ClusterSetup s = swap_case();
  s.replicas = 2;
  Harness h({spec(0, 4, 12), spec(0, 4, 1), spec(0, 4, 12)}, s);
  FaultPlan plan;
  FaultEvent e;
  e.replica = 0;
  e.at = core::Time::from_ns(65 * kMs);
  plan.events = {e};
  h.cluster->set_faults(plan);
  Probe probe;
  probe.h = &h;
  h.sim.schedule_at(core::Time::from_ns(66 * kMs), &probe);
  h.run();
  EXPECT_EQ(probe.flows, 0u);
  EXPECT_DOUBLE_EQ(probe.delivered, 0);
  EXPECT_EQ(probe.swap_used, 0);
  EXPECT_EQ(probe.in_flight, 0);
  EXPECT_EQ(h.cluster->counters().rerouted, 2u);
  for (uint64_t id : {0u, 1u, 2u}) EXPECT_EQ(h.obs.find(id)->outcome, core::RequestOutcome::kCompleted) << id;
  EXPECT_EQ(h.cluster->replicas()[0]->swap_stats().swap_outs, 1u);
  EXPECT_EQ(h.cluster->replicas()[0]->swap_stats().swap_ins, 0u);
}

TEST(SwapFabricTest, WithoutTheFabricTheCopyTimeIsAddedToTheNextStep) {
  // No topology (and, the same, a topology with swap_flows off): B's 8 MB at the 1 GB/s host link
  // adds 8 ms to A's step planned at 60 ms: [60, 78] ms; A's gen 6..12 at 78, ..., 138 ms; B's
  // swap-in adds 8 ms to its first step: gen 6 at 138 + 18 = 156 ms, gen 12 at 216 ms (what main
  // gave before swap copies were flows).
  for (bool network : {false, true}) {
    ClusterSetup s = swap_case();
    s.unified_network = network;
    s.swap_flows = false;
    Harness h(swap_trace(), s);
    h.run();
    ASSERT_GE(h.obs.iterations.size(), 8u);
    EXPECT_EQ(h.obs.iterations[6].start.ns(), 60 * kMs) << network;
    EXPECT_EQ(h.obs.iterations[6].duration.ns(), 18 * kMs) << network;
    EXPECT_EQ(h.obs.find(0)->finish.ns(), 138 * kMs) << network;
    EXPECT_EQ(h.obs.find(1)->finish.ns(), 216 * kMs) << network;
    EXPECT_FALSE(h.cluster->replicas()[0]->swap_on_fabric());
    EXPECT_EQ(h.cluster->replicas()[0]->swap_stats().swap_outs, 1u);
    EXPECT_NEAR(h.cluster->replicas()[0]->swap_stats().wait_seconds, 0.016, 1e-12);  // 8 + 8 ms added
    // TP 1: 8 tokens x 1 MB per token on the one GPU = 8 MB each way, as the flows case counts.
    EXPECT_DOUBLE_EQ(h.cluster->replicas()[0]->swap_stats().out_bytes, 8e6) << network;
    EXPECT_DOUBLE_EQ(h.cluster->replicas()[0]->swap_stats().in_bytes, 8e6) << network;
    if (network) {
      EXPECT_EQ(h.network->active_flows(), 0u);
    }
  }
}

TEST(SwapFabricTest, AnalyticSwapsOfATensorParallelReplicaCountEveryGpusShare) {
  // The TP = 2 replica of ATensorParallelReplicaMovesEachGpusShareOverItsSwitch with analytic copies,
  // without a topology and on one with swap_flows off (cluster.swap_copies = "analytic"). B's KV is
  // 8 tokens x 1 MB per token per GPU x 2 GPUs = 16 MB out and 16 MB back in: the bytes the flows
  // case counts (and delivers: 2 x 8 MB each way). The time is each GPU's 8 MB over its own 1 GB/s
  // link, in parallel: 8 ms added to A's step planned at 60 ms ([60, 78] ms) and 8 ms to B's first
  // step back, as on TP 1 (WithoutTheFabricTheCopyTimeIsAddedToTheNextStep): A ends at 138 ms, B at
  // 216 ms; 16 ms of wait. (Counting one GPU's share, as before this fix, gives 8 MB.)
  double flows_out = -1, flows_in = -1;
  {
    ClusterSetup s = swap_case();
    s.gpus_per_replica = 2;
    s.topology.gpus_per_pcie_switch = 2;
    Harness h(swap_trace(), s);
    h.run();
    ASSERT_TRUE(h.cluster->replicas()[0]->swap_on_fabric());
    flows_out = h.cluster->replicas()[0]->swap_stats().out_bytes;
    flows_in = h.cluster->replicas()[0]->swap_stats().in_bytes;
  }
  EXPECT_DOUBLE_EQ(flows_out, 16e6);
  EXPECT_DOUBLE_EQ(flows_in, 16e6);
  for (bool network : {false, true}) {
    ClusterSetup s = swap_case();
    s.gpus_per_replica = 2;
    s.topology.gpus_per_pcie_switch = 2;
    s.unified_network = network;
    s.swap_flows = false;
    Harness h(swap_trace(), s);
    h.run();
    EXPECT_FALSE(h.cluster->replicas()[0]->swap_on_fabric());
    ASSERT_GE(h.obs.iterations.size(), 8u);
    EXPECT_EQ(h.obs.iterations[6].start.ns(), 60 * kMs) << network;
    EXPECT_EQ(h.obs.iterations[6].duration.ns(), 18 * kMs) << network;
    EXPECT_EQ(h.obs.find(0)->finish.ns(), 138 * kMs) << network;
    EXPECT_EQ(h.obs.find(1)->finish.ns(), 216 * kMs) << network;
    const Replica::SwapStats& st = h.cluster->replicas()[0]->swap_stats();
    EXPECT_EQ(st.swap_outs, 1u) << network;
    EXPECT_EQ(st.swap_ins, 1u) << network;
    EXPECT_DOUBLE_EQ(st.out_bytes, 16e6) << network;
    EXPECT_DOUBLE_EQ(st.in_bytes, 16e6) << network;
    EXPECT_DOUBLE_EQ(st.out_bytes, flows_out) << network;
    EXPECT_DOUBLE_EQ(st.in_bytes, flows_in) << network;
    EXPECT_NEAR(st.wait_seconds, 0.016, 1e-12) << network;
    if (network) {
      EXPECT_DOUBLE_EQ(h.network->bytes_delivered(), 0);  // nothing on the fabric
    }
  }
}

TEST(SwapFabricTest, AnalyticSwapsOfAnExpertParallelReplicaCountOneRanksShare) {
  // The expert-parallel replica of AnExpertParallelReplicasSwapIsSpreadOverItsRanksLikeItsTierCopies
  // (two attention ranks of TP 1) with analytic copies: one rank's share, 8 tokens x 1 MB x 1 GPU =
  // 8 MB each way, as its flows count (not 2 x 8 MB for the replica's two GPUs); 8 ms added to each
  // of the two steps (16 ms).
  ClusterSetup s = swap_case();
  s.gpus_per_replica = 2;
  s.attention_ranks = 2;
  s.swap_flows = false;
  Harness h(swap_trace(), s);
  h.run();
  const Replica::SwapStats& st = h.cluster->replicas()[0]->swap_stats();
  EXPECT_EQ(st.swap_outs, 1u);
  EXPECT_DOUBLE_EQ(st.out_bytes, 8e6);
  EXPECT_DOUBLE_EQ(st.in_bytes, 8e6);
  EXPECT_NEAR(st.wait_seconds, 0.016, 1e-12);
}

}  // namespace
}  // namespace servesim::sim
