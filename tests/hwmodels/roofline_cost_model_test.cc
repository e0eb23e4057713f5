#include "hwmodels/roofline_cost_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "hwmodels/roofline.h"
#include "tests/hwmodels/hw_test_util.h"
#include "tests/test_paths.h"

namespace servesim::hwmodels {
namespace {

using hwtest::build_hw;
using hwtest::decode;
using hwtest::find_op;
using hwtest::hw_config;

BatchShape prefill(int64_t tokens, int64_t prior = 0, bool completes = true) {
  BatchShape s;
  s.prefill_seqs = 1;
  s.prefill_tokens = tokens;
  s.prefill_logits = completes ? 1 : 0;
  s.prefill_context_tokens = prior;
  s.prefill_attention_pairs = tokens * prior + tokens * (tokens + 1) / 2;
  return s;
}

int64_t capped_triangle_for_test(int64_t n, int64_t cap) {
  int64_t sum = 0;
  for (int64_t x = 1; x <= n; ++x) sum += std::min(x, cap);
  return sum;
}

BatchShape mix(const BatchShape& a, const BatchShape& b) {
  BatchShape s = a;
  s.prefill_seqs += b.prefill_seqs;
  s.prefill_tokens += b.prefill_tokens;
  s.prefill_logits += b.prefill_logits;
  s.prefill_context_tokens += b.prefill_context_tokens;
  s.prefill_attention_pairs += b.prefill_attention_pairs;
  s.decode_seqs += b.decode_seqs;
  s.decode_context_tokens += b.decode_context_tokens;
  return s;
}

const RooflineCostModel& roofline(const hwtest::Hw& hw) {
  return dynamic_cast<const RooflineCostModel&>(*hw.cost);
}

double sum_ops(const std::vector<OperatorCost>& ops, const std::vector<std::string_view>& names) {
  double s = 0;
  for (auto name : names)
    if (const OperatorCost* op = find_op(ops, name)) s += op->seconds;
  return s;
}

const std::vector<std::string_view> kGemms = {"attn_pre_proj", "attn_post_proj",
                                                             "mlp_up_proj", "mlp_down_proj"};

TEST(RooflineCostModelTest, RegisteredWithDocumentedDefaults) {
  const auto names = cost_model_registry().kind_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "roofline"), names.end());
  EXPECT_EQ(cost_model_registry().name(), "cost_models");
  const auto hw = build_hw(hw_config("llama-3-8b", "h100-sxm"));  // no [cost_model]: roofline
  const RooflineParams& p = roofline(hw).params();
  const RooflineParams d;
  EXPECT_DOUBLE_EQ(p.compute_efficiency, d.compute_efficiency);
  EXPECT_DOUBLE_EQ(p.kernel_overhead_us, d.kernel_overhead_us);
  EXPECT_EQ(hw.cost->model().name, "llama-3-8b");
  EXPECT_EQ(hw.cost->gpu().name, "h100-sxm");
  EXPECT_EQ(hw.cost->tensor_parallel(), 1);
  for (const auto& spec : roofline_param_specs()) EXPECT_FALSE(spec.description.empty()) << spec.name;
}

