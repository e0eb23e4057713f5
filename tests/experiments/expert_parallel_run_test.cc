// Expert parallelism from the configuration to the results: pools with their own EP degree, the KV
// capacity the spread experts free, and configuration errors that name the key and its line.
#include <gtest/gtest.h>

#include <fstream>

#include "experiments/run.h"
#include "sim/core/config.h"
#include "sim/core/error.h"
#include "tests/test_paths.h"

namespace servesim::experiments {
namespace {

// A small MoE (2 blocks, hidden 1024, 8 heads of 128, 8 experts of width 512, top-2, bf16) on 1 GiB
// GPUs, two GPUs per node, constant efficiencies.
const std::string kTiny = R"(seed = 5
[workload]
kind = "poisson"
rate = 200.0
max_requests = 80
[workload.prompt]
kind = "uniform"
min = 50
max = 600
[workload.output]
kind = "uniform"
min = 1
max = 40
[model]
kind = "mixtral-8x7b"
num_layers = 2
hidden_size = 1024
num_heads = 8
num_kv_heads = 8
head_dim = 128
intermediate_size = 512
vocab_size = 1000
moe_intermediate_size = 512
max_context = 4096
[gpu]
kind = "h100-sxm"
memory_gib = 1.0
[cost_model]
calibration = "none"
[network]
gpus_per_node = 2
)";

// No activation reserve: the 1 GiB GPUs hold the weights and KV only.
core::Params config(const std::string& cluster, const std::string& extra = "") {
  return core::parse_config(kTiny + cluster + extra, "ep.toml", run_schema(), {"cluster.activation_reserve_gib=0"});
}

core::ConfigError config_error(const std::string& cluster, const std::string& extra = "") {
  try {
    run_simulation(config(cluster, extra), RunOutputs{});
  } catch (const core::ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a configuration error";
  return core::ConfigError({}, "", "");
}

// The line of `needle` in the configuration text (1-based).
int64_t line_of(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  return 1 + static_cast<int64_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}

TEST(ExpertParallelRunTest, SpreadExpertsFreeKvCapacityByHand) {
  // Per GPU: 0.9 x 1 GiB = 966,367,641.6 bytes, no activation reserve; a 16-token block of this model
  // is 2 blocks x 2 (K, V) x 8 heads x 128 x 2 bytes x 16 = 131,072 bytes.
  // TP 1: weights 71,247,872 bytes (attention 2 x 4,194,304, 16 experts of 1,572,864, the rest
  // 2,069,504, at 2 bytes): (966,367,641.6 - 71,247,872) / 131,072 = 6829.3 -> 6829 blocks per GPU.
  const RunResult tp1 = run_simulation(config("[cluster]\nreplicas = 4\n"), RunOutputs{});
  EXPECT_EQ(tp1.pools[0].kv_blocks_per_replica, 6829);
  // EP 4: 2 experts per block per GPU, 33,499,136 bytes of weights: 7117.25 -> 7117 blocks on each of
  // the 4 attention ranks, 28,468 for the replica (1,152 more than four TP-1 replicas: 288 per GPU,
  // the 37,748,736 bytes of experts each no longer holds).
  const RunResult ep4 =
      run_simulation(config("[cluster]\nexpert_parallel = 4\n"), RunOutputs{});
  EXPECT_EQ(ep4.pools[0].kv_blocks_per_replica, 28468);
  EXPECT_EQ(ep4.pools[0].expert_parallel, 4);
  EXPECT_EQ(ep4.pools[0].attention_data_parallel, 4);
  EXPECT_DOUBLE_EQ(ep4.pools[0].expert_imbalance, 1.0);
  EXPECT_EQ(ep4.summary.requests_completed, 80u);
  // Costed as 4 GPUs.
  EXPECT_NEAR(ep4.summary.gpu_hours, 4.0 * ep4.summary.sim_seconds / 3600.0, 1e-12);
}

TEST(ExpertParallelRunTest, PrefillAndDecodePoolsTakeTheirOwnDegreesAndRunTheSameTwice) {
  const std::string pd = R"([cluster.prefill]
replicas = 1
expert_parallel = 2
[cluster.decode]
replicas = 1
expert_parallel = 4
redundant_experts = 4
)";
  const std::string moe = "[moe]\nrouting_skew = 0.8\noverlap = \"two_batch\"\n";
  const RunResult a = run_simulation(config(pd, moe), RunOutputs{});
  ASSERT_EQ(a.pools.size(), 2u);
  EXPECT_EQ(a.pools[0].expert_parallel, 2);
  EXPECT_EQ(a.pools[1].expert_parallel, 4);
  EXPECT_EQ(a.pools[1].redundant_experts, 4);
  EXPECT_GT(a.pools[0].expert_imbalance, a.pools[1].expert_imbalance);  // EPLB on the decode pool
  EXPECT_EQ(a.summary.requests_completed, 80u);
  EXPECT_GT(a.summary.kv_transfers, 70u);  // every request with more than one output token
  const RunResult b = run_simulation(config(pd, moe), RunOutputs{});
  EXPECT_EQ(a.summary.sim_seconds, b.summary.sim_seconds);
  EXPECT_EQ(a.summary.ttft_ms.p99, b.summary.ttft_ms.p99);
  EXPECT_EQ(a.summary.tpot_ms.mean, b.summary.tpot_ms.mean);
}

TEST(ExpertParallelRunTest, ConfigurationErrorsNameTheKeyAndItsLine) {
  {
    const std::string text = "[cluster]\nexpert_parallel = 4\n";
    const core::ConfigError e = [&] {
      try {
        run_simulation(core::parse_config(kTiny + text, "ep.toml", run_schema(), {"model.kind=llama-3-8b"}),
                       RunOutputs{});
      } catch (const core::ConfigError& err) {
        return err;
      }
      return core::ConfigError({}, "", "");
    }();
    EXPECT_EQ(e.key(), "cluster.expert_parallel");
    EXPECT_NE(std::string(e.what()).find("no routed experts"), std::string::npos) << e.what();
  }
  struct Case {
    std::string cluster, extra, key, needle, line_of;
  };
  const std::vector<Case> cases = {
      {"[cluster]\nexpert_parallel = 4\nredundant_experts = 2\n", "", "cluster.redundant_experts",
       "do not split evenly over expert_parallel = 4", "redundant_experts = 2"},
      {"[cluster]\nexpert_parallel = 4\nattention_data_parallel = 2\n", "", "cluster.attention_data_parallel",
       "2 ranks x tensor_parallel 1 = 2 GPUs, but expert_parallel = 4", "attention_data_parallel = 2"},
      {"[cluster]\nattention_data_parallel = 2\n", "", "cluster.attention_data_parallel",
       "set expert_parallel = 2", "attention_data_parallel = 2"},
      {"[cluster]\nexpert_parallel = 3\nredundant_experts = 1\n", "", "cluster.expert_parallel",
       "would leave a node partly used", "expert_parallel = 3"},
      {"[cluster]\nexpert_parallel = 4\nredundant_experts = 4\n", "[moe]\nplacement = \"contiguous\"\n",
       "cluster.redundant_experts", "placement = \"eplb\"", "redundant_experts = 4"},
      {"[cluster]\nexpert_parallel = 4\n", "[moe]\nrouting_skew = 8.0\n", "moe.routing_skew",
       "more than 1/top-k = 0.5", "routing_skew = 8.0"},
      {"[cluster.prefill]\nreplicas = 1\n[cluster.decode]\nreplicas = 1\nexpert_parallel = 3\nredundant_experts = 1\n",
       "", "cluster.decode.expert_parallel", "partly used", "expert_parallel = 3"},
  };
  for (const Case& c : cases) {
    const core::ConfigError e = config_error(c.cluster, c.extra);
    EXPECT_EQ(e.key(), c.key) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << e.what();
    EXPECT_EQ(e.where().file, "ep.toml");
    EXPECT_EQ(e.where().line, line_of(kTiny + c.cluster + c.extra, c.line_of)) << e.what();
  }
}

TEST(ExpertParallelRunTest, ExpertSharesFromAFile) {
  servesim::testing::TempDir dir;
  const std::string path = dir.file("loads.txt");
  {
    std::ofstream(path) << "40\n10\n10\n10\n10\n10\n10\n";  // 7 loads for 8 experts
  }
  const std::string moe = "[moe]\nexpert_shares_file = \"" + path + "\"\n";
  try {
    run_simulation(config("[cluster]\nexpert_parallel = 4\n", moe), RunOutputs{});
    FAIL() << "expected an input error";
  } catch (const core::InputError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_NE(std::string(e.what()).find("8 routed experts"), std::string::npos) << e.what();
  }
  {
    std::ofstream(path) << "30\n10\n10\n10\n10\n10\n10\n10\n";  // expert 0: 0.3 of the visits
  }
  const RunResult r = run_simulation(config("[cluster]\nexpert_parallel = 4\n", moe), RunOutputs{});
  // Contiguous: GPU 0 holds experts 0 and 1, 0.4 of the visits: 1.6 x the mean.
  EXPECT_NEAR(r.pools[0].expert_imbalance, 1.6, 1e-12);
  const core::ConfigError both = config_error("[cluster]\nexpert_parallel = 4\n", moe + "routing_skew = 0.5\n");
  EXPECT_EQ(both.key(), "moe.routing_skew");
}

}  // namespace
}  // namespace servesim::experiments
