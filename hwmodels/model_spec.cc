#include "hwmodels/model_spec.h"

#include <memory>

#include "sim/core/format.h"

namespace servesim::hwmodels {

ModelRegistry& model_registry() {
  static ModelRegistry r("models", "served model architectures");
  return r;
}

double ModelSpec::layer_params() const {
  const double h = static_cast<double>(hidden_size);
  const double q_cols = static_cast<double>(num_heads * head_dim);
  const double kv_cols = static_cast<double>(num_kv_heads * head_dim);
  const double attention = h * q_cols + 2.0 * h * kv_cols + q_cols * h;  // Q, K, V, O
  const double mlp = (gated_mlp ? 3.0 : 2.0) * h * static_cast<double>(intermediate_size);
  const double norms = 2.0 * h;
  return attention + mlp + norms;
}

double ModelSpec::embedding_params() const {
  return static_cast<double>(vocab_size) * static_cast<double>(hidden_size);
}

double ModelSpec::lm_head_params() const { return tied_embeddings ? 0.0 : embedding_params(); }

double ModelSpec::param_count() const {
  const double final_norm = static_cast<double>(hidden_size);
  return static_cast<double>(num_layers) * layer_params() + embedding_params() + lm_head_params() +
         final_norm;
}

double ModelSpec::weight_bytes_total() const { return param_count() * weight_bytes; }

double ModelSpec::kv_bytes_per_token() const {
  return 2.0 * static_cast<double>(num_layers) * static_cast<double>(num_kv_heads) *
         static_cast<double>(head_dim) * kv_bytes;
}

double ModelSpec::decode_weight_bytes() const {
  const double lookup_only = tied_embeddings ? 0.0 : embedding_params();
  return (param_count() - lookup_only) * weight_bytes;
}

namespace {

struct ModelPreset {
  ModelSpec spec;
  std::string description;
};

ModelSpec llama(std::string name, int64_t layers, int64_t hidden, int64_t heads, int64_t kv_heads,
                int64_t intermediate, int64_t vocab, int64_t context) {
  ModelSpec m;
  m.name = std::move(name);
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_heads = heads;
  m.num_kv_heads = kv_heads;
  m.head_dim = hidden / heads;
  m.intermediate_size = intermediate;
  m.vocab_size = vocab;
  m.max_context = context;
  m.gated_mlp = true;
  m.tied_embeddings = false;
  m.weight_bytes = 2.0;  // fp16/bf16 checkpoints as released
  m.kv_bytes = 2.0;
  m.activation_bytes = 2.0;
  return m;
}

// Published architectures (the models' config.json on their Hugging Face model cards).
const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      {llama("llama-2-7b", 32, 4096, 32, 32, 11008, 32000, 4096),
       "Llama-2-7B: 32 layers, hidden 4096, 32 heads (MHA), SwiGLU 11008, vocab 32000, fp16"},
      {llama("llama-2-70b", 80, 8192, 64, 8, 28672, 32000, 4096),
       "Llama-2-70B: 80 layers, hidden 8192, 64 heads, 8 KV heads (GQA), SwiGLU 28672, fp16"},
      {llama("llama-3-8b", 32, 4096, 32, 8, 14336, 128256, 8192),
       "Llama-3-8B: 32 layers, hidden 4096, 32 heads, 8 KV heads, SwiGLU 14336, vocab 128256, fp16"},
      {llama("llama-3-70b", 80, 8192, 64, 8, 28672, 128256, 8192),
       "Llama-3-70B: 80 layers, hidden 8192, 64 heads, 8 KV heads, SwiGLU 28672, vocab 128256, fp16"},
      // The lecture notes' "7B model, 32 layers, 32 heads of dimension 128, half precision": the
      // Llama-2-7B shape, so its numbers (524,288 KV bytes per token) come out exactly.
      {llama("teaching-7b", 32, 4096, 32, 32, 11008, 32000, 4096),
       "the lecture notes' 7B teaching model (Llama-2-7B dimensions: 32 layers, 32 heads of 128, MHA)"},
  };
  return presets;
}

}  // namespace