TEST(RooflineCostModelTest, ParametersComeFromTheConfig) {
  const auto hw = build_hw(hw_config("llama-3-8b", "h100-sxm") +
                           "[cost_model]\nkind = \"roofline\"\ncompute_efficiency = 0.5\n"
                           "kernel_overhead_us = 1.25\nallreduce_latency_us = 3\n");
  EXPECT_DOUBLE_EQ(roofline(hw).params().compute_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(roofline(hw).params().kernel_overhead_us, 1.25);
  EXPECT_DOUBLE_EQ(roofline(hw).params().allreduce_latency_us, 3);
  EXPECT_THROW(build_hw(hw_config("llama-3-8b", "h100-sxm") + "[cost_model]\ncompute_efficiency = 0\n"),
               core::ConfigError);
  EXPECT_THROW(build_hw(hw_config("llama-3-8b", "h100-sxm") + "[cost_model]\nmemory_efficiency = 1.5\n"),
               core::ConfigError);
}

TEST(RooflineCostModelTest, EmptyShapeCostsNothing) {
  const auto hw = build_hw(hw_config("llama-3-8b", "h100-sxm"));
  const StepCost c = hw.cost->step(BatchShape{});
  EXPECT_EQ(c.seconds, 0);
  EXPECT_EQ(c.flops, 0);
  EXPECT_EQ(c.bytes, 0);
  EXPECT_TRUE(roofline(hw).breakdown(BatchShape{}).empty());
}

TEST(RooflineCostModelTest, UnusableTensorParallelismIsRejected) {
  const auto hw = build_hw(hw_config("llama-3-8b", "h100-sxm"));
  EXPECT_THROW(RooflineCostModel(hw.cost->model(), hw.cost->gpu(), 3), core::Error);
}

TEST(RooflineCostModelTest, BreakdownAddsUpToStep) {
  const auto hw = build_hw(hw_config("llama-3-70b", "h100-sxm"), 4);
  const BatchShape s = mix(prefill(700, 300), decode(40, 900));
  const StepCost c = hw.cost->step(s);
  StepCost sum;
  for (const auto& op : roofline(hw).breakdown(s)) {
    sum.seconds += op.seconds;
    sum.flops += op.flops;
    sum.bytes += op.bytes;
  }
  EXPECT_DOUBLE_EQ(sum.seconds, c.seconds);
  EXPECT_DOUBLE_EQ(sum.flops, c.flops);
  EXPECT_DOUBLE_EQ(sum.bytes, c.bytes);
}

TEST(RooflineCostModelTest, Batch1DecodeOfSeventyBIsWeightBound) {
  // 70B on one H100 does not fit in memory, but the cost model does not care.
  const auto hw = build_hw(hw_config("llama-3-70b", "h100-sxm"));
  const StepCost c = hw.cost->step(decode(1, 512));
  const ModelSpec& m = hw.cost->model();
  const double floor = weight_read_seconds(m.decode_weight_bytes(), hw.gpu->hbm_bandwidth);
  const double expected = floor / roofline(hw).params().memory_efficiency;
  EXPECT_GE(c.seconds, 41e-3);
  EXPECT_GE(c.seconds, floor);
  EXPECT_NEAR(c.seconds / expected, 1.0, 0.2) << c.seconds;
  // Every weight is read once: the group's bytes are the decode weight bytes plus a little.
  EXPECT_NEAR(c.bytes / m.decode_weight_bytes(), 1.0, 0.01);
  EXPECT_LT(step_mfu(c, 1), 0.01);  // decode MFU "0.3%"
  EXPECT_GT(step_mbu(c, *hw.gpu, 1), 0.75);
}

// Issue 11: fp8 GEMMs run at the fp8 peak, so MFU compares them with it. With every efficiency at
// 1 and no overheads, a long fp8 prefill of Llama-3-70B is nearly all GEMMs at their peak: MFU just
// under 1 (attention and the 16-bit LM head at the 16-bit peak). Against the 16-bit peak alone the
// same step would claim nearly 2.
TEST(RooflineCostModelTest, MfuOfAnFp8ModelIsAgainstTheFp8Peak) {
  const auto hw = build_hw(hw_config("llama-3-70b", "h100-sxm", "weight_dtype = \"fp8\"\n") +
                           "[cost_model]\ncompute_efficiency = 1\nmemory_efficiency = 1\nelementwise_efficiency = 1\n"
                           "attention_compute_efficiency = 1\nattention_memory_efficiency = 1\n"
                           "kernel_overhead_us = 0\n");
  const StepCost c = hw.cost->step(prefill(8192));
  EXPECT_LE(step_mfu(c, 1), 1.0);
  EXPECT_GT(step_mfu(c, 1), 0.85);  // norms, RoPE and adds take the rest
  EXPECT_GT(c.flops / (c.seconds * hw.gpu->peak_flops), 1.5) << "the 16-bit-peak figure this replaces";
}

TEST(RooflineCostModelTest, PrefillOfTwoThousandTokensIsComputeBound) {
  const auto hw = build_hw(hw_config("llama-3-8b", "h100-sxm"));
  const ModelSpec& m = hw.cost->model();
  const double eff = roofline(hw).params().compute_efficiency;
  const BatchShape s = prefill(2000);
  const StepCost c = hw.cost->step(s);
  const auto ops = roofline(hw).breakdown(s);

  // 32.1 TFLOP x (share of parameters in the transformer blocks: the embedding is a lookup and the
  // LM head runs for one row) at the effective peak.
  const double ratio = static_cast<double>(m.num_layers) * m.layer_params() / m.param_count();
  const double gemm_expected = 2000 * m.flops_per_token() * ratio / (hw.gpu->peak_flops * eff);
  EXPECT_NEAR(sum_ops(ops, kGemms) / gemm_expected, 1.0, 0.02);
  // Norms, RoPE, SiLU and adds, attention and the overheads come on top: measured kernels make the
  // elementwise ones about a fifth of the GEMM time at prefill sizes (see the calibration table).
  EXPECT_GE(c.seconds, gemm_expected);
  EXPECT_LE(c.seconds, 1.35 * gemm_expected);
  EXPECT_GT(step_mfu(c, 1), 0.5);

  // Useful FLOPs: the block matmuls for every token, causal attention, one LM-head row.
  const double pairs = 2000.0 * 2001.0 / 2.0;
  const double attention = 4.0 * 128 * 32 * pairs * 32;
  EXPECT_NEAR(find_op(ops, "attention_prefill")->flops, attention, 1.0);
  const double expected_flops = 2000 * 2 * (m.num_layers * (m.layer_params() - 2.0 * m.hidden_size)) +
                                attention + 2 * m.lm_head_params();
  EXPECT_NEAR(c.flops / expected_flops, 1.0, 1e-9);
}

TEST(RooflineCostModelTest, IdealMachineMeetsTheSeedsBounds) {
  // With every efficiency 1 and no overheads the model collapses to the notes' bounds.
  const std::string ideal =
      "[cost_model]\nkind = \"roofline\"\ncompute_efficiency = 1\nmemory_efficiency = 1\n"
      "elementwise_efficiency = 1\nattention_compute_efficiency = 1\nattention_memory_efficiency = 1\n"
      "kernel_overhead_us = 0\n";
  const auto hw = build_hw(hw_config("teaching-7b", "reference") + ideal);
  const ModelSpec& m = hw.cost->model();
  const StepCost d = hw.cost->step(decode(1, 1));
  EXPECT_NEAR(d.seconds / weight_read_seconds(m.decode_weight_bytes(), 2e12), 1.0, 0.001);
  EXPECT_NEAR(1.0 / d.seconds, 151, 1);  // 13.2 GB of Llama-2-7B weights; "143" is for 14 GB
  const StepCost p = hw.cost->step(prefill(4096));
  EXPECT_GE(p.seconds, p.flops / 312e12);
  EXPECT_NEAR(p.seconds / (p.flops / 312e12), 1.0, 0.1);
}

TEST(RooflineCostModelTest, TensorParallelismHalvesWeightsAndAddsAllReduce) {
  const auto tp1 = build_hw(hw_config("llama-3-8b", "h100-sxm"), 1);
  const auto tp2 = build_hw(hw_config("llama-3-8b", "h100-sxm"), 2);
  const ModelSpec& m = tp1.cost->model();
  EXPECT_NEAR(weight_bytes_per_gpu(m, 2) / weight_bytes_per_gpu(m, 1), 0.5, 1e-4);

  const BatchShape s = decode(8, 1000);
  const auto ops1 = roofline(tp1).breakdown(s);
  const auto ops2 = roofline(tp2).breakdown(s);
  EXPECT_EQ(find_op(ops1, "all_reduce"), nullptr);
  const OperatorCost* ar = find_op(ops2, "all_reduce");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->count, 2 * 32 + 1);
  EXPECT_GT(ar->seconds, 65 * 10e-6);
  // Per GPU, the weight-bound GEMMs take about half as long (their kernel overhead does not halve).
  const double g1 = sum_ops(ops1, kGemms), g2 = sum_ops(ops2, kGemms);
  EXPECT_NEAR(g2 / g1, 0.5, 0.03);
  // The group moves the same bytes and does the same useful work.
  const StepCost c1 = tp1.cost->step(s), c2 = tp2.cost->step(s);
  EXPECT_NEAR(c2.bytes / c1.bytes, 1.0, 0.01);
  EXPECT_DOUBLE_EQ(c2.flops, c1.flops);
  EXPECT_LT(c2.seconds, c1.seconds);
  EXPECT_GT(c2.seconds, 0.5 * c1.seconds);
}

