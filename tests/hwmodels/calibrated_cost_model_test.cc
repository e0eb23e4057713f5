// The roofline cost model with calibration profiles, mixture-of-experts and latent attention,
// quantised data types, CUDA graphs and engine overheads.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "hwmodels/calibration_profile.h"
#include "hwmodels/engine/engine_model.h"
#include "hwmodels/hf_config.h"
#include "hwmodels/roofline.h"
#include "hwmodels/roofline_cost_model.h"
#include "tests/hwmodels/hw_test_util.h"
#include "tests/test_paths.h"

namespace servesim::hwmodels {
namespace {

using hwtest::build_hw;
using hwtest::decode;
using hwtest::find_op;
using hwtest::hw_config;

BatchShape prefill(int64_t tokens, int64_t seqs = 1) {
  BatchShape s;
  s.prefill_seqs = seqs;
  s.prefill_tokens = tokens * seqs;
  s.prefill_logits = seqs;
  s.prefill_attention_pairs = seqs * (tokens * (tokens + 1) / 2);
  return s;
}

const GpuSpec& h100() { return *find_gpu_preset("h100-sxm"); }
const ModelSpec& llama8b() { return *find_model_preset("llama-3-8b"); }

// A profile with flat efficiencies: tables whose every value is the same behave like constants.
CalibrationProfile flat_profile(double compute, double memory, double stream) {
  CalibrationProfile p;
  p.gpu = "h100-sxm";
  p.kernel_us = 1.0;
  p.gemm.compute_efficiency = Table2D({1, 65536}, {1e6, 1e9}, {{compute, compute}, {compute, compute}});
  p.gemm.memory_efficiency = Curve({1e3, 1e10}, {memory, memory});
  p.elementwise["copy"] = Curve({1e3, 1e10}, {stream, stream});
  return p;
}

TEST(CalibratedCostModelTest, FlatTablesEqualTheConstants) {
  RooflineParams constants;
  constants.compute_efficiency = 0.6;
  constants.memory_efficiency = 0.8;
  constants.elementwise_efficiency = 0.4;
  constants.kernel_overhead_us = 1.0;
  const CalibrationProfile p = flat_profile(0.6, 0.8, 0.4);
  RooflineParams table_params;
  table_params.kernel_overhead_us = 1.0;
  const RooflineCostModel table(llama8b(), h100(), 1, table_params, &p);
  const RooflineCostModel plain(llama8b(), h100(), 1, constants);
  EXPECT_TRUE(table.calibrated());
  for (const BatchShape& s : {prefill(1), prefill(777), prefill(3000, 2), decode(1, 100), decode(64, 2000)}) {
    const StepCost a = table.step(s), b = plain.step(s);
    EXPECT_NEAR(a.seconds / b.seconds, 1.0, 1e-12);
    EXPECT_DOUBLE_EQ(a.flops, b.flops);
    EXPECT_DOUBLE_EQ(a.bytes, b.bytes);
  }
  EXPECT_NEAR(table.step(prefill(20000)).seconds / plain.step(prefill(20000)).seconds, 1.0, 1e-12);
}

TEST(CalibratedCostModelTest, PrecomputedRowsGiveTheSameResults) {
  const CalibrationProfile p = read_calibration_profile(servesim::testing::source_dir() + "/calibration/profiles/h100-sxm.toml");
  RooflineParams params;
  const ProfileUse use = apply_profile_scalars(p, params, [](std::string_view) { return false; });
  const RooflineCostModel direct(llama8b(), h100(), 2, params, &p, use);
  RooflineCostModel tabulated(llama8b(), h100(), 2, params, &p, use);
  tabulated.precompute();
  for (const BatchShape& s : {prefill(1), prefill(777), prefill(3000, 2), prefill(9000, 3), decode(1, 100),
                              decode(64, 2000), decode(300, 9000)}) {
    EXPECT_EQ(direct.step(s).seconds, tabulated.step(s).seconds);
    EXPECT_EQ(direct.step(s).bytes, tabulated.step(s).bytes);
  }
}

TEST(CalibratedCostModelTest, EfficiencyTablesFollowShape) {
  // Compute efficiency rising with rows: a 16-row GEMM at 0.1 of peak, 4096 rows at 0.8.
  CalibrationProfile p = flat_profile(0.5, 0.9, 0.5);
  p.gemm.compute_efficiency = Table2D({16, 4096}, {1e6, 1e9}, {{0.1, 0.8}, {0.1, 0.8}});
  RooflineParams params;
  const ProfileUse use = apply_profile_scalars(p, params, [](std::string_view) { return false; });
  EXPECT_DOUBLE_EQ(params.kernel_overhead_us, 1.0);
  const RooflineCostModel m(llama8b(), h100(), 1, params, &p, use);
  const auto shapes = m.operator_shapes();
  const OperatorShape* up = nullptr;
  for (const auto& s : shapes)
    if (s.name == "mlp_up_proj") up = &s;
  ASSERT_NE(up, nullptr);
  const double fixed = 1e-6;  // kernel_us
  // At 4096 rows the GEMM is compute-bound at 0.8 of peak.
  EXPECT_NEAR(*m.operator_seconds("mlp_up_proj", 4096), up->flops_per_row * 4096 / (989e12 * 0.8) + fixed, 1e-12);
  // At 256 rows, halfway in log2 between 16 and 4096: 0.45 of peak; memory-bound is faster.
  const double compute_256 = up->flops_per_row * 256 / (989e12 * 0.45);
  EXPECT_NEAR(*m.operator_seconds("mlp_up_proj", 256), compute_256 + fixed, 1e-12);
  EXPECT_FALSE(m.operator_seconds("no_such_op", 1).has_value());
}

TEST(CalibratedCostModelTest, ProfileThroughTheConfigAndKeysOverrideIt) {
  servesim::testing::TempDir dir;
  CalibrationProfile p = flat_profile(0.5, 0.5, 0.5);
  p.kernel_us = 3.0;
  p.all_reduce[2] = {20e-6, 100e9};
  p.all_reduce[8] = {40e-6, 300e9};
  write_calibration_profile(p, dir.file("h100.toml"));
  auto hw_with = [&](const std::string& keys, int64_t tp = 1) {
    return build_hw(hw_config("llama-3-8b", "h100-sxm") + "[cost_model]\nkind = \"roofline\"\ncalibration = \"" +
                        dir.file("h100.toml") + "\"\n" + keys,
                    tp);
  };
  const auto cal = hw_with("");
  const auto& rm = dynamic_cast<const RooflineCostModel&>(*cal.cost);
  EXPECT_TRUE(rm.calibrated());
  EXPECT_DOUBLE_EQ(rm.params().kernel_overhead_us, 3.0);  // from the profile
  const auto explicit_key = hw_with("kernel_overhead_us = 0.25\ncompute_efficiency = 1\n");
  const auto& rk = dynamic_cast<const RooflineCostModel&>(*explicit_key.cost);
  EXPECT_DOUBLE_EQ(rk.params().kernel_overhead_us, 0.25);  // the written key wins
  // compute_efficiency written: the GEMM table is not used, so a compute-bound prefill is faster.
  EXPECT_LT(explicit_key.cost->step(prefill(4096)).seconds, cal.cost->step(prefill(4096)).seconds);

  // All-reduce alpha-beta per GPU count: 4 GPUs interpolate between the measured 2 and 8.
  for (int64_t tp : {2, 4, 8}) {
    const auto hw = hw_with("", tp);
    const auto ops = dynamic_cast<const RooflineCostModel&>(*hw.cost).breakdown(decode(1, 10));
    const OperatorCost* ar = find_op(ops, "all_reduce");
    ASSERT_NE(ar, nullptr);
    const double t = static_cast<double>(tp);
    const double latency = tp == 2 ? 20e-6 : tp == 8 ? 40e-6 : 30e-6;
    const double bw = tp == 2 ? 100e9 : tp == 8 ? 300e9 : 200e9;
    EXPECT_NEAR(ar->seconds / static_cast<double>(ar->count), latency + 2 * (t - 1) / t * 4096 * 2 / bw, 1e-15) << tp;
  }

  // A profile of another GPU is refused at the key.
  p.gpu = "a100-80gb-sxm";
  write_calibration_profile(p, dir.file("a100.toml"));
  const std::string text = hw_config("llama-3-8b", "h100-sxm") + "[cost_model]\ncalibration = \"" + dir.file("a100.toml") + "\"\n";
  try {
    build_hw(text);
    FAIL() << "a100 profile accepted for h100";
  } catch (const core::ConfigError& e) {
    EXPECT_EQ(e.key(), "cost_model.calibration");
  }
  try {  // a missing profile is reported where the configuration names it
    build_hw(hw_config("llama-3-8b", "h100-sxm") + "[cost_model]\ncalibration = \"/no/such.toml\"\n");
    FAIL() << "a missing profile accepted";
  } catch (const core::ConfigError& e) {
    EXPECT_EQ(e.key(), "cost_model.calibration");
  }
}

// A decode step's all-reduces take the regime of their message size: 8 rows of Llama-3-8B's 4,096
// fp16 activations are 64 KiB, under the small regime's 1 MiB (6 us + 64 KiB / 100 GB/s); a
// 4,096-token prefill's 32 MiB take the large-message line (20 us + 32 MiB / 300 GB/s). TP 2: ring
// factor 1, 65 all-reduces per step.
TEST(CalibratedCostModelTest, AllReduceRegimesBySize) {
  CalibrationProfile p = flat_profile(0.5, 0.5, 0.5);
  p.all_reduce[2] = {20e-6, 300e9};
  p.all_reduce_regimes[2] = {{1048576, {6e-6, 100e9}}};
  const RooflineCostModel m(llama8b(), h100(), 2, {}, &p);
  const double small = find_op(m.breakdown(decode(8, 100)), "all_reduce")->seconds;
  EXPECT_NEAR(small, 65 * (6e-6 + 8 * 4096 * 2 / 100e9), 1e-15);
  const double large = find_op(m.breakdown(prefill(4096)), "all_reduce")->seconds;
  EXPECT_NEAR(large, 65 * (20e-6 + 4096 * 4096 * 2 / 300e9), 1e-15);
  // The profile keeps them through its text.
  EXPECT_EQ(parse_calibration_profile(calibration_profile_toml(p), "p.toml").all_reduce_regimes, p.all_reduce_regimes);
}

TEST(CalibratedCostModelTest, ShippedProfilesPredictTheirGpus) {
  for (const char* gpu : {"a100-80gb-sxm", "h100-sxm"}) {
    const CalibrationProfile p =
        read_calibration_profile(servesim::testing::source_dir() + "/calibration/profiles/" + gpu + ".toml");
    const RooflineCostModel cal(llama8b(), *find_gpu_preset(gpu), 1, {}, &p);
    const RooflineCostModel plain(llama8b(), *find_gpu_preset(gpu), 1);
    // Same physics, different efficiencies: within a factor of two of the constants everywhere.
    for (const BatchShape& s : {prefill(16), prefill(2048), decode(1, 512), decode(128, 2048)}) {
      const double r = cal.step(s).seconds / plain.step(s).seconds;
      EXPECT_GT(r, 0.5) << gpu;
      EXPECT_LT(r, 2.0) << gpu;
    }
  }
}

// The engine decides how a batch is launched (EngineModel::prepare); the cost model costs it: a full
// graph drops the per-kernel launch floor and pads the rows to the captured size, at one graph
// launch; piecewise graphs leave attention eager and cost at least one launch per piece.
TEST(CalibratedCostModelTest, CudaGraphsPadTheBatchAndDropTheLaunchFloor) {
  RooflineParams params;
  params.eager_launch_us = 8.0;
  params.graph_launch_us = 10.0;
  const RooflineCostModel m(llama8b(), h100(), 1, params);
  EngineModel full, piecewise, eager;
  full.graphs = CudaGraphMode::kFullDecode;
  piecewise.graphs = CudaGraphMode::kPiecewise;
  auto launched = [](const EngineModel& e, BatchShape s) {
    e.prepare(s);
    return s;
  };
  const BatchShape d1_full = launched(full, decode(1, 100)), d1_eager = launched(eager, decode(1, 100));
  EXPECT_EQ(d1_full.launch, LaunchMode::kFullGraph);
  EXPECT_EQ(d1_eager.launch, LaunchMode::kEager);
  // Batch 1 decode: eager kernels shorter than 8 us wait for the host; the graph does not.
  EXPECT_LT(m.step(d1_full).seconds, m.step(d1_eager).seconds);
  const auto ops = m.breakdown(d1_full);
  ASSERT_NE(find_op(ops, "cuda_graph_launch"), nullptr);
  EXPECT_DOUBLE_EQ(find_op(ops, "cuda_graph_launch")->seconds, 10e-6);
  EXPECT_EQ(find_op(m.breakdown(d1_eager), "cuda_graph_launch"), nullptr);
  // 17 sequences run the graph captured for 24: the GEMMs cost what 24 rows cost, the work is 17 rows'.
  EXPECT_EQ(cuda_graph_batch(17), 24);
  EXPECT_EQ(cuda_graph_batch(3), 4);
  EXPECT_EQ(cuda_graph_batch(64), 64);
  const auto g17 = m.breakdown(launched(full, decode(17, 100))), g24 = m.breakdown(launched(full, decode(24, 100)));
  EXPECT_DOUBLE_EQ(find_op(g17, "mlp_down_proj")->seconds, find_op(g24, "mlp_down_proj")->seconds);
  EXPECT_LT(find_op(g17, "mlp_down_proj")->flops, find_op(g24, "mlp_down_proj")->flops);
  // Beyond max_graph_tokens, and with any prefill under full_decode, the iteration runs eagerly.
  full.max_graph_tokens = 8;
  EXPECT_EQ(launched(full, decode(9, 100)).launch, LaunchMode::kEager);
  EXPECT_EQ(launched(full, prefill(100)).launch, LaunchMode::kEager);
  // Piecewise: a 100-token prefill runs the pieces captured for 104 tokens, attention eagerly (its
  // launch floor stays), and the 33 pieces cost at least 33 launches.
  const BatchShape p100 = launched(piecewise, prefill(100));
  EXPECT_EQ(p100.launch, LaunchMode::kPiecewiseGraph);
  EXPECT_EQ(p100.graph_tokens, 104);
  const auto pw = m.breakdown(p100);
  EXPECT_GE(find_op(pw, "attention_prefill")->seconds, 32 * 8e-6);
  double captured = 0;
  for (const auto& op : pw)
    if (op.name != "attention_prefill" && op.name != "cuda_graph_launch") captured += op.seconds;
  EXPECT_NEAR(captured + find_op(pw, "cuda_graph_launch")->seconds, std::max(captured, 33 * 10e-6), 1e-15);
  // The captured GEMMs compute 104 rows: an eager 104-token prefill's GEMM without its launch floor.
  EXPECT_DOUBLE_EQ(find_op(pw, "mlp_up_proj")->seconds / 32, *m.operator_seconds("mlp_up_proj", 104));
}

TEST(CalibratedCostModelTest, QuantisedWeightsAndKv) {
  ModelSpec fp8 = llama8b();
  fp8.weight_dtype = DType::kFp8;
  fp8.weight_bytes = 1.0;
  const RooflineCostModel base(llama8b(), h100(), 1), q(fp8, h100(), 1);
  // Decode streams half the linear-layer bytes (the LM head stays 16-bit).
  const StepCost b1 = base.step(decode(1, 10)), q1 = q.step(decode(1, 10));
  EXPECT_NEAR(q1.bytes / b1.bytes, (fp8.decode_weight_bytes() + 1) / (llama8b().decode_weight_bytes() + 1), 0.01);
  EXPECT_LT(q1.seconds, 0.65 * b1.seconds);  // iteration and kernel overheads do not halve
  // Prefill GEMMs run at the fp8 peak on an H100 ...
  const auto bp = base.breakdown(prefill(4096)), qp = q.breakdown(prefill(4096));
  EXPECT_NEAR(find_op(qp, "mlp_up_proj")->seconds / find_op(bp, "mlp_up_proj")->seconds, 0.5, 0.01);
  // ... but not on an A100, which has no fp8 tensor cores (weight-only there).
  const RooflineCostModel a_base(llama8b(), *find_gpu_preset("a100-80gb-sxm"), 1),
      a_q(fp8, *find_gpu_preset("a100-80gb-sxm"), 1);
  EXPECT_NEAR(find_op(a_q.breakdown(prefill(4096)), "mlp_up_proj")->seconds /
                  find_op(a_base.breakdown(prefill(4096)), "mlp_up_proj")->seconds,
              1.0, 0.01);
  // int4 weight-only: a quarter of the bytes plus group scales, compute at the 16-bit rate.
  ModelSpec int4 = llama8b();
  int4.weight_dtype = DType::kInt4;
  int4.weight_bytes = dtype_bytes(DType::kInt4);
  EXPECT_NEAR(weight_bytes_per_gpu(int4, 1) / weight_bytes_per_gpu(llama8b(), 1),
              (int4.linear_params() * 0.51953125 + (int4.param_count() - int4.linear_params()) * 2) /
                  (llama8b().param_count() * 2),
              1e-12);
  // fp8 KV cache: half the bytes per token and per GPU, and faster decode attention.
  ModelSpec kv8 = llama8b();
  kv8.kv_dtype = DType::kFp8;
  kv8.kv_bytes = 1.0;
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_per_gpu(kv8, 2), kv_bytes_per_token_per_gpu(llama8b(), 2) / 2);
  const RooflineCostModel k(kv8, h100(), 1);
  EXPECT_LT(find_op(k.breakdown(decode(64, 8000)), "attention_decode")->seconds,
            0.6 * find_op(base.breakdown(decode(64, 8000)), "attention_decode")->seconds);
}

TEST(CalibratedCostModelTest, MoeDecodeReadsTheExpertsTheBatchActivates) {
  const ModelSpec& mixtral = *find_model_preset("mixtral-8x7b");
  EXPECT_DOUBLE_EQ(mixtral.expected_active_experts(1), 2.0);
  EXPECT_NEAR(mixtral.expected_active_experts(2), 8.0 * (1 - 0.75 * 0.75), 1e-12);
  EXPECT_NEAR(mixtral.expected_active_experts(64), 8.0, 1e-6);
  // Batch 1 reads two experts per block: about the 12.9B active parameters.
  EXPECT_NEAR(mixtral.decode_weight_bytes(1) / 2, mixtral.active_param_count() - mixtral.embedding_params(), 1e6);
  EXPECT_NEAR(mixtral.decode_weight_bytes(1024) / 2, mixtral.param_count() - mixtral.embedding_params(), 1e6);
  const RooflineCostModel m(mixtral, h100(), 2);
  const StepCost one = m.step(decode(1, 100)), many = m.step(decode(64, 100));
  EXPECT_NEAR(one.bytes / (mixtral.decode_weight_bytes(1)), 1.0, 0.02);
  EXPECT_NEAR(many.bytes / (mixtral.decode_weight_bytes(64) + 64 * 100 * mixtral.kv_bytes_per_token()), 1.0, 0.02);
  EXPECT_GT(many.seconds, 2.5 * one.seconds);  // four times the expert bytes
  // FLOPs are the active parameters' (plus attention): 2 x 12.9B per token less the embedding lookup.
  const auto ops = m.breakdown(decode(64, 100));
  ASSERT_NE(find_op(ops, "moe_up_proj"), nullptr);
  ASSERT_NE(find_op(ops, "moe_gate"), nullptr);
  EXPECT_NEAR(find_op(ops, "moe_up_proj")->flops, 64.0 * 32 * 2 * 2 * 4096 * 2 * 14336, 1.0);
  EXPECT_EQ(find_op(ops, "mlp_up_proj"), nullptr);  // no dense MLP
  // The weights resident per GPU include every expert, split tensor-parallel.
  EXPECT_NEAR(weight_bytes_per_gpu(mixtral, 2), mixtral.weight_bytes_total() / 2, 0.01 * mixtral.weight_bytes_total());
  EXPECT_EQ(tp_problem(mixtral, 16), "");  // the 8 KV heads are replicated
  EXPECT_NE(tp_problem(mixtral, 64).find("attention heads"), std::string::npos);
}

TEST(CalibratedCostModelTest, DeepSeekMlaAndSharedExperts) {
  const ModelSpec& ds = *find_model_preset("deepseek-v3");
  EXPECT_EQ(tp_problem(ds, 8), "");
  // The latent cache is whole on every GPU of the group.
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_per_gpu(ds, 8), ds.kv_bytes_per_token());
  EXPECT_DOUBLE_EQ(ds.kv_bytes_per_token(), 61.0 * 576 * 2);
  const RooflineCostModel m(ds, *find_gpu_preset("h200"), 8);
  const auto dec = m.breakdown(decode(32, 4096));
  for (const char* op : {"attn_pre_proj", "attn_q_a_layernorm", "attn_kv_a_layernorm", "attn_q_proj", "attn_kv_b_proj",
                         "attention_decode", "shared_expert_up_proj", "mlp_up_proj", "moe_up_proj", "moe_combine"})
    EXPECT_NE(find_op(dec, op), nullptr) << op;
  EXPECT_EQ(find_op(dec, "mlp_up_proj")->count, 3);   // the dense blocks
  EXPECT_EQ(find_op(dec, "moe_up_proj")->count, 58);  // the MoE blocks
  // Decode attention reads the latent cache: 576 bf16 elements per token and layer on each GPU.
  EXPECT_NEAR(find_op(dec, "attention_decode")->bytes,
              8.0 * 61 * (32 * 4096 * 576 * 2 + 32 * 576 * 2 + 32 * (128.0 / 8) * (192 + 128) * 2), 1.0);
  // fp8 weights: resident bytes per GPU near 671B / 8 at one byte, plus the bf16 embeddings.
  EXPECT_NEAR(weight_bytes_per_gpu(ds, 8) / 1e9, 671.0 / 8 + 2 * 0.93 / 8, 2.0);
  // Chunked prefill with a cached prefix re-expands the cached latents in kv_b_proj.
  BatchShape chunk = prefill(512);
  chunk.prefill_context_tokens = 4096;
  chunk.prefill_attention_pairs = 512 * 4096 + 512 * 513 / 2;
  const auto with_prefix = m.breakdown(chunk), fresh = m.breakdown(prefill(512));
  EXPECT_NEAR(find_op(with_prefix, "attn_kv_b_proj")->flops / find_op(fresh, "attn_kv_b_proj")->flops,
              (512.0 + 4096) / 512, 1e-9);
}

