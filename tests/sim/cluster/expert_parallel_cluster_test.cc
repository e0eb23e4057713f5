// An expert-parallel replica across nodes: its iterations' cross-node all-to-alls go through the
// cluster onto the network as flows, so other traffic on the same links slows them.
#include <gtest/gtest.h>

#include "policies/scheduler/batch_scheduler.h"
#include "sim/cluster/cluster.h"
#include "sim/core/config.h"
#include "tests/sim_test_support.h"

namespace servesim::sim {
namespace {

constexpr double kCompute = 1e-3, kFixed = 20e-6, kBytes = 1e6, kScaleout = 25e9;

// Every step: 1 ms of compute, then 20 us of collective latencies and 1 MB per GPU across nodes,
// which the model prices at the uncontended 25 GB/s (40 us).
class ExchangeCostModel final : public hwmodels::StepCostModel {
 public:
  ExchangeCostModel() {
    model_.name = "test";
    model_.num_layers = 1;
    model_.num_kv_heads = 1;
    model_.head_dim = 1;
    model_.kv_bytes = 500;
    gpu_.name = "test";
  }
  hwmodels::StepCost step(const hwmodels::BatchShape&) const override {
    hwmodels::StepCost c;
    c.all_to_all.compute_s = kCompute;
    c.all_to_all.fixed_s = kFixed;
    c.all_to_all.scaleout_bytes = kBytes;
    c.all_to_all.scaleout_s = kBytes / kScaleout;
    c.seconds = hwmodels::all_to_all_step_seconds(c.all_to_all, c.all_to_all.scaleout_s);
    c.flops = c.bytes = 1;
    return c;
  }
  const hwmodels::ModelSpec& model() const override { return model_; }
  const hwmodels::GpuSpec& gpu() const override { return gpu_; }
  int64_t tensor_parallel() const override { return 1; }
  int64_t gpus() const override { return 4; }

 private:
  hwmodels::ModelSpec model_;
  hwmodels::GpuSpec gpu_;
};

struct FirstReplica final : Router {
  uint32_t route(const Request&, std::span<const ReplicaLoad>) override { return 0; }
};

struct Ignore final : TransferListener {
  void on_transfer_done(uint64_t) override {}
};

// One unified replica of 4 GPUs on two nodes of two (a NIC of 25 GB/s per GPU), 4 attention
// ranks; one request of 8 prompt tokens and 3 output tokens: three iterations.
std::vector<core::IterationRecord> run(bool kv_transfer_on_the_link) {
  Simulation sim;
  TopologyConfig t;
  t.num_gpus = 4;
  t.gpus_per_node = 2;
  t.nics_per_node = 2;
  t.nic_bytes_per_s = kScaleout;
  t.pcie_bytes_per_s = 50e9;
  Network network(sim, Topology(t));
  testing::VectorSource source({testing::spec(0.0, 8, 3)});
  testing::RecordingObserver obs;
  ClusterLayout layout;
  layout.replicas = 1;
  Cluster cluster(sim, source, std::make_unique<FirstReplica>(), obs, layout, nullptr, &network);
  const std::vector<core::ParamSpec> schema = {core::ParamSpec::section("scheduler", "schedulers", "continuous", "s")};
  const core::Params cfg = core::parse_config("[scheduler]\nkind = \"continuous\"\n", "test.toml", schema);
  policies::SchedulerContext ctx;
  ctx.max_context = 1024;
  ctx.data_parallel = 4;
  ReplicaConfig rc;
  rc.kv_blocks = 100;
  rc.block_size = 16;
  rc.max_context = 1024;
  rc.kv_bytes_per_token_per_gpu = 1000;
  ExchangeCostModel cost;
  cluster.add_replica(rc, cost, policies::scheduler_registry().make(cfg.section("scheduler"), ctx), {0, 1, 2, 3}, 4);
  Ignore ignore;
  // A long KV transfer on GPU 0's NIC uplink and GPU 2's downlink, both on the replica's exchange
  // path 0 -> 2.
  if (kv_transfer_on_the_link) network.start_transfer(1, {{0, 2}}, 10e9, &ignore);
  cluster.start();
  sim.run();
  cluster.check_drained();
  return obs.iterations;
}

TEST(ExpertParallelClusterTest, AllToAllBandwidthHalvesWhenAKvTransferSharesTheLink) {
  const auto quiet = run(false);
  ASSERT_EQ(quiet.size(), 3u);
  // Alone on the links: 1 ms + 20 us + 1 MB / 25 GB/s = 1.06 ms, as the cost model said.
  for (const auto& it : quiet) EXPECT_EQ(it.duration.ns(), 1060000);
  const auto shared = run(true);
  ASSERT_EQ(shared.size(), 3u);
  // Sharing GPU 0 -> 2 with the transfer: 12.5 GB/s, so 80 us: 1.1 ms.
  for (const auto& it : shared) EXPECT_EQ(it.duration.ns(), 1100000);
}

}  // namespace
}  // namespace servesim::sim
