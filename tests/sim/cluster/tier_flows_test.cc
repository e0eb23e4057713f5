// Every KV tier copy a flow on a disaggregated cluster's topology (issue 16, "one fabric"): a node's
// NVMe SSDs are a vertex behind its host (an SSD read link NVMe -> host, a write link host -> NVMe,
// never transit), so an NVMe load crosses the SSD link, the host's uplink and the GPU's PCIe link,
// sharing them max-min fairly with PD transfers and the other tiers' copies. Hand computations in
// the comments.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
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

using testing::hashed;
using testing::host_tier_spec;
using testing::tier_policies;
using testing::TierPolicies;

struct Done : TransferListener {
  Simulation* sim = nullptr;
  std::vector<std::pair<uint64_t, int64_t>> at;
  void on_transfer_done(uint64_t tag) override { at.emplace_back(tag, sim->now().ns()); }
};

// store_fabric_test's topology: two nodes of 2 GPUs behind one PCIe switch each, with the node's
// single NIC on that switch, each node on its own leaf under a spine: PCIe 50 GB/s and 1 us a hop,
// NIC 100 GB/s and 2 us, leaf - spine 1 us, host uplink 50 GB/s (1 us), the store on the spine
// (40 GB/s). Node 0 has SSDs: 20 GB/s of reads, 10 GB/s of writes, 100 us; node 1 has none.
TopologyConfig with_nvme() {
  TopologyConfig c;
  c.num_gpus = 4;
  c.gpus_per_node = 2;
  c.gpus_per_pcie_switch = 2;
  c.nics_per_node = 1;
  c.nvlink_bytes_per_s = 400e9;
  c.nvlink_latency_s = 1e-6;
  c.pcie_bytes_per_s = 50e9;
  c.pcie_latency_s = 1e-6;
  c.nic_bytes_per_s = 100e9;
  c.nic_latency_s = 2e-6;
  c.nodes_per_switch = 1;
  c.switch_latency_s = 1e-6;
  c.host_bytes_per_s = 50e9;
  c.store = true;
  c.store_bytes_per_s = 40e9;
  c.nvme_read_bytes_per_s = {20e9, 0};
  c.nvme_write_bytes_per_s = {10e9, 0};
  c.nvme_latency_s = 100e-6;
  return c;
}

std::vector<std::string> names(const Topology& t, const Topology::Path& p) {
  std::vector<std::string> out;
  for (uint32_t l : p.links) out.push_back(t.link_name(l));
  return out;
}

TEST(TierFlowsTest, ANodesNvmeSitsBehindItsHost) {
  Topology t(with_nvme());
  // Endpoints: GPUs 0-3, hosts 4-5, the store 6, node 0's NVMe 7 (node 1 has none).
  EXPECT_EQ(t.nvme_endpoint(0), 7);
  EXPECT_TRUE(t.has_nvme(0));
  EXPECT_FALSE(t.has_nvme(1));
  EXPECT_FALSE(t.is_host(t.nvme_endpoint(0)));
  // NVMe -> GPU 1 (a load): the SSD read link, the host's uplink to the PCIe switch, the GPU's PCIe
  // link. Bottleneck min(20, 50, 50) = 20 GB/s; latency 100 + 1 + 1 = 102 us.
  const auto& load = t.path(t.nvme_endpoint(0), 1);
  EXPECT_EQ(names(t, load), (std::vector<std::string>{"node 0 nvme (down)", "node 0 host - pcie switch 0 (down)",
                                                      "gpu 1 pcie (down)"}));
  EXPECT_DOUBLE_EQ(load.bottleneck_bytes_per_s, 20e9);
  EXPECT_NEAR(load.latency_s, 102e-6, 1e-15);
  // GPU 1 -> NVMe (HBM's write): the other directions, bottleneck the 10 GB/s write link.
  const auto& write = t.path(1, t.nvme_endpoint(0));
  EXPECT_EQ(names(t, write), (std::vector<std::string>{"gpu 1 pcie (up)", "node 0 host - pcie switch 0 (up)",
                                                       "node 0 nvme (up)"}));
  EXPECT_DOUBLE_EQ(write.bottleneck_bytes_per_s, 10e9);
  // Host -> NVMe (what host memory evicts): the SSD write link alone, 100 us.
  const auto& evict = t.path(t.host_endpoint(0), t.nvme_endpoint(0));
  EXPECT_EQ(names(t, evict), (std::vector<std::string>{"node 0 nvme (up)"}));
  EXPECT_NEAR(evict.latency_s, 100e-6, 1e-15);
  // The NVMe links come after the store's (34 links: store_fabric_test), 2 for node 0.
  EXPECT_EQ(t.num_links(), 36u);
  EXPECT_EQ(t.link_name(34), "node 0 nvme (up)");
  EXPECT_DOUBLE_EQ(t.link_bandwidth(35), 20e9);
  EXPECT_EQ(t.links_named("node 0 nvme").size(), 2u);
}

