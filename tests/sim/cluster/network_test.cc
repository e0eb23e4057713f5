#include "sim/cluster/network.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "sim/core/rng.h"

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

// Two nodes of two GPUs, each GPU with its own NIC at 25 GB/s (PCIe 50 GB/s): the expert-parallel
// case of tests/hwmodels/roofline_cost_model_ep_test.cc.
TopologyConfig two_nodes_nic_per_gpu() {
  TopologyConfig c = two_nodes();
  c.nics_per_node = 2;
  return c;
}

// Each GPU sends to the GPU of the same local rank on the other node: every NIC link carries one flow.
const std::vector<std::pair<int64_t, int64_t>> kExchange = {{0, 2}, {1, 3}, {2, 0}, {3, 1}};

TEST(NetworkTest, ExchangeOfATwoNodeAllToAllByHand) {
  Simulation sim;
  Network net(sim, Topology(two_nodes_nic_per_gpu()));
  // The cost model's hand case: 99,328 bytes per GPU across nodes at 25 GB/s = 3.97312 us.
  EXPECT_DOUBLE_EQ(net.start_exchange(kExchange, 99328.0), 99328.0 / 25e9);
  EXPECT_EQ(net.active_flows(), 4u);
  sim.run();  // the flows drain; nobody is waiting for them
  EXPECT_EQ(net.active_flows(), 0u);
  EXPECT_DOUBLE_EQ(net.bytes_delivered(), 4 * 99328.0);
  // Pairs inside a node move over NVLink; a GPU to itself moves nothing.
  EXPECT_EQ(net.start_exchange({{0, 1}, {1, 0}}, 1e6), 1e6 / 400e9);
  EXPECT_EQ(net.start_exchange({{0, 0}}, 1e6), 0.0);
}

TEST(NetworkTest, AKvTransferSharingTheLinkHalvesTheExchangeBandwidth) {
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(two_nodes_nic_per_gpu()));
  // A 1 GB KV transfer from GPU 0 to GPU 2 holds GPU 0's NIC uplink and GPU 2's downlink; the
  // exchange's flow 0 -> 2 shares both with it at 12.5 GB/s, so the exchange (which ends with its
  // slowest flow) takes twice as long: 2 x 1 MB / 25 GB/s = 80 us.
  net.start_transfer(7, {{0, 2}}, 1e9, &done);
  const double bytes = 1e6;
  EXPECT_DOUBLE_EQ(net.start_exchange(kExchange, bytes), 2.0 * bytes / 25e9);
  sim.run();
  // The KV transfer ran at 12.5 GB/s while the exchange shared its link (1 MB moved in those 80 us),
  // then at 25 GB/s: (1 GB + 1 MB) / 25 GB/s, plus the 6 us path latency.
  ASSERT_EQ(done.at.size(), 1u);
  EXPECT_NEAR(static_cast<double>(done.at[0].second), (1e9 + bytes) / 25e9 * 1e9 + 6000, 2.0);
  // Without the transfer the exchange gets the whole link.
  Simulation quiet;
  Network alone(quiet, Topology(two_nodes_nic_per_gpu()));
  EXPECT_DOUBLE_EQ(alone.start_exchange(kExchange, bytes), bytes / 25e9);
}

TEST(NetworkTest, ExchangePredictionFollowsFlowsThatFinishFirst) {
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(two_nodes_nic_per_gpu()));
  // A small transfer (0.5 MB) shares the 0 -> 2 link with the exchange's 1 MB flow: both at
  // 12.5 GB/s until it drains (40 us, 0.5 MB of the exchange moved), then the exchange's last
  // 0.5 MB alone at 25 GB/s (20 us): 60 us.
  net.start_transfer(7, {{0, 2}}, 0.5e6, &done);
  EXPECT_NEAR(net.start_exchange(kExchange, 1e6), 60e-6, 1e-15);
  sim.run();
}

