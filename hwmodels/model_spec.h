#pragma once
// The architecture of a served model: everything the cost model and the KV cache need. Dense
// Llama-style blocks by default; mixture-of-experts MLPs (Mixtral, DeepSeek) and multi-head latent
// attention (DeepSeek-V2/V3) when their fields are set; per-layer attention types (sliding-window,
// linear attention / state-space, DeepSeek sparse attention) when attention_pattern says so.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hwmodels/dtype.h"
#include "sim/core/params.h"

namespace servesim::hwmodels {

// What the mixer of one layer is. Letters of ModelSpec::attention_pattern in brackets.
enum class LayerAttention : uint8_t {
  kFull,           // [F] causal attention over the whole context; KV for every token
  kSlidingWindow,  // [S] attention over the last sliding_window tokens (the query included); KV for those only
  kLinear,         // [L] linear attention / state space (Gated DeltaNet, Mamba-2, KDA): a fixed-size
                   //     state per sequence, read and written once per token, no per-token cache
  kSparse,         // [D] DeepSeek sparse attention: a lightning indexer scores every cached key at
                   //     low precision, attention reads the index_topk best; KV (and indexer keys)
                   //     for every token
};

// The caps on the keys a query attends to that a batch's shape sums (BatchShape): the window of
// sliding-window layers and the top-k of sparse layers; 0 = the model has no such layers.
struct AttentionLimits {
  int64_t window = 0;
  int64_t topk = 0;
};

struct ModelSpec {
  std::string name;
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;       // GQA groups; for MLA the latent cache is shared by all heads
  int64_t head_dim = 0;           // for MLA: the non-rotary query/key head dimension (qk_nope_head_dim)
  int64_t intermediate_size = 0;  // dense MLP width (the dense layers of a MoE model)
  int64_t vocab_size = 0;
  int64_t max_context = 0;        // tokens (prompt + output) the model accepts
  bool gated_mlp = true;          // SwiGLU: gate and up projections (also inside every expert)
  bool tied_embeddings = false;   // LM head shares the embedding matrix
  bool qkv_bias = false;          // biases on the Q, K and V projections (Qwen2)

  // Data types. weight_bytes is what the transformer blocks' linear layers store per weight;
  // embeddings, the LM head, norms and biases stay in the 16-bit dtype (activation_bytes), as
  // fp8/int8/int4 checkpoints keep them.
  DType weight_dtype = DType::kFp16;
  DType kv_dtype = DType::kFp16;
  double weight_bytes = 2.0;      // bytes per linear-layer weight (dtype_bytes(weight_dtype) unless overridden)
  double kv_bytes = 2.0;          // bytes per KV-cache element
  double activation_bytes = 2.0;  // bytes per activation element and per unquantised weight

  // Mixture of experts (num_experts = 0: dense). The first dense_layers blocks keep a dense MLP of
  // intermediate_size (DeepSeek's first_k_dense_replace); the others route each token to
  // experts_per_token of num_experts experts of moe_intermediate_size, plus num_shared_experts
  // experts of the same width that every token passes through.
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;
  int64_t moe_intermediate_size = 0;
  int64_t num_shared_experts = 0;
  int64_t dense_layers = 0;

  // Multi-head latent attention (kv_lora_rank = 0: standard attention). The cache holds one latent of
  // kv_lora_rank plus a shared rotary key of qk_rope_head_dim per token and layer; queries go
  // through a q_lora_rank bottleneck when it is non-zero; values have v_head_dim per head.
  int64_t kv_lora_rank = 0;
  int64_t q_lora_rank = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;

  // Expert weights stored apart from the other linear layers (gpt-oss keeps attention in bf16 and
  // its experts in mxfp4): unset = weight_dtype / weight_bytes.
  std::optional<DType> expert_weight_dtype;
  double expert_weight_bytes = 0;  // 0 = dtype_bytes(expert_weight_dtype), or weight_bytes when unset

