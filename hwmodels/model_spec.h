#pragma once
// The architecture of a served model: everything the cost model and the KV cache need. Dense
// Llama-style blocks by default; mixture-of-experts MLPs (Mixtral, DeepSeek) and multi-head latent
// attention (DeepSeek-V2/V3) when their fields are set.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hwmodels/dtype.h"
#include "sim/core/params.h"

namespace servesim::hwmodels {

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
  double embedding_params() const;   // vocab x hidden (the token embedding table)
  double lm_head_params() const;     // vocab x hidden, or 0 when tied to the embedding
  // Parameters stored at weight_bytes (the blocks' projection and MLP/expert matrices); the rest
  // (embeddings, LM head, norms, biases, router gates) stay at activation_bytes.
  double linear_params() const;

  double weight_bytes_total() const;  // every weight at its storage type
  // Bytes one token occupies in the cache, all layers: 2 x layers x kv heads x head dim x kv_bytes,
  // or layers x (kv_lora_rank + qk_rope_head_dim) x kv_bytes with MLA.
  double kv_bytes_per_token() const;
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
