#include "hwmodels/model_spec.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/hwmodels/hw_test_util.h"

namespace servesim::hwmodels {
namespace {

using hwtest::hw_config;
using hwtest::parse_hw;

ModelSpec parse_model(const std::string& kind, const std::string& extra = "") {
  const core::Params root = parse_hw(hw_config(kind, "h100-sxm", extra));
  return *model_registry().make(root.section("model"));
}

// The ConfigError a [model] section raises, or a failure if it raises none.
core::ConfigError model_error(const std::string& kind, const std::string& extra) {
  try {
    parse_model(kind, extra);
  } catch (const core::ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no ConfigError for " << kind << " with " << extra;
  return core::ConfigError({}, "", "");
}

TEST(ModelSpecTest, RegistryListsEveryPreset) {
  const auto names = model_registry().kind_names();
  for (const char* want : {"llama-2-7b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "teaching-7b"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  EXPECT_EQ(model_registry().name(), "models");
}

TEST(ModelSpecTest, LookupIgnoresCase) {
  const ModelSpec m = parse_model("Llama-3-8B");
  EXPECT_EQ(m.name, "llama-3-8b");
  EXPECT_EQ(m.num_kv_heads, 8);
  ASSERT_NE(find_model_preset("LLAMA-2-70B"), nullptr);
  EXPECT_EQ(find_model_preset("LLAMA-2-70B")->num_layers, 80);
  EXPECT_EQ(find_model_preset("gpt-5"), nullptr);
}

TEST(ModelSpecTest, PresetsMatchPublishedArchitectures) {
  const ModelSpec l2_7 = parse_model("llama-2-7b");
  EXPECT_EQ(l2_7.num_layers, 32);
  EXPECT_EQ(l2_7.hidden_size, 4096);
  EXPECT_EQ(l2_7.num_heads, 32);
  EXPECT_EQ(l2_7.num_kv_heads, 32);
  EXPECT_EQ(l2_7.head_dim, 128);
  EXPECT_EQ(l2_7.intermediate_size, 11008);
  EXPECT_EQ(l2_7.vocab_size, 32000);
  EXPECT_EQ(l2_7.max_context, 4096);
  EXPECT_TRUE(l2_7.gated_mlp);
  EXPECT_FALSE(l2_7.tied_embeddings);
  EXPECT_DOUBLE_EQ(l2_7.weight_bytes, 2.0);
  // Published parameter counts: 6.74B, 69.0B, 8.03B, 70.6B.
  EXPECT_NEAR(l2_7.param_count(), 6.738e9, 0.001e9);
  EXPECT_NEAR(parse_model("llama-2-70b").param_count(), 68.98e9, 0.01e9);
  EXPECT_NEAR(parse_model("llama-3-8b").param_count(), 8.030e9, 0.001e9);
  EXPECT_NEAR(parse_model("llama-3-70b").param_count(), 70.55e9, 0.01e9);

  const ModelSpec l3_70 = parse_model("llama-3-70b");
  EXPECT_EQ(l3_70.num_layers, 80);
  EXPECT_EQ(l3_70.hidden_size, 8192);
  EXPECT_EQ(l3_70.num_heads, 64);
  EXPECT_EQ(l3_70.num_kv_heads, 8);
  EXPECT_EQ(l3_70.intermediate_size, 28672);
  EXPECT_EQ(l3_70.vocab_size, 128256);
  EXPECT_EQ(l3_70.max_context, 8192);
}

TEST(ModelSpecTest, TeachingModelIsTheSeedsSevenB) {
  const ModelSpec m = parse_model("teaching-7b");
  EXPECT_EQ(m.num_layers, 32);
  EXPECT_EQ(m.num_heads, 32);
  EXPECT_EQ(m.num_kv_heads, 32);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.vocab_size, 32000);
}

TEST(ModelSpecTest, AnyFieldCanBeOverridden) {
  const ModelSpec m = parse_model("llama-3-8b",
                                  "num_layers = 16\nweight_bytes = 1\nhead_dim = 64\n"
                                  "gated_mlp = false\ntied_embeddings = true\nmax_context = 131072\n");
  EXPECT_EQ(m.num_layers, 16);
  EXPECT_DOUBLE_EQ(m.weight_bytes, 1.0);
  EXPECT_EQ(m.head_dim, 64);  // head_dim x num_heads need not equal hidden_size
  EXPECT_FALSE(m.gated_mlp);
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_EQ(m.max_context, 131072);
  EXPECT_EQ(m.hidden_size, 4096);  // untouched fields keep the preset's values
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.name, "llama-3-8b");
}

TEST(ModelSpecTest, KvHeadsMustDivideHeadsNamingTheKey) {
  const core::ConfigError e = model_error("llama-3-8b", "num_kv_heads = 5\n");
  EXPECT_EQ(e.key(), "model.num_kv_heads");
  EXPECT_NE(std::string(e.what()).find("must divide num_heads"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("t.toml:3"), std::string::npos) << e.what();
  // When only num_heads was written, that is the key to blame.
  EXPECT_EQ(model_error("llama-3-8b", "num_heads = 12\n").key(), "model.num_heads");
}

TEST(ModelSpecTest, RejectsNonPositiveFields) {
  EXPECT_EQ(model_error("llama-3-8b", "num_layers = 0\n").key(), "model.num_layers");
  EXPECT_EQ(model_error("llama-3-8b", "vocab_size = -1\n").key(), "model.vocab_size");
  EXPECT_EQ(model_error("llama-3-8b", "kv_bytes = 0\n").key(), "model.kv_bytes");
  EXPECT_EQ(model_error("llama-3-8b", "num_layer = 3\n").key(), "model.num_layer");  // typo: unknown key
}

TEST(ModelSpecTest, TiedAndUngatedVariants) {
  const ModelSpec base = parse_model("llama-3-8b");
  const ModelSpec tied = parse_model("llama-3-8b", "tied_embeddings = true\n");
  const double table = 128256.0 * 4096.0;
  EXPECT_DOUBLE_EQ(base.param_count() - tied.param_count(), table);
  // A tied LM head reads the shared matrix, so decode streams every weight.
  EXPECT_DOUBLE_EQ(tied.decode_weight_bytes(), tied.weight_bytes_total());
  EXPECT_DOUBLE_EQ(base.decode_weight_bytes(), base.weight_bytes_total() - table * 2.0);

  const ModelSpec ungated = parse_model("llama-3-8b", "gated_mlp = false\n");
  EXPECT_DOUBLE_EQ(base.layer_params() - ungated.layer_params(), 4096.0 * 14336.0);
}

}  // namespace
}  // namespace servesim::hwmodels

namespace servesim::hwmodels {
namespace {

TEST(ModelSpecTest, AddedPresetsAndDtypes) {
  const auto names = model_registry().kind_names();
  for (const char* want : {"mistral-7b", "qwen2-7b", "mixtral-8x7b", "deepseek-v3", "hf_config"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  // weight_dtype sets the bytes; weight_bytes still overrides them.
  const ModelSpec fp8 = parse_model("llama-3-8b", "weight_dtype = \"fp8\"\n");
  EXPECT_EQ(fp8.weight_dtype, DType::kFp8);
  EXPECT_DOUBLE_EQ(fp8.weight_bytes, 1.0);
  // Only the linear layers shrink: embeddings and LM head stay 16-bit.
  const ModelSpec base = parse_model("llama-3-8b");
  EXPECT_DOUBLE_EQ(base.weight_bytes_total() - fp8.weight_bytes_total(), base.linear_params());
  const ModelSpec int4 = parse_model("llama-3-8b", "weight_dtype = \"int4\"\nkv_dtype = \"fp8\"\n");
  EXPECT_DOUBLE_EQ(int4.weight_bytes, 0.51953125);
  EXPECT_DOUBLE_EQ(int4.kv_bytes_per_token(), base.kv_bytes_per_token() / 2);
  EXPECT_DOUBLE_EQ(parse_model("llama-3-8b", "weight_dtype = \"int4\"\nweight_bytes = 0.5\n").weight_bytes, 0.5);
  EXPECT_EQ(model_error("llama-3-8b", "weight_dtype = \"int3\"\n").key(), "model.weight_dtype");
  EXPECT_EQ(model_error("llama-3-8b", "kv_dtype = \"int4\"\n").key(), "model.kv_dtype");
  // MoE and MLA fields must come together.
  EXPECT_EQ(model_error("llama-3-8b", "experts_per_token = 2\n").key(), "model.num_experts");
  EXPECT_EQ(model_error("mixtral-8x7b", "experts_per_token = 9\n").key(), "model.experts_per_token");
  EXPECT_EQ(model_error("llama-3-8b", "qk_rope_head_dim = 64\n").key(), "model.kv_lora_rank");
  EXPECT_EQ(model_error("llama-3-8b", "num_layers = 99999999\n").key(), "model.num_layers");
  // A dense model's active parameters are all of them.
  EXPECT_DOUBLE_EQ(base.active_param_count(), base.param_count());
  EXPECT_DOUBLE_EQ(base.expected_active_experts(100), 0.0);
}

// ---- hybrid and sparse attention ----------------------------------------------------------------

TEST(ModelSpecTest, AttentionPatternCyclesOverTheLayers) {
  ModelSpec m;
  m.num_layers = 10;
  EXPECT_TRUE(m.uniform_full());
  EXPECT_EQ(m.layers_of(LayerAttention::kFull), 10);
  m.attention_pattern = "LLLF";  // 10 layers: two whole cycles, then L, L
  EXPECT_FALSE(m.uniform_full());
  EXPECT_EQ(m.layers_of(LayerAttention::kLinear), 8);
  EXPECT_EQ(m.layers_of(LayerAttention::kFull), 2);
  EXPECT_EQ(m.layer_attention(3), LayerAttention::kFull);
  EXPECT_EQ(m.layer_attention(9), LayerAttention::kLinear);
  EXPECT_EQ(m.attention_layers(), 2);
  m.attention_pattern = "FFFFFFFFFF";  // spelled out, every layer full: the models before hybrids
  EXPECT_TRUE(m.uniform_full());
}

TEST(ModelSpecTest, HybridPresetsAndOverrides) {
  const ModelSpec oss = parse_model("gpt-oss-120b");
  EXPECT_EQ(oss.attention_pattern, "SF");
  EXPECT_EQ(oss.attention_limits().window, 128);
  EXPECT_EQ(oss.expert_dtype(), DType::kMxfp4);
  // Any hybrid field can be overridden: a window of 4096 and nvfp4 experts.
  const ModelSpec wide = parse_model("gpt-oss-120b", "sliding_window = 4096\nexpert_weight_dtype = \"nvfp4\"\n");
  EXPECT_EQ(wide.sliding_window, 4096);
  EXPECT_DOUBLE_EQ(wide.expert_bytes(), 0.5625);
  // A dense preset made hybrid from [model]: Llama-3-8B with every other layer sliding.
  const ModelSpec llama = parse_model("llama-3-8b", "attention_pattern = \"sf\"\nsliding_window = 1024\n");
  EXPECT_EQ(llama.attention_pattern, "SF");
  EXPECT_DOUBLE_EQ(llama.window_kv_bytes_per_token(), 16.0 * 2 * 8 * 128 * 2);
  EXPECT_DOUBLE_EQ(llama.kv_bytes_per_token(), parse_model("llama-3-8b").kv_bytes_per_token());
  const ModelSpec next = parse_model("qwen3-next-80b-a3b", "state_dtype = \"fp32\"\n");
  EXPECT_DOUBLE_EQ(next.state_bytes, 4.0);
  const ModelSpec v32 = parse_model("deepseek-v3.2", "index_topk = 512\n");
  EXPECT_EQ(v32.attention_limits().topk, 512);
}

TEST(ModelSpecTest, HybridFieldsAreCheckedNamingTheKey) {
  EXPECT_EQ(model_error("llama-3-8b", "attention_pattern = \"FX\"\n").key(), "model.attention_pattern");
  EXPECT_EQ(model_error("llama-3-8b", "attention_pattern = \"S\"\n").key(), "model.sliding_window");
  EXPECT_EQ(model_error("llama-3-8b", "attention_pattern = \"LF\"\n").key(), "model.linear_num_key_heads");
  EXPECT_EQ(model_error("llama-3-8b", "attention_pattern = \"D\"\n").key(), "model.index_topk");
  EXPECT_EQ(model_error("llama-3-8b", "expert_weight_dtype = \"mxfp4\"\n").key(), "model.expert_weight_dtype");
  EXPECT_EQ(model_error("llama-3-8b", "attention_pattern = \"" + std::string(33, 'F') + "\"\n").key(),
            "model.attention_pattern");  // 33 letters for 32 layers
  EXPECT_EQ(model_error("qwen3-next-80b-a3b", "linear_num_value_heads = 24\n").key(), "model.linear_num_value_heads");
}

TEST(ModelSpecTest, DensePresetsPrintNoHybridKeys) {
  // The configuration text (and so every stored run's hash) of the models before hybrids is what
  // it was: their hybrid keys are unset, not defaulted.
  const core::Params root = parse_hw(hw_config("llama-3-8b", "h100-sxm"));
  const std::string toml = root.to_toml();
  for (const char* key : {"attention_pattern", "sliding_window", "expert_weight_dtype", "index_topk",
                          "linear_num_key_heads", "state_dtype", "fp4_peak_tflops"})
    EXPECT_EQ(toml.find(key), std::string::npos) << key;
  EXPECT_NE(parse_hw(hw_config("gpt-oss-120b", "b200")).to_toml().find("attention_pattern = \"SF\""), std::string::npos);
}

}  // namespace
}  // namespace servesim::hwmodels
