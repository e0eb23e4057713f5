// The cost of speculative decoding: the target verifying draft tokens (roofline_cost_model.cc with
// BatchShape::decode_extra_*) and the drafter's passes (speculative_cost_model.cc).
#include "hwmodels/speculative_cost_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "hwmodels/roofline_cost_model.h"
#include "tests/hwmodels/hw_test_util.h"

namespace servesim::hwmodels {
namespace {

using hwtest::build_hw;
using hwtest::decode;
using hwtest::find_op;
using hwtest::hw_config;

// Every efficiency 1, no overheads: each operator takes max(FLOPs / peak, bytes / bandwidth).
const char* kIdeal =
    "[cost_model]\nkind = \"roofline\"\ncompute_efficiency = 1\nmemory_efficiency = 1\n"
    "elementwise_efficiency = 1\nattention_compute_efficiency = 1\nattention_memory_efficiency = 1\n"
    "kernel_overhead_us = 0\n";

// `seqs` decodes of context `context` each, verifying `drafts` draft tokens each.
BatchShape verify(int64_t seqs, int64_t context, int64_t drafts) {
  BatchShape s = decode(seqs, context);
  s.decode_extra_tokens = seqs * drafts;
  s.decode_extra_pairs = seqs * (drafts * context + drafts * (drafts + 1) / 2);
  return s;
}

const RooflineCostModel& roofline(const hwtest::Hw& hw) { return dynamic_cast<const RooflineCostModel&>(*hw.cost); }

TEST(SpeculativeCostModelTest, HandComputedVerificationStep) {
  // The lecture notes' 7B model (32 layers, 32 heads of 128, fp16) on their reference accelerator
  // (312 TFLOP/s, 2 TB/s): two sequences of context 1000 verify 3 draft tokens each.
  const auto hw = build_hw(hw_config("teaching-7b", "reference") + kIdeal);
  const BatchShape v = verify(2, 1000, 3);
  const auto ops = roofline(hw).breakdown(v);

  // Attention, by hand. Query-key pairs: each sequence's 4 queries attend to 1000, 1001, 1002 and
  // 1003 keys: 4006 pairs, 8012 in all. FLOPs per pair on one GPU: 4 x head_dim x heads = 16384.
  // Bytes per layer: the cache (16384 bytes a token a layer: K and V of 32 x 128 fp16) read once for
  // the 1003 keys of each sequence, the 8 new tokens' K and V written, their Q read and O written
  // (16384 bytes each): 16384 x (2006 + 8) + 16384 x 8. Memory-bound: 2022 x 16384 bytes / 2 TB/s.
  const OperatorCost* attention = find_op(ops, "attention_decode");
  ASSERT_NE(attention, nullptr);
  EXPECT_DOUBLE_EQ(attention->flops, 32.0 * 16384 * 8012);
  EXPECT_DOUBLE_EQ(attention->bytes, 32.0 * 16384 * 2022);
  EXPECT_NEAR(attention->seconds, 32.0 * 16384 * 2022 / 2e12, 1e-15);
  EXPECT_GT(attention->seconds, 32.0 * 16384 * 8012 / 312e12);  // the FLOPs take less

  // Every other operator is exactly that of a step of 8 rows: the verification is a small batch of
  // 8 tokens, with 8 rows of logits.
  const auto rows8 = roofline(hw).breakdown(decode(8, 1000));
  ASSERT_EQ(ops.size(), rows8.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].name == "attention_decode") continue;
    SCOPED_TRACE(std::string(ops[i].name));
    EXPECT_EQ(ops[i].name, rows8[i].name);
    EXPECT_DOUBLE_EQ(ops[i].seconds, rows8[i].seconds);
    EXPECT_DOUBLE_EQ(ops[i].flops, rows8[i].flops);
    EXPECT_DOUBLE_EQ(ops[i].bytes, rows8[i].bytes);
  }
  // Same weight reads: each operator's bytes grow by the 6 extra rows' activations only.
  const auto rows2 = roofline(hw).breakdown(decode(2, 1000));
  const auto rows3 = roofline(hw).breakdown(decode(3, 1000));
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].name == "attention_decode") continue;
    EXPECT_NEAR(ops[i].bytes - rows2[i].bytes, 6 * (rows3[i].bytes - rows2[i].bytes), 1e-3) << ops[i].name;
  }
  // The step is memory-bound: every operator at bandwidth, so its time is its bytes / 2 TB/s.
  const StepCost c = hw.cost->step(v);
  EXPECT_NEAR(c.seconds, c.bytes / 2e12, 1e-12);
  // 4x the tokens of a plain decode of the two sequences for 0.3% more time.
  const StepCost plain = hw.cost->step(decode(2, 1000));
  EXPECT_LT(c.seconds, 1.01 * plain.seconds);
  EXPECT_NEAR(c.flops / plain.flops, 4.0, 0.01);
}