// Never transit: with NVMe vertices every GPU -> GPU, GPU <-> host and GPU <-> store path is the
// one without them (the same links, numbered the same).
TEST(TierFlowsTest, NvmeChangesNoOtherPath) {
  TopologyConfig without = with_nvme();
  without.nvme_read_bytes_per_s.clear();
  without.nvme_write_bytes_per_s.clear();
  Topology a(without), b(with_nvme());
  ASSERT_EQ(b.num_links(), a.num_links() + 2);
  for (uint32_t l = 0; l < a.num_links(); ++l) EXPECT_EQ(a.link_name(l), b.link_name(l));
  for (int64_t from = 0; from < 7; ++from)
    for (int64_t to = 0; to < 7; ++to) {
      if (from >= 4 && to >= 4) continue;  // host/store to host/store: not a pair anything uses
      EXPECT_EQ(a.path(from, to).links, b.path(from, to).links) << from << " -> " << to;
    }
}

// The SSD links can fail ("node 0 nvme"): both edges of the write link (from the host's two
// vertices) go down with it.
TEST(TierFlowsTest, TheSsdLinksCanGoDown) {
  Simulation sim;
  Network net(sim, Topology(with_nvme()));
  const Topology& t = net.topology();
  net.set_links_down(t.links_named("node 0 nvme"), true);
  EXPECT_FALSE(t.path(t.nvme_endpoint(0), 0).connected);
  EXPECT_FALSE(t.path(0, t.nvme_endpoint(0)).connected);
  EXPECT_FALSE(t.path(t.host_endpoint(0), t.nvme_endpoint(0)).connected);
  EXPECT_TRUE(t.path(t.host_endpoint(0), 0).connected);
  net.set_links_down(t.links_named("node 0 nvme"), false);
  EXPECT_TRUE(t.path(t.host_endpoint(0), t.nvme_endpoint(0)).connected);
}

