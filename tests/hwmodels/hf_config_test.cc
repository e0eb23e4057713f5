#include "hwmodels/hf_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "hwmodels/roofline.h"
#include "sim/core/rng.h"
#include "tests/hwmodels/hw_test_util.h"
#include "tests/test_paths.h"

namespace servesim::hwmodels {
namespace {

std::string fixture(const std::string& dir) {
  return servesim::testing::source_dir() + "/tests/hwmodels/testdata/hf/" + dir + "/config.json";
}

core::InputError parse_error(const std::string& json) {
  try {
    parse_hf_config(json, "c.json");
  } catch (const core::InputError& e) {
    return e;
  }
  ADD_FAILURE() << "no InputError for " << json;
  return core::InputError("", 0, "", "");
}

const char* kLlama = R"({
  "model_type": "llama",
  "hidden_size": 4096,
  "num_hidden_layers": 32,
  "num_attention_heads": 32,
  "num_key_value_heads": 8,
  "intermediate_size": 14336,
  "vocab_size": 128256,
  "max_position_embeddings": 8192,
  "torch_dtype": "bfloat16"
})";

TEST(HfConfigTest, LlamaMatchesThePreset) {
  const ModelSpec m = read_hf_config(fixture("Meta-Llama-3-8B"));
  const ModelSpec& preset = *find_model_preset("llama-3-8b");
  EXPECT_EQ(m.name, "Meta-Llama-3-8B");  // the directory of config.json
  EXPECT_EQ(m.num_layers, preset.num_layers);
  EXPECT_EQ(m.hidden_size, preset.hidden_size);
  EXPECT_EQ(m.num_heads, preset.num_heads);
  EXPECT_EQ(m.num_kv_heads, preset.num_kv_heads);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.intermediate_size, preset.intermediate_size);
  EXPECT_EQ(m.vocab_size, preset.vocab_size);
  EXPECT_EQ(m.max_context, 8192);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_EQ(m.weight_dtype, DType::kBf16);
  EXPECT_DOUBLE_EQ(m.param_count(), preset.param_count());
  EXPECT_DOUBLE_EQ(m.kv_bytes_per_token(), preset.kv_bytes_per_token());
}

TEST(HfConfigTest, MistralWithNullHeadDim) {
  const ModelSpec m = read_hf_config(fixture("Mistral-7B-v0.3"));
  EXPECT_EQ(m.head_dim, 128);  // "head_dim": null -> hidden / heads
  EXPECT_EQ(m.vocab_size, 32768);
  EXPECT_NEAR(m.param_count(), 7.248e9, 0.001e9);  // published 7.25B
  EXPECT_DOUBLE_EQ(m.param_count(), find_model_preset("mistral-7b")->param_count());
}

TEST(HfConfigTest, Qwen2HasQkvBiases) {
  const ModelSpec m = read_hf_config(fixture("Qwen2-7B"));
  EXPECT_TRUE(m.qkv_bias);
  EXPECT_EQ(m.num_kv_heads, 4);
  EXPECT_NEAR(m.param_count(), 7.616e9, 0.001e9);  // published 7.62B
  // The biases are three vectors per block: 3584 + 2 x 512 parameters.
  ModelSpec no_bias = m;
  no_bias.qkv_bias = false;
  EXPECT_DOUBLE_EQ(m.param_count() - no_bias.param_count(), 28.0 * (3584 + 2 * 512));
  EXPECT_DOUBLE_EQ(m.kv_bytes_per_token(), 2.0 * 28 * 4 * 128 * 2);
  EXPECT_DOUBLE_EQ(m.param_count(), find_model_preset("qwen2-7b")->param_count());
}