// The textbook progressive filling, one scan over every link per round: the oracle the network's
// faster fill (heap, links that cannot fill left out, flows alone on their links) must match bit
// for bit.
std::vector<double> reference_rates(const Topology& t, const std::vector<std::vector<uint32_t>>& paths) {
  std::vector<double> residual(t.num_links());
  std::vector<int64_t> unfrozen(t.num_links(), 0);
  for (size_t l = 0; l < residual.size(); ++l) residual[l] = t.link_bandwidth(static_cast<uint32_t>(l));
  for (const auto& p : paths)
    for (uint32_t l : p) ++unfrozen[l];
  std::vector<double> rate(paths.size(), -1);
  size_t left = paths.size();
  while (left > 0) {
    double share = std::numeric_limits<double>::infinity();
    uint32_t bottleneck = 0;
    for (size_t l = 0; l < residual.size(); ++l)
      if (unfrozen[l] > 0 && residual[l] / static_cast<double>(unfrozen[l]) < share) {
        share = residual[l] / static_cast<double>(unfrozen[l]);
        bottleneck = static_cast<uint32_t>(l);
      }
    for (size_t i = 0; i < paths.size(); ++i) {
      if (rate[i] >= 0 || std::find(paths[i].begin(), paths[i].end(), bottleneck) == paths[i].end()) continue;
      rate[i] = share;
      --left;
      for (uint32_t l : paths[i]) {
        residual[l] -= share;
        --unfrozen[l];
      }
    }
  }
  return rate;
}

TEST(NetworkTest, FastRatesEqualTheTextbookFillingBitForBit) {
  core::Rng rng(7, "network_oracle");
  for (int trial = 0; trial < 200; ++trial) {
    TopologyConfig c;
    c.num_gpus = 8 + static_cast<int64_t>(rng.uniform_int(40));
    c.gpus_per_node = 1 + static_cast<int64_t>(rng.uniform_int(8));
    c.nics_per_node = 1 + static_cast<int64_t>(rng.uniform_int(8));
    c.nodes_per_switch = 1 + static_cast<int64_t>(rng.uniform_int(4));
    const double speeds[] = {25e9, 50e9, 100e9, 400e9};
    c.nvlink_bytes_per_s = speeds[rng.uniform_int(4)];
    c.pcie_bytes_per_s = speeds[rng.uniform_int(3)];
    c.nic_bytes_per_s = speeds[rng.uniform_int(3)];
    c.spine_bytes_per_s = rng.uniform() < 0.5 ? 0.0 : speeds[rng.uniform_int(4)];  // blocking or not
    Simulation sim;
    Network net(sim, Topology(c));
    Done done;
    done.sim = &sim;
    const int transfers = 1 + static_cast<int>(rng.uniform_int(12));
    for (int k = 0; k < transfers; ++k) {
      std::vector<std::pair<int64_t, int64_t>> pairs;
      const int n = 1 + static_cast<int>(rng.uniform_int(6));
      for (int p = 0; p < n; ++p)
        pairs.emplace_back(static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(c.num_gpus))),
                           static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(c.num_gpus))));
      if (rng.uniform() < 0.3)
        net.start_exchange(pairs, 1e6 * (1 + rng.uniform_int(100)));
      else
        net.start_transfer(static_cast<uint64_t>(k), pairs, 1e7 * (1 + rng.uniform_int(100)), &done);
    }
    const auto flows = net.flow_rates();
    std::vector<std::vector<uint32_t>> paths;
    for (const auto& f : flows) paths.push_back(f.first);
    const std::vector<double> expected = reference_rates(net.topology(), paths);
    for (size_t i = 0; i < flows.size(); ++i) ASSERT_EQ(flows[i].second, expected[i]) << "trial " << trial << " flow " << i;
    sim.run();
  }
}

// ---- link failures ([faults] kind = "link") ------------------------------------------------------

// Takes the named link (both directions) down or up at a time.
struct LinkChange : EventHandler {
  Network* net = nullptr;
  std::vector<uint32_t> links;
  bool down = true;
  size_t stalled = 0;  // flows without a path right after the change
  void on_event(uint64_t) override { stalled = net->set_links_down(links, down); }
};

TEST(NetworkTest, LinksAreNamedAsTheTopologyNamesThem) {
  Topology t(two_nodes_nic_per_gpu());
  const auto nic = t.links_named("node 0 nic 0 - leaf");
  ASSERT_EQ(nic.size(), 2u);  // a cable: both directions
  EXPECT_EQ(t.link_name(nic[0]), "node 0 nic 0 - leaf (up)");
  EXPECT_EQ(t.link_name(nic[1]), "node 0 nic 0 - leaf (down)");
  EXPECT_EQ(t.links_named("gpu 3 pcie").size(), 2u);
  EXPECT_TRUE(t.links_named("node 0 nic 0").empty());
  EXPECT_TRUE(t.links_named("node 9 nic 0 - leaf").empty());
}

