// Hosts on the network (issue 16, "one fabric"): each node's host (CPU root complex and DRAM) is an
// endpoint behind its PCIe switches; host KV-tier loads (host -> GPU) and stores (GPU -> host) are
// flows that share links max-min fairly with PD KV transfers. Hand computations in the comments.
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

// Two nodes of 2 GPUs behind one PCIe switch each, with the node's single NIC on that switch (a
// DGX-like layout in small): PCIe 50 GB/s, host uplink 40 GB/s, NIC 100 GB/s (never the bottleneck).
TopologyConfig switched() {
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
  c.host_bytes_per_s = 40e9;
  return c;
}

std::vector<std::string> names(const Topology& t, const Topology::Path& p) {
  std::vector<std::string> out;
  for (uint32_t l : p.links) out.push_back(t.link_name(l));
  return out;
}

TEST(HostFabricTest, AHostSitsBehindItsNodesPcieSwitches) {
  Topology t(switched());
  EXPECT_EQ(t.num_nodes(), 2);
  EXPECT_EQ(t.host_endpoint(1), 5);
  // GPU 1 -> its host: its PCIe link up to the switch, the switch's uplink to the host.
  const auto& store = t.path(1, t.host_endpoint(0));
  EXPECT_EQ(names(t, store), (std::vector<std::string>{"gpu 1 pcie (up)", "node 0 host - pcie switch 0 (up)"}));
  EXPECT_DOUBLE_EQ(store.bottleneck_bytes_per_s, 40e9);
  EXPECT_NEAR(store.latency_s, 2e-6, 1e-15);
  // Host of node 1 -> GPU 3: the other direction of the same two links.
  const auto& load = t.path(t.host_endpoint(1), 3);
  EXPECT_EQ(names(t, load), (std::vector<std::string>{"node 1 host - pcie switch 0 (down)", "gpu 3 pcie (down)"}));
  // GPU -> GPU paths are as without hosts: inside a node over NVLink, across nodes over
  // PCIe -> NIC -> leaf -> NIC -> PCIe (no host on the way).
  EXPECT_EQ(names(t, t.path(0, 1)), (std::vector<std::string>{"gpu 0 nvlink (up)", "gpu 1 nvlink (down)"}));
  EXPECT_EQ(names(t, t.path(0, 2)),
            (std::vector<std::string>{"gpu 0 pcie (up)", "node 0 nic 0 pcie (down)", "node 0 nic 0 - leaf (up)",
                                      "node 1 nic 0 - leaf (down)", "node 1 nic 0 pcie (up)", "gpu 2 pcie (down)"}));
  // The host links come after every other link: 2 nodes x (2 nvlink + 2 GPU pcie + 1 NIC pcie + 1
  // NIC-leaf) cables = 12, 24 directed links, then 2 hosts x 1 switch x 2 directions.
  EXPECT_EQ(t.num_links(), 28u);
  EXPECT_EQ(t.link_name(24), "node 0 host - pcie switch 0 (up)");
  EXPECT_EQ(t.links_named("node 1 host - pcie switch 0").size(), 2u);
}

TEST(HostFabricTest, WithoutPcieSwitchesTheHostAttachesAtEachGpusPcieEndpoint) {
  TopologyConfig c = switched();
  c.gpus_per_pcie_switch = 1;
  c.nics_per_node = 2;  // GPU i's PCIe link ends at NIC i
  Topology t(c);
  EXPECT_EQ(names(t, t.path(1, t.host_endpoint(0))),
            (std::vector<std::string>{"gpu 1 pcie (up)", "node 0 host - nic 1 (up)"}));
}

TEST(HostFabricTest, NoPathBetweenGpusCrossesAHost) {
  // One node of 4 GPUs behind 2 PCIe switches (GPUs 0, 1 on switch 0 with the NIC; 2, 3 on switch
  // 1), the host behind both. With every NVLink down, GPU 0 still reaches GPU 1 through switch 0,
  // but GPU 2 only through the host (switch 0 -> host -> switch 1), which is no transit: no path.
  // The host itself reaches both switches.
  TopologyConfig c = switched();
  c.gpus_per_node = 4;
  Simulation sim;
  Network net(sim, Topology(c));
  std::vector<uint32_t> down;
  for (const char* n : {"gpu 0 nvlink", "gpu 1 nvlink", "gpu 2 nvlink", "gpu 3 nvlink"})
    for (uint32_t l : net.topology().links_named(n)) down.push_back(l);
  net.set_links_down(down, true);
  const Topology& t = net.topology();
  EXPECT_EQ(names(t, t.path(0, 1)), (std::vector<std::string>{"gpu 0 pcie (up)", "gpu 1 pcie (down)"}));
  EXPECT_FALSE(t.path(0, 2).connected);
  EXPECT_EQ(names(t, t.path(0, t.host_endpoint(0))),
            (std::vector<std::string>{"gpu 0 pcie (up)", "node 0 host - pcie switch 0 (up)"}));
  EXPECT_EQ(names(t, t.path(t.host_endpoint(0), 2)),
            (std::vector<std::string>{"node 0 host - pcie switch 1 (down)", "gpu 2 pcie (down)"}));
}

