#include "hwmodels/model_spec.h"

#include <algorithm>
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
  // An output gate doubles the query projection's columns (one gate value per query element).
  const double gate = attn_output_gate ? h * q_cols : 0.0;
  return h * q_cols + 2.0 * h * kv_cols + q_cols * h + bias + gate;  // Q, K, V, O
}

bool ModelSpec::uniform_full() const {
  for (const char c : attention_pattern)
    if (c != 'F') return false;
  return true;
}

LayerAttention ModelSpec::layer_attention(int64_t layer) const {
  if (attention_pattern.empty()) return LayerAttention::kFull;
  switch (attention_pattern[static_cast<size_t>(layer) % attention_pattern.size()]) {
    case 'S': return LayerAttention::kSlidingWindow;
    case 'L': return LayerAttention::kLinear;
    case 'D': return LayerAttention::kSparse;
    default: return LayerAttention::kFull;
  }
}

int64_t ModelSpec::layers_of(LayerAttention kind) const {
  if (attention_pattern.empty()) return kind == LayerAttention::kFull ? num_layers : 0;
  // Whole cycles of the pattern, then the first layers of a partial one.
  const int64_t n = static_cast<int64_t>(attention_pattern.size());
  int64_t per_cycle = 0, in_tail = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (layer_attention(i) != kind) continue;
    ++per_cycle;
    if (i < num_layers % n) ++in_tail;
  }
  return num_layers / n * per_cycle + in_tail;
}

double ModelSpec::expert_bytes() const {
  if (expert_weight_bytes > 0) return expert_weight_bytes;
  return expert_weight_dtype ? dtype_bytes(*expert_weight_dtype) : weight_bytes;
}

namespace {
int64_t linear_key_dim(const ModelSpec& m) { return m.linear_num_key_heads * m.linear_key_head_dim; }
int64_t linear_value_dim(const ModelSpec& m) { return m.linear_num_value_heads * m.linear_value_head_dim; }
// Channels of the short convolution: q, k (key dim each) and v (value dim).
int64_t linear_conv_dim(const ModelSpec& m) { return 2 * linear_key_dim(m) + linear_value_dim(m); }
}  // namespace

double ModelSpec::linear_attention_linear_params() const {
  const double h = d(hidden_size);
  // in_proj_qkvz (q, k, v and the output gate z), in_proj_ba (one beta and one decay per value
  // head), out_proj.
  return h * d(2 * linear_key_dim(*this) + 2 * linear_value_dim(*this)) + h * d(2 * linear_num_value_heads) +
         d(linear_value_dim(*this)) * h;
}

double ModelSpec::linear_attention_params() const {
  // Plus the depthwise convolution's weights, A_log and dt_bias per value head, the gated norm.
  return linear_attention_linear_params() + d(linear_conv_dim(*this) * linear_conv_kernel) +
         d(2 * linear_num_value_heads) + d(linear_value_head_dim);
}

double ModelSpec::indexer_linear_params() const {
  const double h = d(hidden_size);
  // Queries from the query bottleneck (or the hidden state), one shared key, a weight per head.
  const double q_in = q_lora_rank > 0 ? d(q_lora_rank) : h;
  return q_in * d(index_n_heads * index_head_dim) + h * d(index_head_dim) + h * d(index_n_heads);
}

double ModelSpec::indexer_params() const { return indexer_linear_params() + 2.0 * d(index_head_dim); }

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

double hybrid_blocks_params(const ModelSpec& m, bool active);

double ModelSpec::layer_params() const {
  if (!uniform_full()) return hybrid_blocks_params(*this, false) / d(num_layers);
  if (!is_moe()) return attention_params() + dense_mlp_params() + block_norm_params(*this);
  const double mlp = (d(dense_mlp_layers()) * dense_mlp_params() + d(moe_layers()) * moe_mlp_params(*this)) /
                     d(num_layers);
  return attention_params() + mlp + block_norm_params(*this);
}

double ModelSpec::embedding_params() const { return d(vocab_size) * d(hidden_size); }

