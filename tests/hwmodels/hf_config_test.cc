#include "hwmodels/hf_config.h"

#include <gtest/gtest.h>

#include <fstream>

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