TEST(HostFabricTest, ALoadOnAnIdleFabricTakesBytesPerGpuOverTheBottleneckPlusLatency) {
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(switched()));
  const int64_t host = net.topology().host_endpoint(0);
  // One GPU: 1 GB at min(40, 50) = 40 GB/s = 25 ms, + 2 x 1 us of PCIe latency.
  net.start_transfer(1, {{host, 0}}, 1e9, &done);
  sim.run();
  // Both GPUs of the switch load 1 GB each (2 GB split over the two pairs): they share the 40 GB/s
  // uplink, 20 GB/s each: 50 ms + 2 us after the start at 25.002 ms.
  net.start_transfer(2, {{host, 0}, {host, 1}}, 2e9, &done);
  sim.run();
  ASSERT_EQ(done.at.size(), 2u);
  EXPECT_EQ(done.at[0].second, 25'000'000 + 2'000);
  EXPECT_EQ(done.at[1].second, 25'002'000 + 50'000'000 + 2'000);
}

// THE test: an offload flow and a PD transfer sharing a PCIe link each take the time max-min
// sharing gives. Host uplink at 50 GB/s like the GPU links, so the shared GPU PCIe link binds.
TEST(HostFabricTest, AStoreAndAPdTransferSharingAPcieLinkTakeTheirMaxMinTimes) {
  TopologyConfig c = switched();
  c.host_bytes_per_s = 50e9;
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(c));
  // At 0: a 0.5 GB store GPU 0 -> host 0 and a 1 GB PD transfer GPU 0 -> GPU 2, both on "gpu 0
  // pcie (up)" (50 GB/s): 25 GB/s each (their other links: host uplink 50, NIC pcie 50, NIC 100).
  net.start_transfer(1, {{0, net.topology().host_endpoint(0)}}, 0.5e9, &done);
  net.start_transfer(2, {{0, 2}}, 1e9, &done);
  const auto rates = net.flow_rates();
  ASSERT_EQ(rates.size(), 2u);
  EXPECT_DOUBLE_EQ(rates[0].second, 25e9);
  EXPECT_DOUBLE_EQ(rates[1].second, 25e9);
  sim.run();
  ASSERT_EQ(done.at.size(), 2u);
  // The store drains at 0.5 GB / 25 GB/s = 20 ms, arrives 2 x 1 us later.
  EXPECT_EQ(done.at[0].first, 1u);
  EXPECT_EQ(done.at[0].second, 20'000'000 + 2'000);
  // The transfer has 0.5 GB left at 20 ms and takes it alone at 50 GB/s: 10 ms more; its path's
  // latency is 1 + 1 (PCIe to the NIC) + 2 + 2 (NIC - leaf - NIC) + 1 + 1 us = 8 us.
  EXPECT_EQ(done.at[1].first, 2u);
  EXPECT_EQ(done.at[1].second, 30'000'000 + 8'000);
}

TEST(HostFabricTest, ALoadAndAPdTransferIntoTheSameGpuShareItsPcieLink) {
  TopologyConfig c = switched();
  c.host_bytes_per_s = 50e9;
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(c));
  // A 1 GB load host 1 -> GPU 2 and a 0.25 GB PD transfer GPU 0 -> GPU 2 share "gpu 2 pcie (down)":
  // 25 GB/s each; the transfer drains at 10 ms (+ 8 us), the load has 0.75 GB left and takes it at
  // 50 GB/s: 15 ms more, 25 ms (+ 2 us).
  net.start_transfer(1, {{net.topology().host_endpoint(1), 2}}, 1e9, &done);
  net.start_transfer(2, {{0, 2}}, 0.25e9, &done);
  sim.run();
  ASSERT_EQ(done.at.size(), 2u);
  EXPECT_EQ(done.at[0].first, 2u);
  EXPECT_EQ(done.at[0].second, 10'000'000 + 8'000);
  EXPECT_EQ(done.at[1].first, 1u);
  EXPECT_EQ(done.at[1].second, 25'000'000 + 2'000);
}

struct Repair final : EventHandler {
  Network* net = nullptr;
  std::vector<uint32_t> links;
  void on_event(uint64_t) override { net->set_links_down(links, false); }
};

TEST(HostFabricTest, ALoadCutOffByItsHostLinkWaitsForTheRepair) {
  // Node 0's only host link (to its one PCIe switch) is down: a 1 GB load host 0 -> GPU 0 has no
  // path (a host is no transit, and no other link reaches it) and waits with its bytes; the repair
  // at 5 ms gives it its path back: 1 GB at 40 GB/s = 25 ms, + 2 us, from 5 ms.
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(switched()));
  Repair repair;
  repair.net = &net;
  repair.links = net.topology().links_named("node 0 host - pcie switch 0");
  ASSERT_EQ(repair.links.size(), 2u);
  net.set_links_down(repair.links, true);
  net.start_transfer(1, {{net.topology().host_endpoint(0), 0}}, 1e9, &done);
  EXPECT_EQ(net.stalled_flows(), 1u);
  sim.schedule_at(core::Time() + core::Duration::from_ns(5'000'000), &repair);
  sim.run();
  ASSERT_EQ(done.at.size(), 1u);
  EXPECT_NEAR(static_cast<double>(done.at[0].second), 5e6 + 25e6 + 2000, 2.0);
}

}  // namespace
}  // namespace servesim::sim
