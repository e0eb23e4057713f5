#include "hwmodels/model_spec.h"

#include <cmath>
#include <memory>

#include "sim/core/format.h"

namespace servesim::hwmodels {

ModelRegistry& model_registry() {
  static ModelRegistry r("models", "served model architectures");
  return r;
}

namespace {
double d(int64_t v) { return static_cast<double>(v); }
}  // namespace

double ModelSpec::attention_params() const {
  const double h = d(hidden_size);
  const double heads = d(num_heads);
  if (is_mla()) {
    const double qk = d(qk_head_dim());
    const double q = q_lora_rank > 0 ? h * d(q_lora_rank) + d(q_lora_rank) * heads * qk : h * heads * qk;
    const double kv_a = h * d(kv_lora_rank + qk_rope_head_dim);
    const double kv_b = d(kv_lora_rank) * heads * d(head_dim + v_head_dim);
    const double o = heads * d(v_head_dim) * h;
    return q + kv_a + kv_b + o;
  }
  const double q_cols = d(num_heads * head_dim);
  const double kv_cols = d(num_kv_heads * head_dim);
  const double bias = qkv_bias ? q_cols + 2.0 * kv_cols : 0.0;
  return h * q_cols + 2.0 * h * kv_cols + q_cols * h + bias;  // Q, K, V, O
}

double ModelSpec::dense_mlp_params() const {
  return (gated_mlp ? 3.0 : 2.0) * d(hidden_size) * d(intermediate_size);
}

double ModelSpec::expert_params() const {
  return (gated_mlp ? 3.0 : 2.0) * d(hidden_size) * d(moe_intermediate_size);
}

double ModelSpec::router_params() const { return d(hidden_size) * d(num_experts); }

namespace {
// Norms of one block: the two RMSNorms, plus MLA's norms inside its low-rank bottlenecks.
double block_norm_params(const ModelSpec& m) {
  double n = 2.0 * d(m.hidden_size);
  if (m.is_mla()) n += d(m.kv_lora_rank) + d(m.q_lora_rank);
  return n;
}
double moe_mlp_params(const ModelSpec& m) {
  return m.router_params() + d(m.num_experts + m.num_shared_experts) * m.expert_params();
}
double moe_mlp_active_params(const ModelSpec& m) {
  return m.router_params() + d(m.experts_per_token + m.num_shared_experts) * m.expert_params();
}
}  // namespace

double ModelSpec::layer_params() const {
  if (!is_moe()) return attention_params() + dense_mlp_params() + block_norm_params(*this);
  const double mlp = (d(dense_mlp_layers()) * dense_mlp_params() + d(moe_layers()) * moe_mlp_params(*this)) /
                     d(num_layers);
  return attention_params() + mlp + block_norm_params(*this);
}

double ModelSpec::embedding_params() const { return d(vocab_size) * d(hidden_size); }

double ModelSpec::lm_head_params() const { return tied_embeddings ? 0.0 : embedding_params(); }

namespace {
double blocks_params(const ModelSpec& m, bool active) {
  const double common = m.attention_params() + block_norm_params(m);
  if (!m.is_moe()) return d(m.num_layers) * (common + m.dense_mlp_params());
  const double moe = active ? moe_mlp_active_params(m) : moe_mlp_params(m);
  return d(m.num_layers) * common + d(m.dense_mlp_layers()) * m.dense_mlp_params() + d(m.moe_layers()) * moe;
}
}  // namespace

double ModelSpec::param_count() const {
  const double final_norm = d(hidden_size);
  if (!is_moe()) return d(num_layers) * layer_params() + embedding_params() + lm_head_params() + final_norm;
  return blocks_params(*this, false) + embedding_params() + lm_head_params() + final_norm;
}

double ModelSpec::active_param_count() const {
  if (!is_moe()) return param_count();
  return blocks_params(*this, true) + embedding_params() + lm_head_params() + d(hidden_size);
}

double ModelSpec::linear_params() const {
  const double bias = qkv_bias && !is_mla() ? d(num_heads * head_dim) + 2.0 * d(num_kv_heads * head_dim) : 0.0;
  const double attention = attention_params() - bias;
  const double experts = d(moe_layers()) * d(num_experts + num_shared_experts) * expert_params();
  return d(num_layers) * attention + d(dense_mlp_layers()) * dense_mlp_params() + experts;
}

double ModelSpec::weight_bytes_total() const {
  const double linear = linear_params();
  return linear * weight_bytes + (param_count() - linear) * activation_bytes;
}

double ModelSpec::kv_bytes_per_token() const {
  if (is_mla()) return d(num_layers) * d(kv_lora_rank + qk_rope_head_dim) * kv_bytes;
  return 2.0 * d(num_layers) * d(num_kv_heads) * d(head_dim) * kv_bytes;
}

double ModelSpec::expected_active_experts(double tokens) const {
  if (!is_moe() || tokens <= 0) return 0.0;
  const double e = d(num_experts);
  return e * (1.0 - std::pow(1.0 - d(experts_per_token) / e, tokens));
}

double ModelSpec::decode_weight_bytes(double tokens) const {
  const double lookup_only = tied_embeddings ? 0.0 : embedding_params();
  const double linear = linear_params();
  double bytes = linear * weight_bytes + (param_count() - linear - lookup_only) * activation_bytes;
  if (is_moe()) {
    const double idle = d(num_experts) - expected_active_experts(tokens);
    bytes -= d(moe_layers()) * idle * expert_params() * weight_bytes;
  }
  return bytes;
}

std::string model_problem(const ModelSpec& m) {
  const auto s = [](int64_t v) { return std::to_string(v); };
  if (!m.is_mla() && m.num_heads % m.num_kv_heads != 0)
    return "num_kv_heads: num_kv_heads (" + s(m.num_kv_heads) + ") must divide num_heads (" + s(m.num_heads) +
           "): each KV head serves a whole group of query heads";
  if (m.kv_dtype == DType::kInt4)
    return "kv_dtype: int4 is a weight-only format; the KV cache takes fp32, fp16, bf16, fp8 or int8";
  if (m.is_moe()) {
    if (m.experts_per_token < 1 || m.experts_per_token > m.num_experts)
      return "experts_per_token: a MoE model routes each token to 1..num_experts (" + s(m.num_experts) +
             ") experts, got " + s(m.experts_per_token);
    if (m.moe_intermediate_size < 1) return "moe_intermediate_size: a MoE model needs the experts' MLP width";
    if (m.dense_layers >= m.num_layers)
      return "dense_layers: " + s(m.dense_layers) + " dense blocks leave no MoE block of the " + s(m.num_layers);
  } else if (m.experts_per_token > 0 || m.num_shared_experts > 0 || m.dense_layers > 0) {
    return "num_experts: experts_per_token, num_shared_experts and dense_layers describe a MoE model; "
           "set num_experts too";
  }
  if (m.is_mla()) {
    if (m.qk_rope_head_dim < 1 || m.v_head_dim < 1)
      return "qk_rope_head_dim: multi-head latent attention (kv_lora_rank > 0) needs qk_rope_head_dim and "
             "v_head_dim";
  } else if (m.q_lora_rank > 0 || m.qk_rope_head_dim > 0 || m.v_head_dim > 0) {
    return "kv_lora_rank: q_lora_rank, qk_rope_head_dim and v_head_dim describe multi-head latent attention; "
           "set kv_lora_rank too";
  }
  return "";
}

namespace {

struct ModelPreset {
  ModelSpec spec;
  std::string description;
};

ModelSpec llama(std::string name, int64_t layers, int64_t hidden, int64_t heads, int64_t kv_heads,
                int64_t intermediate, int64_t vocab, int64_t context, DType dtype = DType::kFp16) {
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
  m.weight_dtype = dtype;  // as released
  m.kv_dtype = dtype;
  m.weight_bytes = dtype_bytes(dtype);
  m.kv_bytes = dtype_bytes(dtype);
  m.activation_bytes = 2.0;
  return m;
}

ModelSpec mixtral_8x7b() {
  ModelSpec m = llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768, DType::kBf16);
  m.num_experts = 8;
  m.experts_per_token = 2;
  m.moe_intermediate_size = 14336;
  return m;
}

ModelSpec deepseek_v3() {
  ModelSpec m = llama("deepseek-v3", 61, 7168, 128, 128, 18432, 129280, 163840, DType::kFp8);
  m.head_dim = 128;  // qk_nope_head_dim
  m.kv_dtype = DType::kBf16;
  m.kv_bytes = 2.0;
  m.num_experts = 256;
  m.experts_per_token = 8;
  m.moe_intermediate_size = 2048;
  m.num_shared_experts = 1;
  m.dense_layers = 3;
  m.kv_lora_rank = 512;
  m.q_lora_rank = 1536;
  m.qk_rope_head_dim = 64;
  m.v_head_dim = 128;
  m.mtp_layers = 1;  // num_nextn_predict_layers
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
      {llama("mistral-7b", 32, 4096, 32, 8, 14336, 32768, 32768, DType::kBf16),
       "Mistral-7B-v0.3: 32 layers, hidden 4096, 32 heads, 8 KV heads, SwiGLU 14336, vocab 32768, bf16"},
      {[] {
         ModelSpec m = llama("qwen2-7b", 28, 3584, 28, 4, 18944, 152064, 32768, DType::kBf16);
         m.qkv_bias = true;
         return m;
       }(),
       "Qwen2-7B: 28 layers, hidden 3584, 28 heads, 4 KV heads, QKV biases, SwiGLU 18944, vocab 152064, bf16"},
      {mixtral_8x7b(),
       "Mixtral-8x7B: 32 layers, hidden 4096, 8 KV heads, 8 experts of 14336 (top-2), 46.7B total, "
       "12.9B active, bf16"},
      {deepseek_v3(),
       "DeepSeek-V3: 61 layers (3 dense), hidden 7168, 128 heads, MLA (latent 512 + rope 64), 256 "
       "routed experts of 2048 (top-8) + 1 shared, 671B total, 37B active, fp8 weights"},
  };
  return presets;
}

