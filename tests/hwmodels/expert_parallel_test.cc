#include "hwmodels/expert_parallel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <numeric>

#include "hwmodels/roofline.h"
#include "sim/core/error.h"
#include "tests/test_paths.h"

namespace servesim::hwmodels {
namespace {

// A small MoE: 2 blocks, hidden 1024, 8 heads of 128 (MHA), 8 routed experts of width 512, top-2,
// vocabulary 1000, bf16.
ModelSpec tiny_moe() {
  ModelSpec m = *find_model_preset("mixtral-8x7b");
  m.name = "tiny-moe";
  m.num_layers = 2;
  m.hidden_size = 1024;
  m.num_heads = 8;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.intermediate_size = 512;
  m.vocab_size = 1000;
  m.num_experts = 8;
  m.experts_per_token = 2;
  m.moe_intermediate_size = 512;
  return m;
}

ExpertParallelism ep_over(int64_t degree, int64_t gpus_per_node) {
  ExpertParallelism ep;
  ep.degree = degree;
  ep.gpus_per_node = gpus_per_node;
  return ep;
}

TEST(ExpertParallelTest, ZipfSharesFollowThePowerLawUnderAFixedPermutation) {
  const std::vector<double> uniform = zipf_expert_shares(8, 0.0);
  for (double s : uniform) EXPECT_DOUBLE_EQ(s, 1.0 / 8.0);
  const std::vector<double> skewed = zipf_expert_shares(4, 1.0);
  // 1, 1/2, 1/3, 1/4 over H_4 = 25/12, on some permutation of the ids.
  std::vector<double> sorted = skewed;
  std::sort(sorted.rbegin(), sorted.rend());
  EXPECT_NEAR(sorted[0], 12.0 / 25.0, 1e-15);
  EXPECT_NEAR(sorted[1], 6.0 / 25.0, 1e-15);
  EXPECT_NEAR(sorted[2], 4.0 / 25.0, 1e-15);
  EXPECT_NEAR(sorted[3], 3.0 / 25.0, 1e-15);
  EXPECT_EQ(skewed, zipf_expert_shares(4, 1.0));  // the same permutation every time
  const std::vector<double> many = zipf_expert_shares(256, 1.2);
  EXPECT_NEAR(std::accumulate(many.begin(), many.end(), 0.0), 1.0, 1e-12);
  // The hottest ids are spread, not the first ones.
  EXPECT_NE(std::max_element(many.begin(), many.end()) - many.begin(), 0);
}

TEST(ExpertParallelTest, ContiguousPlacementLoadsByHand) {
  ExpertParallelism ep = ep_over(4, 2);
  // Experts 0 and 1 sit on GPU 0: 0.25 + 0.15 = 0.4 of the visits; every other GPU 0.2.
  ep.expert_shares = {0.25, 0.15, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1};
  const ExpertPlacement p = place_experts(tiny_moe(), ep);
  EXPECT_EQ(p.slots_per_gpu, 2);
  EXPECT_EQ(p.busiest_gpu, 0);
  EXPECT_NEAR(p.gpu_load[0], 0.4, 1e-15);
  EXPECT_NEAR(p.gpu_load[3], 0.2, 1e-15);
  EXPECT_NEAR(p.imbalance, 1.6, 1e-14);
  // A token visits expert 0 with probability top-k x share = 0.5.
  EXPECT_NEAR(p.slot_visit[0], 0.5, 1e-15);
  // Uniform routing is balanced.
  EXPECT_DOUBLE_EQ(place_experts(tiny_moe(), ep_over(4, 2)).imbalance, 1.0);
}

TEST(ExpertParallelTest, EplbGivesRedundantReplicasToTheHottestAndPacksByLoad) {
  ExpertParallelism ep = ep_over(4, 2);
  ep.redundant_experts = 4;  // 12 slots, 3 per GPU
  ep.eplb = true;
  ep.expert_shares = {0.25, 0.15, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1};
  const ExpertPlacement p = place_experts(tiny_moe(), ep);
  // By hand: expert 0 (0.25 -> 0.125 per replica), expert 1 (0.15 -> 0.075), then 0.125 is still the
  // largest per-replica load: expert 0 gets a third (0.0833), then expert 2 (0.1 -> 0.05).
  EXPECT_EQ(p.replicas[0], 3);
  EXPECT_EQ(p.replicas[1], 2);
  EXPECT_EQ(p.replicas[2], 2);
  EXPECT_EQ(p.replicas[3], 1);
  EXPECT_EQ(p.slots_per_gpu, 3);
  EXPECT_NEAR(std::accumulate(p.gpu_load.begin(), p.gpu_load.end(), 0.0), 1.0, 1e-14);
  // Longest-processing-time packing of the 12 loads (5 x 0.1 for experts 3-7, 3 x 1/12, 2 x 0.075,
  // 2 x 0.05), each to the least-loaded GPU with a free slot (3 slots each): GPU 0 gets 3, 7, 2
  // (0.25); GPU 1 gets 4, 0, 1 (0.2583); GPU 2 gets 5, 0, 1 (0.2583); GPU 3 gets 6, 0, 2 (0.2333).
  EXPECT_EQ(p.busiest_gpu, 1);
  EXPECT_EQ(p.slot_expert[3], 4);
  EXPECT_EQ(p.slot_expert[4], 0);
  EXPECT_EQ(p.slot_expert[5], 1);
  EXPECT_NEAR(p.gpu_load[0], 0.25, 1e-15);
  EXPECT_NEAR(p.gpu_load[3], 0.1 + 0.25 / 3 + 0.05, 1e-15);
  EXPECT_NEAR(p.imbalance, 4.0 * (0.1 + 0.25 / 3 + 0.075), 1e-14);
  const ExpertPlacement contiguous = place_experts(tiny_moe(), [&] {
    ExpertParallelism c = ep_over(4, 2);
    c.expert_shares = ep.expert_shares;
    return c;
  }());
  EXPECT_LT(p.imbalance, contiguous.imbalance);
}

TEST(ExpertParallelTest, CopiesPerTokenByHand) {
  const ModelSpec m = tiny_moe();  // E = 8, k = 2
  const ExpertParallelism ep = ep_over(4, 2);  // two nodes of two GPUs
  // Low-latency: k copies, 1/4 of them on the token's own GPU, 1/4 on the other GPU of its node.
  const EpCopies ll = ep_copies_per_token(m, ep, true);
  EXPECT_DOUBLE_EQ(ll.nvlink, 0.5);
  EXPECT_DOUBLE_EQ(ll.scaleout, 1.0);
  // Normal: the other node (4 experts of 8) is missed by both picks with (4/8)(3/7) = 3/14; a GPU
  // (2 of 8) with (6/8)(5/7) = 15/28. One RDMA copy per node hit; NVLink to every other hit GPU of
  // each node: 2 nodes x 1 GPU x 13/28.
  const EpCopies normal = ep_copies_per_token(m, ep, false);
  EXPECT_NEAR(normal.scaleout, 11.0 / 14.0, 1e-15);
  EXPECT_NEAR(normal.nvlink, 13.0 / 14.0, 1e-15);
  // One node: nothing leaves it.
  EXPECT_DOUBLE_EQ(ep_copies_per_token(m, ep_over(4, 8), false).scaleout, 0.0);
  // fp8 dispatch: 1024 bytes and 8 scales of 4 bytes; bf16 combine: 2048.
  EXPECT_DOUBLE_EQ(ep_dispatch_bytes_per_copy(m, ep), 1056.0);
  EXPECT_DOUBLE_EQ(ep_combine_bytes_per_copy(m), 2048.0);
}

TEST(ExpertParallelTest, ExpectedMaximumOfTheGpuLoads) {
  EXPECT_DOUBLE_EQ(expected_max_count(100, 1), 100.0);
  EXPECT_NEAR(expected_max_count(100, 8), 100.0 + 10.0 * std::sqrt(2.0 * std::log(8.0)), 1e-12);
}

TEST(ExpertParallelTest, ProblemsNameTheKeyToBlame) {
  const ModelSpec m = tiny_moe();
  EXPECT_EQ(ep_problem(m, 1, ep_over(4, 2)), "");
  EXPECT_EQ(ep_problem(*find_model_preset("llama-3-8b"), 1, ep_over(4, 8)).rfind("expert_parallel: ", 0), 0u);
  EXPECT_EQ(ep_problem(m, 8, ep_over(4, 8)).rfind("expert_parallel: ", 0), 0u);
  ExpertParallelism odd = ep_over(4, 8);
  odd.redundant_experts = 2;  // 10 slots over 4 GPUs
  odd.eplb = true;
  EXPECT_NE(ep_problem(m, 1, odd).find("redundant_experts: the 8 routed experts"), std::string::npos);
  ExpertParallelism hot = ep_over(4, 8);
  hot.expert_shares = {0.6, 0.4 / 7, 0.4 / 7, 0.4 / 7, 0.4 / 7, 0.4 / 7, 0.4 / 7, 0.4 / 7};
  EXPECT_NE(ep_problem(m, 1, hot).find("expert_shares: expert 0 would take 0.6"), std::string::npos);
  EXPECT_EQ(ep_problem(m, 1, ep_over(8, 3)).rfind("expert_parallel: 8 GPUs across nodes of 3", 0), 0u);
}

TEST(ExpertParallelTest, SharesFileErrorsNameFileAndLine) {
  servesim::testing::TempDir dir;
  const std::string path = dir.file("loads.txt");
  {
    std::ofstream(path) << "# tokens per expert\n10\n30  # hot\n\n20\n40\n";
  }
  const std::vector<double> s = read_expert_shares(path, 4);
  EXPECT_DOUBLE_EQ(s[1], 0.3);
  EXPECT_DOUBLE_EQ(s[3], 0.4);
  {
    std::ofstream(path) << "10\n-3\n";
  }
  try {
    read_expert_shares(path, 2);
    FAIL();
  } catch (const core::InputError& e) {
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.field(), "expert 1");
  }
  {
    std::ofstream(path) << "1\n2\n3\n";
  }
  EXPECT_THROW(read_expert_shares(path, 4), core::InputError);
  EXPECT_THROW(read_expert_shares(path, 2), core::InputError);
}

TEST(ExpertParallelTest, SpreadingExpertsFreesMemoryForKvByHand) {
  const ModelSpec m = tiny_moe();
  // Per block: attention 4 x 1024^2 = 4,194,304; an expert 3 x 1024 x 512 = 1,572,864; gate 8,192.
  // Unquantised (2 bytes either way): 2 x (2 x 1024) norms, 2 gates, embedding + LM head 2,048,000,
  // final norm 1,024 = 2,069,504.
  const double attention = 2 * 4194304.0, expert = 1572864.0, other = 2069504.0;
  EXPECT_DOUBLE_EQ(weight_bytes_per_gpu(m, 1), 2.0 * (attention + 2 * 8 * expert + other));
  // EP 4: each GPU keeps its rank's whole attention and 8 / 4 = 2 experts per block.
  EXPECT_DOUBLE_EQ(weight_bytes_per_gpu(m, 1, 4), 2.0 * (attention + 2 * 2 * expert + other));
  // With 4 redundant experts, 3 per GPU.
  EXPECT_DOUBLE_EQ(weight_bytes_per_gpu(m, 1, 4, 4), 2.0 * (attention + 2 * 3 * expert + other));
  // The KV budget grows by what the experts no longer take: 3/4 of 2 blocks x 8 experts x 2 bytes.
  GpuSpec gpu = *find_gpu_preset("h100-sxm");
  gpu.memory_bytes = kBytesPerGib;
  EXPECT_NEAR(kv_budget_bytes_per_gpu(gpu, m, 1, 0.9, 0, 4) - kv_budget_bytes_per_gpu(gpu, m, 1, 0.9, 0),
              37748736.0, 1e-6);
}

}  // namespace
}  // namespace servesim::hwmodels
