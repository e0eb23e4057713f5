// The lecture notes' worked numbers (shared/seeds) as test vectors, each to the notes' rounding,
// asserted through the code a simulation or `servesim estimate` runs: the model's KV bytes (what
// the replicas' caches and the KV transfers use), the run's KV capacity (run_simulation), the
// step cost model (StepCost and its breakdown), the estimate command's JSON, and the formulas
// estimate prints (hwmodels/roofline.h, each of them called by estimate). Where the notes round a
// model ("70B", "7B = 14 GB") the formula is checked with the notes' own inputs and the real
// model through the simulator's path, with the difference explained.
//
// Seed files: 000_b70ae9c30d4d6609 (the KV-cache spectrum, the roofline and the decode speed limit,
// batched decode, prefill at scale), 001_cd9a04b916c1e007 (the reference accelerator, the KV cache
// of a 7B and a 70B model, the decode ceiling, MFU), 002_19ec0f257919ca40 (Llama-3-8B prefill and
// decode accounting, attention at long context, Little's law).

#include "hwmodels/roofline.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "experiments/cli/cli.h"
#include "experiments/run.h"
#include "sim/core/config.h"
#include "tests/hwmodels/hw_test_util.h"
#include "tests/test_paths.h"

namespace servesim::hwmodels {
namespace {

using hwtest::find_op;

ModelSpec model(const std::string& kind, const std::string& extra = "") {
  const core::Params root = hwtest::parse_hw(hwtest::hw_config(kind, "h100-sxm", extra));
  return *model_registry().make(root.section("model"));
}

GpuSpec gpu(const std::string& kind) {
  const core::Params root = hwtest::parse_hw(hwtest::hw_config("llama-3-8b", kind));
  return *gpu_registry().make(root.section("gpu"));
}

// `servesim estimate ... --json`, parsed.
nlohmann::json estimate(std::vector<std::string> args) {
  args.insert(args.begin(), {"servesim", "estimate"});
  args.push_back("--json");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int code = experiments::run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  EXPECT_EQ(code, 0) << err.str();
  return nlohmann::json::parse(out.str());
}

// A roofline with every efficiency at 1 and no overheads: the notes' idealised machine.
const char* kIdeal =
    "[cost_model]\ncompute_efficiency = 1\nmemory_efficiency = 1\nelementwise_efficiency = 1\n"
    "attention_compute_efficiency = 1\nattention_memory_efficiency = 1\nkernel_overhead_us = 0\n"
    "allreduce_latency_us = 0\n";

// ---- KV cache (seed 001, the 7B and 70B examples; seed 000, the spectrum) ------------------------

TEST(SeedVectorsTest, KvCacheOfTheSevenBModel) {
  const ModelSpec m = model("teaching-7b");
  EXPECT_DOUBLE_EQ(m.kv_bytes_per_token(), 524288.0);  // 2 x 32 x 32 x 128 x 2
  // "Over the full context: 524,288 x 4096 = 2.15 GB"; at batch 8 "17 GB", more than the weights.
  const auto one = estimate({"--model", "teaching-7b", "--gpu", "reference", "--prompt", "4096"});
  EXPECT_NEAR(one["decode"]["kv_cache_gb"].get<double>(), 2.15, 0.005);
  const auto eight = estimate({"--model", "teaching-7b", "--gpu", "reference", "--prompt", "4096", "--batch", "8"});
  EXPECT_NEAR(eight["decode"]["kv_cache_gb"].get<double>(), 17.0, 0.5);
  EXPECT_GT(eight["decode"]["kv_cache_gb"].get<double>() * 1e9, m.weight_bytes_total());
}

TEST(SeedVectorsTest, GroupedQueryAttentionQuartersTheCache) {
  // H_kv = 8 instead of 32: "The cache falls by a factor of four, to 0.54 GB".
  const ModelSpec m = model("teaching-7b", "num_kv_heads = 8\n");
  EXPECT_DOUBLE_EQ(m.kv_bytes_per_token(), 524288.0 / 4);
  EXPECT_NEAR(kv_cache_bytes(m, 4096, 1), 0.54e9, 0.005e9);
}

// Seed 001's exercise: a 70B model (80 layers, 8 KV heads of 128, half precision) at batch 4: what
// context fills 40 GB? 40e9 / (4 x 327,680) = 30,517 tokens. Through the simulator: a GPU whose
// memory is the weights plus 40 GB, all of it usable, gives the run 40 GB of KV blocks.
TEST(SeedVectorsTest, KvCacheOfTheSeventyBModelThroughTheRunsCapacity) {
  const ModelSpec m = model("llama-2-70b");
  EXPECT_DOUBLE_EQ(m.kv_bytes_per_token(), 327680.0);  // 2 x 80 x 8 x 128 x 2
  EXPECT_NEAR(kv_tokens_that_fit(m.kv_bytes_per_token(), 40e9, 4), 30517, 1);
  const double memory_gib = (weight_bytes_per_gpu(m, 1) + 40e9) / kBytesPerGib;
  const core::Params config = core::parse_config(
      "[workload]\nkind = \"poisson\"\nrate = 1\nmax_requests = 1\n[workload.prompt]\nkind = \"fixed\"\n"
      "value = 10\n[workload.output]\nkind = \"fixed\"\nvalue = 2\n[model]\nkind = \"llama-2-70b\"\n"
      "[gpu]\nkind = \"h100-sxm\"\nmemory_gib = " + std::to_string(memory_gib) +
          "\n[cluster]\ngpu_memory_utilization = 1\nactivation_reserve_gib = 0\nblock_size = 16\n",
      "seed.toml", experiments::run_schema());
  const experiments::RunResult r = experiments::run_simulation(config, {});
  const double tokens_per_sequence = static_cast<double>(r.kv_blocks_per_replica * r.block_size) / 4.0;
  EXPECT_NEAR(tokens_per_sequence, 30500, 50);  // the notes' "~30,500"
  EXPECT_NEAR(tokens_per_sequence, 30517, 16);  // to within one block of 16 tokens
}

// Seed 000: "At L = 1,048,576, K3's state is ~27.2 GiB vs ~320 GiB for a GQA-70B-style model";
// K3's 24 Gated-MLA layers hold "27 KiB/token" (576 elements of 2 bytes per layer). The other
// 0.2 GiB is K3's fixed recurrent state, which needs state layers (not modelled here yet).
TEST(SeedVectorsTest, MillionTokenContextGqaVersusLatentCache) {
  constexpr double kTokens = 1048576, kGiB = 1024.0 * 1024 * 1024;
  EXPECT_NEAR(model("llama-2-70b").kv_bytes_per_token() * kTokens / kGiB, 320, 0.5);
  const ModelSpec latent = model("deepseek-v3", "num_layers = 24\ndense_layers = 3\nkv_dtype = \"bf16\"\n");
  EXPECT_DOUBLE_EQ(latent.kv_bytes_per_token(), 27.0 * 1024);
  EXPECT_NEAR(latent.kv_bytes_per_token() * kTokens / kGiB, 27.0, 1e-9);
}

// Seed 000: MLA stores "a low-rank 576-element latent ... about 9.3x under Llama-70B-GQA": 80 layers
// x 2 x 8 x 128 half-precision values against DeepSeek-V3's 61 layers x 576 values in fp8.
TEST(SeedVectorsTest, LatentAttentionCacheRatio) {
  const ModelSpec mla = model("deepseek-v3", "kv_dtype = \"fp8\"\n");
  EXPECT_DOUBLE_EQ(mla.kv_bytes_per_token(), 61.0 * 576);
  EXPECT_NEAR(model("llama-2-70b").kv_bytes_per_token() / mla.kv_bytes_per_token(), 9.3, 0.05);
}

// ---- Roofline and the decode speed limit (seeds 000, 001 and 002) ------------------------------

TEST(SeedVectorsTest, RidgePoints) {
  EXPECT_DOUBLE_EQ(estimate({"--model", "llama-3-8b", "--gpu", "reference", "--prompt", "8"})["ridge_point"], 156.0);
  EXPECT_NEAR(estimate({"--model", "llama-3-8b", "--gpu", "h100-sxm", "--prompt", "8"})["ridge_point"].get<double>(),
              295, 0.5);
  // Batch-1 decode at 1 FLOP/byte reaches 3.35 TFLOP/s on an H100, "about 0.3%" of its peak.
  const GpuSpec h100 = gpu("h100-sxm");
  EXPECT_DOUBLE_EQ(attainable_flops(h100.peak_flops, h100.hbm_bandwidth, 1.0), 3.35e12);
  EXPECT_NEAR(attainable_flops(h100.peak_flops, h100.hbm_bandwidth, 1.0) / h100.peak_flops, 0.003, 0.0005);
  EXPECT_DOUBLE_EQ(attainable_flops(h100.peak_flops, h100.hbm_bandwidth, 1000.0), h100.peak_flops);
}

TEST(SeedVectorsTest, DecodeSpeedLimits) {
  // Seed 001: 7B in half precision = 14 GB, read once per token at 2 TB/s: "about 143 tokens per
  // second".
  EXPECT_NEAR(decode_ceiling_tokens_per_s(14e9, gpu("reference").hbm_bandwidth), 143, 0.5);
  // Seed 000: 70B fp16 = 140 GB at 3.35 TB/s: "41.8 ms", "a single-request ceiling of ~24 tok/s".
  EXPECT_NEAR(weight_read_seconds(140e9, 3.35e12), 41.8e-3, 0.05e-3);
  EXPECT_NEAR(decode_ceiling_tokens_per_s(140e9, 3.35e12), 24, 0.5);
  // The same bound through the step cost model: Llama-2-70B's 138 GB read at full bandwidth (its
  // "70B" is 69.0e9 parameters, of which the 0.26e9 embedding rows are gathered, not read).
  const auto hw = hwtest::build_hw(hwtest::hw_config("llama-2-70b", "h100-sxm") + kIdeal);
  const StepCost step = hw.cost->step(hwtest::decode(1, 1));
  EXPECT_NEAR(step.seconds, 41.8e-3, 0.02 * 41.8e-3);
  EXPECT_GE(step.seconds, weight_read_seconds(hw.model->decode_weight_bytes(), 3.35e12));
  // Kimi K3: 16 routed experts x 92 layers x 17.5 MB "~26 GB per step", ">= 7.8 ms", "<= 129 tok/s".
  EXPECT_NEAR(17.5e6 * 16 * 92, 26e9, 0.3e9);
  EXPECT_NEAR(weight_read_seconds(26e9, 3.35e12), 7.8e-3, 0.05e-3);
  EXPECT_NEAR(decode_ceiling_tokens_per_s(26e9, 3.35e12), 129, 0.5);
}

TEST(SeedVectorsTest, BatchedDecodeIntensityTable) {
  // Seed 000's table for a 70B GQA model: P = 70e9 half-precision parameters (2P FLOPs per token
  // and 2P weight bytes), kv = 327,680 B/token.
  struct Row {
    int64_t context;
    double b1, b32, b256, saturated;
  };
  const Row rows[] = {
      {512, 1.0, 30.8, 195.9, 834.5},  {2048, 1.0, 27.7, 115.0, 208.6}, {8192, 1.0, 19.8, 43.3, 52.2},
      {32768, 0.9, 9.3, 12.4, 13.0}, {131072, 0.8, 3.0, 3.2, 3.3},
  };
  const double two_p = 2 * 70e9, kv = 327680;
  // 0.05 is the table's one-decimal rounding; the L=2048, B=256 entry is 114.94 unrounded.
  const double tol = 0.07;
  for (const Row& r : rows) {
    SCOPED_TRACE(r.context);
    EXPECT_NEAR(decode_intensity(two_p, two_p, 1, r.context, kv), r.b1, tol);
    EXPECT_NEAR(decode_intensity(two_p, two_p, 32, r.context, kv), r.b32, tol);
    EXPECT_NEAR(decode_intensity(two_p, two_p, 256, r.context, kv), r.b256, tol);
    EXPECT_NEAR(saturated_decode_intensity(two_p, r.context, kv), r.saturated, tol);
  }
  // KV reads overtake weight reads at B = 2P / (L kv): 834.5 at L = 512.
  EXPECT_NEAR(decode_crossover_batch(two_p, 512, kv), 834.5, 0.05);
  // Through estimate, Llama-2-70B at B = 32, L = 512: the table's 30.8, a little higher (30.9)
  // because its 0.26e9 embedding parameters are a gather, not a read.
  const auto j = estimate({"--model", "llama-2-70b", "--gpu", "h100-sxm", "--batch", "32", "--prompt", "512"});
  EXPECT_NEAR(j["decode"]["notes_intensity"].get<double>(), 30.8, 0.2);
  EXPECT_NEAR(j["decode"]["saturated_notes_intensity"].get<double>(), 834.5, 0.02 * 834.5);
}

// ---- Llama-3-8B prefill and decode accounting (seed 002) ------------------------------------

TEST(SeedVectorsTest, Llama3EightBCounts) {
  const ModelSpec m = model("llama-3-8b");
  EXPECT_NEAR(m.param_count(), 8.03e9, 0.005e9);
  EXPECT_NEAR(m.flops_per_token(), 16.1e9, 0.05e9);  // "16.1 GFLOP per token"
  // "32.1 TFLOP" for a 2,000-token prompt; W_gate "58.7 M parameters".
  const auto j = estimate({"--model", "llama-3-8b", "--gpu", "h100-sxm", "--prompt", "2000", "--context", "1"});
  EXPECT_NEAR(j["prefill"]["matmul_flops"].get<double>(), 32.1e12, 0.05e12);
  EXPECT_NEAR(static_cast<double>(m.hidden_size * m.intermediate_size), 58.7e6, 0.05e6);
  // Decode: "~15.0 GB (every weight, once; embedding is a lookup)", intensity "~= 1.07", "~4.5 ms
  // theoretical step" on an H100.
  EXPECT_NEAR(j["decode"]["weight_kv_bytes"].get<double>(), 15.0e9, 0.05e9);
  EXPECT_NEAR(j["decode"]["notes_intensity"].get<double>(), 1.07, 0.005);
  EXPECT_NEAR(j["decode"]["weight_floor_ms"].get<double>(), 4.5, 0.05);
  // The step cost model reads the same bytes: LM head "reading 1.05 GB", "7% of your entire
  // per-token byte budget"; o_proj "33 MB" and gate/up/down "352 MB" per layer; the embedding
  // gathers one "8 KB" row (and writes it as the first activation).
  const auto hw = hwtest::build_hw(hwtest::hw_config("llama-3-8b", "h100-sxm"));
  const auto ops = dynamic_cast<const RooflineCostModel&>(*hw.cost).breakdown(hwtest::decode(1, 1));
  const double layers = static_cast<double>(m.num_layers);
  EXPECT_NEAR(find_op(ops, "lm_head")->bytes, 1.05e9, 0.005e9);
  EXPECT_NEAR(find_op(ops, "lm_head")->bytes / j["decode"]["weight_kv_bytes"].get<double>(), 0.07, 0.005);
  EXPECT_NEAR(find_op(ops, "attn_post_proj")->bytes / layers, 33.5e6, 0.5e6);
  EXPECT_NEAR((find_op(ops, "mlp_up_proj")->bytes + find_op(ops, "mlp_down_proj")->bytes) / layers, 352e6, 1e6);
  EXPECT_DOUBLE_EQ(find_op(ops, "emb")->bytes, 2 * 8192.0);
}

// Seed 002: attention's 4 S^2 (heads x head_dim) x layers FLOPs: 2.1 TFLOP at 2,000 tokens and
// 537 TFLOP at 32,000, where the matmuls' 2PL is 514. That count is a full S x S score matrix; the
// simulator charges a causal kernel's S(S+1)/2 query-key pairs, half of it, so at 32k the charged
// attention (269 TFLOP) stays below the matmuls.
TEST(SeedVectorsTest, AttentionAtLongContext) {
  const auto hw = hwtest::build_hw(hwtest::hw_config("llama-3-8b", "h100-sxm"));
  const auto& cost = dynamic_cast<const RooflineCostModel&>(*hw.cost);
  for (const auto& [s, notes] : {std::pair<int64_t, double>{2000, 2.1e12}, {32000, 537e12}}) {
    BatchShape prefill;
    prefill.prefill_seqs = 1;
    prefill.prefill_tokens = s;
    prefill.prefill_logits = 1;
    prefill.prefill_attention_pairs = s * (s + 1) / 2;
    const double causal = find_op(cost.breakdown(prefill), "attention_prefill")->flops;
    const double full = causal * 2.0 * static_cast<double>(s) / static_cast<double>(s + 1);
    EXPECT_NEAR(full, notes, 0.005 * notes) << s;
  }
  const auto j = estimate({"--model", "llama-3-8b", "--gpu", "h100-sxm", "--prompt", "32000"});
  EXPECT_NEAR(j["prefill"]["matmul_flops"].get<double>(), 514e12, 0.5e12);
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
  // estimate --cached: the same hits on Llama-2-70B (2 x 69.0e9 FLOPs per token) compute the
  // uncached tokens' matmuls only.
  auto matmul = [](const std::string& cached) {
    return estimate({"--model", "llama-2-70b", "--gpu", "h100-sxm", "--tp", "8", "--prompt", "32768", "--cached",
                     cached})["prefill"]["matmul_flops"]
        .get<double>();
  };
  const double n2 = model("llama-2-70b").flops_per_token();
  EXPECT_NEAR(matmul("26214") - matmul("29491"), n2 * (29491 - 26214), 1e3);  // h = 0.8 vs 0.9
  EXPECT_NEAR(matmul("26214") - matmul("29491"), 460e12, 0.02 * 460e12);
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

// ---- hybrid and sparse attention ----------------------------------------------------------------

TEST(RooflineHybridTest, KvGroupsPerGpu) {
  // gpt-oss-120b at TP 4: each GPU holds 2 of the 8 KV heads of every layer (2 x 2 x 64 x 2 = 512
  // bytes per token and layer), 18 full layers and 18 window layers of 128 tokens.
  const KvGroups oss = kv_groups_per_gpu(model("gpt-oss-120b"), 4);
  EXPECT_DOUBLE_EQ(oss.full_bytes_per_token, 18.0 * 512);
  EXPECT_DOUBLE_EQ(oss.window_bytes_per_token, 18.0 * 512);
  EXPECT_EQ(oss.window, 128);
  EXPECT_DOUBLE_EQ(oss.state_bytes, 0.0);
  EXPECT_DOUBLE_EQ(oss.bytes(1000), 18.0 * 512 * 1000 + 18.0 * 512 * 128);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_per_gpu(model("gpt-oss-120b"), 4), 36.0 * 512);
  // Qwen3-Next at TP 2: the state's heads split too, half of 36 x 1,097,728 bytes per GPU.
  const KvGroups next = kv_groups_per_gpu(model("qwen3-next-80b-a3b"), 2);
  EXPECT_DOUBLE_EQ(next.full_bytes_per_token, 12.0 * 1024);
  EXPECT_DOUBLE_EQ(next.state_bytes, 36.0 * 1097728 / 2);
  // DeepSeek-V3.2: the latent and the indexer keys are whole on every GPU.
  EXPECT_DOUBLE_EQ(kv_groups_per_gpu(model("deepseek-v3.2"), 8).full_bytes_per_token, 61.0 * (1152 + 132));
  // A model whose layers are all full keeps one group, as before.
  EXPECT_FALSE(kv_groups_per_gpu(model("llama-3-70b"), 4).hybrid());
}

TEST(RooflineHybridTest, ContextThatFitsStopsCountingTheWindowAtTheWindow) {
  KvGroups g;
  g.full_bytes_per_token = 100;
  g.window_bytes_per_token = 300;
  g.window = 10;
  g.state_bytes = 1000;
  // 2 sequences in 10,000 bytes: 5,000 each, 1,000 of it state; the first 10 tokens take 400
  // each (4,000), so exactly 10 fit; every token past the window takes 100.
  EXPECT_DOUBLE_EQ(kv_tokens_that_fit(g, 10000, 2), 10.0);
  EXPECT_DOUBLE_EQ(kv_tokens_that_fit(g, 12000, 2), 20.0);  // 1,000 more each: 10 more full tokens
  EXPECT_DOUBLE_EQ(kv_tokens_that_fit(g, 4000, 2), 2.5);    // within the window: 400 per token
  EXPECT_DOUBLE_EQ(kv_tokens_that_fit(g, 1000, 2), 0.0);    // the states alone do not fit
}

TEST(RooflineHybridTest, WeightsPerGpuSplitExpertsAndMixers) {
  for (const char* name : {"gpt-oss-120b", "qwen3-next-80b-a3b", "deepseek-v3.2"}) {
    const ModelSpec m = model(name);
    EXPECT_NEAR(weight_bytes_per_gpu(m, 1) / m.weight_bytes_total(), 1.0, 1e-9) << name;
    EXPECT_LT(weight_bytes_per_gpu(m, 2), 0.51 * m.weight_bytes_total()) << name;
  }
  EXPECT_EQ(tp_problem(model("qwen3-next-80b-a3b"), 2), "");
  // 16 GDN key heads do not split 32 ways (nor do the 16 attention heads).
  EXPECT_NE(tp_problem(model("qwen3-next-80b-a3b"), 32), "");
  ModelSpec narrow = model("qwen3-next-80b-a3b");
  narrow.num_heads = 32;
  narrow.num_kv_heads = 32;
  EXPECT_NE(tp_problem(narrow, 32).find("linear-attention"), std::string::npos) << tp_problem(narrow, 32);
}

TEST(RooflineHybridTest, EstimateShowsTheCacheByLayerGroup) {
  const auto j = estimate({"--model", servesim::testing::source_dir() + "/tests/hwmodels/testdata/hf/gpt-oss-120b/config.json",
                           "--gpu", "h200", "--prompt", "8192"});
  EXPECT_DOUBLE_EQ(j["kv_cache"]["full_bytes_per_token"].get<double>(), 18.0 * 2048);
  EXPECT_DOUBLE_EQ(j["kv_cache"]["window_bytes_per_token"].get<double>(), 18.0 * 2048);
  EXPECT_EQ(j["kv_cache"]["window_tokens"].get<int64_t>(), 128);
  EXPECT_EQ(j["kv_cache"]["layers"]["sliding_window"].get<int64_t>(), 18);
  EXPECT_DOUBLE_EQ(j["kv_cache"]["bytes_per_sequence_at_context"].get<double>(), 18.0 * 2048 * (8192 + 128));
  EXPECT_NEAR(j["decode"]["kv_cache_gb"].get<double>(), 18.0 * 2048 * (8192 + 128) * 1e-9, 1e-12);
  const auto next = estimate({"--model", "qwen3-next-80b-a3b", "--gpu", "h200", "--prompt", "1000", "--tp", "2"});
  EXPECT_DOUBLE_EQ(next["kv_cache"]["state_bytes_per_sequence"].get<double>(), 36.0 * 1097728);
  EXPECT_EQ(next["kv_cache"]["layers"]["linear"].get<int64_t>(), 36);
}

}  // namespace
}  // namespace servesim::hwmodels
