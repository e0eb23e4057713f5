#include "hwmodels/roofline.h"

#include <algorithm>
#include <limits>

namespace servesim::hwmodels {

double kv_cache_bytes(const ModelSpec& model, int64_t tokens, int64_t batch) {
  return model.kv_bytes_per_token() * static_cast<double>(tokens) * static_cast<double>(batch);
}

double kv_tokens_that_fit(double kv_bytes_per_token, double bytes, int64_t batch) {
  return bytes / (kv_bytes_per_token * static_cast<double>(batch));
}

double kv_budget_bytes_per_gpu(const GpuSpec& gpu, const ModelSpec& model, int64_t tp, double memory_utilization,
                               double reserve_bytes, int64_t expert_parallel, int64_t redundant_experts) {
  return gpu.memory_bytes * memory_utilization - reserve_bytes -
         weight_bytes_per_gpu(model, tp, expert_parallel, redundant_experts);
}

std::string tp_problem(const ModelSpec& m, int64_t tp) {
  const std::string t = std::to_string(tp);
  if (tp < 1) return "tensor parallelism must be at least 1, got " + t;
  if (m.num_heads % tp != 0)
    return "tensor parallelism " + t + " does not divide the " + std::to_string(m.num_heads) +
           " attention heads of " + m.name + ": each GPU must hold whole heads";
  if (!m.is_mla() && m.num_kv_heads % tp != 0 && tp % m.num_kv_heads != 0)
    return "tensor parallelism " + t + " and the " + std::to_string(m.num_kv_heads) + " KV heads of " +
           m.name + " do not divide one another: KV heads must split evenly or be replicated whole";
  if (m.dense_mlp_layers() > 0 && m.intermediate_size % tp != 0)
    return "tensor parallelism " + t + " does not divide the MLP width " +
           std::to_string(m.intermediate_size) + " of " + m.name;
  if (m.is_moe() && m.moe_intermediate_size % tp != 0)
    return "tensor parallelism " + t + " does not divide the expert MLP width " +
           std::to_string(m.moe_intermediate_size) + " of " + m.name + " (experts are split tensor-parallel)";
  if (m.layers_of(LayerAttention::kLinear) > 0 &&
      (m.linear_num_key_heads % tp != 0 || m.linear_num_value_heads % tp != 0))
    return "tensor parallelism " + t + " does not divide the " + std::to_string(m.linear_num_key_heads) +
           " key heads and " + std::to_string(m.linear_num_value_heads) + " value heads of " + m.name +
           "'s linear-attention layers: each GPU must hold whole heads and their states";
  return "";
}

int64_t kv_heads_per_gpu(const ModelSpec& m, int64_t tp) {
  return m.num_kv_heads >= tp ? m.num_kv_heads / tp : 1;
}

double kv_bytes_per_token_per_gpu(const ModelSpec& m, int64_t tp) {
  if (!m.uniform_full()) {
    const KvGroups g = kv_groups_per_gpu(m, tp);
    return g.full_bytes_per_token + g.window_bytes_per_token;
  }
  // MLA's latent is shared by all heads, so every GPU of the group keeps the whole of it.
  if (m.is_mla()) return m.kv_bytes_per_token();
  return 2.0 * static_cast<double>(m.num_layers) * static_cast<double>(kv_heads_per_gpu(m, tp)) *
         static_cast<double>(m.head_dim) * m.kv_bytes;
}

double KvGroups::bytes(double tokens) const {
  const double w = window > 0 ? std::min(tokens, static_cast<double>(window)) : 0.0;
  return full_bytes_per_token * tokens + window_bytes_per_token * w + state_bytes;
}

KvGroups kv_groups_per_gpu(const ModelSpec& m, int64_t tp) {
  KvGroups g;
  if (m.uniform_full()) {
    g.full_bytes_per_token = kv_bytes_per_token_per_gpu(m, tp);
    return g;
  }
  const double layer = m.is_mla() ? static_cast<double>(m.kv_lora_rank + m.qk_rope_head_dim) * m.kv_bytes
                                  : 2.0 * static_cast<double>(kv_heads_per_gpu(m, tp)) *
                                        static_cast<double>(m.head_dim) * m.kv_bytes;
  const double sparse = static_cast<double>(m.layers_of(LayerAttention::kSparse));
  g.full_bytes_per_token = static_cast<double>(m.layers_of(LayerAttention::kFull)) * layer +
                           sparse * (layer + m.indexer_key_bytes_per_token());
  g.window_bytes_per_token = static_cast<double>(m.layers_of(LayerAttention::kSlidingWindow)) * layer;
  g.window = g.window_bytes_per_token > 0 ? m.sliding_window : 0;
  // The state's heads (and the convolution's channels) split with the heads.
  g.state_bytes = m.state_bytes_per_sequence() / static_cast<double>(tp);
  return g;
}

double kv_tokens_that_fit(const KvGroups& g, double bytes, int64_t batch) {
  const double per_sequence = bytes / static_cast<double>(batch) - g.state_bytes;
  if (per_sequence <= 0) return 0.0;
  const double both = g.full_bytes_per_token + g.window_bytes_per_token;
  const double w = static_cast<double>(g.window);
  if (g.window > 0 && per_sequence > both * w) {
    // Past the window only the full layers grow.
    if (g.full_bytes_per_token <= 0) return std::numeric_limits<double>::infinity();
    return w + (per_sequence - both * w) / g.full_bytes_per_token;
  }
  return both > 0 ? per_sequence / both : std::numeric_limits<double>::infinity();
}

double weight_bytes_per_gpu(const ModelSpec& m, int64_t tp, int64_t expert_parallel, int64_t redundant_experts) {
  const double t = static_cast<double>(tp);
  const double h = static_cast<double>(m.hidden_size);
  const double heads = static_cast<double>(m.num_heads) / t;
  // Linear-layer weights (stored at weight_bytes) and the rest (at activation_bytes), per block.
  double attention = 0, attention_other = 0;
  if (m.is_mla()) {
    const double qk = static_cast<double>(m.qk_head_dim());
    const double q_lora = static_cast<double>(m.q_lora_rank);
    const double kv_lora = static_cast<double>(m.kv_lora_rank);
    // The low-rank down projections are replicated on every GPU; the up projections and the output
    // projection split by heads.
    attention = (m.q_lora_rank > 0 ? h * q_lora + q_lora * heads * qk : h * heads * qk) +
                h * (kv_lora + static_cast<double>(m.qk_rope_head_dim)) +
                kv_lora * heads * static_cast<double>(m.head_dim + m.v_head_dim) +
                heads * static_cast<double>(m.v_head_dim) * h;
    attention_other = kv_lora + q_lora;
  } else {
    const double q_cols = static_cast<double>(m.num_heads * m.head_dim) / t;
    const double kv_cols = static_cast<double>(kv_heads_per_gpu(m, tp) * m.head_dim);
    attention = h * (q_cols + 2.0 * kv_cols) + q_cols * h;
    attention_other = m.qkv_bias ? q_cols + 2.0 * kv_cols : 0.0;
  }
  if (m.attn_output_gate) attention += h * static_cast<double>(m.num_heads * m.head_dim) / t;
  const double layers = static_cast<double>(m.num_layers);
  const double dense_mlp = (m.gated_mlp ? 3.0 : 2.0) * h * static_cast<double>(m.intermediate_size) / t;
  const double experts =
      expert_parallel > 1
          ? static_cast<double>(m.num_experts + redundant_experts) / static_cast<double>(expert_parallel) *
                    m.expert_params() +
                static_cast<double>(m.num_shared_experts) * m.expert_params() / t
          : static_cast<double>(m.num_experts + m.num_shared_experts) * m.expert_params() / t;
  const double vocab_rows = (m.embedding_params() + m.lm_head_params()) / t;
  if (!m.uniform_full()) {
    // Attention projections on the softmax layers; linear-attention mixers split by heads (their
    // gated norm, shared by the heads, whole); sparse layers' indexers whole on every GPU (each GPU
    // selects the same keys for its heads).
    const double linear_layers = static_cast<double>(m.layers_of(LayerAttention::kLinear));
    const double sparse_layers = static_cast<double>(m.layers_of(LayerAttention::kSparse));
    const double attn_layers = static_cast<double>(m.attention_layers());
    const double lin_norm = static_cast<double>(m.linear_value_head_dim);
    const double lin_other = (m.linear_attention_params() - m.linear_attention_linear_params() - lin_norm) / t + lin_norm;
    const double linear_weights = attn_layers * attention + linear_layers * m.linear_attention_linear_params() / t +
                                  sparse_layers * m.indexer_linear_params() +
                                  static_cast<double>(m.dense_mlp_layers()) * dense_mlp;
    const double expert_weights = static_cast<double>(m.moe_layers()) * experts;
    const double other = attn_layers * attention_other + linear_layers * lin_other +
                         sparse_layers * (m.indexer_params() - m.indexer_linear_params()) + layers * 2.0 * h +
                         static_cast<double>(m.moe_layers()) * m.router_params() + vocab_rows + h;
    return linear_weights * m.weight_bytes + expert_weights * m.expert_bytes() + other * m.activation_bytes;
  }
  const double linear = layers * attention + static_cast<double>(m.dense_mlp_layers()) * dense_mlp +
                        static_cast<double>(m.moe_layers()) * experts;
  const double other = layers * (attention_other + 2.0 * h) +
                       static_cast<double>(m.moe_layers()) * m.router_params() + vocab_rows + h;
  if (m.experts_stored_apart())
    return (linear - static_cast<double>(m.moe_layers()) * experts) * m.weight_bytes +
           static_cast<double>(m.moe_layers()) * experts * m.expert_bytes() + other * m.activation_bytes;
  return linear * m.weight_bytes + other * m.activation_bytes;
}

double arithmetic_intensity(double flops, double bytes) { return flops / bytes; }

double attainable_flops(double peak_flops, double bandwidth_bytes_per_s, double intensity) {
  return std::min(peak_flops, bandwidth_bytes_per_s * intensity);
}

double decode_intensity(double flops_per_token, double weight_bytes, int64_t batch, int64_t context,
                        double kv_bytes_per_token) {
  const double b = static_cast<double>(batch);
  return flops_per_token * b / (weight_bytes + b * static_cast<double>(context) * kv_bytes_per_token);
}

double saturated_decode_intensity(double flops_per_token, int64_t context, double kv_bytes_per_token) {
  return flops_per_token / (static_cast<double>(context) * kv_bytes_per_token);
}

double decode_crossover_batch(double weight_bytes, int64_t context, double kv_bytes_per_token) {
  return weight_bytes / (static_cast<double>(context) * kv_bytes_per_token);
}

double weight_read_seconds(double weight_bytes, double bandwidth_bytes_per_s) {
  return weight_bytes / bandwidth_bytes_per_s;
}

double decode_ceiling_tokens_per_s(double weight_bytes, double bandwidth_bytes_per_s) {
  return bandwidth_bytes_per_s / weight_bytes;
}

double prefill_flops(double params, int64_t tokens, double prefix_hit_rate) {
  return (1.0 - prefix_hit_rate) * 2.0 * params * static_cast<double>(tokens);
}

double step_mfu(const StepCost& cost, int64_t tp) {
  if (cost.seconds <= 0) return 0.0;
  return cost.peak_flop_seconds / (cost.seconds * static_cast<double>(tp));
}

double step_mbu(const StepCost& cost, const GpuSpec& gpu, int64_t tp) {
  if (cost.seconds <= 0) return 0.0;
  return cost.bytes / (cost.seconds * gpu.hbm_bandwidth * static_cast<double>(tp));
}

}  // namespace servesim::hwmodels