// Decode-attention tables keyed by head layout, each with its own flat efficiency so the one the
// model picked can be read off the time it predicts.
const char* kLayoutProfile = R"(format = "servesim-calibration-profile"
version = 1
gpu = "h100-sxm"
%UNKEYED%
[[attention_decode_layout]]
heads = 32
kv_heads = 8
head_dim = 128
block_size = 32
seqs = [1, 256]
context_tokens = [128, 32768]
memory_efficiency = [[0.66, 0.66], [0.66, 0.66]]
%A%
[[attention_decode_layout]]
heads = 8
kv_heads = 1
head_dim = 128
block_size = 16
seqs = [1, 256]
context_tokens = [128, 32768]
memory_efficiency = [[0.22, 0.22], [0.22, 0.22]]

[[attention_decode_layout]]
heads = 32
kv_heads = 32
head_dim = 128
block_size = 16
seqs = [1, 256]
context_tokens = [128, 32768]
memory_efficiency = [[0.33, 0.33], [0.33, 0.33]]

[[attention_decode_layout]]
heads = 28
kv_heads = 4
head_dim = 128
block_size = 16
seqs = [1, 256]
context_tokens = [128, 32768]
memory_efficiency = [[0.44, 0.44], [0.44, 0.44]]

[[attention_decode_layout]]
heads = 16
kv_heads = 1
head_dim = 576
block_size = 16
kv_lora_rank = 512
seqs = [1, 256]
context_tokens = [128, 32768]
memory_efficiency = [[0.55, 0.55], [0.55, 0.55]]