TEST(SpeculativeCostModelTest, VerificationHurtsWhenComputeBound) {
  // 512 short sequences: the GEMMs are compute-bound already, and verifying 3 drafts each
  // quadruples them; at a = 0.7 (2.53 tokens a step) speculation loses.
  const auto hw = build_hw(hw_config("teaching-7b", "reference") + kIdeal);
  const auto plain = roofline(hw).breakdown(decode(512, 16));
  const auto spec = roofline(hw).breakdown(verify(512, 16, 3));
  for (std::string_view gemm : {"attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj"})
    EXPECT_NEAR(find_op(spec, gemm)->seconds / find_op(plain, gemm)->seconds, 4.0, 1e-9) << gemm;
  const double ratio = hw.cost->step(verify(512, 16, 3)).seconds / hw.cost->step(decode(512, 16)).seconds;
  EXPECT_GT(ratio, (1 - 0.7 * 0.7 * 0.7 * 0.7) / 0.3);
  EXPECT_LT(ratio, 4.0);
}

TEST(SpeculativeCostModelTest, VerifyingMoeTouchesMoreExperts) {
  // More rows route to more experts, whose weights must be read: verification is not free for MoE.
  const auto hw = build_hw(hw_config("mixtral-8x7b", "h100-sxm"), 2);
  const auto plain_ops = roofline(hw).breakdown(decode(1, 500));
  const auto spec_ops = roofline(hw).breakdown(verify(1, 500, 3));
  const OperatorCost* plain = find_op(plain_ops, "moe_up_proj");
  const OperatorCost* spec = find_op(spec_ops, "moe_up_proj");
  ASSERT_TRUE(plain && spec);
  // 2 of 8 experts for one token; 8 (1 - (6/8)^4) = 5.47 expected for four.
  EXPECT_NEAR(spec->bytes / plain->bytes, (8 * (1 - std::pow(0.75, 4))) / 2.0, 0.01);
}

TEST(SpeculativeCostModelTest, DraftsAreQueriesOfEveryAttentionType) {
  // gpt-oss-120b (18 full and 18 sliding-window layers, window 128, 64 query heads of 64, 8 KV
  // heads): two sequences at context 1000 verify 3 drafts each. A full layer's queries attend to
  // 1000..1003 keys; a window layer's to 128 each. Each layer streams the cache once (plus the
  // drafts' keys), writes 8 tokens' K and V (2048 bytes each) and moves 8 tokens' Q and O.
  const auto hw = build_hw(hw_config("gpt-oss-120b", "h200"));
  BatchShape s;
  add_decodes(s, hw.model->attention_limits(), 2, 1000);
  s.decode_extra_tokens = 6;
  s.decode_extra_pairs = 2 * (3 * 1000 + 6);
  s.decode_extra_window_pairs = 2 * capped_pairs(1000, 3, 128);
  EXPECT_EQ(s.decode_extra_window_pairs, 2 * 3 * 128);
  const auto ops = roofline(hw).breakdown(s);
  const double q_o = 2.0 * 64 * 64 * 2, per_pair = 4.0 * 64 * 64;
  EXPECT_DOUBLE_EQ(find_op(ops, "attention_decode")->flops, 18 * per_pair * (2000 + 6012));
  EXPECT_DOUBLE_EQ(find_op(ops, "attention_decode")->bytes, 18 * (2048.0 * (2006 + 8) + q_o * 8));
  EXPECT_DOUBLE_EQ(find_op(ops, "attention_decode_window")->flops, 18 * per_pair * (256 + 768));
  EXPECT_DOUBLE_EQ(find_op(ops, "attention_decode_window")->bytes, 18 * (2048.0 * (262 + 8) + q_o * 8));
}