std::vector<core::ParamSpec> model_param_specs(const ModelSpec& d) {
  using core::ParamSpec;
  return {
      ParamSpec::integer("num_layers", d.num_layers, "", "transformer blocks").at_least(1),
      ParamSpec::integer("hidden_size", d.hidden_size, "", "model (residual stream) width").at_least(1),
      ParamSpec::integer("num_heads", d.num_heads, "", "attention query heads").at_least(1),
      ParamSpec::integer("num_kv_heads", d.num_kv_heads, "",
                         "key/value heads (GQA groups); must divide num_heads")
          .at_least(1),
      ParamSpec::integer("head_dim", d.head_dim, "", "dimension of one attention head").at_least(1),
      ParamSpec::integer("intermediate_size", d.intermediate_size, "", "MLP inner width").at_least(1),
      ParamSpec::integer("vocab_size", d.vocab_size, "", "vocabulary (embedding and LM head rows)")
          .at_least(1),
      ParamSpec::integer("max_context", d.max_context, "tokens",
                         "longest sequence (prompt + output) the model accepts")
          .at_least(1),
      ParamSpec::boolean("gated_mlp", d.gated_mlp, "SwiGLU MLP (gate and up projections); false: up only"),
      ParamSpec::boolean("tied_embeddings", d.tied_embeddings, "LM head shares the embedding matrix"),
      ParamSpec::real("weight_bytes", d.weight_bytes, "bytes/element",
                      "storage of one weight (2 = fp16/bf16, 1 = fp8/int8, 0.5 = int4)")
          .above(0),
      ParamSpec::real("kv_bytes", d.kv_bytes, "bytes/element", "storage of one KV-cache element")
          .above(0),
      ParamSpec::real("activation_bytes", d.activation_bytes, "bytes/element",
                      "storage of one activation element")
          .above(0),
  };
}

ModelSpec model_from_params(const core::Params& p, const std::string& name) {
  ModelSpec m;
  m.name = name;
  m.num_layers = p.get_int("num_layers");
  m.hidden_size = p.get_int("hidden_size");
  m.num_heads = p.get_int("num_heads");
  m.num_kv_heads = p.get_int("num_kv_heads");
  m.head_dim = p.get_int("head_dim");
  m.intermediate_size = p.get_int("intermediate_size");
  m.vocab_size = p.get_int("vocab_size");
  m.max_context = p.get_int("max_context");
  m.gated_mlp = p.get_bool("gated_mlp");
  m.tied_embeddings = p.get_bool("tied_embeddings");
  m.weight_bytes = p.get_float("weight_bytes");
  m.kv_bytes = p.get_float("kv_bytes");
  m.activation_bytes = p.get_float("activation_bytes");
  if (m.num_heads % m.num_kv_heads != 0) {
    // Blame the key the user wrote; both are defaults only if a preset were inconsistent.
    const char* key = p.given("num_kv_heads") || !p.given("num_heads") ? "num_kv_heads" : "num_heads";
    p.fail(key, "num_kv_heads (" + std::to_string(m.num_kv_heads) + ") must divide num_heads (" +
                    std::to_string(m.num_heads) + "): each KV head serves a whole group of query heads");
  }
  return m;
}

const ModelSpec* find_model_preset(std::string_view name) {
  const std::string key = core::to_lower(name);
  for (const auto& p : model_presets())
    if (p.spec.name == key) return &p.spec;
  return nullptr;
}

namespace {

[[maybe_unused]] const bool kRegistered = [] {
  for (const auto& preset : model_presets()) {
    const std::string name = preset.spec.name;
    model_registry().add({name, preset.description, model_param_specs(preset.spec)},
                         [name](const core::Params& p) {
                           return std::make_unique<ModelSpec>(model_from_params(p, name));
                         });
  }
  return true;
}();

}  // namespace

}  // namespace servesim::hwmodels