TEST(HfConfigTest, MixtralIsMixtureOfExperts) {
  const ModelSpec m = read_hf_config(fixture("Mixtral-8x7B"));
  EXPECT_TRUE(m.is_moe());
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_EQ(m.experts_per_token, 2);
  EXPECT_EQ(m.moe_intermediate_size, 14336);
  EXPECT_EQ(m.moe_layers(), 32);
  // Published: 46.7B parameters, 12.9B active per token.
  EXPECT_NEAR(m.param_count(), 46.70e9, 0.01e9);
  EXPECT_NEAR(m.active_param_count(), 12.88e9, 0.01e9);
  EXPECT_DOUBLE_EQ(m.flops_per_token(), 2.0 * m.active_param_count());
  EXPECT_DOUBLE_EQ(m.kv_bytes_per_token(), 2.0 * 32 * 8 * 128 * 2);
  EXPECT_DOUBLE_EQ(m.param_count(), find_model_preset("mixtral-8x7b")->param_count());
}

TEST(HfConfigTest, DeepSeekV3IsMlaAndMoeWithSharedExperts) {
  const ModelSpec m = read_hf_config(fixture("DeepSeek-V3"));
  EXPECT_TRUE(m.is_mla());
  EXPECT_TRUE(m.is_moe());
  EXPECT_EQ(m.kv_lora_rank, 512);
  EXPECT_EQ(m.q_lora_rank, 1536);
  EXPECT_EQ(m.qk_rope_head_dim, 64);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.v_head_dim, 128);
  EXPECT_EQ(m.num_shared_experts, 1);
  EXPECT_EQ(m.dense_layers, 3);
  EXPECT_EQ(m.moe_layers(), 58);
  EXPECT_EQ(m.weight_dtype, DType::kFp8);  // quantization_config: fp8
  EXPECT_EQ(m.kv_dtype, DType::kBf16);
  EXPECT_DOUBLE_EQ(m.weight_bytes, 1.0);
  // Published: 671B parameters (without the multi-token-prediction module), 37B activated.
  EXPECT_NEAR(m.param_count(), 671e9, 1e9);
  EXPECT_NEAR(m.active_param_count(), 37.5e9, 0.6e9);
  // MLA caches 512 + 64 elements per token and layer, the seeds' "~576 elem/token/layer".
  EXPECT_DOUBLE_EQ(m.kv_bytes_per_token(), 61.0 * 576 * 2);
  EXPECT_DOUBLE_EQ(m.param_count(), find_model_preset("deepseek-v3")->param_count());
}

// ---- hybrid and sparse attention ----------------------------------------------------------------

