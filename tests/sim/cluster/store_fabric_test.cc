// The shared KV store on the network (issue 16, "one fabric"): a storage server attached to the
// spine (or to the one leaf) by a link of the store's bandwidth; KV store loads (store -> GPU) and
// writes (GPU -> store) are flows that cross the GPU's PCIe link, its NIC and the switches, sharing
// them max-min fairly with PD KV transfers. Hand computations in the comments.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/cluster/network.h"

namespace servesim::sim {
namespace {

struct Done : TransferListener {
  Simulation* sim = nullptr;
  std::vector<std::pair<uint64_t, int64_t>> at;
  void on_transfer_done(uint64_t tag) override { at.emplace_back(tag, sim->now().ns()); }
};

// Two nodes of 2 GPUs behind one PCIe switch each, with the node's single NIC on that switch, each
// node on its own leaf (nodes_per_switch = 1), the two leaves under a spine: PCIe 50 GB/s and 1 us
// a hop, NIC 100 GB/s and 2 us, leaf - spine 1 us (uplink: the leaf's one NIC, 100 GB/s), host
// uplink 50 GB/s; the store on the spine by a 40 GB/s link (1 us, a switch hop).
TopologyConfig spined() {
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
  return c;
}

std::vector<std::string> names(const Topology& t, const Topology::Path& p) {
  std::vector<std::string> out;
  for (uint32_t l : p.links) out.push_back(t.link_name(l));
  return out;
}

TEST(StoreFabricTest, TheStoreSitsOnTheSpineBehindEachGpusNic) {
  Topology t(spined());
  ASSERT_TRUE(t.has_store());
  // Endpoints: GPUs 0-3, hosts 4-5, the store 6.
  EXPECT_EQ(t.store_endpoint(), 6);
  EXPECT_FALSE(t.is_host(t.store_endpoint()));
  EXPECT_TRUE(t.is_host(t.host_endpoint(1)));
  // GPU 1 -> store (a write): its PCIe link up to the switch, the switch to the NIC, NIC -> leaf,
  // leaf -> spine, spine -> store. Bottleneck min(50, 50, 100, 100, 40) = 40 GB/s; latency 1 + 1 + 2
  // + 1 + 1 = 6 us.
  const auto& write = t.path(1, t.store_endpoint());
  EXPECT_EQ(names(t, write), (std::vector<std::string>{"gpu 1 pcie (up)", "node 0 nic 0 pcie (down)",
                                                       "node 0 nic 0 - leaf (up)", "leaf 0 - spine (up)",
                                                       "store - spine (up)"}));
  EXPECT_DOUBLE_EQ(write.bottleneck_bytes_per_s, 40e9);
  EXPECT_NEAR(write.latency_s, 6e-6, 1e-15);
  // Store -> GPU 3 (a load): the other directions, through node 1's NIC and leaf 1.
  EXPECT_EQ(names(t, t.path(t.store_endpoint(), 3)),
            (std::vector<std::string>{"store - spine (down)", "leaf 1 - spine (down)", "node 1 nic 0 - leaf (down)",
                                      "node 1 nic 0 pcie (up)", "gpu 3 pcie (down)"}));
  // The store's links come after the hosts': 2 nodes x (2 nvlink + 2 GPU pcie + 1 NIC pcie + 1
  // NIC-leaf) + 2 leaf-spine cables = 14, 28 directed links; 2 hosts x 2 directions = 4; then the store's 2.
  EXPECT_EQ(t.num_links(), 34u);
  EXPECT_EQ(t.link_name(32), "store - spine (up)");
  EXPECT_EQ(t.links_named("store - spine").size(), 2u);
}

TEST(StoreFabricTest, WithoutASpineTheStoreSitsOnTheLeafAndUnsetItsLinkIsNonBlocking) {
  TopologyConfig c = spined();
  c.nodes_per_switch = 32;   // both nodes on one leaf: no spine
  c.store_bytes_per_s = 0;   // non-blocking: the sum of every NIC, 2 nodes x 1 NIC x 100 GB/s
  Topology t(c);
  const auto& write = t.path(0, t.store_endpoint());
  EXPECT_EQ(names(t, write), (std::vector<std::string>{"gpu 0 pcie (up)", "node 0 nic 0 pcie (down)",
                                                       "node 0 nic 0 - leaf (up)", "store - leaf 0 (up)"}));
  EXPECT_DOUBLE_EQ(t.link_bandwidth(t.links_named("store - leaf 0")[0]), 200e9);
  EXPECT_DOUBLE_EQ(write.bottleneck_bytes_per_s, 50e9);
}

// (d) The store is never transit: with a store configured, every GPU -> GPU path and every GPU <->
// host path is the one without a store (the same links, numbered the same), also with the links that
// would make a store-crossing detour attractive down.
TEST(StoreFabricTest, TheStoreChangesNoOtherPath) {
  TopologyConfig without = spined();
  without.store = false;
  Topology a(without), b(spined());
  ASSERT_EQ(b.num_links(), a.num_links() + 2);
  for (uint32_t l = 0; l < a.num_links(); ++l) EXPECT_EQ(a.link_name(l), b.link_name(l));
  for (int64_t from = 0; from < 6; ++from)
    for (int64_t to = 0; to < 6; ++to) {
      if (from >= 4 && to >= 4) continue;  // host to host: not an endpoint pair anything uses
      EXPECT_EQ(a.path(from, to).links, b.path(from, to).links) << from << " -> " << to;
    }
  // Leaf 0's uplink down: node 0 reaches node 1 no more (the store on the spine is no way round),
  // and GPU 0 reaches the store no more either.
  Simulation sim;
  Network net(sim, Topology(spined()));
  net.set_links_down(net.topology().links_named("leaf 0 - spine"), true);
  EXPECT_FALSE(net.topology().path(0, 2).connected);
  EXPECT_FALSE(net.topology().path(0, net.topology().store_endpoint()).connected);
  EXPECT_TRUE(net.topology().path(net.topology().store_endpoint(), 2).connected);
}

// (a) A store load on an idle fabric takes bytes per GPU / the path's bottleneck + its latency.
TEST(StoreFabricTest, ALoadOnAnIdleFabricTakesBytesPerGpuOverTheBottleneckPlusLatency) {
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(spined()));
  const int64_t store = net.topology().store_endpoint();
  // GPU 0 alone: 1 GB at min(40 store, 100 spine, 100 NIC, 50, 50) = 40 GB/s = 25 ms, + 6 us.
  net.start_transfer(1, {{store, 0}}, 1e9, &done);
  sim.run();
  // GPUs 0 and 2 (a replica over both nodes, 1 GB each): different NICs and leaves, but both on the
  // store's 40 GB/s link: 20 GB/s each, 50 ms, + 6 us, from 25.006 ms.
  net.start_transfer(2, {{store, 0}, {store, 2}}, 2e9, &done);
  sim.run();
  ASSERT_EQ(done.at.size(), 2u);
  EXPECT_EQ(done.at[0].second, 25'000'000 + 6'000);
  EXPECT_EQ(done.at[1].second, 25'006'000 + 50'000'000 + 6'000);
}

// (b) A store write and a PD transfer sharing a NIC each take the time max-min sharing gives.
TEST(StoreFabricTest, AStoreWriteAndAPdTransferSharingANicTakeTheirMaxMinTimes) {
  TopologyConfig c = spined();
  c.nic_bytes_per_s = 40e9;     // the NIC binds (below PCIe's 50)
  c.spine_bytes_per_s = 100e9;  // the leaf uplinks do not
  c.store_bytes_per_s = 100e9;  // nor does the store's link
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(c));
  // At 0: a 0.5 GB write GPU 0 -> store and a 1 GB PD transfer GPU 0 -> GPU 2. Both cross "gpu 0
  // pcie (up)" (50), "node 0 nic 0 pcie (down)" (50), "node 0 nic 0 - leaf (up)" (40) and "leaf 0 -
  // spine (up)" (100): the NIC is the smallest share, 40 / 2 = 20 GB/s each.
  net.start_transfer(1, {{0, net.topology().store_endpoint()}}, 0.5e9, &done);
  net.start_transfer(2, {{0, 2}}, 1e9, &done);
  const auto rates = net.flow_rates();
  ASSERT_EQ(rates.size(), 2u);
  EXPECT_DOUBLE_EQ(rates[0].second, 20e9);
  EXPECT_DOUBLE_EQ(rates[1].second, 20e9);
  sim.run();
  ASSERT_EQ(done.at.size(), 2u);
  // The write drains at 0.5 GB / 20 GB/s = 25 ms and arrives one path latency later: 1 + 1 + 2 + 1
  // + 1 = 6 us.
  EXPECT_EQ(done.at[0].first, 1u);
  EXPECT_EQ(done.at[0].second, 25'000'000 + 6'000);
  // The transfer has 0.5 GB left at 25 ms and takes it alone at the NIC's 40 GB/s: 12.5 ms more,
  // drained at 37.5 ms; its path's latency is PCIe 1 + 1, NIC 2, spine 1 + 1, NIC 2, PCIe 1 + 1 =
  // 10 us.
  EXPECT_EQ(done.at[1].first, 2u);
  EXPECT_EQ(done.at[1].second, 37'500'000 + 10'000);
}

}  // namespace
}  // namespace servesim::sim