TEST(RooflineCostModelTest, ReplicatedKvHeadsAreReadOnEveryGpu) {
  const auto tp8 = build_hw(hw_config("llama-3-70b", "h100-sxm"), 8);
  const auto tp16 = build_hw(hw_config("llama-3-70b", "h100-sxm"), 16);
  const BatchShape s = decode(64, 4000);
  const double a8 = find_op(roofline(tp8).breakdown(s), "attention_decode")->seconds;
  const double a16 = find_op(roofline(tp16).breakdown(s), "attention_decode")->seconds;
  EXPECT_NEAR(a16 / a8, 1.0, 0.05);  // one KV head per GPU either way
}

TEST(RooflineCostModelTest, DecodeTimeGrowsWithContext) {
  const auto hw = build_hw(hw_config("llama-3-8b", "h100-sxm"));
  const RooflineParams& p = roofline(hw).params();
  double last = 0;
  for (int64_t ctx : {16, 512, 2048, 8192, 32768}) {
    const double t = hw.cost->step(decode(32, ctx)).seconds;
    EXPECT_GT(t, last) << ctx;
    last = t;
  }
  // The growth is the extra KV read at the attention's bandwidth: 32 layers x 8 heads x 128 x 2 x 2.
  const double dt = hw.cost->step(decode(32, 4096)).seconds - hw.cost->step(decode(32, 1024)).seconds;
  const double kv_bytes = 32.0 * 3072 * 32 * 8 * 128 * 2 * 2;
  EXPECT_NEAR(dt, kv_bytes / (hw.gpu->hbm_bandwidth * p.attention_memory_efficiency), 1e-12);
}