  // ---- Hybrid and sparse attention ----
  // One letter per layer (F, S, L, D: LayerAttention), or a shorter cycle repeated over the layers
  // ("SF" for gpt-oss, "LLLF" for Qwen3-Next, "D" for DeepSeek-V3.2); "" = every layer full.
  std::string attention_pattern;
  int64_t sliding_window = 0;      // tokens a sliding-window layer attends to (the query included)
  bool attn_output_gate = false;   // a sigmoid gate on the attention output (Qwen3-Next): q_proj twice as wide
  // Linear-attention layers (Gated DeltaNet's names): per layer a state of value heads x key dim x
  // value dim at state_dtype, plus a short causal convolution over the q, k and v channels whose
  // last linear_conv_kernel - 1 inputs are kept at the activation type.
  int64_t linear_num_key_heads = 0;
  int64_t linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_conv_kernel = 0;
  DType state_dtype = DType::kBf16;
  double state_bytes = 2.0;        // bytes per recurrent-state element
  // DeepSeek sparse attention: the indexer's heads and head dim (its keys cached in fp8 with an
  // fp32 scale per 128 elements), and the keys each query attends to.
  int64_t index_topk = 0;
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  // Speculative decoding (policies/decoding/). Multi-token-prediction modules the checkpoint
  // carries beside the model (config.json's num_nextn_predict_layers): engines load them only when
  // they speculate with them, so they are not in the parameter counts above.
  int64_t mtp_layers = 0;
  // This spec describes a draft head (an EAGLE head, an MTP module): before its blocks it fuses
  // [token embedding; the target's hidden state] through a 2h x h projection (cost model op
  // "draft_fc"). Set on drafter specs only, never from a config.
  bool draft_head = false;

  bool is_moe() const { return num_experts > 0; }
  bool is_mla() const { return kv_lora_rank > 0; }
  // Blocks with routed experts, and with a dense MLP.
  int64_t moe_layers() const { return is_moe() ? num_layers - dense_layers : 0; }
  int64_t dense_mlp_layers() const { return num_layers - moe_layers(); }
  // Query/key and value widths of one head (head_dim for both without MLA).
  int64_t qk_head_dim() const { return head_dim + (is_mla() ? qk_rope_head_dim : 0); }
  int64_t value_head_dim() const { return is_mla() ? v_head_dim : head_dim; }

  // Per-layer attention. uniform_full(): every layer full attention (the models before hybrids;
  // their figures are computed exactly as before).
  bool uniform_full() const;
  LayerAttention layer_attention(int64_t layer) const;
  int64_t layers_of(LayerAttention kind) const;
  // Layers with softmax attention (full, window, sparse): they carry the attention projections.
  int64_t attention_layers() const { return num_layers - layers_of(LayerAttention::kLinear); }
  double expert_bytes() const;                 // bytes of one expert weight
  DType expert_dtype() const { return expert_weight_dtype.value_or(weight_dtype); }
  bool experts_stored_apart() const { return is_moe() && expert_bytes() != weight_bytes; }
  AttentionLimits attention_limits() const {
    return {layers_of(LayerAttention::kSlidingWindow) > 0 ? sliding_window : 0,
            layers_of(LayerAttention::kSparse) > 0 ? index_topk : 0};
  }

  // ---- Parameter counts (embeddings and LM head included). ----
  double param_count() const;
  // Parameters one token passes through: routed experts only experts_per_token of num_experts.
  double active_param_count() const;
  // Mean parameters of one transformer block (exact for dense models: every block is the same).
  double layer_params() const;
  double attention_params() const;   // one block's attention projections and their biases
  double dense_mlp_params() const;   // one dense MLP
  double expert_params() const;      // one routed or shared expert
  double router_params() const;      // one MoE block's gate (hidden x num_experts)
  double linear_attention_params() const;  // one linear-attention layer's mixer (projections, conv, norm)
  double linear_attention_linear_params() const;  // of which its projections (stored at weight_bytes)
  double indexer_params() const;     // one sparse-attention layer's lightning indexer
  double indexer_linear_params() const;  // of which its projections
  double embedding_params() const;   // vocab x hidden (the token embedding table)
  double lm_head_params() const;     // vocab x hidden, or 0 when tied to the embedding
  // Parameters stored at weight_bytes (the blocks' projection and MLP/expert matrices); the rest
  // (embeddings, LM head, norms, biases, router gates) stay at activation_bytes.
  double linear_params() const;