core::ParamSpec dim(std::string name, int64_t def, std::string unit, std::string description) {
  return core::ParamSpec::integer(std::move(name), def, std::move(unit), std::move(description))
      .range(1, static_cast<double>(kMaxModelDim));
}
core::ParamSpec count0(std::string name, int64_t def, std::string description) {
  return core::ParamSpec::integer(std::move(name), def, "", std::move(description))
      .range(0, static_cast<double>(kMaxModelCount));
}

}  // namespace

std::vector<core::ParamSpec> model_param_specs(const ModelSpec& d) {
  using core::ParamSpec;
  const std::vector<std::string> kv_types = {"fp32", "fp16", "bf16", "fp8", "int8"};
  return {
      dim("num_layers", d.num_layers, "", "transformer blocks").range(1, static_cast<double>(kMaxModelCount)),
      dim("hidden_size", d.hidden_size, "", "model (residual stream) width"),
      dim("num_heads", d.num_heads, "", "attention query heads"),
      dim("num_kv_heads", d.num_kv_heads, "", "key/value heads (GQA groups); must divide num_heads"),
      dim("head_dim", d.head_dim, "",
          "dimension of one attention head (with MLA: the non-rotary query/key part, qk_nope_head_dim)"),
      dim("intermediate_size", d.intermediate_size, "", "MLP inner width (of the dense blocks of a MoE model)"),
      dim("vocab_size", d.vocab_size, "", "vocabulary (embedding and LM head rows)"),
      dim("max_context", d.max_context, "tokens", "longest sequence (prompt + output) the model accepts")
          .range(1, static_cast<double>(int64_t{1} << 32)),
      ParamSpec::boolean("gated_mlp", d.gated_mlp, "SwiGLU MLP (gate and up projections); false: up only"),
      ParamSpec::boolean("tied_embeddings", d.tied_embeddings, "LM head shares the embedding matrix"),
      ParamSpec::boolean("qkv_bias", d.qkv_bias, "biases on the Q, K and V projections (Qwen2)"),
      ParamSpec::string("weight_dtype", std::string(dtype_name(d.weight_dtype)),
                        "storage of the blocks' linear-layer weights: fp8 and int8 run W8A8 GEMMs on GPUs with "
                        "those tensor cores, int4 is weight-only (W4A16, group 128)")
          .one_of(dtype_names()),
      ParamSpec::string("kv_dtype", std::string(dtype_name(d.kv_dtype)), "storage of the KV cache")
          .one_of(kv_types),
      ParamSpec::real("weight_bytes", 0, "bytes/element",
                      "bytes of one linear-layer weight; unset: from weight_dtype (2, 1, or 0.5195 for int4 with "
                      "its group scales)")
          .above(0)
          .range(0, 16)
          .optional(),
      ParamSpec::real("kv_bytes", 0, "bytes/element", "bytes of one KV-cache element; unset: from kv_dtype")
          .above(0)
          .range(0, 16)
          .optional(),
      ParamSpec::real("activation_bytes", d.activation_bytes, "bytes/element",
                      "storage of one activation element and of the unquantised weights (embeddings, LM head, "
                      "norms)")
          .above(0)
          .range(0, 16),
      count0("num_experts", d.num_experts, "routed experts per MoE block; 0 = dense MLP"),
      count0("experts_per_token", d.experts_per_token, "experts each token is routed to (top-k)"),
      count0("moe_intermediate_size", d.moe_intermediate_size, "MLP width of one expert"),
      count0("num_shared_experts", d.num_shared_experts, "experts of moe_intermediate_size every token passes"),
      count0("dense_layers", d.dense_layers, "leading blocks of a MoE model that keep a dense MLP"),
      count0("kv_lora_rank", d.kv_lora_rank, "MLA latent KV width; 0 = standard attention"),
      count0("q_lora_rank", d.q_lora_rank, "MLA query bottleneck width; 0 = direct query projection"),
      count0("qk_rope_head_dim", d.qk_rope_head_dim, "MLA rotary query/key dimension per head (shared rotary key)"),
      count0("v_head_dim", d.v_head_dim, "MLA value dimension per head"),
  };
}