TEST(RooflineCostModelTest, ChunkedPrefillPaysForItsContext) {
  const auto hw = build_hw(hw_config("llama-3-8b", "h100-sxm"));
  const StepCost fresh = hw.cost->step(prefill(512, 0, false));
  const StepCost late = hw.cost->step(prefill(512, 6000, false));
  EXPECT_GT(late.seconds, fresh.seconds);
  EXPECT_GT(late.flops, fresh.flops);
  // Only a completing chunk runs the LM head.
  const auto ops = roofline(hw).breakdown(prefill(512, 0, false));
  EXPECT_EQ(find_op(ops, "lm_head"), nullptr);
  EXPECT_NE(find_op(roofline(hw).breakdown(prefill(512)), "lm_head"), nullptr);
}

TEST(RooflineCostModelTest, MixedBatchCostsAtLeastEachPart) {
  const auto hw = build_hw(hw_config("llama-3-8b", "h100-sxm"));
  const BatchShape p = prefill(512, 1024), d = decode(64, 1500);
  const StepCost cp = hw.cost->step(p), cd = hw.cost->step(d), cm = hw.cost->step(mix(p, d));
  EXPECT_GE(cm.seconds, cp.seconds);
  EXPECT_GE(cm.seconds, cd.seconds);
  EXPECT_LE(cm.seconds, cp.seconds + cd.seconds);  // one weight read and one overhead serve both
  EXPECT_NEAR(cm.flops, cp.flops + cd.flops, 1e-6 * cm.flops);
}