  double expert_linear_params() const;  // routed and shared experts, all MoE blocks
  double weight_bytes_total() const;  // every weight at its storage type
  // Bytes one token occupies in the cache, all layers: 2 x layers x kv heads x head dim x kv_bytes,
  // or layers x (kv_lora_rank + qk_rope_head_dim) x kv_bytes with MLA. With per-layer attention
  // types: the full and sparse layers' (full_kv_bytes_per_token) plus the sliding-window layers'
  // (window_kv_bytes_per_token), what a token adds while the context is within the window.
  double kv_bytes_per_token() const;
  // The cache by layer group, whole model: per token of full and sparse layers (sparse layers add
  // their indexer keys), per token of window layers (kept for the last sliding_window tokens), and
  // per sequence of linear-attention layers (their state, whatever the context).
  double full_kv_bytes_per_token() const;
  double window_kv_bytes_per_token() const;
  double state_bytes_per_sequence() const;
  // The cache one sequence of `tokens` tokens holds: full x tokens + window x min(tokens, window)
  // + state.
  double sequence_kv_bytes(double tokens) const;
  // Bytes one sparse layer caches per token for its indexer: index_head_dim fp8 values and an fp32
  // scale per 128 of them (DeepSeek's 128 + 4 = 132).
  double indexer_key_bytes_per_token() const;
  // Matmul FLOPs per token: 2 x active parameters (the seeds' 2N), embeddings included as the seeds do.
  double flops_per_token() const { return 2.0 * active_param_count(); }
  // Experts a step of `tokens` tokens activates in one MoE block, in expectation when each token
  // picks experts_per_token of num_experts uniformly: E (1 - (1 - k/E)^tokens). 0 for dense models.
  double expected_active_experts(double tokens) const;
  // Bytes one decode step of `tokens` sequences must stream: every weight except the embedding
  // table, which is a row lookup (a tied LM head still reads the shared matrix in full), and of the
  // routed experts only those the step activates.
  double decode_weight_bytes(double tokens = 1.0) const;
};

// Upper bounds of the architecture fields: far above any published model, low enough that products
// of them cannot overflow.
inline constexpr int64_t kMaxModelDim = int64_t{1} << 24;
inline constexpr int64_t kMaxModelCount = int64_t{1} << 20;

// The [model] parameters of a preset: every architecture field, with the preset's value as default
// (weight_bytes and kv_bytes are optional: unset means the dtype's bytes).
std::vector<core::ParamSpec> model_param_specs(const ModelSpec& defaults);
// Reads those parameters back over `base` (the one factory behind every preset): a field that
// has() a value replaces the base's; checks the architecture's consistency, failing at the key the
// user wrote.
ModelSpec model_from_params(const core::Params& params, ModelSpec base);
ModelSpec model_from_params(const core::Params& params, const std::string& name);
// "" when the architecture is consistent (KV heads divide query heads, MoE and MLA fields set
// together, ...), else what is wrong and the field to blame, as "field: sentence".
std::string model_problem(const ModelSpec& m);
// A built-in preset by name (case ignored), nullptr when there is none. For tools and tests; a
// config reaches models through model_registry().
const ModelSpec* find_model_preset(std::string_view name);

// Family "models": each entry is a preset whose parameters default to its architecture, so any
// field can be overridden in [model]; kind "hf_config" reads a Hugging Face config.json.
using ModelRegistry = core::Registry<ModelSpec>;
ModelRegistry& model_registry();

}  // namespace servesim::hwmodels
