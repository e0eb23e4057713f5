// The roofline cost model with expert parallelism: data-parallel attention timed on the busiest
// rank, expert GEMMs on the busiest GPU, dispatch and combine all-to-alls, against hand numbers.
#include <gtest/gtest.h>

#include <cmath>

#include "hwmodels/expert_parallel.h"
#include "hwmodels/roofline_cost_model.h"
#include "tests/hwmodels/hw_test_util.h"

namespace servesim::hwmodels {
namespace {

using hwtest::find_op;

// 2 MoE blocks, hidden 1024, 8 heads of 128, 8 routed experts of width 512, top-2, bf16.
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

// Round numbers: 100 TFLOP/s, 1 TB/s, NVLink 100 GB/s; every efficiency 1, no fixed kernel time.
GpuSpec test_gpu() {
  GpuSpec g = *find_gpu_preset("h100-sxm");
  g.name = "test";
  g.peak_flops = 1e14;
  g.fp8_peak_flops = 0;
  g.hbm_bandwidth = 1e12;
  g.interconnect_bandwidth = 100e9;
  return g;
}

RooflineParams unit_params() {
  RooflineParams p;
  p.compute_efficiency = p.memory_efficiency = p.elementwise_efficiency = 1.0;
  p.kernel_overhead_us = 0;
  p.eager_launch_us = 0;
  return p;
}

// Four GPUs on two nodes of two: NVLink 100 GB/s (2 us GPU to GPU), 25 GB/s per GPU across nodes
// (5 us), low-latency kernels, no sampling fluctuation.
ExpertParallelism two_nodes() {
  ExpertParallelism ep;
  ep.degree = 4;
  ep.gpus_per_node = 2;
  ep.nvlink_bytes_per_s = 100e9;
  ep.nvlink_latency_s = 2e-6;
  ep.scaleout_bytes_per_s = 25e9;
  ep.scaleout_latency_s = 5e-6;
  ep.kernels = EpKernels::kLowLatency;
  ep.routing_noise = false;
  return ep;
}

RooflineCostModel model_with(const ExpertParallelism& ep) {
  return RooflineCostModel(tiny_moe(), test_gpu(), 1, unit_params(), nullptr, ProfileUse{}, ep);
}

BatchShape decode(int64_t seqs, int64_t context) {
  BatchShape s;
  s.decode_seqs = seqs;
  s.decode_context_tokens = seqs * context;
  return s;
}

TEST(RooflineCostModelEpTest, AllToAllOfATwoNodeStepByHand) {
  const RooflineCostModel cost = model_with(two_nodes());
  EXPECT_EQ(cost.gpus(), 4);
  const StepCost c = cost.step(decode(64, 100));
  // 64 decodes over 4 attention ranks: each GPU dispatches 16 tokens; the busiest GPU (all equal)
  // receives 64 x 2 / 4 = 32 visits, 16 tokens' worth of copies. A copy is 1024 fp8 bytes + 8 x 4
  // bytes of scales in dispatch, 2048 bf16 bytes in combine: 16 x (1056 + 2048) = 49,664 bytes
  // per copy per token slot, either direction. Low-latency kernels: of k = 2 copies, 2 x 2/4 = 1
  // goes to the other node, 2 x 1/4 = 0.5 to the other GPU of the node. Two MoE blocks.
  const double per_copy = 16.0 * (1056.0 + 2048.0);
  EXPECT_DOUBLE_EQ(c.all_to_all.scaleout_bytes, 2.0 * 1.0 * per_copy);  // 99,328 bytes
  EXPECT_DOUBLE_EQ(c.all_to_all.scaleout_s, 99328.0 / 25e9);           // 3.97312 us
  EXPECT_DOUBLE_EQ(c.all_to_all.nvlink_s, 2.0 * 0.5 * per_copy / 100e9);  // 0.49664 us
  EXPECT_DOUBLE_EQ(c.all_to_all.fixed_s, 2.0 * 2.0 * 5e-6);           // 2 blocks x dispatch + combine
  const double comm = 20e-6 + 99328.0 / 25e9;                          // 23.97312 us
  const auto ops = cost.breakdown(decode(64, 100));
  ASSERT_NE(find_op(ops, "moe_all_to_all"), nullptr);
  EXPECT_NEAR(find_op(ops, "moe_all_to_all")->seconds, comm, 1e-18);
  EXPECT_NEAR(c.seconds, c.all_to_all.compute_s + comm, 1e-15);
  EXPECT_DOUBLE_EQ(all_to_all_step_seconds(c.all_to_all, c.all_to_all.scaleout_s), c.all_to_all.compute_s + comm);
  // Half the scale-out bandwidth (another flow on the link) doubles the cross-node part.
  EXPECT_NEAR(all_to_all_step_seconds(c.all_to_all, 2 * c.all_to_all.scaleout_s),
              c.all_to_all.compute_s + 20e-6 + 2 * 99328.0 / 25e9, 1e-15);

  // Two-batch overlap: the step takes the longer of compute and comm; the breakdown still adds up.
  ExpertParallelism tbo = two_nodes();
  tbo.two_batch_overlap = true;
  const RooflineCostModel overlapped = model_with(tbo);
  const StepCost o = overlapped.step(decode(64, 100));
  EXPECT_NEAR(o.seconds, std::max(o.all_to_all.compute_s, comm), 1e-15);
  double sum = 0;
  for (const auto& op : overlapped.breakdown(decode(64, 100))) sum += op.seconds;
  EXPECT_NEAR(sum, o.seconds, 1e-15);
}

TEST(RooflineCostModelEpTest, NormalKernelsForPrefillSendOneCopyPerNode) {
  const RooflineCostModel cost = model_with([] {
    ExpertParallelism ep = two_nodes();
    ep.kernels = EpKernels::kAuto;
    return ep;
  }());
  BatchShape s;
  s.prefill_seqs = 4;
  s.prefill_tokens = 4 * 256;
  s.prefill_logits = 4;
  s.prefill_attention_pairs = 4 * (256 * 257 / 2);
  const StepCost c = cost.step(s);
  // One prompt of 256 tokens per rank; 1024 x 2 / 4 = 512 visits at the busiest GPU, 256 tokens'
  // copies. Normal kernels: 11/14 RDMA copies per token (ExpertParallelTest.CopiesPerTokenByHand).
  const double per_copy = 256.0 * (1056.0 + 2048.0);
  EXPECT_NEAR(c.all_to_all.scaleout_bytes, 2.0 * 11.0 / 14.0 * per_copy, 1e-6);
  EXPECT_NEAR(c.all_to_all.nvlink_s, 2.0 * 13.0 / 14.0 * per_copy / 100e9, 1e-18);
  // A decode-only step under auto uses the low-latency kernels: one RDMA copy per token here.
  EXPECT_NEAR(cost.step(decode(64, 100)).all_to_all.scaleout_bytes, 2.0 * 16.0 * (1056.0 + 2048.0), 1e-9);
}

TEST(RooflineCostModelEpTest, ExpertGemmTimeFollowsTheBusiestGpuByHand) {
  // 4096 decodes: compute-bound expert GEMMs. The up projection of a whole expert is 1024 x 1024
  // (gate and up of width 512): 2 x 1024 x 1024 FLOPs per visit, at 1e14 FLOP/s.
  const double flops_per_visit = 2.0 * 1024 * 1024;
  const RooflineCostModel balanced = model_with(two_nodes());
  const auto up = [&](const RooflineCostModel& m) {
    return find_op(m.breakdown(decode(4096, 1)), "moe_up_proj")->seconds;
  };
  // Uniform: 4096 x 2 / 4 = 2048 visits on every GPU, two blocks.
  EXPECT_NEAR(up(balanced), 2.0 * 2048 * flops_per_visit / 1e14, 1e-15);
  // Experts 0 and 1 (GPU 0) take 0.4 of the visits: 3276.8 there, 1.6 x the mean.
  ExpertParallelism skewed = two_nodes();
  skewed.expert_shares = {0.25, 0.15, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1};
  const RooflineCostModel hot = model_with(skewed);
  EXPECT_NEAR(hot.expert_placement().imbalance, 1.6, 1e-14);
  EXPECT_NEAR(up(hot), 2.0 * 3276.8 * flops_per_visit / 1e14, 1e-15);
  EXPECT_NEAR(up(hot) / up(balanced), 1.6, 1e-12);
  // The useful FLOPs are the same: every visit, wherever it lands.
  EXPECT_DOUBLE_EQ(find_op(hot.breakdown(decode(4096, 1)), "moe_up_proj")->flops,
                   find_op(balanced.breakdown(decode(4096, 1)), "moe_up_proj")->flops);
  // The step's fluctuation: mean + sqrt(mean x 2 ln 4) visits at the busiest of 4 GPUs.
  ExpertParallelism noisy = two_nodes();
  noisy.routing_noise = true;
  EXPECT_NEAR(up(model_with(noisy)),
              2.0 * (2048 + std::sqrt(2048 * 2 * std::log(4.0))) * flops_per_visit / 1e14, 1e-15);
}

TEST(RooflineCostModelEpTest, AttentionRunsOnTheBusiestDataParallelRank) {
  const RooflineCostModel ep = model_with(two_nodes());
  const RooflineCostModel single(tiny_moe(), test_gpu(), 1, unit_params());
  // 5 decodes over 4 ranks: the busiest holds 2 of them, at the mean context.
  const auto ep_ops = ep.breakdown(decode(5, 300));
  EXPECT_DOUBLE_EQ(find_op(ep_ops, "attention_decode")->seconds,
                   find_op(single.breakdown(decode(2, 300)), "attention_decode")->seconds);
  EXPECT_DOUBLE_EQ(find_op(ep_ops, "attention_decode")->flops,
                   find_op(single.breakdown(decode(5, 300)), "attention_decode")->flops);
  // Every rank reads its own copy of the attention weights.
  const auto single_ops = single.breakdown(decode(5, 300));
  const auto* ep_qkv = find_op(ep_ops, "attn_pre_proj");
  const auto* one_qkv = find_op(single_ops, "attn_pre_proj");
  EXPECT_DOUBLE_EQ(ep_qkv->seconds, find_op(single.breakdown(decode(2, 300)), "attn_pre_proj")->seconds);
  const double weights = 2.0 * 1024 * (1024 + 2 * 1024) * 2;  // 2 blocks x QKV at 2 bytes
  EXPECT_NEAR(ep_qkv->bytes - one_qkv->bytes, 3.0 * weights, 1e-6);
}

TEST(RooflineCostModelEpTest, BusiestRankTakesItsShareOfEverySum) {
  BatchShape s;
  s.prefill_seqs = 5;
  s.prefill_tokens = 1000;
  s.prefill_logits = 3;
  s.prefill_context_tokens = 301;
  s.prefill_attention_pairs = 90001;
  s.prefill_window_pairs = 5001;
  s.decode_seqs = 7;
  s.decode_context_tokens = 701;
  s.decode_sparse_context_tokens = 71;
  s.launch = LaunchMode::kFullGraph;
  s.graph_tokens = 24;
  // 4 ranks: the busiest holds ceil(5/4) = 2 prefill chunks and ceil(7/4) = 2 decodes, each sum
  // scaled by 2/5 or 2/7 and rounded up.
  const BatchShape r = busiest_rank(s, 4);
  EXPECT_EQ(r.prefill_seqs, 2);
  EXPECT_EQ(r.prefill_tokens, 400);
  EXPECT_EQ(r.prefill_logits, 2);
  EXPECT_EQ(r.prefill_context_tokens, 121);    // 120.4
  EXPECT_EQ(r.prefill_attention_pairs, 36001);  // 36000.4
  EXPECT_EQ(r.prefill_window_pairs, 2001);      // 2000.4
  EXPECT_EQ(r.decode_seqs, 2);
  EXPECT_EQ(r.decode_context_tokens, 201);      // 200.3
  EXPECT_EQ(r.decode_sparse_context_tokens, 21);  // 20.3
  EXPECT_EQ(r.launch, LaunchMode::kFullGraph);
  EXPECT_EQ(r.graph_tokens, 24);
  // One rank: the shape itself.
  EXPECT_EQ(busiest_rank(s, 1).prefill_attention_pairs, s.prefill_attention_pairs);
}

TEST(RooflineCostModelEpTest, WithoutExpertParallelismNothingChanges) {
  const RooflineCostModel plain(tiny_moe(), test_gpu(), 1, unit_params());
  const RooflineCostModel degree_one = model_with(ExpertParallelism{});
  for (const BatchShape& s : {decode(7, 900), decode(300, 20)}) {
    EXPECT_EQ(plain.step(s).seconds, degree_one.step(s).seconds);
    EXPECT_EQ(degree_one.step(s).all_to_all.scaleout_bytes, 0.0);
  }
  EXPECT_EQ(degree_one.gpus(), 1);
}

}  // namespace
}  // namespace servesim::hwmodels