double ModelSpec::lm_head_params() const { return tied_embeddings ? 0.0 : embedding_params(); }

// Per-layer mixers summed by type: attention projections on the softmax layers (and MLA's norms),
// linear-attention mixers, sparse layers' indexers; two norms per block.
double hybrid_blocks_params(const ModelSpec& m, bool active) {
  const double h = d(m.hidden_size);
  const double mla_norms = m.is_mla() ? d(m.kv_lora_rank) + d(m.q_lora_rank) : 0.0;
  const double mixers = d(m.attention_layers()) * (m.attention_params() + mla_norms) +
                        d(m.layers_of(LayerAttention::kLinear)) * m.linear_attention_params() +
                        d(m.layers_of(LayerAttention::kSparse)) * m.indexer_params() + d(m.num_layers) * 2.0 * h;
  if (!m.is_moe()) return mixers + d(m.num_layers) * m.dense_mlp_params();
  const double moe = active ? moe_mlp_active_params(m) : moe_mlp_params(m);
  return mixers + d(m.dense_mlp_layers()) * m.dense_mlp_params() + d(m.moe_layers()) * moe;
}

namespace {
double blocks_params(const ModelSpec& m, bool active) {
  if (!m.uniform_full()) return hybrid_blocks_params(m, active);
  const double common = m.attention_params() + block_norm_params(m);
  if (!m.is_moe()) return d(m.num_layers) * (common + m.dense_mlp_params());
  const double moe = active ? moe_mlp_active_params(m) : moe_mlp_params(m);
  return d(m.num_layers) * common + d(m.dense_mlp_layers()) * m.dense_mlp_params() + d(m.moe_layers()) * moe;
}
}  // namespace

double ModelSpec::param_count() const {
  const double final_norm = d(hidden_size);
  if (!is_moe() && uniform_full()) return d(num_layers) * layer_params() + embedding_params() + lm_head_params() + final_norm;
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
  if (!uniform_full())
    return d(attention_layers()) * attention +
           d(layers_of(LayerAttention::kLinear)) * linear_attention_linear_params() +
           d(layers_of(LayerAttention::kSparse)) * indexer_linear_params() + d(dense_mlp_layers()) * dense_mlp_params() +
           experts;
  return d(num_layers) * attention + d(dense_mlp_layers()) * dense_mlp_params() + experts;
}

double ModelSpec::expert_linear_params() const {
  return d(moe_layers()) * d(num_experts + num_shared_experts) * expert_params();
}

double ModelSpec::weight_bytes_total() const {
  const double linear = linear_params();
  if (experts_stored_apart()) {
    const double experts = expert_linear_params();
    return (linear - experts) * weight_bytes + experts * expert_bytes() + (param_count() - linear) * activation_bytes;
  }
  return linear * weight_bytes + (param_count() - linear) * activation_bytes;
}

double ModelSpec::kv_bytes_per_token() const {
  if (!uniform_full()) return full_kv_bytes_per_token() + window_kv_bytes_per_token();
  if (is_mla()) return d(num_layers) * d(kv_lora_rank + qk_rope_head_dim) * kv_bytes;
  return 2.0 * d(num_layers) * d(num_kv_heads) * d(head_dim) * kv_bytes;
}

namespace {
// One softmax-attention layer's cache per token: K and V of its KV heads, or MLA's latent.
double attention_layer_kv_bytes(const ModelSpec& m) {
  if (m.is_mla()) return d(m.kv_lora_rank + m.qk_rope_head_dim) * m.kv_bytes;
  return 2.0 * d(m.num_kv_heads) * d(m.head_dim) * m.kv_bytes;
}
}  // namespace

double ModelSpec::indexer_key_bytes_per_token() const {
  constexpr double kFp8Bytes = 1.0, kScaleBytes = 4.0, kScaleBlock = 128.0;
  return d(index_head_dim) * kFp8Bytes + kScaleBytes * std::ceil(d(index_head_dim) / kScaleBlock);
}