TEST(HfConfigTest, GptOssAlternatesSlidingAndFullLayersWithMxfp4Experts) {
  const ModelSpec m = read_hf_config(fixture("gpt-oss-120b"));
  EXPECT_EQ(m.attention_pattern, "SF");  // layer_types: sliding, full, sliding, ... (36 entries)
  EXPECT_EQ(m.layer_attention(0), LayerAttention::kSlidingWindow);
  EXPECT_EQ(m.layer_attention(35), LayerAttention::kFull);
  EXPECT_EQ(m.layers_of(LayerAttention::kSlidingWindow), 18);
  EXPECT_EQ(m.layers_of(LayerAttention::kFull), 18);
  EXPECT_EQ(m.sliding_window, 128);
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_TRUE(m.qkv_bias);
  EXPECT_EQ(m.num_experts, 128);
  EXPECT_EQ(m.experts_per_token, 4);
  EXPECT_EQ(m.moe_intermediate_size, 2880);
  EXPECT_EQ(m.moe_layers(), 36);
  // quantization_config: mxfp4, with self_attn among modules_to_not_convert: experts only.
  EXPECT_EQ(m.weight_dtype, DType::kBf16);
  EXPECT_EQ(m.expert_dtype(), DType::kMxfp4);
  EXPECT_DOUBLE_EQ(m.expert_bytes(), 0.53125);
  // By hand from config.json: a layer caches K and V of 8 heads of 64 in bf16, 2 x 8 x 64 x 2 =
  // 2048 bytes per token; 18 full layers keep every token, 18 window layers the last 128.
  EXPECT_DOUBLE_EQ(m.full_kv_bytes_per_token(), 18.0 * 2048);
  EXPECT_DOUBLE_EQ(m.window_kv_bytes_per_token(), 18.0 * 2048);
  EXPECT_DOUBLE_EQ(m.state_bytes_per_sequence(), 0.0);
  EXPECT_DOUBLE_EQ(m.sequence_kv_bytes(100000), 18.0 * 2048 * 100000 + 18.0 * 2048 * 128);
  EXPECT_DOUBLE_EQ(m.sequence_kv_bytes(100), 36.0 * 2048 * 100);
  // The model card: 116.83B parameters (114.71B MoE, 0.96B attention, 1.16B embedding and
  // unembedding), 5.13B active not counting the embedding table; the experts' and router's biases
  // (0.04B) are not modelled.
  EXPECT_NEAR(m.param_count(), 116.83e9, 0.06e9);
  EXPECT_NEAR(m.active_param_count() - m.embedding_params(), 5.13e9, 0.02e9);
  EXPECT_NEAR(static_cast<double>(m.num_layers) * m.attention_params(), 0.96e9, 0.005e9);
  // The checkpoint is 60.8 GiB: experts at 4.25 bits, everything else bf16.
  EXPECT_NEAR(m.weight_bytes_total() / kBytesPerGib, 60.8, 0.2);
  EXPECT_DOUBLE_EQ(m.param_count(), find_model_preset("gpt-oss-120b")->param_count());
  EXPECT_DOUBLE_EQ(m.weight_bytes_total(), find_model_preset("gpt-oss-120b")->weight_bytes_total());
}

