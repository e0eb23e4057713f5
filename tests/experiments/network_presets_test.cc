// Topology presets ([network] preset, issue 16): the DGX H100 node and fabric built from the preset,
// paths and max-min shares computed by hand from its figures (docs/policies.md, "Topology presets"),
// written fields overriding the preset's, the GPU check, and a disaggregated run on the preset whose
// KV transfer takes the hand-computed time.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "experiments/network_presets.h"
#include "experiments/run.h"
#include "hwmodels/gpu_spec.h"
#include "sim/cluster/network.h"
#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/engine/simulation.h"
#include "tests/cli_driver.h"

namespace servesim::experiments {
namespace {

const char* kPd = R"(
seed = 3
[workload]
kind = "poisson"
rate = 1.0
max_requests = 1
[workload.prompt]
kind = "uniform"
min = 1000
max = 1000
[workload.output]
kind = "uniform"
min = 10
max = 10
[model]
kind = "llama-3-8b"
[gpu]
kind = "h100-sxm"
[cluster.prefill]
replicas = 8
[cluster.decode]
replicas = 8
[decode_router]
kind = "least_outstanding"
[network]
preset = "dgx-h100"
)";

core::Params config_with(const std::string& network_extra, const std::string& gpu = "h100-sxm") {
  std::string text = kPd;
  text.replace(text.find("kind = \"h100-sxm\""), 17, "kind = \"" + gpu + "\"");
  return core::parse_config(text + network_extra, "preset.toml", run_schema());
}

sim::Topology dgx_h100(int64_t gpus, const std::string& extra = "") {
  const core::Params c = config_with(extra);
  const auto gpu = hwmodels::gpu_registry().make(c.section("gpu"));
  return sim::Topology(resolve_network(c.section("network"), "h100-sxm").topology(*gpu, gpus));
}

std::vector<std::string> names(const sim::Topology& t, const sim::Topology::Path& p) {
  std::vector<std::string> out;
  for (uint32_t l : p.links) out.push_back(t.link_name(l));
  return out;
}

// DGX H100 (preset): GPU 0 of node 0 and GPU 8 (GPU 0 of node 1) are on rail 0. The path leaves
// through GPU 0's PCIe link to its PCIe switch, NIC 0's PCIe link, NIC 0 to the rail-0 leaf, and the
// same in reverse: four PCIe hops of 1 us and two NIC hops of 1 us = 6 us, every link 50 GB/s.
TEST(NetworkPresetTest, DgxH100CrossesNodesOnOneRailThroughThePcieSwitches) {
  const sim::Topology t = dgx_h100(16);
  const auto& p = t.path(0, 8);
  EXPECT_EQ(names(t, p), (std::vector<std::string>{"gpu 0 pcie (up)", "node 0 nic 0 pcie (down)",
                                                    "node 0 nic 0 - leaf (up)", "node 1 nic 0 - leaf (down)",
                                                    "node 1 nic 0 pcie (up)", "gpu 8 pcie (down)"}));
  EXPECT_NEAR(p.latency_s, 6e-6, 1e-15);
  EXPECT_DOUBLE_EQ(p.bottleneck_bytes_per_s, 50e9);
  // Inside a node: NVLink through the NVSwitch at the H100's 450 GB/s per direction.
  EXPECT_EQ(names(t, t.path(0, 5)), (std::vector<std::string>{"gpu 0 nvlink (up)", "gpu 5 nvlink (down)"}));
  EXPECT_DOUBLE_EQ(t.path(0, 5).bottleneck_bytes_per_s, 450e9);
}

// GPU 0 to GPU 10 (local rank 2 of node 1, behind node 1's second PCIe switch with NICs 2 and 3) is
// on another rail. Through the spine: 4 PCIe + 2 NIC + 2 switch hops; with switch_latency_us = 2 that
// is 4 + 2 + 4 = 10 us. Through NVLink to GPU 2 (or 3) and its rail (NCCL's PXN): 2 NVLink + 4 PCIe +
// 2 NIC = 8 us, which the path takes (or rail 0 and NVLink on node 1: as short). (GPU 9 would need no detour: it shares a PCIe switch with NIC 0.)
TEST(NetworkPresetTest, RailsSendAnotherLocalRankOverNvlinkWhenTheSpineIsSlower) {
  const sim::Topology t = dgx_h100(16, "switch_latency_us = 2\n");
  const auto& p = t.path(0, 10);
  const std::vector<std::string> n = names(t, p);
  ASSERT_EQ(n.size(), 8u);
  int nvlink_hops = 0;
  for (const std::string& link : n) {
    EXPECT_EQ(link.find("spine"), std::string::npos) << link;
    nvlink_hops += link.find("nvlink") != std::string::npos;
  }
  EXPECT_EQ(nvlink_hops, 2);  // one NVSwitch crossing, on either node (the two are equally short)
  EXPECT_NEAR(p.latency_s, 8e-6, 1e-15);
  EXPECT_EQ(names(t, t.path(0, 9)).size(), 6u);  // rail 0, then NIC 0's PCIe switch
  EXPECT_NEAR(t.path(0, 9).latency_s, 6e-6, 1e-15);
}

struct Done : sim::TransferListener {
  sim::Simulation* sim = nullptr;
  std::vector<int64_t> at;
  void on_transfer_done(uint64_t) override { at.push_back(sim->now().ns()); }
};

// GPUs 0 and 1 of node 0 send 1 GB each to GPU 8. GPU 1's flow takes rail 1 and enters node 1 through
// NIC 1, which shares GPU 8's PCIe switch, so both flows meet only on GPU 8's PCIe link (50 GB/s):
// 25 GB/s each, 40 ms, plus the 6 us path latency.
TEST(NetworkPresetTest, TwoFlowsMeetingOnAGpusPcieLinkShareIt) {
  sim::Simulation sim;
  Done done;
  done.sim = &sim;
  sim::Network net(sim, dgx_h100(16));
  EXPECT_NEAR(net.topology().path(1, 8).latency_s, 6e-6, 1e-15);
  net.start_transfer(1, {{0, 8}}, 1e9, &done);
  net.start_transfer(2, {{1, 8}}, 1e9, &done);
  sim.run();
  EXPECT_EQ(done.at, (std::vector<int64_t>{40'006'000, 40'006'000}));
}

// Written fields win over the preset's; the rest are the preset's (docs/policies.md's table).
TEST(NetworkPresetTest, WrittenFieldsOverrideThePreset) {
  const core::Params c = config_with("nic_gb_s = 25\nrails = false\n");
  const NetworkFields f = resolve_network(c.section("network"), "h100-sxm");
  EXPECT_EQ(f.nic_gb_s, 25);
  EXPECT_FALSE(f.rails);
  EXPECT_EQ(f.gpus_per_pcie_switch, 2);
  EXPECT_EQ(f.nodes_per_switch, 32);
  EXPECT_EQ(f.pcie_gb_s, 50);
  // Without a preset: the schema's defaults (each GPU's PCIe link straight to its NIC, no rails).
  std::string plain = kPd;
  plain.erase(plain.find("preset = \"dgx-h100\"\n"));
  const NetworkFields d =
      resolve_network(core::parse_config(plain, "p.toml", run_schema()).section("network"), "h100-sxm");
  EXPECT_EQ(d.gpus_per_pcie_switch, 1);
  EXPECT_FALSE(d.rails);
  EXPECT_EQ(d.nodes_per_switch, 32);
}

TEST(NetworkPresetTest, APresetOfAnotherGpuIsRefusedNamingTheKey) {
  std::string error;
  try {
    run_simulation(config_with("", "a100-80gb-sxm"), RunOutputs{});
  } catch (const core::Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("network.preset"), std::string::npos) << error;
  EXPECT_NE(error.find("'dgx-h100' is a node of h100-sxm GPUs"), std::string::npos) << error;
  // The A100 node's own preset runs.
  std::string a100 = kPd;
  a100.replace(a100.find("kind = \"h100-sxm\""), 17, "kind = \"a100-80gb-sxm\"");
  a100.replace(a100.find("dgx-h100"), 8, "dgx-a100");
  EXPECT_EQ(run_simulation(core::parse_config(a100, "a.toml", run_schema()), RunOutputs{}).summary.requests_completed,
            1u);
  std::string unknown = kPd;
  unknown.replace(unknown.find("dgx-h100"), 8, "dgx-h900");
  EXPECT_THROW(core::parse_config(unknown, "u.toml", run_schema()), core::ConfigError);
}

// End to end: eight prefill replicas fill node 0 and eight decode replicas node 1 of the preset. The
// one request's 1,000-token prompt leaves 1,000 x 131,072 bytes (Llama-3-8B: 32 layers x 8 KV heads x
// 128 x 2 x 2 bytes) from GPU 0 to GPU 8 (the least loaded decode replica, ties to the first): the
// 6-hop path above at 50 GB/s, 2.62144 ms + 6 us.
TEST(NetworkPresetTest, AKvTransferOnThePresetTakesTheHandComputedTime) {
  const RunResult r = run_simulation(config_with(""), RunOutputs{});
  ASSERT_EQ(r.summary.kv_transfers, 1u);
  EXPECT_NEAR(r.summary.kv_transfer_gb, 0.131072, 1e-12);
  EXPECT_NEAR(r.summary.kv_transfer_ms.mean, 1000.0 * 131072 / 50e9 * 1e3 + 6e-3, 2e-6);
}

// `servesim list networks` shows every preset with its GPU and values.
TEST(NetworkPresetTest, ListNetworksShowsEveryPreset) {
  const servesim::testing::Cli r = servesim::testing::cli({"list", "networks"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* name : {"dgx-a100 (gpu.kind = a100-80gb-sxm)", "dgx-h100 (gpu.kind = h100-sxm)",
                           "dgx-h200 (gpu.kind = h200)", "gb200-nvl72 (gpu.kind = b200)"})
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  EXPECT_NE(r.out.find("gpus_per_pcie_switch  2"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace servesim::experiments