TEST(RooflineCostModelTest, MonotonicInTokens) {
  const auto hw = build_hw(hw_config("llama-3-70b", "a100-80gb-sxm"), 4);
  StepCost last;
  for (int64_t t = 1; t <= 16384; t = t < 8 ? t + 1 : t * 3 / 2) {
    const StepCost c = hw.cost->step(prefill(t));
    EXPECT_GE(c.seconds, last.seconds) << t;
    EXPECT_GT(c.flops, last.flops) << t;
    EXPECT_GT(c.bytes, last.bytes) << t;
    last = c;
  }
  last = {};
  for (int64_t b = 1; b <= 1024; b *= 2) {
    const StepCost c = hw.cost->step(decode(b, 1000));
    EXPECT_GT(c.seconds, last.seconds) << b;
    last = c;
  }
}

TEST(RooflineCostModelTest, OverridingNumLayersHalvesLayerTime) {
  const auto full = build_hw(hw_config("llama-3-8b", "h100-sxm"));
  const auto half = build_hw(hw_config("llama-3-8b", "h100-sxm", "num_layers = 16\n"));
  const BatchShape s = mix(prefill(1000, 200), decode(16, 700));
  auto layer_seconds = [&](const hwtest::Hw& hw) {
    double sum = 0;
    for (const auto& op : roofline(hw).breakdown(s))
      if (op.count % hw.cost->model().num_layers == 0 && op.count > 1) sum += op.seconds;
    return sum;
  };
  EXPECT_NEAR(layer_seconds(half) / layer_seconds(full), 0.5, 1e-12);
  EXPECT_LT(half.cost->step(s).seconds, full.cost->step(s).seconds);
}

// The constant-efficiency defaults against real H100 kernel timings: Vidur's mlp.csv
// (shared/reference-data/operator-profiles) times one layer's operators, TP 1, fp16. Per token
// count, the layer's predicted time (attention aside) is within 32% of the measured one (the worst,
// 256 tokens, is a cuBLAS kernel switch the smooth roofline does not follow: 197 vs 285 us), within
// 10% on average over 1 to 4,096 tokens, and each GEMM within 22% from 512 tokens up (the QKV projection at 512 tokens: 71 vs 90 us). The bounds sit
// a little above the figures, so a change that makes the defaults worse fails here.
TEST(RooflineCostModelTest, DefaultsAgainstMeasuredH100Llama2_7bLayers) {
  const std::string path = servesim::testing::shared_file(
      "reference-data/operator-profiles/compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv");
  std::ifstream in(path);
  ASSERT_TRUE(in) << "reference data missing: " << path << " (../shared beside the checkout)";

  auto split = [](const std::string& line) {
    std::vector<std::string> out;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) out.push_back(cell);
    return out;
  };
  std::string line;
  std::getline(in, line);
  const auto header = split(line);
  auto column = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  };
  const int tokens_col = column("num_tokens"), tp_col = column("num_tensor_parallel_workers");
  ASSERT_GE(tokens_col, 0);
  ASSERT_GE(tp_col, 0);
  const std::vector<std::string> op_names = {"input_layernorm", "attn_pre_proj", "attn_rope",
                                             "attn_post_proj",  "mlp_up_proj",   "mlp_act",
                                             "mlp_down_proj",   "add"};
  const std::vector<std::string> gemms = {"attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj"};
  std::map<int64_t, std::vector<std::string>> rows;  // first row per token count, TP 1
  while (std::getline(in, line)) {
    const auto cells = split(line);
    if (static_cast<int>(cells.size()) != static_cast<int>(header.size())) continue;
    if (cells[tp_col] != "1") continue;
    rows.emplace(std::stoll(cells[tokens_col]), cells);
  }

  const auto hw = build_hw(hw_config("llama-2-7b", "h100-sxm"));
  double error_sum = 0;
  int counted = 0;
  for (int64_t tokens : {1, 16, 64, 128, 256, 512, 1024, 2048, 4096}) {
    SCOPED_TRACE(std::to_string(tokens) + " tokens");
    const auto it = rows.find(tokens);
    ASSERT_NE(it, rows.end());
    const auto ops = roofline(hw).breakdown(prefill(tokens, 0, false));
    double predicted_sum = 0, measured_sum = 0;
    for (const auto& name : op_names) {
      const OperatorCost* op = find_op(ops, name);
      ASSERT_NE(op, nullptr) << name;
      const double predicted = op->seconds / static_cast<double>(op->count) * 1e6;
      const int col = column("time_stats." + name + ".median");
      ASSERT_GE(col, 0) << name;
      const double measured = std::stod(it->second[col]) * 1e3;  // ms -> us
      const int per_layer = name == "add" ? 2 : 1;
      predicted_sum += per_layer * predicted;
      measured_sum += per_layer * measured;
      if (tokens >= 512 && std::find(gemms.begin(), gemms.end(), name) != gemms.end())
        EXPECT_NEAR(predicted / measured, 1.0, 0.22) << name << ": " << predicted << " vs " << measured << " us";
    }
    const double error = std::abs(predicted_sum / measured_sum - 1.0);
    EXPECT_LE(error, 0.32) << predicted_sum << " vs " << measured_sum << " us";
    error_sum += error;
    ++counted;
  }
  EXPECT_LE(error_sum / counted, 0.10);
}