[[attention_decode_layout]]
heads = 64
kv_heads = 8
head_dim = 64
block_size = 16
seqs = [1, 256]
context_tokens = [128, 32768]
memory_efficiency = [[0.77, 0.77], [0.77, 0.77]]
)";

const char* kLayoutA = R"(
[[attention_decode_layout]]
heads = 32
kv_heads = 8
head_dim = 128
block_size = 16
seqs = [1, 256]
context_tokens = [128, 32768]
memory_efficiency = [[0.11, 0.11], [0.11, 0.11]]
)";

const char* kUnkeyed = R"(
[attention_decode]
seqs = [1, 256]
context_tokens = [128, 32768]
memory_efficiency = [[0.99, 0.99], [0.99, 0.99]]
)";

CalibrationProfile layout_profile(bool with_a, bool with_unkeyed) {
  std::string text = kLayoutProfile;
  text.replace(text.find("%UNKEYED%"), 9, with_unkeyed ? kUnkeyed : "");
  text.replace(text.find("%A%"), 3, with_a ? kLayoutA : "");
  return parse_calibration_profile(text, "layouts.toml");
}

// The HBM efficiency the model's decode attention ran at: its bytes per layer and GPU over the
// time left after the fixed kernel time (the tables are flat and decode is memory-bound here).
double decode_efficiency(const ModelSpec& m, int64_t tp, const CalibrationProfile& p, RooflineParams params = {}) {
  const RooflineCostModel c(m, h100(), tp, params, &p);
  const std::vector<OperatorCost> ops = c.breakdown(decode(4, 1000));
  const OperatorCost* op = find_op(ops, "attention_decode");
  const double layers = static_cast<double>(m.num_layers);
  const double bytes = op->bytes / (layers * static_cast<double>(tp));
  return bytes / (h100().hbm_bandwidth * (op->seconds / layers - params.kernel_overhead_us * 1e-6));
}

