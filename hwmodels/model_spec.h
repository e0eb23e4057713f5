#pragma once
// The architecture of a served model: everything the cost model and the KV cache need.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/params.h"

namespace servesim::hwmodels {

struct ModelSpec {
  std::string name;
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;
  int64_t max_context = 0;        // tokens (prompt + output) the model accepts
  bool gated_mlp = true;          // SwiGLU: gate and up projections
  bool tied_embeddings = false;   // LM head shares the embedding matrix
  double weight_bytes = 2.0;      // bytes per weight element
  double kv_bytes = 2.0;          // bytes per KV-cache element
  double activation_bytes = 2.0;  // bytes per activation element

  // Parameter counts, including embeddings and LM head.
  double param_count() const;
  double weight_bytes_total() const;         // param_count * weight_bytes
  // 2 (K and V) x layers x kv heads x head dim x kv_bytes.
  double kv_bytes_per_token() const;
  // Matmul FLOPs per token: 2 x parameters (the seeds' 2N), embeddings included as the seeds do.
  double flops_per_token() const { return 2.0 * param_count(); }

  // The pieces of param_count(). Llama-style blocks: Q/K/V/O projections, (gated) MLP, two RMSNorms;
  // no biases.
  double layer_params() const;       // one transformer block
  double embedding_params() const;   // vocab x hidden (the token embedding table)
  double lm_head_params() const;     // vocab x hidden, or 0 when tied to the embedding
  // Bytes one decode step must stream: every weight except the embedding table, which is a row
  // lookup (a tied LM head still reads the shared matrix in full, so then it is everything).
  double decode_weight_bytes() const;
};

// The [model] parameters of a preset: every architecture field, with the preset's value as default.
std::vector<core::ParamSpec> model_param_specs(const ModelSpec& defaults);
// Reads those parameters back (the one factory behind every preset); checks that the query heads
// divide into KV groups, failing at the key the user wrote.
ModelSpec model_from_params(const core::Params& params, const std::string& name);
// A built-in preset by name (case ignored), nullptr when there is none. For tools and tests; a
// config reaches models through model_registry().
const ModelSpec* find_model_preset(std::string_view name);

// Family "models": each entry is a preset whose parameters default to its architecture, so any
// field can be overridden in [model].
using ModelRegistry = core::Registry<ModelSpec>;
ModelRegistry& model_registry();

}  // namespace servesim::hwmodels