TEST(SpeculativeCostModelTest, DraftPassesAreCostedByTheDrafter) {
  BatchShape s = verify(4, 500, 3);
  s.prefill_seqs = 1;
  s.prefill_tokens = 100;
  s.prefill_logits = 1;
  s.prefill_attention_pairs = 100 * 101 / 2;
  s.draft_passes = 3;
  s.draft_seqs = 5;
  s.draft_context_tokens = 2600;
  s.draft_catchup_tokens = 7;
  s.draft_catchup_pairs = 3507;
  // Pass 1: the prompt chunk and each decode with its accepted tokens, logits for the last only.
  const BatchShape p1 = draft_pass_shape(s, 1);
  EXPECT_EQ(p1.prefill_tokens, 100);
  EXPECT_EQ(p1.prefill_logits, 1);
  EXPECT_EQ(p1.decode_seqs, 4);
  EXPECT_EQ(p1.decode_context_tokens, 2000);
  EXPECT_EQ(p1.decode_extra_tokens, 7);
  EXPECT_EQ(p1.decode_extra_pairs, 3507);
  EXPECT_FALSE(p1.decode_extra_logits);
  EXPECT_EQ(p1.draft_passes, 0);
  // Passes 2 and 3: one token for each of the 5 sequences, the context one longer each time.
  const BatchShape p3 = draft_pass_shape(s, 3);
  EXPECT_EQ(p3.prefill_tokens, 0);
  EXPECT_EQ(p3.decode_seqs, 5);
  EXPECT_EQ(p3.decode_context_tokens, 2605);

  auto target = build_hw(hw_config("llama-3-8b", "h100-sxm"));
  auto drafter = build_hw(hw_config("llama-3-8b", "h100-sxm", "num_layers = 1\n"));
  const StepCost alone = target.cost->step(s);
  double draft_s = 0;
  for (int64_t pass = 1; pass <= 3; ++pass) draft_s += drafter.cost->step(draft_pass_shape(s, pass)).seconds;
  const StepCostModel* drafter_cost = drafter.cost.get();
  SpeculativeCostModel spec(std::move(target.cost), std::move(drafter.cost), nullptr);
  EXPECT_DOUBLE_EQ(spec.step(s).seconds, alone.seconds + draft_s);
  EXPECT_DOUBLE_EQ(spec.draft_cost(s).seconds, draft_s);
  EXPECT_EQ(spec.drafter(), drafter_cost);
  // No drafter passes, no drafter cost (n-gram lookup, or none this iteration).
  s.draft_passes = 0;
  EXPECT_DOUBLE_EQ(spec.step(s).seconds, alone.seconds);
  // The last-position-only logits of pass 1: the LM head sees 4 + 1 rows, not 11 + 1.
  const auto& r = dynamic_cast<const RooflineCostModel&>(*spec.drafter());
  EXPECT_DOUBLE_EQ(find_op(r.breakdown(p1), "lm_head")->flops, 5 * 2.0 * 4096 * 128256);
}

TEST(SpeculativeCostModelTest, DraftHeadFusesItsInputs) {
  // An MTP module or EAGLE head: one block behind a 2h x h projection, unquantised, whole on
  // every GPU of the group.
  auto hw = build_hw(hw_config("deepseek-v3", "h200", "num_layers = 1\ndense_layers = 0\n"), 8);
  ModelSpec head = hw.cost->model();
  head.draft_head = true;
  const RooflineCostModel model(head, *hw.gpu, 8);
  const auto ops = model.breakdown(decode(1, 1000));
  const OperatorCost* fc = find_op(ops, "draft_fc");
  ASSERT_NE(fc, nullptr);
  EXPECT_EQ(fc->count, 1);
  EXPECT_DOUBLE_EQ(fc->flops, 2.0 * 2 * 7168 * 7168);                    // useful once
  EXPECT_DOUBLE_EQ(fc->bytes, 8 * (2.0 * 7168 * 7168 * 2 + 3 * 7168 * 2));  // read on all 8 GPUs
  EXPECT_EQ(find_op(roofline(hw).breakdown(decode(1, 1000)), "draft_fc"), nullptr);
}

}  // namespace
}  // namespace servesim::hwmodels