TEST(CalibratedCostModelTest, DecodeAttentionUsesTheTableOfTheModelsHeadLayout) {
  const CalibrationProfile p = layout_profile(true, true);
  auto model = [](const char* name) { return *find_model_preset(name); };
  // The bytes the efficiency is read from, by hand for Llama-3-8B at TP 1: K and V of 8 heads x 128
  // in fp16 for 4000 + 4 tokens, Q and O of 32 heads x 128 for 4.
  const RooflineCostModel l8(model("llama-3-8b"), h100(), 1, {}, &p);
  EXPECT_DOUBLE_EQ(find_op(l8.breakdown(decode(4, 1000)), "attention_decode")->bytes,
                   32.0 * (4096.0 * 4004 + 16384.0 * 4));
  // Exact layouts: 32/8/128 pages of 16 (not the table with pages of 32), 8/1 (Llama-3-70B at TP
  // 8), 28/4 (Qwen2-7B), MLA 16 heads on a 512 + 64 latent (DeepSeek-V3 at TP 8), 64/8/64.
  EXPECT_NEAR(decode_efficiency(model("llama-3-8b"), 1, p), 0.11, 1e-9);
  EXPECT_NEAR(decode_efficiency(model("mixtral-8x7b"), 1, p), 0.11, 1e-9);
  EXPECT_NEAR(decode_efficiency(model("llama-3-70b"), 8, p), 0.22, 1e-9);
  EXPECT_NEAR(decode_efficiency(model("qwen2-7b"), 1, p), 0.44, 1e-9);
  EXPECT_NEAR(decode_efficiency(model("deepseek-v3"), 8, p), 0.55, 1e-9);
  ModelSpec narrow = model("llama-3-8b");
  narrow.num_heads = 64;
  narrow.head_dim = 64;
  EXPECT_NEAR(decode_efficiency(narrow, 1, p), 0.77, 1e-9);
  // Nearest: the same head_dim and kind, then the nearest query heads per KV head, then KV heads.
  EXPECT_NEAR(decode_efficiency(model("llama-3-8b"), 4, p), 0.11, 1e-9);   // 8/2: group 4 as 32/8
  EXPECT_NEAR(decode_efficiency(model("llama-2-7b"), 2, p), 0.33, 1e-9);   // 16/16: group 1 as 32/32
  EXPECT_NEAR(decode_efficiency(model("qwen2-7b"), 2, p), 0.44, 1e-9);     // 14/2: group 7 as 28/4
  EXPECT_NEAR(decode_efficiency(model("deepseek-v3"), 4, p), 0.55, 1e-9);  // MLA 32 heads: the MLA table
  EXPECT_NEAR(decode_efficiency(model("llama-2-70b"), 4, p), 0.22, 1e-9);  // 16/2: group 8 as 8/1, not 64/8/64
  // Without the 32/8 pages-of-16 table, the pages-of-32 one is the nearest for Llama-3-8B.
  EXPECT_NEAR(decode_efficiency(model("llama-3-8b"), 1, layout_profile(false, true)), 0.66, 1e-9);
  // No table of its head_dim: the un-keyed table, else the constant.
  ModelSpec wide = model("llama-3-8b");
  wide.num_heads = 16;
  wide.head_dim = 256;
  EXPECT_NEAR(decode_efficiency(wide, 1, p), 0.99, 1e-9);
  RooflineParams constant;
  constant.attention_memory_efficiency = 0.3;
  EXPECT_NEAR(decode_efficiency(wide, 1, layout_profile(true, false), constant), 0.3, 1e-9);
  // A [cost_model] attention_memory_efficiency written by the user beats every table.
  RooflineParams written = constant;
  const ProfileUse use = apply_profile_scalars(p, written, [](std::string_view key) {
    return key == "attention_memory_efficiency";
  });
  const RooflineCostModel overridden(model("llama-3-8b"), h100(), 1, written, &p, use);
  const std::vector<OperatorCost> ops = overridden.breakdown(decode(4, 1000));
  const OperatorCost* op = find_op(ops, "attention_decode");
  EXPECT_NEAR(op->bytes / 32 / (h100().hbm_bandwidth * (op->seconds / 32 - 2e-6)), 0.3, 1e-9);
}