double ModelSpec::full_kv_bytes_per_token() const {
  if (uniform_full()) return kv_bytes_per_token();
  const double sparse = d(layers_of(LayerAttention::kSparse));
  return d(layers_of(LayerAttention::kFull)) * attention_layer_kv_bytes(*this) +
         sparse * (attention_layer_kv_bytes(*this) + indexer_key_bytes_per_token());
}

double ModelSpec::window_kv_bytes_per_token() const {
  return d(layers_of(LayerAttention::kSlidingWindow)) * attention_layer_kv_bytes(*this);
}

double ModelSpec::state_bytes_per_sequence() const {
  const int64_t layers = layers_of(LayerAttention::kLinear);
  if (layers == 0) return 0.0;
  const double recurrent = d(linear_num_value_heads) * d(linear_key_head_dim) * d(linear_value_head_dim) * state_bytes;
  const double conv = d(linear_conv_dim(*this)) * d(std::max<int64_t>(0, linear_conv_kernel - 1)) * activation_bytes;
  return d(layers) * (recurrent + conv);
}

double ModelSpec::sequence_kv_bytes(double tokens) const {
  if (uniform_full()) return kv_bytes_per_token() * tokens;
  const double window = sliding_window > 0 ? std::min(tokens, d(sliding_window)) : 0.0;
  return full_kv_bytes_per_token() * tokens + window_kv_bytes_per_token() * window + state_bytes_per_sequence();
}

double ModelSpec::expected_active_experts(double tokens) const {
  if (!is_moe() || tokens <= 0) return 0.0;
  const double e = d(num_experts);
  return e * (1.0 - std::pow(1.0 - d(experts_per_token) / e, tokens));
}

double ModelSpec::decode_weight_bytes(double tokens) const {
  const double lookup_only = tied_embeddings ? 0.0 : embedding_params();
  const double linear = linear_params();
  const double linear_bytes = experts_stored_apart() ? (linear - expert_linear_params()) * weight_bytes +
                                                           expert_linear_params() * expert_bytes()
                                                     : linear * weight_bytes;
  double bytes = linear_bytes + (param_count() - linear - lookup_only) * activation_bytes;
  if (is_moe()) {
    const double idle = d(num_experts) - expected_active_experts(tokens);
    bytes -= d(moe_layers()) * idle * expert_params() * expert_bytes();
  }
  return bytes;
}

namespace {
// The per-layer attention fields: a pattern of known letters no longer than the model, and the
// fields each letter needs.
std::string attention_problem(const ModelSpec& m) {
  const auto s = [](int64_t v) { return std::to_string(v); };
  for (const char c : m.attention_pattern)
    if (c != 'F' && c != 'S' && c != 'L' && c != 'D')
      return std::string("attention_pattern: '") + c +
             "' is not a layer type; one letter per layer (or a cycle of them): F full attention, S sliding "
             "window, L linear attention / state space, D DeepSeek sparse attention";
  if (static_cast<int64_t>(m.attention_pattern.size()) > m.num_layers)
    return "attention_pattern: " + s(static_cast<int64_t>(m.attention_pattern.size())) +
           " letters for a model of " + s(m.num_layers) + " layers";
  if (m.layers_of(LayerAttention::kSlidingWindow) > 0 && m.sliding_window < 1)
    return "sliding_window: the sliding-window layers (S) need the window, in tokens";
  if (m.layers_of(LayerAttention::kLinear) > 0) {
    if (m.linear_num_key_heads < 1 || m.linear_num_value_heads < 1 || m.linear_key_head_dim < 1 ||
        m.linear_value_head_dim < 1 || m.linear_conv_kernel < 1)
      return "linear_num_key_heads: the linear-attention layers (L) need linear_num_key_heads, "
             "linear_num_value_heads, linear_key_head_dim, linear_value_head_dim and linear_conv_kernel";
    if (m.linear_num_value_heads % m.linear_num_key_heads != 0)
      return "linear_num_value_heads: " + s(m.linear_num_value_heads) + " value heads cannot share " +
             s(m.linear_num_key_heads) + " key heads evenly";
    if (is_four_bit(m.state_dtype) || m.state_dtype == DType::kInt8)
      return "state_dtype: the recurrent state is kept in fp32, bf16 or fp16";
  }
  if (m.layers_of(LayerAttention::kSparse) > 0 && (m.index_topk < 1 || m.index_n_heads < 1 || m.index_head_dim < 1))
    return "index_topk: the sparse-attention layers (D) need index_topk, index_n_heads and index_head_dim";
  return "";
}
}  // namespace