// ---- hybrid and sparse attention ----------------------------------------------------------------

TEST(RooflineHybridCostTest, CappedPairsByHand) {
  // Queries at positions 1..5 with at most 3 keys each: 1 + 2 + 3 + 3 + 3.
  EXPECT_EQ(capped_pairs(0, 5, 3), 12);
  // A chunk of 2 after 4 cached tokens: positions 5 and 6, 3 keys each.
  EXPECT_EQ(capped_pairs(4, 2, 3), 6);
  EXPECT_EQ(capped_pairs(0, 1000, 1 << 20), 1000 * 1001 / 2);  // a cap beyond the context: causal
  BatchShape s;
  add_prefill_chunk(s, {128, 0}, 100, 50, true);
  EXPECT_EQ(s.prefill_attention_pairs, 50 * 100 + 50 * 51 / 2);
  EXPECT_EQ(s.prefill_window_pairs, capped_triangle_for_test(150, 128) - capped_triangle_for_test(100, 128));
  EXPECT_EQ(s.prefill_window_context_tokens, 100);  // min(100, 127)
  EXPECT_EQ(s.prefill_sparse_pairs, 0);
  add_decodes(s, {128, 2048}, 3, 1000);
  EXPECT_EQ(s.decode_window_context_tokens, 3 * 128);
  EXPECT_EQ(s.decode_sparse_context_tokens, 3 * 1000);
}

