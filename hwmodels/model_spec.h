#pragma once
// The architecture of a served model: everything the cost model and the KV cache need.

#include <cstdint>
#include <string>

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
};

// Family "models": each entry is a preset whose parameters default to its architecture, so any
// field can be overridden in [model].
using ModelRegistry = core::Registry<ModelSpec>;
ModelRegistry& model_registry();

}  // namespace servesim::hwmodels