std::string model_problem(const ModelSpec& m) {
  const auto s = [](int64_t v) { return std::to_string(v); };
  if (!m.is_mla() && m.num_heads % m.num_kv_heads != 0)
    return "num_kv_heads: num_kv_heads (" + s(m.num_kv_heads) + ") must divide num_heads (" + s(m.num_heads) +
           "): each KV head serves a whole group of query heads";
  if (is_four_bit(m.kv_dtype))
    return "kv_dtype: " + std::string(dtype_name(m.kv_dtype)) +
           " is a weight-only format; the KV cache takes fp32, fp16, bf16, fp8 or int8";
  if (const std::string p = attention_problem(m); !p.empty()) return p;
  if (m.expert_weight_dtype && !m.is_moe())
    return "expert_weight_dtype: stores the experts of a MoE model apart; this model has no experts (num_experts = 0)";
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

ModelSpec deepseek_v32() {
  ModelSpec m = deepseek_v3();
  m.name = "deepseek-v3.2";
  m.attention_pattern = "D";
  m.index_topk = 2048;
  m.index_n_heads = 64;
  m.index_head_dim = 128;
  return m;
}

// gpt-oss: attention (with biases) in bf16, sliding-window (128) and full layers alternating, every
// block a MoE of experts as wide as the model, stored in mxfp4.
ModelSpec gpt_oss(std::string name, int64_t layers, int64_t experts) {
  ModelSpec m = llama(std::move(name), layers, 2880, 64, 8, 2880, 201088, 131072, DType::kBf16);
  m.head_dim = 64;
  m.qkv_bias = true;
  m.num_experts = experts;
  m.experts_per_token = 4;
  m.moe_intermediate_size = 2880;
  m.expert_weight_dtype = DType::kMxfp4;
  m.attention_pattern = "SF";
  m.sliding_window = 128;
  return m;
}

ModelSpec qwen3_next_80b() {
  ModelSpec m = llama("qwen3-next-80b-a3b", 48, 2048, 16, 2, 5120, 151936, 262144, DType::kBf16);
  m.head_dim = 256;
  m.attn_output_gate = true;
  m.num_experts = 512;
  m.experts_per_token = 10;
  m.moe_intermediate_size = 512;
  m.num_shared_experts = 1;
  m.attention_pattern = "LLLF";
  m.linear_num_key_heads = 16;
  m.linear_num_value_heads = 32;
  m.linear_key_head_dim = 128;
  m.linear_value_head_dim = 128;
  m.linear_conv_kernel = 4;
  m.state_dtype = DType::kBf16;
  m.state_bytes = 2.0;
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
      {[] {
         ModelSpec m = llama("qwen3-32b", 64, 5120, 64, 8, 25600, 151936, 40960, DType::kBf16);
         m.head_dim = 128;
         return m;
       }(),
       "Qwen3-32B: 64 layers, hidden 5120, 64 heads of 128, 8 KV heads, SwiGLU 25600, vocab 151936, bf16 (dense; "
       "the quality Qwen3-Next-80B-A3B is reported to match or exceed)"},
      {mixtral_8x7b(),
       "Mixtral-8x7B: 32 layers, hidden 4096, 8 KV heads, 8 experts of 14336 (top-2), 46.7B total, "
       "12.9B active, bf16"},
      {deepseek_v3(),
       "DeepSeek-V3: 61 layers (3 dense), hidden 7168, 128 heads, MLA (latent 512 + rope 64), 256 "
       "routed experts of 2048 (top-8) + 1 shared, 671B total, 37B active, fp8 weights"},
      {deepseek_v32(),
       "DeepSeek-V3.2-Exp: DeepSeek-V3 with DeepSeek sparse attention on every layer (lightning indexer of 64 "
       "heads x 128 in fp8, each query attends to its top 2048 keys), fp8 weights"},
      {gpt_oss("gpt-oss-120b", 36, 128),
       "gpt-oss-120b: 36 layers alternating sliding-window (128 tokens) and full attention, hidden 2880, 64 "
       "heads of 64, 8 KV heads, 128 experts of 2880 (top-4) in mxfp4, attention in bf16; 117B total, 5.1B active"},
      {gpt_oss("gpt-oss-20b", 24, 32),
       "gpt-oss-20b: 24 layers alternating sliding-window (128 tokens) and full attention, 32 experts of 2880 "
       "(top-4) in mxfp4, attention in bf16; 21B total, 3.6B active"},
      {qwen3_next_80b(),
       "Qwen3-Next-80B-A3B: 48 layers, three Gated DeltaNet (linear attention) to one gated full attention "
       "(16 heads of 256, 2 KV heads), 512 experts of 512 (top-10) + 1 shared, bf16; 80B total, 3B active"},
  };
  return presets;
}