// DeepSeek-V3.2, one sequence decoding at a context of N = 10,000 tokens, top-k K = 2048, TP 1.
// Attention reads the K selected tokens' latents (576 bf16 values, 1152 bytes) and writes the new
// token's; the indexer reads all N tokens' index keys (128 fp8 + an fp32 scale = 132 bytes), writes
// the new one's, reads the query (64 heads x 128 fp8 + 64 fp32 weights = 8448 bytes), writes and
// reads N fp32 scores and writes and reads K int32 indices. Every layer, 61 of them.
TEST(RooflineHybridCostTest, SparseAttentionBytesAreTopKReadsPlusIndexerReads) {
  const auto hw = build_hw(hw_config("deepseek-v3.2", "h200"));
  constexpr double N = 10000, K = 2048, layers = 61;
  BatchShape s;
  add_decodes(s, hw.model->attention_limits(), 1, static_cast<int64_t>(N));
  const auto ops = roofline(hw).breakdown(s);
  const OperatorCost* attn = find_op(ops, "attention_decode_sparse");
  const OperatorCost* indexer = find_op(ops, "indexer_decode");
  ASSERT_TRUE(attn && indexer);
  EXPECT_EQ(find_op(ops, "attention_decode"), nullptr);  // no full-attention layer
  const double q_o = 128.0 * (192 + 128) * 2;            // the query in, the output out (bf16)
  EXPECT_DOUBLE_EQ(attn->bytes, layers * (K * 1152 + 1152 + q_o));
  EXPECT_DOUBLE_EQ(indexer->bytes, layers * (132 * (N + 1) + 8448 + 8 * N + 8 * K));
  // FLOPs: the absorbed form per selected key, 2 x (576 + 512) per head; the indexer's fp8 dot
  // products and weighted sum per key, 2 x 64 x 128 + 2 x 64.
  EXPECT_DOUBLE_EQ(attn->flops, layers * 2 * (576 + 512) * 128 * K);
  EXPECT_DOUBLE_EQ(indexer->flops, layers * (2 * 64 * 128 + 2 * 64) * N);
  EXPECT_DOUBLE_EQ(indexer->peak_flop_seconds, indexer->flops / 1979e12);  // at the fp8 peak
  // Dense MLA (DeepSeek-V3) reads every token's latent: at this context 3.0x the sparse layers'
  // attention and indexer bytes together.
  const auto v3 = build_hw(hw_config("deepseek-v3", "h200"));
  const auto dense_ops = roofline(v3).breakdown(decode(1, 10000));
  const OperatorCost* dense = find_op(dense_ops, "attention_decode");
  EXPECT_DOUBLE_EQ(dense->bytes, layers * (N * 1152 + 1152 + q_o));
  EXPECT_NEAR(dense->bytes / (attn->bytes + indexer->bytes), 3.0, 0.01);
  // Within the top-k every key is selected: the sparse layers read what dense ones do.
  BatchShape short_ctx;
  add_decodes(short_ctx, hw.model->attention_limits(), 1, 1000);
  EXPECT_DOUBLE_EQ(find_op(roofline(hw).breakdown(short_ctx), "attention_decode_sparse")->bytes,
                   find_op(roofline(v3).breakdown(decode(1, 1000)), "attention_decode")->bytes);
}

// gpt-oss-120b: two sequences decoding at a context of 1000. The full layers read 1000 keys each,
// the window layers 128; both write the new token's K and V (2048 bytes a layer) and read Q and
// write O (2 x 64 heads x 64 x 2 bytes).
TEST(RooflineHybridCostTest, WindowLayersReadTheWindowOnly) {
  const auto hw = build_hw(hw_config("gpt-oss-120b", "h200"));
  BatchShape s;
  add_decodes(s, hw.model->attention_limits(), 2, 1000);
  const auto ops = roofline(hw).breakdown(s);
  const double q_o = 2.0 * 64 * 64 * 2;
  EXPECT_DOUBLE_EQ(find_op(ops, "attention_decode")->bytes, 18 * (2048.0 * (2000 + 2) + q_o * 2));
  EXPECT_DOUBLE_EQ(find_op(ops, "attention_decode_window")->bytes, 18 * (2048.0 * (256 + 2) + q_o * 2));
  // Prefill of 1000 tokens: the window layers score min(position, 128) keys per query.
  BatchShape p;
  add_prefill_chunk(p, hw.model->attention_limits(), 0, 1000, true);
  const auto pre = roofline(hw).breakdown(p);
  const double window_pairs = 128.0 * 129 / 2 + 872.0 * 128;
  EXPECT_DOUBLE_EQ(find_op(pre, "attention_prefill_window")->flops, 18 * 4.0 * 64 * 64 * window_pairs);
  EXPECT_DOUBLE_EQ(find_op(pre, "attention_prefill")->flops, 18 * 4.0 * 64 * 64 * (1000.0 * 1001 / 2));
}