ModelSpec model_from_params(const core::Params& p, ModelSpec m) {
  auto set_int = [&](const char* key, int64_t& field) {
    if (p.has(key)) field = p.get_int(key);
  };
  auto set_bool = [&](const char* key, bool& field) {
    if (p.has(key)) field = p.get_bool(key);
  };
  set_int("num_layers", m.num_layers);
  set_int("hidden_size", m.hidden_size);
  set_int("num_heads", m.num_heads);
  set_int("num_kv_heads", m.num_kv_heads);
  set_int("head_dim", m.head_dim);
  set_int("intermediate_size", m.intermediate_size);
  set_int("vocab_size", m.vocab_size);
  set_int("max_context", m.max_context);
  set_bool("gated_mlp", m.gated_mlp);
  set_bool("tied_embeddings", m.tied_embeddings);
  set_bool("qkv_bias", m.qkv_bias);
  if (p.has("weight_dtype")) {
    m.weight_dtype = *parse_dtype(p.get_string("weight_dtype"));
    m.weight_bytes = dtype_bytes(m.weight_dtype);
  }
  if (p.has("kv_dtype")) {
    m.kv_dtype = *parse_dtype(p.get_string("kv_dtype"));
    m.kv_bytes = dtype_bytes(m.kv_dtype);
  }
  if (p.has("weight_bytes")) m.weight_bytes = p.get_float("weight_bytes");
  if (p.has("kv_bytes")) m.kv_bytes = p.get_float("kv_bytes");
  if (p.has("activation_bytes")) m.activation_bytes = p.get_float("activation_bytes");
  set_int("num_experts", m.num_experts);
  set_int("experts_per_token", m.experts_per_token);
  set_int("moe_intermediate_size", m.moe_intermediate_size);
  set_int("num_shared_experts", m.num_shared_experts);
  set_int("dense_layers", m.dense_layers);
  set_int("kv_lora_rank", m.kv_lora_rank);
  set_int("q_lora_rank", m.q_lora_rank);
  set_int("qk_rope_head_dim", m.qk_rope_head_dim);
  set_int("v_head_dim", m.v_head_dim);

  if (const std::string problem = model_problem(m); !problem.empty()) {
    const std::string field = problem.substr(0, problem.find(':'));
    std::string key = field;
    // Blame a key the user wrote: num_heads when only it was given for a KV-group mismatch.
    if (field == "num_kv_heads" && !p.given("num_kv_heads") && p.given("num_heads")) key = "num_heads";
    p.fail(key, problem.substr(field.size() + 2));
  }
  return m;
}

ModelSpec model_from_params(const core::Params& p, const std::string& name) {
  ModelSpec base;
  base.name = name;
  if (const ModelSpec* preset = find_model_preset(name)) base = *preset;
  return model_from_params(p, std::move(base));
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
    const ModelSpec spec = preset.spec;
    model_registry().add({spec.name, preset.description, model_param_specs(spec)},
                         [spec](const core::Params& p) { return std::make_unique<ModelSpec>(model_from_params(p, spec)); });
  }
  return true;
}();

}  // namespace

}  // namespace servesim::hwmodels