TEST(NetworkTest, APathAvoidsALinkThatIsDownAndComesBackWithIt) {
  Topology t(two_nodes_nic_per_gpu());
  const std::vector<uint32_t> direct = t.path(0, 2).links;
  ASSERT_EQ(direct.size(), 4u);  // GPU 0 -> NIC 0 -> leaf -> node 1 NIC 0 -> GPU 2
  for (uint32_t l : t.links_named("node 0 nic 0 - leaf")) t.set_link_down(l, true);
  // The detour by hand: NVLink to GPU 1 (GPU 0 -> NVSwitch -> GPU 1), GPU 1's PCIe to NIC 1, the leaf,
  // node 1's NIC 0, GPU 2: 1 + 1 + 1 + 2 + 2 + 1 us.
  const Topology::Path& detour = t.path(0, 2);
  ASSERT_TRUE(detour.connected);
  std::vector<std::string> names;
  for (uint32_t l : detour.links) names.push_back(t.link_name(l));
  EXPECT_EQ(names, (std::vector<std::string>{"gpu 0 nvlink (up)", "gpu 1 nvlink (down)", "gpu 1 pcie (up)",
                                             "node 0 nic 1 - leaf (up)", "node 1 nic 0 - leaf (down)",
                                             "gpu 2 pcie (down)"}));
  EXPECT_NEAR(detour.latency_s, 8e-6, 1e-15);
  EXPECT_DOUBLE_EQ(detour.bottleneck_bytes_per_s, 25e9);
  for (uint32_t l : t.links_named("node 0 nic 0 - leaf")) t.set_link_down(l, false);
  EXPECT_EQ(t.path(0, 2).links, direct);
  // One NIC per node: nothing leaves node 0 without it.
  Topology one(two_nodes());
  for (uint32_t l : one.links_named("node 0 nic 0 - leaf")) one.set_link_down(l, true);
  EXPECT_FALSE(one.path(0, 2).connected);
  EXPECT_TRUE(one.path(0, 1).connected);  // NVLink inside the node is untouched
  EXPECT_FALSE(one.path(3, 1).connected);
}

TEST(NetworkTest, AFlowReroutedAroundAFailedNicSharesTheDetourMaxMinFair) {
  // GPU 0 -> 2 and GPU 1 -> 3, 1 GB each, each over its own NIC at 25 GB/s. At 10 ms (0.75 GB
  // left each) node 0's NIC 0 fails: flow 0 -> 2 detours over NVLink to GPU 1 and NIC 1, which it now
  // shares with 1 -> 3 at 12.5 GB/s each. 0.75 GB / 12.5 GB/s = 60 ms more: both drain at 70 ms.
  // Each completes one latency after: the detour's 8 us for 0 -> 2 (its last byte took it), 6 us
  // for 1 -> 3.
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(two_nodes_nic_per_gpu()));
  LinkChange fail;
  fail.net = &net;
  fail.links = net.topology().links_named("node 0 nic 0 - leaf");
  net.start_transfer(1, {{0, 2}}, 1e9, &done);
  net.start_transfer(2, {{1, 3}}, 1e9, &done);
  sim.schedule_at(core::Time() + core::Duration::from_ns(10'000'000), &fail);
  sim.run();
  EXPECT_EQ(fail.stalled, 0u);
  ASSERT_EQ(done.at.size(), 2u);
  std::sort(done.at.begin(), done.at.end());
  EXPECT_NEAR(static_cast<double>(done.at[0].second), 70e6 + 8000, 2.0);
  EXPECT_NEAR(static_cast<double>(done.at[1].second), 70e6 + 6000, 2.0);
  EXPECT_DOUBLE_EQ(net.bytes_delivered(), 2e9);
}

TEST(NetworkTest, ARepairGivesTheDetouredFlowItsPathBack) {
  // As above, and the NIC is repaired at 20 ms: each flow has 0.75 - 0.125 = 0.625 GB left and gets
  // its own NIC back at 25 GB/s: 25 ms more, both drain at 45 ms. 0 -> 2 keeps the 8 us of the
  // longest path it took.
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(two_nodes_nic_per_gpu()));
  LinkChange fail, repair;
  fail.net = repair.net = &net;
  fail.links = repair.links = net.topology().links_named("node 0 nic 0 - leaf");
  repair.down = false;
  net.start_transfer(1, {{0, 2}}, 1e9, &done);
  net.start_transfer(2, {{1, 3}}, 1e9, &done);
  sim.schedule_at(core::Time() + core::Duration::from_ns(10'000'000), &fail);
  sim.schedule_at(core::Time() + core::Duration::from_ns(20'000'000), &repair);
  sim.run();
  ASSERT_EQ(done.at.size(), 2u);
  std::sort(done.at.begin(), done.at.end());
  EXPECT_NEAR(static_cast<double>(done.at[0].second), 45e6 + 8000, 2.0);
  EXPECT_NEAR(static_cast<double>(done.at[1].second), 45e6 + 6000, 2.0);
}