core::ParamSpec dim(std::string name, int64_t def, std::string unit, std::string description) {
  return core::ParamSpec::integer(std::move(name), def, std::move(unit), std::move(description))
      .range(1, static_cast<double>(kMaxModelDim));
}
core::ParamSpec preset_or_unset(core::ParamSpec spec, bool preset_sets_it) {
  if (!preset_sets_it) spec.optional();
  return spec;
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
          .range(0.125, 16)
          .optional(),
      ParamSpec::real("kv_bytes", 0, "bytes/element", "bytes of one KV-cache element; unset: from kv_dtype")
          .range(0.125, 16)
          .optional(),
      ParamSpec::real("activation_bytes", d.activation_bytes, "bytes/element",
                      "storage of one activation element and of the unquantised weights (embeddings, LM head, "
                      "norms)")
          .range(0.125, 16),
      count0("num_experts", d.num_experts, "routed experts per MoE block; 0 = dense MLP"),
      count0("experts_per_token", d.experts_per_token, "experts each token is routed to (top-k)"),
      count0("moe_intermediate_size", d.moe_intermediate_size, "MLP width of one expert"),
      count0("num_shared_experts", d.num_shared_experts, "experts of moe_intermediate_size every token passes"),
      count0("dense_layers", d.dense_layers, "leading blocks of a MoE model that keep a dense MLP"),
      count0("kv_lora_rank", d.kv_lora_rank, "MLA latent KV width; 0 = standard attention"),
      count0("q_lora_rank", d.q_lora_rank, "MLA query bottleneck width; 0 = direct query projection"),
      count0("qk_rope_head_dim", d.qk_rope_head_dim, "MLA rotary query/key dimension per head (shared rotary key)"),
      count0("v_head_dim", d.v_head_dim, "MLA value dimension per head"),
      // Declared with a default only where the preset uses them, so that the resolved configuration
      // (and its hash) of every other model is what it was before these fields existed.
      preset_or_unset(ParamSpec::string("expert_weight_dtype",
                                        std::string(dtype_name(d.expert_weight_dtype.value_or(d.weight_dtype))),
                                        "storage of the experts' weights when it differs from weight_dtype (gpt-oss: "
                                        "mxfp4 experts, bf16 attention); unset: weight_dtype")
                          .one_of(dtype_names()),
                      d.expert_weight_dtype.has_value()),
      preset_or_unset(ParamSpec::string("attention_pattern", d.attention_pattern,
                                        "the mixer of each layer, one letter per layer or a cycle repeated over "
                                        "them: F full attention, S sliding window, L linear attention / state "
                                        "space, D DeepSeek sparse attention (\"SF\": gpt-oss, \"LLLF\": "
                                        "Qwen3-Next); unset: every layer full"),
                      !d.attention_pattern.empty()),
      preset_or_unset(dim("sliding_window", std::max<int64_t>(1, d.sliding_window), "tokens",
                          "keys a sliding-window layer attends to, the query's own included; only they are cached"),
                      d.sliding_window > 0),
      preset_or_unset(ParamSpec::boolean("attn_output_gate", d.attn_output_gate,
                                         "a sigmoid gate on each attention output (Qwen3-Next): the query "
                                         "projection is twice as wide"),
                      d.attn_output_gate),
      preset_or_unset(dim("linear_num_key_heads", std::max<int64_t>(1, d.linear_num_key_heads), "",
                          "linear-attention layers: query/key heads"),
                      d.linear_num_key_heads > 0),
      preset_or_unset(dim("linear_num_value_heads", std::max<int64_t>(1, d.linear_num_value_heads), "",
                          "linear-attention layers: value heads (one recurrent state each)"),
                      d.linear_num_value_heads > 0),
      preset_or_unset(dim("linear_key_head_dim", std::max<int64_t>(1, d.linear_key_head_dim), "",
                          "linear-attention layers: key dimension per head (rows of the state)"),
                      d.linear_key_head_dim > 0),
      preset_or_unset(dim("linear_value_head_dim", std::max<int64_t>(1, d.linear_value_head_dim), "",
                          "linear-attention layers: value dimension per head (columns of the state)"),
                      d.linear_value_head_dim > 0),
      preset_or_unset(dim("linear_conv_kernel", std::max<int64_t>(1, d.linear_conv_kernel), "",
                          "linear-attention layers: width of the short causal convolution"),
                      d.linear_conv_kernel > 0),
      preset_or_unset(ParamSpec::string("state_dtype", std::string(dtype_name(d.state_dtype)),
                                        "storage of the linear-attention layers' recurrent state")
                          .one_of({"fp32", "bf16", "fp16"}),
                      d.layers_of(LayerAttention::kLinear) > 0),
      preset_or_unset(dim("index_topk", std::max<int64_t>(1, d.index_topk), "tokens",
                          "sparse-attention layers: keys each query attends to (the indexer's top-k)"),
                      d.index_topk > 0),
      preset_or_unset(dim("index_n_heads", std::max<int64_t>(1, d.index_n_heads), "",
                          "sparse-attention layers: lightning-indexer heads"),
                      d.index_n_heads > 0),
      preset_or_unset(dim("index_head_dim", std::max<int64_t>(1, d.index_head_dim), "",
                          "sparse-attention layers: lightning-indexer head dimension (its keys are cached in "
                          "fp8)"),
                      d.index_head_dim > 0),
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
  if (p.has("expert_weight_dtype")) {
    m.expert_weight_dtype = *parse_dtype(p.get_string("expert_weight_dtype"));
    m.expert_weight_bytes = 0;
  }
  if (p.has("attention_pattern")) {
    m.attention_pattern = p.get_string("attention_pattern");
    for (char& c : m.attention_pattern) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  }
  set_int("sliding_window", m.sliding_window);
  set_bool("attn_output_gate", m.attn_output_gate);
  set_int("linear_num_key_heads", m.linear_num_key_heads);
  set_int("linear_num_value_heads", m.linear_num_value_heads);
  set_int("linear_key_head_dim", m.linear_key_head_dim);
  set_int("linear_value_head_dim", m.linear_value_head_dim);
  set_int("linear_conv_kernel", m.linear_conv_kernel);
  if (p.has("state_dtype")) {
    m.state_dtype = *parse_dtype(p.get_string("state_dtype"));
    m.state_bytes = dtype_bytes(m.state_dtype);
  }
  set_int("index_topk", m.index_topk);
  set_int("index_n_heads", m.index_n_heads);
  set_int("index_head_dim", m.index_head_dim);

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