TEST(CalibratedCostModelTest, DecodeAttentionLayoutOfAModel) {
  // Heads split over the group, KV heads split or replicated, MLA on its latent.
  const AttentionLayout l70 = decode_attention_layout(*find_model_preset("llama-3-70b"), 8);
  EXPECT_EQ(l70, (AttentionLayout{8, 1, 128, 16, 0}));
  EXPECT_EQ(decode_attention_layout(*find_model_preset("llama-3-8b"), 16), (AttentionLayout{2, 1, 128, 16, 0}));
  EXPECT_EQ(decode_attention_layout(*find_model_preset("qwen2-7b"), 2), (AttentionLayout{14, 2, 128, 16, 0}));
  EXPECT_EQ(decode_attention_layout(*find_model_preset("deepseek-v3"), 8), (AttentionLayout{16, 1, 576, 16, 512}));
}

TEST(CalibratedCostModelTest, HfConfigModelsRunThroughTheCostModel) {
  for (const char* dir : {"Meta-Llama-3-8B", "Mistral-7B-v0.3", "Qwen2-7B", "Mixtral-8x7B", "DeepSeek-V3"}) {
    const ModelSpec m = read_hf_config(servesim::testing::source_dir() + "/tests/hwmodels/testdata/hf/" + dir + "/config.json");
    const int64_t tp = m.is_mla() ? 8 : 4;
    ASSERT_EQ(tp_problem(m, tp), "") << dir;
    const RooflineCostModel c(m, h100(), tp);
    const StepCost p = c.step(prefill(1000)), d = c.step(decode(16, 1000));
    EXPECT_GT(p.seconds, d.seconds) << dir;
    // Prefill FLOPs: 2 x active parameters per token within a few percent (attention and the
    // embedding lookup aside).
    EXPECT_NEAR(p.flops / (1000 * m.flops_per_token()), 1.0, 0.15) << dir;
  }
}

}  // namespace
}  // namespace servesim::hwmodels
