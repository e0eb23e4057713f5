// The lecture notes' worked numbers (shared/seeds) as test vectors, each to the notes' rounding.

#include "hwmodels/roofline.h"

#include <gtest/gtest.h>

#include "tests/hwmodels/hw_test_util.h"

namespace servesim::hwmodels {
namespace {

ModelSpec model(const std::string& kind, const std::string& extra = "") {
  const core::Params root = hwtest::parse_hw(hwtest::hw_config(kind, "h100-sxm", extra));
  return *model_registry().make(root.section("model"));
}

GpuSpec gpu(const std::string& kind) {
  const core::Params root = hwtest::parse_hw(hwtest::hw_config("llama-3-8b", kind));
  return *gpu_registry().make(root.section("gpu"));
}

// ---- KV cache (seed 002, Derivation 10.1 and its exercise) -----------------------------------

TEST(SeedVectorsTest, KvCacheOfTheSevenBModel) {
  const ModelSpec m = model("teaching-7b");
  EXPECT_DOUBLE_EQ(m.kv_bytes_per_token(), 524288.0);          // 2 x 32 x 32 x 128 x 2
  EXPECT_NEAR(kv_cache_bytes(m, 4096, 1), 2.15e9, 0.005e9);    // "2.15 GB"
  EXPECT_NEAR(kv_cache_bytes(m, 4096, 8), 17e9, 0.5e9);        // "at batch 8 it becomes 17 GB"
  EXPECT_GT(kv_cache_bytes(m, 4096, 8), 14e9);                 // ... and exceeds the 14 GB of weights
}

TEST(SeedVectorsTest, GroupedQueryAttentionQuartersTheCache) {
  const ModelSpec m = model("teaching-7b", "num_kv_heads = 8\n");
  EXPECT_NEAR(kv_cache_bytes(m, 4096, 1), 0.54e9, 0.005e9);  // "falls ... to 0.54 GB"
}

TEST(SeedVectorsTest, KvCacheOfTheSeventyBModel) {
  const ModelSpec m = model("llama-2-70b");
  EXPECT_DOUBLE_EQ(m.kv_bytes_per_token(), 327680.0);  // 2 x 80 x 8 x 128 x 2
  // "At batch 4, what context length fills 40 GB?  ~30,500 tokens" (30,517.6 unrounded).
  EXPECT_NEAR(kv_tokens_that_fit(m, 40e9, 4), 30500, 50);
  EXPECT_NEAR(kv_tokens_that_fit(m, 40e9, 4), 30517, 1);
}

// ---- Roofline and the decode speed limit (seeds 000 and 002) ---------------------------------

TEST(SeedVectorsTest, RidgePoints) {
  EXPECT_DOUBLE_EQ(gpu("reference").ridge_point(), 156.0);  // 312e12 / 2e12
  EXPECT_NEAR(gpu("h100-sxm").ridge_point(), 295, 0.5);     // 989e12 / 3.35e12
  // Batch-1 decode at 1 FLOP/byte reaches 3.35 TFLOP/s on an H100, "about 0.3%" of peak.
  const GpuSpec h100 = gpu("h100-sxm");
  EXPECT_DOUBLE_EQ(attainable_flops(h100.peak_flops, h100.hbm_bandwidth, 1.0), 3.35e12);
  EXPECT_NEAR(attainable_flops(h100.peak_flops, h100.hbm_bandwidth, 1.0) / h100.peak_flops, 0.003,
              0.0005);
  EXPECT_DOUBLE_EQ(attainable_flops(h100.peak_flops, h100.hbm_bandwidth, 1000.0), h100.peak_flops);
}

TEST(SeedVectorsTest, DecodeSpeedLimits) {
  // 7B in half precision = 14 GB, read once per token at 2 TB/s: "about 143 tokens per second".
  EXPECT_NEAR(decode_ceiling_tokens_per_s(14e9, gpu("reference").hbm_bandwidth), 143, 0.5);
  // 70B fp16 = 140 GB at 3.35 TB/s: "41.8 ms", "a single-request ceiling of ~24 tok/s".
  EXPECT_NEAR(weight_read_seconds(140e9, 3.35e12), 41.8e-3, 0.05e-3);
  EXPECT_NEAR(decode_ceiling_tokens_per_s(140e9, 3.35e12), 24, 0.5);
  // Kimi K3: 16 routed experts x 92 layers x 17.5 MB "~26 GB per step", ">= 7.8 ms", "<= 129 tok/s".
  EXPECT_NEAR(17.5e6 * 16 * 92, 26e9, 0.3e9);
  EXPECT_NEAR(weight_read_seconds(26e9, 3.35e12), 7.8e-3, 0.05e-3);
  EXPECT_NEAR(decode_ceiling_tokens_per_s(26e9, 3.35e12), 129, 0.5);
}

TEST(SeedVectorsTest, BatchedDecodeIntensityTable) {
  // Seed 000's table for a 70B GQA model (P = 70e9, kv = 327,680 B/token).
  struct Row {
    int64_t context;
    double b1, b32, b256, saturated;
  };
  const Row rows[] = {
      {512, 1.0, 30.8, 195.9, 834.5},  {2048, 1.0, 27.7, 115.0, 208.6}, {8192, 1.0, 19.8, 43.3, 52.2},
      {32768, 0.9, 9.3, 12.4, 13.0}, {131072, 0.8, 3.0, 3.2, 3.3},
  };
  const double p = 70e9, kv = 327680;
  // 0.05 is the table's one-decimal rounding; the L=2048, B=256 entry is 114.94 unrounded.
  const double tol = 0.07;
  for (const Row& r : rows) {
    SCOPED_TRACE(r.context);
    EXPECT_NEAR(decode_intensity(p, 1, r.context, kv), r.b1, tol);
    EXPECT_NEAR(decode_intensity(p, 32, r.context, kv), r.b32, tol);
    EXPECT_NEAR(decode_intensity(p, 256, r.context, kv), r.b256, tol);
    EXPECT_NEAR(saturated_decode_intensity(p, r.context, kv), r.saturated, tol);
  }
  // KV reads overtake weight reads at B = 2P / (L kv): 834.5 at L = 512.
  EXPECT_NEAR(decode_crossover_batch(p, 512, kv), 834.5, 0.05);
}

// ---- Llama-3-8B prefill and decode accounting (seed 001) ------------------------------------

TEST(SeedVectorsTest, Llama3EightBCounts) {
  const ModelSpec m = model("llama-3-8b");
  EXPECT_NEAR(m.param_count(), 8.03e9, 0.005e9);
  EXPECT_NEAR(m.flops_per_token(), 16.1e9, 0.05e9);                    // "16.1 GFLOP per token"
  EXPECT_NEAR(prefill_flops(m.param_count(), 2000), 32.1e12, 0.05e12);  // "32.1 TFLOP" for 2,000
  EXPECT_NEAR(static_cast<double>(m.hidden_size * m.intermediate_size), 58.7e6, 0.05e6);  // W_gate
  // Decode: "~15.0 GB (every weight, once; embedding is a lookup)", intensity "~= 1.07".
  EXPECT_NEAR(m.decode_weight_bytes(), 15.0e9, 0.05e9);
  EXPECT_NEAR(m.flops_per_token() / m.decode_weight_bytes(), 1.07, 0.005);
  // "~4.5 ms theoretical step" on an H100.
  EXPECT_NEAR(weight_read_seconds(m.decode_weight_bytes(), 3.35e12), 4.5e-3, 0.05e-3);
  // LM head "reading 1.05 GB", "7% of your entire per-token byte budget".
  const double lm_head_bytes = m.lm_head_params() * m.weight_bytes;
  EXPECT_NEAR(lm_head_bytes, 1.05e9, 0.005e9);
  EXPECT_NEAR(lm_head_bytes / m.decode_weight_bytes(), 0.07, 0.005);
  // Per-layer reads in the decode walk-through: o_proj "33 MB", gate/up/down "352 MB", embedding
  // row "8 KB".
  const double h = 4096, inter = 14336;
  EXPECT_NEAR(h * h * m.weight_bytes, 33.5e6, 0.5e6);
  EXPECT_NEAR(3 * h * inter * m.weight_bytes, 352e6, 1e6);
  EXPECT_DOUBLE_EQ(h * m.weight_bytes, 8192.0);
}

TEST(SeedVectorsTest, AttentionOvertakesMatmulsAtLongContext) {
  const ModelSpec m = model("llama-3-8b");
  EXPECT_NEAR(full_attention_flops(m, 2000), 2.1e12, 0.005e12);
  EXPECT_NEAR(full_attention_flops(m, 32000), 537e12, 0.5e12);
  EXPECT_NEAR(prefill_flops(m.param_count(), 32000), 514e12, 0.5e12);
  EXPECT_GT(full_attention_flops(m, 32000), prefill_flops(m.param_count(), 32000));
}

// ---- Prefill at scale and prefix caching (seed 000) ------------------------------------------

TEST(SeedVectorsTest, SeventyBPrefillAndPrefixHits) {
  // "prefilling 4,096 tokens of 70B costs 2PL ~ 573 TFLOP ~ 1.2 s ... at 50% MFU".
  EXPECT_NEAR(prefill_flops(70e9, 4096), 573e12, 0.5e12);
  EXPECT_NEAR(prefill_flops(70e9, 4096) / (0.5 * 990e12), 1.2, 0.05);
  // "A 10-point drop of h at L = 32K on a 70B model adds ~460 TFLOP ~ 0.9 s".
  const double extra = prefill_flops(70e9, 32768, 0.80) - prefill_flops(70e9, 32768, 0.90);
  EXPECT_NEAR(extra, 460e12, 2e12);
  EXPECT_NEAR(extra / (0.5 * 990e12), 0.9, 0.05);
}

// ---- Cost and utilisation -----------------------------------------------------------------------

TEST(SeedVectorsTest, CostPerMillionTokens) {
  EXPECT_NEAR(usd_per_million_tokens(2.0, 3000), 0.19, 0.005);  // "$0.19 per 1M output tokens"
}

TEST(SeedVectorsTest, TrainingMfu) {
  // "4200 x 6 x 7e9 = 1.76e14 FLOP/s = 176 TFLOP/s. Divided by 312: 56%."
  EXPECT_NEAR(4200 * 6 * 7e9, 176e12, 0.5e12);
  EXPECT_NEAR(training_mfu(4200, 7e9, gpu("reference").peak_flops), 0.56, 0.006);
  EXPECT_NEAR(mfu(176e12, 312e12), 0.564, 0.001);
  EXPECT_DOUBLE_EQ(mbu(2.68e12, 3.35e12), 0.8);
}

// ---- Tensor parallelism --------------------------------------------------------------------------

TEST(RooflineTpTest, UsableDegrees) {
  const ModelSpec m = model("llama-3-8b");
  for (int64_t tp : {1, 2, 4, 8, 16, 32}) EXPECT_EQ(tp_problem(m, tp), "") << tp;
}

TEST(RooflineTpTest, Problems) {
  const ModelSpec m = model("llama-3-8b");
  EXPECT_NE(tp_problem(m, 0).find("at least 1"), std::string::npos);
  EXPECT_NE(tp_problem(m, 3).find("does not divide the 32 attention heads of llama-3-8b"),
            std::string::npos)
      << tp_problem(m, 3);
  EXPECT_NE(tp_problem(m, 64).find("attention heads"), std::string::npos);

  ModelSpec odd_kv = m;  // 24 heads in 6 KV groups: tp 4 neither splits nor replicates them
  odd_kv.num_heads = 24;
  odd_kv.num_kv_heads = 6;
  odd_kv.intermediate_size = 12288;
  EXPECT_EQ(tp_problem(odd_kv, 3), "");
  EXPECT_EQ(tp_problem(odd_kv, 6), "");
  EXPECT_NE(tp_problem(odd_kv, 4).find("KV heads"), std::string::npos) << tp_problem(odd_kv, 4);

  ModelSpec narrow = m;
  narrow.intermediate_size = 1000;
  EXPECT_NE(tp_problem(narrow, 16).find("MLP width 1000"), std::string::npos) << tp_problem(narrow, 16);
}

TEST(RooflineTpTest, PerGpuShares) {
  const ModelSpec m = model("llama-3-70b");
  EXPECT_EQ(kv_heads_per_gpu(m, 1), 8);
  EXPECT_EQ(kv_heads_per_gpu(m, 4), 2);
  EXPECT_EQ(kv_heads_per_gpu(m, 16), 1);  // replicated: 2 GPUs hold each KV head
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_per_gpu(m, 1), m.kv_bytes_per_token());
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_per_gpu(m, 8), m.kv_bytes_per_token() / 8);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_per_gpu(m, 16), m.kv_bytes_per_token() / 8);

  EXPECT_NEAR(weight_bytes_per_gpu(m, 1), m.weight_bytes_total(), 1.0);
  const ModelSpec mha = model("llama-2-7b");
  EXPECT_NEAR(weight_bytes_per_gpu(mha, 2) / weight_bytes_per_gpu(mha, 1), 0.5, 1e-4);
  // Replicated KV projections make 16-way shards a little more than 1/16.
  EXPECT_GT(weight_bytes_per_gpu(m, 16), m.weight_bytes_total() / 16);
}

}  // namespace
}  // namespace servesim::hwmodels
