#include "sim/cluster/network.h"

#include <gtest/gtest.h>

namespace servesim::sim {
namespace {

struct Done : TransferListener {
  Simulation* sim = nullptr;
  std::vector<std::pair<uint64_t, int64_t>> at;
  void on_transfer_done(uint64_t tag) override { at.emplace_back(tag, sim->now().ns()); }
};

TopologyConfig two_nodes() {
  TopologyConfig c;
  c.num_gpus = 4;
  c.gpus_per_node = 2;
  c.nics_per_node = 1;  // both GPUs of a node share one NIC
  c.nvlink_bytes_per_s = 400e9;
  c.nvlink_latency_s = 1e-6;
  c.pcie_bytes_per_s = 50e9;
  c.pcie_latency_s = 1e-6;
  c.nic_bytes_per_s = 25e9;  // the NIC is the bottleneck across nodes
  c.nic_latency_s = 2e-6;
  return c;
}

TEST(NetworkTest, PathsFollowTheTopology) {
  Topology t(two_nodes());
  const auto& inside = t.path(0, 1);
  EXPECT_EQ(inside.links.size(), 2u);  // GPU -> NVSwitch -> GPU
  EXPECT_DOUBLE_EQ(inside.bottleneck_bytes_per_s, 400e9);
  EXPECT_NEAR(inside.latency_s, 2e-6, 1e-15);
  const auto& across = t.path(0, 2);
  EXPECT_EQ(across.links.size(), 4u);  // GPU -> NIC -> leaf -> NIC -> GPU
  EXPECT_DOUBLE_EQ(across.bottleneck_bytes_per_s, 25e9);
  EXPECT_NEAR(across.latency_s, 1e-6 + 2e-6 + 2e-6 + 1e-6, 1e-15);
}

TEST(NetworkTest, HandComputedTransferTime) {
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(two_nodes()));
  net.start_transfer(7, {{0, 2}}, 1e9, &done);  // 1 GB at 25 GB/s = 40 ms, + 6 us latency
  sim.run();
  ASSERT_EQ(done.at.size(), 1u);
  EXPECT_EQ(done.at[0].first, 7u);
  EXPECT_EQ(done.at[0].second, 40000000 + 6000);
  EXPECT_DOUBLE_EQ(net.bytes_delivered(), 1e9);
}

TEST(NetworkTest, TwoTransfersSharingALinkTakeTwiceAsLong) {
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(two_nodes()));
  // GPUs 0 and 1 both send to node 1 through node 0's single NIC: 12.5 GB/s each.
  net.start_transfer(1, {{0, 2}}, 1e9, &done);
  net.start_transfer(2, {{1, 3}}, 1e9, &done);
  sim.run();
  ASSERT_EQ(done.at.size(), 2u);
  EXPECT_EQ(done.at[0].second, 80000000 + 6000);
  EXPECT_EQ(done.at[1].second, 80000000 + 6000);
}

TEST(NetworkTest, RatesRecoverWhenASharingFlowEnds) {
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(two_nodes()));
  // 0.5 GB and 1 GB share 25 GB/s: the small one drains at 40 ms (12.5 GB/s); the big one has
  // 0.5 GB left and finishes it alone at 25 GB/s: 20 ms more.
  net.start_transfer(1, {{0, 2}}, 0.5e9, &done);
  net.start_transfer(2, {{1, 3}}, 1e9, &done);
  sim.run();
  ASSERT_EQ(done.at.size(), 2u);
  EXPECT_EQ(done.at[0].first, 1u);
  EXPECT_EQ(done.at[0].second, 40000000 + 6000);
  EXPECT_EQ(done.at[1].second, 60000000 + 6000);
}

TEST(NetworkTest, MaxMinFairnessGivesUnusedShareToOthers) {
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(two_nodes()));
  // Inside node 0 over NVLink (400 GB/s) and across nodes (25 GB/s) at once: they share no link,
  // so neither slows the other.
  net.start_transfer(1, {{0, 1}}, 4e9, &done);
  net.start_transfer(2, {{1, 2}}, 1e9, &done);
  sim.run();
  ASSERT_EQ(done.at.size(), 2u);
  EXPECT_EQ(done.at[0].second, 10000000 + 2000);  // 4 GB / 400 GB/s
  EXPECT_EQ(done.at[1].second, 40000000 + 6000);
}

}  // namespace
}  // namespace servesim::sim