TEST(HfConfigTest, Qwen3NextIsThreeLinearLayersToOneFull) {
  const ModelSpec m = read_hf_config(fixture("Qwen3-Next-80B-A3B-Instruct"));
  EXPECT_EQ(m.attention_pattern, "LLLF");  // full_attention_interval = 4
  EXPECT_EQ(m.layers_of(LayerAttention::kLinear), 36);
  EXPECT_EQ(m.layers_of(LayerAttention::kFull), 12);
  EXPECT_TRUE(m.attn_output_gate);
  EXPECT_EQ(m.head_dim, 256);
  EXPECT_EQ(m.num_experts, 512);
  EXPECT_EQ(m.experts_per_token, 10);
  EXPECT_EQ(m.num_shared_experts, 1);  // shared_expert_intermediate_size 512 = one expert
  EXPECT_EQ(m.linear_num_key_heads, 16);
  EXPECT_EQ(m.linear_num_value_heads, 32);
  EXPECT_EQ(m.linear_conv_kernel, 4);
  EXPECT_EQ(m.state_dtype, DType::kBf16);  // no mamba_ssm_dtype: the model's dtype
  // By hand: 12 full layers x K and V of 2 heads of 256 in bf16 = 12 x 2048 bytes per token. A
  // Gated DeltaNet layer's state: 32 value heads x 128 x 128 bf16 = 1,048,576 bytes, plus the
  // convolution's last 3 inputs of 2 x 16 x 128 + 32 x 128 = 8192 channels, 49,152 bytes.
  EXPECT_DOUBLE_EQ(m.full_kv_bytes_per_token(), 12.0 * 2048);
  EXPECT_DOUBLE_EQ(m.window_kv_bytes_per_token(), 0.0);
  EXPECT_DOUBLE_EQ(m.state_bytes_per_sequence(), 36.0 * (1048576 + 49152));
  EXPECT_DOUBLE_EQ(m.sequence_kv_bytes(4096) - m.sequence_kv_bytes(1024), 12.0 * 2048 * 3072);
  // Published: 80B total, "3B activated" (we count 3.25B without the embedding and LM head).
  EXPECT_NEAR(m.param_count(), 80e9, 1.0e9);
  EXPECT_NEAR(m.active_param_count() - m.embedding_params() - m.lm_head_params(), 3.0e9, 0.3e9);
  EXPECT_DOUBLE_EQ(m.param_count(), find_model_preset("qwen3-next-80b-a3b")->param_count());
  // layer_types, when given, says the same.
  std::string text;
  {
    std::ifstream in(fixture("Qwen3-Next-80B-A3B-Instruct"));
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::string types = "\"layer_types\": [";
  for (int i = 0; i < 48; ++i) types += std::string(i ? ", " : "") + (i % 4 == 3 ? "\"full_attention\"" : "\"linear_attention\"");
  text.insert(1, types + "],\n");
  EXPECT_EQ(parse_hf_config(text, "c.json").attention_pattern, "LLLF");
  // A Qwen3.5-style fp32 state doubles the recurrent part.
  std::string fp32 = text;
  fp32.insert(1, "\"mamba_ssm_dtype\": \"float32\",\n");
  EXPECT_DOUBLE_EQ(parse_hf_config(fp32, "c.json").state_bytes_per_sequence(), 36.0 * (2 * 1048576 + 49152));
}

TEST(HfConfigTest, DeepSeekV32IsMlaWithSparseAttentionOnEveryLayer) {
  const ModelSpec m = read_hf_config(fixture("DeepSeek-V3.2-Exp"));
  const ModelSpec v3 = read_hf_config(fixture("DeepSeek-V3"));
  EXPECT_EQ(m.attention_pattern, "D");
  EXPECT_EQ(m.layers_of(LayerAttention::kSparse), 61);
  EXPECT_EQ(m.index_topk, 2048);
  EXPECT_EQ(m.index_n_heads, 64);
  EXPECT_EQ(m.index_head_dim, 128);
  EXPECT_EQ(m.attention_limits().topk, 2048);
  EXPECT_EQ(m.attention_limits().window, 0);
  // By hand: the MLA latent, (512 + 64) x 2 bytes, plus the indexer's key: 128 fp8 values and one
  // fp32 scale, 132 bytes, per layer and token.
  EXPECT_DOUBLE_EQ(m.indexer_key_bytes_per_token(), 132.0);
  EXPECT_DOUBLE_EQ(m.full_kv_bytes_per_token(), 61.0 * (576 * 2 + 132));
  EXPECT_DOUBLE_EQ(m.kv_bytes_per_token(), 78324.0);
  // The indexer adds per layer wq_b (1536 x 64 x 128), wk (7168 x 128), weights_proj (7168 x 64)
  // and k_norm (2 x 128) to DeepSeek-V3.
  EXPECT_DOUBLE_EQ(m.param_count() - v3.param_count(), 61.0 * (1536.0 * 8192 + 7168.0 * 128 + 7168.0 * 64 + 256));
  EXPECT_DOUBLE_EQ(m.param_count(), find_model_preset("deepseek-v3.2")->param_count());
}

TEST(HfConfigTest, Qwen3DenseIsTheHybridsComparator) {
  const ModelSpec m = read_hf_config(fixture("Qwen3-32B"));
  EXPECT_TRUE(m.uniform_full());
  EXPECT_EQ(m.head_dim, 128);  // 64 heads of 128 on a 5120 hidden state: head_dim given
  EXPECT_FALSE(m.qkv_bias);
  EXPECT_NEAR(m.param_count(), 32.8e9, 0.05e9);  // published: 32.8B
  // 64 layers x K and V of 8 heads of 128 in bf16: 262,144 bytes per token, 10.7x Qwen3-Next's
  // full layers (24,576).
  EXPECT_DOUBLE_EQ(m.kv_bytes_per_token(), 64.0 * 2 * 8 * 128 * 2);
  EXPECT_DOUBLE_EQ(m.param_count(), find_model_preset("qwen3-32b")->param_count());
}

TEST(HfConfigTest, MistralSlidingWindowSlidesEveryLayer) {
  std::string text = kLlama;
  text.replace(text.find("\"llama\""), 7, "\"mistral\"");
  text.insert(1, "\"sliding_window\": 4096,\n");
  const ModelSpec m = parse_hf_config(text, "c.json");
  EXPECT_EQ(m.attention_pattern, "S");
  EXPECT_EQ(m.sliding_window, 4096);
  EXPECT_DOUBLE_EQ(m.full_kv_bytes_per_token(), 0.0);
  EXPECT_DOUBLE_EQ(m.sequence_kv_bytes(10000), 2.0 * 32 * 8 * 128 * 2 * 4096);
  // "sliding_window": null (Mistral v0.3, Mixtral) keeps every layer full.
  EXPECT_TRUE(read_hf_config(fixture("Mistral-7B-v0.3")).uniform_full());
  EXPECT_TRUE(read_hf_config(fixture("Mixtral-8x7B")).uniform_full());
}

TEST(HfConfigTest, Fp4QuantisationMethods) {
  const std::string nv =
      std::string(kLlama).insert(1, "\"quantization_config\": {\"quant_method\": \"modelopt\", \"quant_algo\": \"NVFP4\"},\n");
  const ModelSpec m = parse_hf_config(nv, "c.json");
  EXPECT_EQ(m.weight_dtype, DType::kNvfp4);
  EXPECT_DOUBLE_EQ(m.weight_bytes, 0.5625);
  EXPECT_FALSE(m.expert_weight_dtype.has_value());
  const std::string mx = std::string(kLlama).insert(1, "\"quantization_config\": {\"quant_method\": \"mxfp4\"},\n");
  EXPECT_EQ(parse_hf_config(mx, "c.json").weight_dtype, DType::kMxfp4);
}

TEST(HfConfigTest, HybridConfigErrorsNameTheFieldAndLine) {
  std::string gpt;
  {
    std::ifstream in(fixture("gpt-oss-120b"));
    gpt.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  {
    // One layer type too few.
    std::string text = gpt;
    text.erase(text.find("\"sliding_attention\",\n"), std::string("\"sliding_attention\",\n    ").size());
    const core::InputError e = parse_error(text);
    EXPECT_EQ(e.field(), "layer_types");
    EXPECT_EQ(e.line(), 15);
    EXPECT_NE(std::string(e.what()).find("35 entries for num_hidden_layers = 36"), std::string::npos) << e.what();
  }
  {
    std::string text = gpt;
    const size_t at = text.find("\"full_attention\"");
    text.replace(at, 16, "\"chunked_attention\"");
    const core::InputError e = parse_error(text);
    EXPECT_EQ(e.field(), "layer_types[1]");
    EXPECT_EQ(e.line(), 15);  // the list's line
    EXPECT_NE(std::string(e.what()).find("chunked_attention"), std::string::npos);
  }
  {
    std::string text = gpt;
    text.replace(text.find("\"sliding_window\": 128"), 21, "\"sliding_window\": null");
    EXPECT_EQ(parse_error(text).field(), "sliding_window");
  }
  {
    std::string text = gpt;
    const size_t from = text.find("\"layer_types\"");
    text.erase(from, text.find("],", from) + 3 - from);
    EXPECT_EQ(parse_error(text).field(), "layer_types");  // gpt-oss without its layer types
  }
  std::string next;
  {
    std::ifstream in(fixture("Qwen3-Next-80B-A3B-Instruct"));
    next.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  {
    std::string text = next;
    text.replace(text.find("\"linear_num_value_heads\": 32"), 28, "\"linear_num_value_heads\": 24");
    const core::InputError e = parse_error(text);
    EXPECT_EQ(e.field(), "linear_num_value_heads");  // 24 value heads cannot share 16 key heads
    EXPECT_EQ(e.line(), 19);
  }
  {
    std::string text = next;
    text.replace(text.find("\"mlp_only_layers\": []"), 21, "\"mlp_only_layers\": [0]");
    EXPECT_EQ(parse_error(text).field(), "mlp_only_layers");
  }
  {
    std::string text = next;
    text.erase(text.find("\"linear_key_head_dim\": 128,"), std::string("\"linear_key_head_dim\": 128,").size());
    const core::InputError e = parse_error(text);
    EXPECT_EQ(e.field(), "linear_key_head_dim");
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos);
  }
  {
    std::string text = next;
    text.replace(text.find("\"full_attention_interval\": 4"), 28, "\"full_attention_interval\": 0");
    EXPECT_EQ(parse_error(text).field(), "full_attention_interval");
  }
  std::string v32;
  {
    std::ifstream in(fixture("DeepSeek-V3.2-Exp"));
    v32.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  {
    std::string text = v32;
    text.erase(text.find("\"index_topk\": 2048,"), std::string("\"index_topk\": 2048,").size());
    const core::InputError e = parse_error(text);
    EXPECT_EQ(e.field(), "index_topk");
    EXPECT_NE(std::string(e.what()).find("deepseek_v32"), std::string::npos) << e.what();
  }
}

TEST(HfConfigTest, WeightDtypeOverrideSkipsQuantizationConfig) {
  const std::string text = std::string(kLlama).insert(1, "\"quantization_config\": {\"quant_method\": \"bitsandbytes\"},\n");
  const core::InputError e = parse_error(text);
  EXPECT_EQ(e.field(), "quantization_config.quant_method");
  EXPECT_NE(std::string(e.what()).find("weight_dtype"), std::string::npos) << e.what();
  const ModelSpec m = parse_hf_config(text, "c.json", "", /*weight_dtype_given=*/true);
  EXPECT_EQ(m.weight_dtype, DType::kBf16);
}

TEST(HfConfigTest, GptqFourBitsIsInt4) {
  const std::string text =
      std::string(kLlama).insert(1, "\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4},\n");
  const ModelSpec m = parse_hf_config(text, "c.json");
  EXPECT_EQ(m.weight_dtype, DType::kInt4);
  EXPECT_DOUBLE_EQ(m.weight_bytes, 0.5 + 2.5 / 128);
}

TEST(HfConfigTest, ErrorsNameTheFieldAndLine) {
  {
    const core::InputError e = parse_error("{\"model_type\": \"llama\",\n \"hidden_size\": 4096,\n \"oops\"}");
    EXPECT_EQ(e.line(), 3);
    EXPECT_NE(std::string(e.what()).find("malformed JSON"), std::string::npos);
  }
  {
    std::string text = kLlama;
    text.replace(text.find("\"vocab_size\""), std::string("\"vocab_size\": 128256").size(), "\"vocab\": 1");
    const core::InputError e = parse_error(text);
    EXPECT_EQ(e.field(), "vocab_size");
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos);
  }
  {
    std::string text = kLlama;
    text.replace(text.find("4096"), 4, "\"big\"");
    const core::InputError e = parse_error(text);
    EXPECT_EQ(e.field(), "hidden_size");
    EXPECT_EQ(e.line(), 3);
    EXPECT_NE(std::string(e.what()).find("expected an integer"), std::string::npos);
  }
  {
    std::string text = kLlama;
    text.replace(text.find("\"llama\""), 7, "\"gemma\"");
    EXPECT_EQ(parse_error(text).field(), "model_type");
  }
  {
    std::string text = kLlama;
    text.replace(text.find("\"num_key_value_heads\": 8"), 24, "\"num_key_value_heads\": 5");
    const core::InputError e = parse_error(text);
    EXPECT_EQ(e.field(), "num_key_value_heads");
    EXPECT_EQ(e.line(), 6);
  }
  {
    std::string text = kLlama;
    text.replace(text.find("32,\n  \"num_attention_heads\""), 2, "-3");
    EXPECT_EQ(parse_error(text).field(), "num_hidden_layers");
  }
  EXPECT_EQ(parse_error("[1, 2]").line(), 1);  // where the value that is not an object starts
  EXPECT_EQ(parse_error("\n\n  \"text\"").line(), 3);
  // Nesting too deep: the line where it passes 64 levels (a fuzzer's find).
  EXPECT_EQ(parse_error("{\"a\":\n" + std::string(70, '[')).line(), 2);
  EXPECT_THROW(read_hf_config("/no/such/config.json"), core::InputError);
}

// Whatever bytes come in, the reader throws InputError or returns a consistent model.
TEST(HfConfigTest, GarbageOnlyRaisesInputErrors) {
  core::Rng rng(7, "hf-garbage");
  const std::string base = kLlama;
  for (int i = 0; i < 3000; ++i) {
    std::string text = base;
    const int edits = 1 + static_cast<int>(rng.uniform_int(4));
    for (int e = 0; e < edits; ++e) {
      const size_t at = static_cast<size_t>(rng.uniform_int(text.size()));
      const char c = "{}[]\",:0123456789-.eE truefalsnul\\"[rng.uniform_int(34)];
      if (rng.uniform_int(2) == 0) text[at] = c;
      else text.erase(at, 1 + static_cast<size_t>(rng.uniform_int(6)));
    }
    try {
      const ModelSpec m = parse_hf_config(text, "fuzz.json");
      EXPECT_EQ(model_problem(m), "");
      EXPECT_GT(m.param_count(), 0);
    } catch (const core::InputError&) {
    }
  }
  EXPECT_THROW(parse_hf_config(std::string(200, '['), "deep.json"), core::InputError);
}

TEST(HfConfigTest, ModelKindReadsTheFileAndAppliesOverrides) {
  servesim::testing::TempDir dir;
  {
    std::ofstream(dir.file("config.json")) << kLlama;
  }
  const std::string toml = "[model]\nkind = \"hf_config\"\npath = \"config.json\"\nnum_layers = 16\n"
                           "kv_dtype = \"fp8\"\n[gpu]\nkind = \"h100-sxm\"\n";
  const core::Params root = core::parse_config(toml, dir.file("run.toml"), hwtest::hw_schema(), {}, dir.path());
  const auto m = model_registry().make(root.section("model"));
  EXPECT_EQ(m->num_layers, 16);
  EXPECT_EQ(m->hidden_size, 4096);
  EXPECT_EQ(m->kv_dtype, DType::kFp8);
  EXPECT_DOUBLE_EQ(m->kv_bytes_per_token(), 2.0 * 16 * 8 * 128 * 1);

  const std::string bad = "[model]\nkind = \"hf_config\"\npath = \"config.json\"\nnum_kv_heads = 5\n[gpu]\nkind = \"h100-sxm\"\n";
  const core::Params bad_root = core::parse_config(bad, dir.file("run.toml"), hwtest::hw_schema(), {}, dir.path());
  try {
    model_registry().make(bad_root.section("model"));
    FAIL() << "num_kv_heads = 5 accepted";
  } catch (const core::ConfigError& e) {
    EXPECT_EQ(e.key(), "model.num_kv_heads");
  }
  const std::string missing = "[model]\nkind = \"hf_config\"\npath = \"nope.json\"\n[gpu]\nkind = \"h100-sxm\"\n";
  const core::Params missing_root = core::parse_config(missing, dir.file("run.toml"), hwtest::hw_schema(), {}, dir.path());
  try {  // a missing file is reported where the configuration names it
    model_registry().make(missing_root.section("model"));
    FAIL() << "a missing config.json accepted";
  } catch (const core::ConfigError& e) {
    EXPECT_EQ(e.key(), "model.path");
    EXPECT_NE(std::string(e.what()).find("nope.json: no such file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace servesim::hwmodels