// An NVMe load alone on an idle fabric: bytes per GPU / the path's bottleneck + its latency.
TEST(TierFlowsTest, AnNvmeLoadAloneTakesBytesOverTheSsdLinkPlusThePathLatency) {
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(with_nvme()));
  const int64_t nvme = net.topology().nvme_endpoint(0);
  // GPU 0 alone: 1 GB at min(20 SSD, 50 host, 50 PCIe) = 20 GB/s = 50 ms, + 102 us.
  net.start_transfer(1, {{nvme, 0}}, 1e9, &done);
  sim.run();
  // A replica of GPUs 0 and 1 (1 GB each): both on the SSD read link, 10 GB/s each (the shared host
  // uplink's 50 does not bind): 100 ms, + 102 us, from 50.102 ms.
  net.start_transfer(2, {{nvme, 0}, {nvme, 1}}, 2e9, &done);
  sim.run();
  ASSERT_EQ(done.at.size(), 2u);
  EXPECT_EQ(done.at[0].second, 50'000'000 + 102'000);
  EXPECT_EQ(done.at[1].second, 50'102'000 + 100'000'000 + 102'000);
}

// An NVMe load and a PD transfer into the same GPU share its PCIe link (50 GB/s) max-min.
TEST(TierFlowsTest, AnNvmeLoadAndAPdTransferSharingAGpusPcieLinkTakeTheirMaxMinTimes) {
  TopologyConfig c = with_nvme();
  c.nvme_read_bytes_per_s = {100e9, 0};  // the SSDs do not bind; GPU 0's PCIe link (down) does
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(c));
  const int64_t nvme = net.topology().nvme_endpoint(0);
  // The NVMe load (0.5 GB) and the PD transfer GPU 2 -> GPU 0 (1 GB) both end on "gpu 0 pcie
  // (down)": 25 GB/s each (the PD path's other links are 50 or 100, the NVMe's 100 and 50). The
  // load drains at 0.5 / 25 = 20 ms; the transfer then has 0.5 GB left alone at 50 GB/s: 10 ms more,
  // drained at 30 ms. Latencies: the load 102 us; the transfer PCIe 1 + NIC PCIe 1 + NIC 2 + leaf -
  // spine 1 + spine - leaf 1 + NIC 2 + NIC PCIe 1 + PCIe 1 = 10 us.
  net.start_transfer(1, {{nvme, 0}}, 0.5e9, &done);
  net.start_transfer(2, {{2, 0}}, 1e9, &done);
  ASSERT_NEAR(net.topology().path(2, 0).latency_s, 10e-6, 1e-15);
  sim.run();
  ASSERT_EQ(done.at.size(), 2u);
  EXPECT_EQ(done.at[0], (std::pair<uint64_t, int64_t>{1, 20'000'000 + 102'000}));
  EXPECT_EQ(done.at[1], (std::pair<uint64_t, int64_t>{2, 30'000'000 + 10'000}));
}

// The load policy's estimate (Network::transfer_seconds_now): per pair, bytes / (the least over its
// links of bandwidth / (active flows on the link + the copy's own flows on it)) + the path latency;
// the longest pair. It moves nothing.
TEST(TierFlowsTest, TheEstimateIsTheNewFlowsShareOfEachLinkAsTheFabricIsNow) {
  TopologyConfig c = with_nvme();
  c.nvme_read_bytes_per_s = {100e9, 0};
  Simulation sim;
  Network net(sim, Topology(c));
  const int64_t nvme = net.topology().nvme_endpoint(0);
  // Idle: NVMe -> GPU 0, 1 GB at min(100 SSD, 50 host, 50 PCIe) = 50 GB/s = 20 ms, + 102 us.
  EXPECT_NEAR(net.transfer_seconds_now({{nvme, 0}}, 1e9), 0.020102, 1e-12);
  // A replica of GPUs 0 and 1 (1 GB each): its two flows share the host uplink (50 / 2 = 25 GB/s)
  // and the SSD link (100 / 2): 1 GB / 25 GB/s = 40 ms + 102 us.
  EXPECT_NEAR(net.transfer_seconds_now({{nvme, 0}, {nvme, 1}}, 2e9), 0.040102, 1e-12);
  // A PD transfer GPU 2 -> GPU 0 under way on "gpu 0 pcie (down)": the NVMe -> GPU 0 copy's flow
  // would get 50 / 2 = 25 GB/s there: 40 ms + 102 us; GPU 1's path is idle but for the copy's
  // own two flows on the uplink (25): also 40.102 ms. Nothing moved, no flow added.
  net.start_transfer(9, {{2, 0}}, 10e9, nullptr);
  EXPECT_NEAR(net.transfer_seconds_now({{nvme, 0}}, 1e9), 0.040102, 1e-12);
  EXPECT_NEAR(net.transfer_seconds_now({{nvme, 1}}, 1e9), 0.020102, 1e-12);
  EXPECT_NEAR(net.transfer_seconds_now({{nvme, 0}, {nvme, 1}}, 2e9), 0.040102, 1e-12);
  EXPECT_EQ(net.active_flows(), 1u);
  // A link of the path down: no path, infinite.
  net.set_links_down(net.topology().links_named("node 0 nvme"), true);
  EXPECT_TRUE(std::isinf(net.transfer_seconds_now({{nvme, 0}}, 1e9)));
}

// ---- a prefetch on the fabric: one flow per GPU, store -> the node's host ----------------------

// kv_prefetch_test's case on a disaggregated cluster: prefill replicas 0 and 1 (GPUs 0, 1), decode
// replicas 2 and 3, all in node 0 (one leaf); round-robin routing, so A (0 s: units 1, 2) runs on
// prefill replica 0 and C (2 s: 24 tokens, units 1, 2, 9) on prefill replica 1, idle, at the head
// of its queue at once. Blocks of 4 tokens, units of 8 (2 blocks), 4,000 B a block; iterations of
// 10 ms + 1 ms a token: loading C's 16 tokens saves 16 ms, its last 8 tokens take 18 ms. Each
// prefill replica has a host tier; the store is written through (A's units are in it at once).
// Topology: one GPU per PCIe switch (the host attaches at each GPU's NIC vertex), host uplink 16
// MB/s, the store's link (on the one leaf) 4 MB/s, PCIe and NIC 1 GB/s (never binding); latencies
// PCIe 1 us, NIC - leaf 2 us, store - leaf 1 us.
//   C's prefetch of units 1 and 2 (16,000 B), one flow GPU 1's share, store -> node 0's host:
//   "store - leaf 0 (down)", "node 0 nic 1 - leaf (down)", "node 0 host - nic 1 (up)":
//   16,000 / 4 MB/s = 4 ms, + 1 + 2 + 1 us = 4.004 ms.
testing::ClusterSetup pd_prefetch_case(const std::string& prefetch) {
  testing::ClusterSetup s;
  s.replicas = 4;
  s.prefill_replicas = 2;
  s.prefix_unit_tokens = 8;
  s.kv_blocks = 8;
  s.kv_bytes_per_token = 1000;
  s.per_token_s = 0.001;
  s.topology.pcie_bytes_per_s = 1e9;
  s.topology.nic_bytes_per_s = 1e9;
  s.topology.pcie_latency_s = 1e-6;
  s.topology.nic_latency_s = 2e-6;
  s.topology.switch_latency_s = 1e-6;
  s.topology.host_bytes_per_s = 16e6;
  s.topology.store = true;
  s.topology.store_bytes_per_s = 4e6;
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

std::vector<traces::RequestSpec> pd_prefetch_trace() {
  return {hashed(0.0, 16, 2, {1, 2}), hashed(0.5, 4, 2, {50}), hashed(1.0, 24, 2, {5, 6, 7}),
          hashed(2.0, 24, 2, {1, 2, 9})};
}

TEST(TierFlowsTest, APrefetchOnTheFabricLandsWhenItsFlowArrives) {
  // wait_complete: C waits (out of the queue) for the flow, which moves its bytes after the store's
  // 1 ms lookup (latency_us): 1 + 4.004 = 5.004 ms; both units land in replica 1's host memory then,
  // and C loads them host -> GPU 1 ("node 0 host - nic 1 (down)", "gpu 1 pcie (down)"): 16,000 /
  // 16 MB/s = 1 ms, + 2 us; then 18 ms of prefill: first token at 2 s + 5.004 + 1.002 + 18 =
  // 2.024006 s (the analytic prefetch would take 1 ms + 4 ms).
  testing::Harness h(pd_prefetch_trace(), pd_prefetch_case("kind = \"wait_complete\""));
  h.run();
  const StoreStats& st = h.cluster->kv_store()->per_replica().at(1);
  EXPECT_EQ(st.prefetches, 1u);
  EXPECT_EQ(st.prefetched_tokens, 16);
  EXPECT_EQ(st.prefetch_cut_tokens, 0);
  EXPECT_EQ(st.prefetch_waits, 1u);
  EXPECT_NEAR(st.prefetch_wait_seconds, 0.005004, 1e-12);
  EXPECT_EQ(st.loads, 0u);
  EXPECT_EQ(h.obs.lookups[3].host_hit_tokens, 16);
  EXPECT_EQ(h.obs.find(3)->first_token.ns(), 2'024'006'000);
}

TEST(TierFlowsTest, APrefetchCutOffOnTheFabricLandsNothingAndItsFlowStops) {
  // best_effort: cut off at once (still in the store's lookup, nothing has moved): nothing lands,
  // both units stay store hits and load straight from the store, store -> GPU 1 ("store - leaf 0
  // (down)", "node 0 nic 1 - leaf (down)", "gpu 1 pcie (down)"): the 1 ms lookup, then 16,000 /
  // 4 MB/s = 4 ms + 4 us, alone on the store's link (the prefetch's flow never started: sharing it
  // would take 8 ms): 5.004 ms. First token 2 s + 5.004 + 18 = 2.023004 s.
  testing::Harness h(pd_prefetch_trace(), pd_prefetch_case("kind = \"best_effort\""));
  h.run();
  const StoreStats& st = h.cluster->kv_store()->per_replica().at(1);
  EXPECT_EQ(st.prefetches, 1u);
  EXPECT_EQ(st.prefetched_tokens, 0);
  EXPECT_EQ(st.prefetch_cut_tokens, 16);
  EXPECT_EQ(st.loads, 1u);
  EXPECT_NEAR(st.load_seconds, 0.005004, 1e-12);
  EXPECT_EQ(h.obs.lookups[3].store_hit_tokens, 16);
  EXPECT_EQ(h.obs.find(3)->first_token.ns(), 2'023'004'000);
}

TEST(TierFlowsTest, APrefetchCutOffOnTheFabricLandsTheUnitsWhoseBytesHaveArrived) {
  // timeout 3.5 ms: C waits (out of the queue) 3.5 ms from the prefetch's start (its arrival, 2 s);
  // its flow (16,000 B: unit 1's 8,000 B, then unit 2's) starts after the store's 1 ms lookup and
  // moves 4 MB/s x 2.5 ms = 10,000 B by then: unit 1 has arrived, unit 2 has not. Cut off: unit 1
  // lands in host memory (8 tokens prefetched), unit 2 is cut (8 tokens). The lookup: unit 1 a host
  // hit, unit 2 a store hit; the store's policy loads both (estimate 1 + 2 ms + 4 us < 16 ms
  // saved), two copies at once: host -> GPU 1, 8,000 / 16 MB/s = 0.5 ms + 2 us; store -> GPU 1, the
  // 1 ms lookup, then 8,000 / 4 MB/s = 2 ms + 4 us (the longer: 3.004 ms). Then 18 ms of prefill:
  // first token at 2 s + 3.5 + 3.004 + 18 = 2.024504 s. (Landing nothing, both units would come
  // from the store: 1 + 4.004 ms, 2.026504 s.)
  testing::Harness h(pd_prefetch_trace(), pd_prefetch_case("kind = \"timeout\"\ntimeout_ms = 3.5"));
  h.run();
  const StoreStats& st = h.cluster->kv_store()->per_replica().at(1);
  EXPECT_EQ(st.prefetches, 1u);
  EXPECT_EQ(st.prefetched_tokens, 8);
  EXPECT_DOUBLE_EQ(st.prefetch_bytes, 8000);
  EXPECT_EQ(st.prefetch_cut_tokens, 8);
  EXPECT_EQ(st.prefetch_waits, 1u);
  EXPECT_NEAR(st.prefetch_wait_seconds, 0.0035, 1e-12);
  EXPECT_EQ(st.loads, 1u);
  EXPECT_EQ(st.loaded_tokens, 8);
  EXPECT_NEAR(st.load_seconds, 0.003004, 1e-12);
  EXPECT_EQ(h.obs.lookups[3].host_hit_tokens, 8);
  EXPECT_EQ(h.obs.lookups[3].store_hit_tokens, 8);
  EXPECT_EQ(h.obs.find(3)->first_token.ns(), 2'024'504'000);
}

TEST(TierFlowsTest, APrefetchCutOffInItsStoreLookupLandsNothing) {
  // timeout 0.5 ms: cut off while the store's 1 ms lookup still holds the flow off the links (the
  // transfer has not started, so its least advanced flow has all 16,000 B left): nothing lands, both
  // units are cut and come from the store: 1 ms lookup + 16,000 / 4 MB/s = 4 ms + 4 us = 5.004 ms;
  // first token at 2 s + 0.5 + 5.004 + 18 = 2.023504 s.
  testing::Harness h(pd_prefetch_trace(), pd_prefetch_case("kind = \"timeout\"\ntimeout_ms = 0.5"));
  h.run();
  const StoreStats& st = h.cluster->kv_store()->per_replica().at(1);
  EXPECT_EQ(st.prefetches, 1u);
  EXPECT_EQ(st.prefetched_tokens, 0);
  EXPECT_EQ(st.prefetch_cut_tokens, 16);
  EXPECT_EQ(h.obs.lookups[3].host_hit_tokens, 0);
  EXPECT_EQ(h.obs.lookups[3].store_hit_tokens, 16);
  EXPECT_NEAR(st.load_seconds, 0.005004, 1e-12);
  EXPECT_EQ(h.obs.find(3)->first_token.ns(), 2'023'504'000);
}

TEST(TierFlowsTest, CancellingATransferReportsWhatItsLeastAdvancedFlowHadLeft) {
  // One transfer of two flows, 8,000 B each: the store -> GPU 0 (40 GB/s, the store's link) and node
  // 0's NVMe -> GPU 1 (20 GB/s, the SSD read link); they share no link. Cut at 100 ns: the first has
  // moved 4,000 B, the second 2,000 B: the least advanced has 6,000 B left. Nobody is told; a second
  // cancel finds nothing.
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(with_nvme()));
  const Topology& t = net.topology();
  net.start_transfer(7, {{t.store_endpoint(), 0}, {t.nvme_endpoint(0), 1}}, 16000, &done);
  struct Cut final : EventHandler {
    Network* net = nullptr;
    Done* done = nullptr;
    std::optional<double> left;
    void on_event(uint64_t) override { left = net->cancel_transfer(7, done); }
  } cut;
  cut.net = &net;
  cut.done = &done;
  sim.schedule_after(core::Duration::from_ns(100), &cut, 0);
  sim.run();
  ASSERT_TRUE(cut.left.has_value());
  EXPECT_NEAR(*cut.left, 6000, 1e-6);
  EXPECT_TRUE(done.at.empty());
  EXPECT_FALSE(net.cancel_transfer(7, &done).has_value());
}

}  // namespace
}  // namespace servesim::sim