TEST(NetworkTest, AFlowCutOffWaitsForTheRepairKeepingItsBytes) {
  // One NIC per node: at 10 ms the 1 GB flow 0 -> 2 has 0.75 GB left and no path; it waits until the
  // repair at 30 ms, then moves the rest at 25 GB/s (30 ms): drained at 60 ms, done 6 us later.
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(two_nodes()));
  LinkChange fail, repair;
  fail.net = repair.net = &net;
  fail.links = repair.links = net.topology().links_named("node 0 nic 0 - leaf");
  repair.down = false;
  net.start_transfer(1, {{0, 2}}, 1e9, &done);
  sim.schedule_at(core::Time() + core::Duration::from_ns(10'000'000), &fail);
  sim.schedule_at(core::Time() + core::Duration::from_ns(30'000'000), &repair);
  sim.run();
  EXPECT_EQ(fail.stalled, 1u);
  EXPECT_EQ(repair.stalled, 0u);
  ASSERT_EQ(done.at.size(), 1u);
  EXPECT_NEAR(static_cast<double>(done.at[0].second), 60e6 + 6000, 2.0);
  // A transfer started while the link is down waits from its start.
  Simulation sim2;
  Done done2;
  done2.sim = &sim2;
  Network net2(sim2, Topology(two_nodes()));
  net2.set_links_down(net2.topology().links_named("node 0 nic 0 - leaf"), true);
  LinkChange repair2;
  repair2.net = &net2;
  repair2.links = net2.topology().links_named("node 0 nic 0 - leaf");
  repair2.down = false;
  net2.start_transfer(1, {{1, 3}}, 1e9, &done2);
  EXPECT_EQ(net2.stalled_flows(), 1u);
  sim2.schedule_at(core::Time() + core::Duration::from_ns(5'000'000), &repair2);
  sim2.run();
  ASSERT_EQ(done2.at.size(), 1u);
  EXPECT_NEAR(static_cast<double>(done2.at[0].second), 5e6 + 40e6 + 6000, 2.0);
}

TEST(NetworkTest, ManyTransfersStartedInOneInstantShareAsIfEachRecomputedTheRates) {
  // Ten 0.1 GB transfers start at t = 0 from both GPUs of node 0 through its one 25 GB/s NIC (the
  // rates are computed once, at the end of the instant): 1 GB at 25 GB/s drains at 40 ms for all.
  // A handler that starts the last of them also schedules an event at exactly 40 ms: the drain was
  // ordered when the flows changed (before that event), so the event sees the flows gone.
  Simulation sim;
  Done done;
  done.sim = &sim;
  Network net(sim, Topology(two_nodes()));
  struct Starter : EventHandler {
    Simulation* sim = nullptr;
    Network* net = nullptr;
    Done* done = nullptr;
    size_t flows_seen = 99;
    void on_event(uint64_t payload) override {
      if (payload == 1) {
        flows_seen = net->active_flows();
        return;
      }
      for (uint64_t i = 0; i < 10; ++i) net->start_transfer(i, {{static_cast<int64_t>(i % 2), 2 + static_cast<int64_t>(i % 2)}}, 0.1e9, done);
      sim->schedule_at(core::Time::from_ns(40'000'000), this, 1);
    }
  } starter;
  starter.sim = &sim;
  starter.net = &net;
  starter.done = &done;
  sim.schedule_at(core::Time(), &starter, 0);
  sim.run();
  ASSERT_EQ(done.at.size(), 10u);
  for (const auto& [tag, at] : done.at) EXPECT_EQ(at, 40'000'000 + 6000) << tag;
  EXPECT_EQ(starter.flows_seen, 0u);
  // The rates of flows started in the same instant are those of their fair share (2.5 GB/s each).
  Simulation sim2;
  Network net2(sim2, Topology(two_nodes()));
  for (uint64_t i = 0; i < 10; ++i) net2.start_transfer(i, {{static_cast<int64_t>(i % 2), 2}}, 0.1e9, nullptr);
  for (const auto& [links, rate] : net2.flow_rates()) EXPECT_DOUBLE_EQ(rate, 2.5e9);
}

}  // namespace
}  // namespace servesim::sim