// Qwen3-Next, one sequence: a Gated DeltaNet layer reads and writes its state once per token
// (1,097,728 bytes at TP 1), whatever the context; only the 12 full layers' reads grow with it.
TEST(RooflineHybridCostTest, StateLayersCostTheSameAtAnyContext) {
  const auto hw = build_hw(hw_config("qwen3-next-80b-a3b", "h200"));
  const auto at = [&](int64_t context) {
    BatchShape s;
    add_decodes(s, hw.model->attention_limits(), 1, context);
    return s;
  };
  const auto short_ops = roofline(hw).breakdown(at(10));
  const auto long_ops = roofline(hw).breakdown(at(100000));
  const OperatorCost* lin = find_op(short_ops, "linear_attention_decode");
  ASSERT_TRUE(lin);
  const double token_bytes = (2.0 * 16 * 128 + 2.0 * 32 * 128 + 2.0 * 32) * 2;  // q, k, v, gates, out
  EXPECT_DOUBLE_EQ(lin->bytes, 36 * (2 * 1097728.0 + token_bytes));
  EXPECT_DOUBLE_EQ(find_op(long_ops, "linear_attention_decode")->bytes, lin->bytes);
  EXPECT_DOUBLE_EQ(lin->flops, 36 * 6.0 * 128 * 128 * 32);  // S^T k, the update, S^T q per value head
  EXPECT_DOUBLE_EQ(roofline(hw).step(at(100000)).bytes - roofline(hw).step(at(10)).bytes, 12 * 2048.0 * 99990);
}

TEST(RooflineHybridCostTest, MemoisedDecodeStepsMatchTheBreakdownBitForBit) {
  for (const char* name : {"gpt-oss-120b", "qwen3-next-80b-a3b", "deepseek-v3.2"}) {
    const auto hw = build_hw(hw_config(name, "h200"), 8);
    for (int64_t context : {100, 5000, 60000}) {
      BatchShape s;
      add_decodes(s, hw.model->attention_limits(), 16, context);
      double seconds = 0, bytes = 0, flops = 0;
      for (const auto& op : roofline(hw).breakdown(s)) {
        seconds += op.seconds;
        bytes += op.bytes;
        flops += op.flops;
      }
      const StepCost first = hw.cost->step(s), again = hw.cost->step(s);  // the second from the memo
      EXPECT_EQ(first.seconds, seconds) << name << " " << context;
      EXPECT_EQ(again.seconds, seconds) << name << " " << context;
      EXPECT_EQ(again.bytes, bytes);
      EXPECT_EQ(again.flops, flops);
    }
  }
}

TEST(RooflineHybridCostTest, Nvfp4RunsAtTheFp4PeakOnBlackwell) {
  const auto fp8 = build_hw(hw_config("llama-3-70b", "b200", "weight_dtype = \"fp8\"\n"));
  const auto fp4 = build_hw(hw_config("llama-3-70b", "b200", "weight_dtype = \"nvfp4\"\n"));
  const auto p = prefill(8192);
  const auto ops8 = roofline(fp8).breakdown(p), ops4 = roofline(fp4).breakdown(p);
  const OperatorCost* up8 = find_op(ops8, "mlp_up_proj");
  const OperatorCost* up4 = find_op(ops4, "mlp_up_proj");
  EXPECT_DOUBLE_EQ(up4->flops, up8->flops);
  EXPECT_DOUBLE_EQ(up4->peak_flop_seconds, up4->flops / 9000e12);
  EXPECT_NEAR(up8->seconds / up4->seconds, 2.0, 0.02);  // compute-bound: twice the tensor rate
  // Decode streams 4.5 bits per weight instead of 8.
  EXPECT_NEAR(roofline(fp4).step(decode(1, 100)).bytes / roofline(fp8).step(decode(1, 100)).bytes, 0.5625, 0.05);
  // gpt-oss's mxfp4 experts stream 4.25 bits and multiply at the 16-bit rate (weight-only).
  const auto oss = build_hw(hw_config("gpt-oss-120b", "b200"));
  const auto oss_ops = roofline(oss).breakdown(p);
  const OperatorCost* moe = find_op(oss_ops, "moe_up_proj");
  EXPECT_DOUBLE_EQ(moe->peak_flop_seconds, moe->flops / 2250e12);
}

}  // namespace
}  // namespace servesim::hwmodels
