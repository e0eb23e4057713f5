#include "hwmodels/roofline_cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "hwmodels/roofline.h"
#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "sim/core/format.h"

namespace servesim::hwmodels {

namespace {
constexpr double kSecondsPerMs = 1e-3;
constexpr double kSecondsPerUs = 1e-6;
}  // namespace

// Where the defaults come from. "Vidur" is the measured operator set in
// shared/reference-data/operator-profiles (median times, one layer, fp16); tests/hwmodels prints
// the comparison of these defaults against it.
std::vector<core::ParamSpec> roofline_param_specs() {
  using core::ParamSpec;
  const RooflineParams d;
  return {
      // Vidur, 2048-4096 tokens: H100 Llama-2-7B GEMMs reach 0.71 (QKV) to 0.85 (down) of
      // 989 TFLOP/s, the fused gate+up 0.75; A100 Llama-3-8B 0.65-0.75 of 312 TFLOP/s.
      ParamSpec::real("compute_efficiency", d.compute_efficiency, "",
                      "fraction of peak FLOP/s a large GEMM reaches (measured 0.65-0.85 on A100/H100)")
          .range(0.01, 1),
      // Vidur, 1 token: H100 gate+up (180 MB of weights) 64 us = 0.84 of 3.35 TB/s; A100 Llama-3-8B
      // gate+up (235 MB) 142 us = 0.81 of 2.04 TB/s, launch floor included.
      ParamSpec::real("memory_efficiency", d.memory_efficiency, "",
                      "fraction of HBM bandwidth a weight-streaming (small-batch) GEMM reaches")
          .range(0.01, 1),
      // Vidur, 4096 tokens, byte-weighted over RMSNorm, RoPE, SiLU-and-mul and residual add: 0.53
      // of bandwidth on H100, 0.49 on A100 (adds ~0.9, norms ~0.3). At prefill sizes these kernels
      // cost about a fifth of the GEMM time, so they are not negligible.
      ParamSpec::real("elementwise_efficiency", d.elementwise_efficiency, "",
                      "fraction of HBM bandwidth normalisation, rotary, activation and add kernels reach")
          .range(0.01, 1),
      // FlashAttention-2 reports 50-73% of A100 peak in the forward pass, FlashAttention-3 up to 75%
      // of H100 fp16 peak on long sequences; short and chunked prompts fill fewer tiles.
      ParamSpec::real("attention_compute_efficiency", d.attention_compute_efficiency, "",
                      "fraction of peak FLOP/s of FlashAttention-style prefill attention")
          .range(0.01, 1),
      // No measurement in the reference set (its attention files were not obtained). Decode
      // attention reads the cache in scattered blocks (16 tokens x head_dim per KV head), below
      // a contiguous weight stream: 0.7 until the project's own microbenchmarks replace it.
      ParamSpec::real("attention_memory_efficiency", d.attention_memory_efficiency, "",
                      "fraction of HBM bandwidth attention reaches reading the (paged) KV cache")
          .range(0.01, 1),
      // Vidur times isolated kernels (launch included): a ~4-5 us floor under tiny ones. Serving
      // engines replay decode through CUDA graphs, which removes most launch cost but not a
      // kernel's ramp-up and tail; with memory_efficiency 0.85, 2 us reproduces the 1-token GEMM
      // times within 2-4 us.
      ParamSpec::real("kernel_overhead_us", d.kernel_overhead_us, "us",
                      "fixed time each kernel adds (ramp-up, tail, residual launch gap)")
          .range(0, 1e4),
      // cuBLAS kernels' prologue and epilogue: Vidur's 1-8-token GEMMs extrapolate to 3-6 us at zero
      // bytes where elementwise kernels take 1-2 us.
      ParamSpec::real("gemm_kernel_overhead_us", 0, "us",
                      "kernel_overhead_us for GEMMs; unset: kernel_overhead_us")
          .range(0, 1e4)
          .optional(),
      // Vidur h100_dgx NCCL all-reduce of 2 KB: 7 us on 2 GPUs (37 us on 8, framework overhead
      // included); custom one-shot all-reduce kernels in serving engines take ~5-10 us.
      ParamSpec::real("allreduce_latency_us", d.allreduce_latency_us, "us",
                      "fixed time of one tensor-parallel all-reduce")
          .range(0, 1e5),
      // Vidur 64 MB all-reduce bus bandwidth: H100 DGX 274/317/365 GB/s on 2/4/8 GPUs = 0.61/0.70/
      // 0.81 of 450 GB/s; A100 DGX 156-174 GB/s = 0.52-0.58 of 300 GB/s.
      ParamSpec::real("interconnect_efficiency", d.interconnect_efficiency, "",
                      "fraction of per-direction NVLink bandwidth an all-reduce reaches (bus bandwidth)")
          .range(0.01, 1),
      // A PyTorch eager launch costs the host 4-10 us; kernels shorter than that leave the GPU idle
      // between them. 0 by default: kernel_overhead_us already stands for the launch gap.
      ParamSpec::real("eager_launch_us", d.eager_launch_us, "us",
                      "CPU time to launch one kernel without CUDA graphs: a shorter kernel takes this long")
          .range(0, 1e6),
      // cudaGraphLaunch of a few hundred kernel nodes: ~10 us of host time and GPU scheduling. Which
      // iterations replay graphs is the engine's choice ([engine] cuda_graphs).
      ParamSpec::real("graph_launch_us", d.graph_launch_us, "us",
                      "time of one CUDA graph (or graph piece) replay launch")
          .range(0, 1e6),
      ParamSpec::path("calibration",
                      "calibration profile (servesim fit / calibrate): efficiency tables, launch costs, all-reduce "
                      "and engine overheads measured on this GPU type; keys written here override it. Unset: "
                      "the GPU's shipped profile (calibration/profiles/<gpu>.toml) when there is one; \"none\": "
                      "no profile, the constant efficiencies above")
          .one_of({std::string(kNoCalibration)})
          .optional(),
  };
}

RooflineParams roofline_params_from(const core::Params& p) {
  RooflineParams r;
  r.compute_efficiency = p.get_float("compute_efficiency");
  r.memory_efficiency = p.get_float("memory_efficiency");
  r.elementwise_efficiency = p.get_float("elementwise_efficiency");
  r.attention_compute_efficiency = p.get_float("attention_compute_efficiency");
  r.attention_memory_efficiency = p.get_float("attention_memory_efficiency");
  r.kernel_overhead_us = p.get_float("kernel_overhead_us");
  if (p.has("gemm_kernel_overhead_us")) r.gemm_kernel_overhead_us = p.get_float("gemm_kernel_overhead_us");
  r.allreduce_latency_us = p.get_float("allreduce_latency_us");
  r.interconnect_efficiency = p.get_float("interconnect_efficiency");
  r.eager_launch_us = p.get_float("eager_launch_us");
  r.graph_launch_us = p.get_float("graph_launch_us");
  return r;
}

AttentionLayout decode_attention_layout(const ModelSpec& m, int64_t tensor_parallel) {
  AttentionLayout l;
  l.heads = m.num_heads / tensor_parallel;
  l.block_size = kAssumedKvBlockSize;
  if (m.is_mla()) {
    // The absorbed form: every query head against the one shared latent, keys of latent + rotary.
    l.kv_heads = 1;
    l.head_dim = m.kv_lora_rank + m.qk_rope_head_dim;
    l.kv_lora_rank = m.kv_lora_rank;
  } else {
    l.kv_heads = kv_heads_per_gpu(m, tensor_parallel);
    l.head_dim = m.head_dim;
  }
  return l;
}

namespace {

// log2 of an all-reduce's GPU count, for interpolating between the counts a profile measured.
AlphaBeta all_reduce_for(const std::map<int64_t, AlphaBeta>& table, int64_t gpus) {
  if (const auto it = table.find(gpus); it != table.end()) return it->second;
  const auto hi = table.lower_bound(gpus);
  if (hi == table.begin()) return hi->second;
  if (hi == table.end()) return std::prev(hi)->second;
  const auto lo = std::prev(hi);
  const double f = (std::log2(static_cast<double>(gpus)) - std::log2(static_cast<double>(lo->first))) /
                   (std::log2(static_cast<double>(hi->first)) - std::log2(static_cast<double>(lo->first)));
  return {lo->second.latency_s + f * (hi->second.latency_s - lo->second.latency_s),
          lo->second.bandwidth + f * (hi->second.bandwidth - lo->second.bandwidth)};
}

}  // namespace

void RooflineCostModel::apply_profile(LinearOp& op, const GemmTables* gemm) const {
  if (!profile_) return;
  if (op.gemm) {
    if (use_.gemm_compute && gemm && !gemm->compute_efficiency.empty())
      op.compute_curve = gemm->compute_efficiency.at_y(op.weight_elements);
    if (use_.gemm_memory && gemm && !gemm->memory_efficiency.empty()) op.memory_curve = gemm->memory_efficiency;
  } else if (use_.elementwise) {
    if (const Curve* c = profile_->elementwise_curve(op.family)) op.memory_curve = *c;
    if (const auto floor = profile_->elementwise_row_ns_per_byte.find(std::string(op.family));
        floor != profile_->elementwise_row_ns_per_byte.end())
      op.row_floor_s = floor->second * 1e-9 * op.bytes_per_row;
  }
}

RooflineCostModel::RooflineCostModel(ModelSpec model, GpuSpec gpu, int64_t tensor_parallel, RooflineParams params,
                                     const CalibrationProfile* profile, ProfileUse use, ExpertParallelism ep)
    : model_(std::move(model)), gpu_(std::move(gpu)), tp_(tensor_parallel), params_(params), use_(use),
      ep_(std::move(ep)) {
  if (const std::string problem = tp_problem(model_, tp_); !problem.empty()) throw core::Error(problem);
  if (const std::string problem = ep_problem(model_, tp_, ep_); !problem.empty()) throw core::Error(problem);
  profile_ = profile;
  calibrated_ = profile != nullptr;

  const ModelSpec& m = model_;
  const double t = static_cast<double>(tp_);
  const double h = static_cast<double>(m.hidden_size);
  const double d = static_cast<double>(m.head_dim);
  const double heads = static_cast<double>(m.num_heads);
  const double kv_heads = static_cast<double>(m.num_kv_heads);
  const double q_cols = heads * d / t;  // this GPU's query heads x head_dim
  const double kv_cols = static_cast<double>(kv_heads_per_gpu(m, tp_)) * d;
  const double inter = static_cast<double>(m.intermediate_size) / t;
  const double up_factor = m.gated_mlp ? 2.0 : 1.0;
  const double vocab = static_cast<double>(m.vocab_size) / t;
  const double w = m.weight_bytes;
  const double a = m.activation_bytes;

  // The profile's GEMM tables for this weight type (fp8 W8A8 has its own when measured).
  const bool w8a8_fp8 = m.weight_dtype == DType::kFp8 && gpu_.fp8_peak_flops > 0;
  const GemmTables* gemm_tables = nullptr;
  if (profile) gemm_tables = w8a8_fp8 && !profile->gemm_fp8.empty() ? &profile->gemm_fp8 : &profile->gemm;
  const bool gemm_compute_table = gemm_tables && use_.gemm_compute && !gemm_tables->compute_efficiency.empty();
  const bool gemm_memory_table = gemm_tables && use_.gemm_memory && !gemm_tables->memory_efficiency.empty();

  // A table replaces the constant efficiency: rates at efficiency 1 then, divided by the table's value.
  const double gemm_peak = gpu_.gemm_peak(m.weight_dtype);
  const double unquantised_peak = gpu_.peak_flops;
  const double compute_rate = gemm_peak * (gemm_compute_table ? 1.0 : params_.compute_efficiency);
  const double lm_head_rate = unquantised_peak * (gemm_compute_table ? 1.0 : params_.compute_efficiency);
  const double gemm_rate = gpu_.hbm_bandwidth * (gemm_memory_table ? 1.0 : params_.memory_efficiency);
  hbm_ = gpu_.hbm_bandwidth;

  // in_cols x out_cols weights per GPU; useful FLOPs of the unsplit GEMM given separately because
  // replicated work (KV heads, MLA's down projections) is done on several GPUs.
  // Unquantised GEMMs (LM head, router) store activation_bytes weights and run at the 16-bit rate.
  auto gemm = [&](std::string_view name, int64_t count, double in_cols, double out_cols, double group_flops_per_row,
                  bool unquantised = false, double extra_weight_bytes = 0.0) {
    const double weight_bytes_per_element = unquantised ? a : w;
    const double rate = unquantised ? lm_head_rate : compute_rate;
    LinearOp op;
    op.name = name;
    op.count = count;
    op.gemm = true;
    op.weight_bytes = in_cols * out_cols * weight_bytes_per_element + extra_weight_bytes;
    op.bytes_per_row = (in_cols + out_cols) * a;
    op.weight_s = op.weight_bytes / gemm_rate;
    op.memory_s_per_row = op.bytes_per_row / gemm_rate;
    op.compute_s_per_row = 2.0 * in_cols * out_cols / rate;
    op.group_flops_per_row = group_flops_per_row;
    op.weight_elements = in_cols * out_cols;
    op.flops_per_row = 2.0 * in_cols * out_cols;
    op.peak = unquantised ? unquantised_peak : gemm_peak;
    op.fixed_s = params_.gemm_kernel_overhead_us.value_or(params_.kernel_overhead_us) * kSecondsPerUs;
    apply_profile(op, gemm_tables);
    return op;
  };
  // Experts stored apart from the other weights (gpt-oss's mxfp4 experts): their bytes and the rate
  // their type runs at.
  auto expert_gemm = [&](std::string_view name, int64_t count, double in_cols, double out_cols,
                         double group_flops_per_row) {
    LinearOp op = gemm(name, count, in_cols, out_cols, group_flops_per_row);
    if (m.experts_stored_apart()) {
      const double peak = gpu_.gemm_peak(m.expert_dtype());
      op.weight_bytes = in_cols * out_cols * m.expert_bytes();
      op.weight_s = op.weight_bytes / gemm_rate;
      op.compute_s_per_row = 2.0 * in_cols * out_cols / (peak * (gemm_compute_table ? 1.0 : params_.compute_efficiency));
      op.peak = peak;
    }
    return op;
  };
  // Memory-bound kernels; their few FLOPs are not "useful" model FLOPs (MFU counts matmuls).
  auto elementwise = [&](std::string_view name, std::string_view family, int64_t count, double weight_bytes,
                         double bytes_per_row) {
    LinearOp op;
    op.name = name;
    op.family = family;
    op.count = count;
    op.weight_bytes = weight_bytes;
    op.bytes_per_row = bytes_per_row;
    op.fixed_s = params_.kernel_overhead_us * kSecondsPerUs;
    apply_profile(op, nullptr);
    const double rate = gpu_.hbm_bandwidth * (op.memory_curve.empty() ? params_.elementwise_efficiency : 1.0);
    op.weight_s = weight_bytes / rate;
    op.memory_s_per_row = bytes_per_row / rate;
    return op;
  };

  const int64_t layers = m.num_layers;
  // The attention projections run on the softmax-attention layers (all of them but linear ones).
  const int64_t attn_layers = m.attention_layers();
  const double norm_bytes_per_row = 2.0 * h * a;  // read x, write normalised x
  // A draft head (EAGLE's fc, an MTP module's eh_proj) first fuses [token embedding; the target's
  // hidden state] into the residual stream: a 2h x h projection, unquantised and whole on every GPU.
  if (m.draft_head) pre_attention_ops_.push_back(gemm("draft_fc", 1, 2.0 * h, h, 2.0 * 2.0 * h * h, true));
  pre_attention_ops_.push_back(elementwise("input_layernorm", "rms_norm", layers, h * a, norm_bytes_per_row));
  double rope_bytes_per_row = 0;
  if (m.is_mla()) {
    const double qk = static_cast<double>(m.qk_head_dim());
    const double v = static_cast<double>(m.v_head_dim);
    const double rope = static_cast<double>(m.qk_rope_head_dim);
    const double q_lora = static_cast<double>(m.q_lora_rank);
    const double kv_lora = static_cast<double>(m.kv_lora_rank);
    const double local_heads = heads / t;
    // The low-rank down projections run whole on every GPU (vLLM's replicated fused_qkv_a_proj):
    // their useful FLOPs count once.
    const double down_cols = (m.q_lora_rank > 0 ? q_lora : 0.0) + kv_lora + rope;
    pre_attention_ops_.push_back(gemm("attn_pre_proj", attn_layers, h, down_cols, 2.0 * h * down_cols));
    if (m.q_lora_rank > 0)
      pre_attention_ops_.push_back(
          elementwise("attn_q_a_layernorm", "rms_norm", attn_layers, q_lora * a, 2.0 * q_lora * a));
    pre_attention_ops_.push_back(
        elementwise("attn_kv_a_layernorm", "rms_norm", attn_layers, kv_lora * a, 2.0 * kv_lora * a));
    const double q_in = m.q_lora_rank > 0 ? q_lora : h;
    pre_attention_ops_.push_back(
        gemm("attn_q_proj", attn_layers, q_in, local_heads * qk, 2.0 * q_in * heads * qk));
    LinearOp kv_b = gemm("attn_kv_b_proj", attn_layers, kv_lora, local_heads * (d + v), 2.0 * kv_lora * heads * (d + v));
    // Full and window layers' prefill expands the cached latents into keys and values; sparse
    // layers run the absorbed form in prefill too (DeepSeek-V3.2's kernels), expanding nothing.
    kv_b.rows_include_prefill_context = m.layers_of(LayerAttention::kSparse) == 0;
    pre_attention_ops_.push_back(kv_b);
    rope_bytes_per_row = 2.0 * (local_heads * rope + rope) * a;  // rotate q's and the shared k's rotary part
    pre_attention_ops_.push_back(elementwise("attn_rope", "rope", attn_layers, 0, rope_bytes_per_row));
    post_attention_ops_.push_back(
        gemm("attn_post_proj", attn_layers, local_heads * v, h, 2.0 * heads * v * h));
  } else {
    const double bias_bytes = m.qkv_bias ? (q_cols + 2.0 * kv_cols) * a : 0.0;
    // An output gate widens the query projection by the gate's q_cols.
    const double gate_cols = m.attn_output_gate ? q_cols : 0.0;
    pre_attention_ops_.push_back(gemm("attn_pre_proj", attn_layers, h, q_cols + 2.0 * kv_cols + gate_cols,
                                      2.0 * h * (heads * (m.attn_output_gate ? 2.0 : 1.0) + 2.0 * kv_heads) * d,
                                      false, bias_bytes));
    // Rotate Q and K in place.
    pre_attention_ops_.push_back(elementwise("attn_rope", "rope", attn_layers, 0, 2.0 * (q_cols + kv_cols) * a));
    // sigmoid(gate) x attention output: read both, write one.
    if (m.attn_output_gate)
      post_attention_ops_.push_back(elementwise("attn_output_gate", "act", attn_layers, 0, 3.0 * q_cols * a));
    post_attention_ops_.push_back(gemm("attn_post_proj", attn_layers, q_cols, h, 2.0 * heads * d * h));
  }
  if (const int64_t n = m.layers_of(LayerAttention::kSparse); n > 0) {
    // The lightning indexer's projections, whole on every GPU: queries of index_n_heads x
    // index_head_dim from the query bottleneck, one key and a weight per head from the hidden state.
    const double q_in = m.q_lora_rank > 0 ? static_cast<double>(m.q_lora_rank) : h;
    const double iq = static_cast<double>(m.index_n_heads * m.index_head_dim);
    const double ikw = static_cast<double>(m.index_head_dim + m.index_n_heads);
    pre_attention_ops_.push_back(gemm("indexer_q_proj", n, q_in, iq, 2.0 * q_in * iq));
    pre_attention_ops_.push_back(gemm("indexer_kw_proj", n, h, ikw, 2.0 * h * ikw));
  }
  if (const int64_t n = m.layers_of(LayerAttention::kLinear); n > 0) {
    // Gated DeltaNet (and kin): q, k, v, the output gate z, and beta and the decay per value head
    // in one projection; a depthwise causal convolution over q, k, v; a gated RMSNorm; out_proj.
    const double kd = static_cast<double>(m.linear_num_key_heads * m.linear_key_head_dim);
    const double vd = static_cast<double>(m.linear_num_value_heads * m.linear_value_head_dim);
    const double nv = static_cast<double>(m.linear_num_value_heads);
    const double in_cols = 2.0 * kd + 2.0 * vd + 2.0 * nv;
    pre_attention_ops_.push_back(gemm("linear_attn_in_proj", n, h, in_cols / t, 2.0 * h * in_cols));
    pre_attention_ops_.push_back(
        elementwise("linear_attn_conv", "act", n, (2.0 * kd + vd) / t * static_cast<double>(m.linear_conv_kernel) * a,
                    2.0 * (2.0 * kd + vd) / t * a));
    post_attention_ops_.push_back(elementwise("linear_attn_norm", "rms_norm", n, 0, 3.0 * vd / t * a));
    post_attention_ops_.push_back(gemm("linear_attn_out_proj", n, vd / t, h, 2.0 * vd * h));
  }
  post_attention_ops_.push_back(
      elementwise("post_attention_layernorm", "rms_norm", layers, h * a, norm_bytes_per_row));
  if (const int64_t dense = m.dense_mlp_layers(); dense > 0) {
    post_attention_ops_.push_back(gemm("mlp_up_proj", dense, h, up_factor * inter,
                                       2.0 * h * up_factor * static_cast<double>(m.intermediate_size)));
    // SiLU(gate) x up reads both halves, writes one; without a gate, read and write.
    post_attention_ops_.push_back(elementwise("mlp_act", "act", dense, 0, (up_factor + 1.0) * inter * a));
    post_attention_ops_.push_back(gemm("mlp_down_proj", dense, inter, h,
                                       2.0 * static_cast<double>(m.intermediate_size) * h));
  }
  if (m.is_moe()) {
    const int64_t blocks = m.moe_layers();
    const double expert_width = static_cast<double>(m.moe_intermediate_size);
    if (m.num_shared_experts > 0) {
      const double shared = static_cast<double>(m.num_shared_experts) * expert_width;
      post_attention_ops_.push_back(expert_gemm("shared_expert_up_proj", blocks, h, up_factor * shared / t,
                                         2.0 * h * up_factor * shared));
      post_attention_ops_.push_back(
          elementwise("shared_expert_act", "act", blocks, 0, (up_factor + 1.0) * shared / t * a));
      post_attention_ops_.push_back(
          expert_gemm("shared_expert_down_proj", blocks, shared / t, h, 2.0 * shared * h));
    }
    moe_.present = true;
    moe_.count = blocks;
    moe_.experts = static_cast<double>(m.num_experts);
    moe_.top_k = static_cast<double>(m.experts_per_token);
    moe_.log_miss = std::log1p(-moe_.top_k / moe_.experts);
    const double e = static_cast<double>(m.num_experts);
    // The router is small and stays unquantised on every GPU.
    moe_.gate = gemm("moe_gate", blocks, h, e, 2.0 * h * e, true);
    // Per expert-row (one token's visit to one expert); weight_s is one expert's share on this GPU:
    // split tensor-parallel, or whole with expert parallelism.
    const double et = ep_.enabled() ? 1.0 : t;
    moe_.up = expert_gemm("moe_up_proj", blocks, h, up_factor * expert_width / et, 2.0 * h * up_factor * expert_width);
    moe_.act = elementwise("moe_act", "act", blocks, 0, (up_factor + 1.0) * expert_width / et * a);
    moe_.down = expert_gemm("moe_down_proj", blocks, expert_width / et, h, 2.0 * expert_width * h);
    // The weighted sum of each token's k expert outputs: read k rows, write one.
    moe_.combine = elementwise("moe_combine", "add", blocks, 0, (moe_.top_k + 1.0) * h * a);
  }
  tail_ops_.push_back(elementwise("add", "add", 2 * layers, 0, 3.0 * h * a));  // two residual adds: read two, write one
  // Vocab-parallel lookup: every GPU looks up a row for every token (rows it does not own read
  // row 0 and are zeroed before the all-reduce), as vLLM's VocabParallelEmbedding does; Vidur's
  // measurements show TP 8 taking 0.9x the TP 1 time, not 1/8.
  embedding_ = elementwise("emb", "embedding", 1, 0, h * (a + a));
  final_norm_ = elementwise("final_layernorm", "rms_norm", 1, h * a, norm_bytes_per_row);
  lm_head_ = gemm("lm_head", 1, h, vocab, 2.0 * h * static_cast<double>(m.vocab_size), true);

  kernel_s_ = params_.kernel_overhead_us * kSecondsPerUs;
  eager_launch_s_ = params_.eager_launch_us * kSecondsPerUs;
  graph_launch_s_ = params_.graph_launch_us * kSecondsPerUs;

  if (m.is_mla()) {
    const double local_heads = heads / t;
    const double latent = static_cast<double>(m.kv_lora_rank + m.qk_rope_head_dim);
    const double qk = static_cast<double>(m.qk_head_dim());
    const double v = static_cast<double>(m.v_head_dim);
    const double kv_lora = static_cast<double>(m.kv_lora_rank);
    // Decode runs the absorbed form over the latent cache: scores against kv_lora + rope, output in
    // kv_lora, per head. Prefill expands keys and values (kv_b_proj) and runs ordinary attention
    // with qk- and v-wide heads.
    kv_bytes_per_token_ = latent * m.kv_bytes;
    kv_write_bytes_per_token_ = latent * m.kv_bytes;
    prefill_kv_bytes_per_token_ = local_heads * (qk + v) * a;
    q_o_bytes_per_token_ = local_heads * (qk + v) * a;
    attn_flops_per_pair_ = 2.0 * (qk + v) * local_heads;
    attn_group_flops_per_pair_ = 2.0 * (qk + v) * heads;
    decode_flops_per_pair_ = 2.0 * (latent + kv_lora) * local_heads;
    decode_group_flops_per_pair_ = 2.0 * (latent + kv_lora) * heads;
  } else {
    kv_bytes_per_token_ = 2.0 * kv_cols * m.kv_bytes;
    kv_write_bytes_per_token_ = kv_bytes_per_token_;
    prefill_kv_bytes_per_token_ = kv_bytes_per_token_;
    q_o_bytes_per_token_ = 2.0 * q_cols * a;
    attn_flops_per_pair_ = 4.0 * d * heads / t;
    attn_group_flops_per_pair_ = 4.0 * d * heads;
    decode_flops_per_pair_ = attn_flops_per_pair_;
    decode_group_flops_per_pair_ = attn_group_flops_per_pair_;
  }
  attn_peak_ = gpu_.peak_flops;
  attn_compute_rate_ = gpu_.peak_flops * params_.attention_compute_efficiency;
  attn_memory_rate_ = gpu_.hbm_bandwidth * params_.attention_memory_efficiency;
  // The analytic model's peaks: a profile's fitted values unless [cost_model] sets them.
  attn_decode_peak_eff_ = params_.attention_memory_efficiency;
  attn_prefill_peak_eff_ = params_.attention_compute_efficiency;
  if (profile && use_.attention_memory && profile->attention_decode_efficiency)
    attn_decode_peak_eff_ = *profile->attention_decode_efficiency;
  if (profile && use_.attention_compute && profile->attention_prefill_efficiency)
    attn_prefill_peak_eff_ = *profile->attention_prefill_efficiency;
  {
    const AttentionLayout layout = decode_attention_layout(model_, tp_);
    attn_kv_heads_ = static_cast<double>(std::max<int64_t>(1, layout.kv_heads));
    attn_group_ = static_cast<double>(std::max<int64_t>(1, layout.heads / std::max<int64_t>(1, layout.kv_heads)));
  }
  sm_count_ = static_cast<double>(std::max<int64_t>(1, gpu_.sm_count));
  // Per-layer attention types (every layer full for the models before hybrids).
  full_layers_ = static_cast<double>(m.layers_of(LayerAttention::kFull));
  window_layers_ = static_cast<double>(m.layers_of(LayerAttention::kSlidingWindow));
  sparse_layers_ = static_cast<double>(m.layers_of(LayerAttention::kSparse));
  linear_layers_ = static_cast<double>(m.layers_of(LayerAttention::kLinear));
  // Sparse layers score each selected key as decode does (MLA's absorbed form, in prefill too).
  sparse_flops_per_pair_ = decode_flops_per_pair_;
  sparse_group_flops_per_pair_ = decode_group_flops_per_pair_;
  if (sparse_layers_ > 0) {
    // Lightning indexer: per query-key pair an fp8 dot product per indexer head, ReLU, and the
    // heads' weighted sum; every GPU of the group computes all of it (it selects the keys of all
    // its heads) at the fp8 rate where there are fp8 tensor cores.
    const double ih = static_cast<double>(m.index_n_heads);
    indexer_flops_per_pair_ = 2.0 * ih * static_cast<double>(m.index_head_dim) + 2.0 * ih;
    indexer_key_bytes_ = m.indexer_key_bytes_per_token();
    indexer_query_bytes_ = ih * static_cast<double>(m.index_head_dim) + 4.0 * ih;
    indexer_topk_ = static_cast<double>(m.index_topk);
    indexer_peak_ = gpu_.fp8_peak_flops > 0 ? gpu_.fp8_peak_flops : gpu_.peak_flops;
    indexer_rate_ = indexer_peak_ * attn_prefill_peak_eff_;
  }
  if (linear_layers_ > 0) {
    // Gated delta rule per value head, state S of dk x dv. Decode (recurrent form): S^T k, the
    // rank-one update and S^T q, 2 dk dv FLOPs each. Prefill (chunkwise form over chunks of C = 64
    // tokens, as the FLA kernels run it): per chunk K K^T and Q K^T (2 C^2 dk each), the WY
    // transform (2 C^2 dk + 2 C^2 dv, and a triangular solve of 2/3 C^3), the intra-chunk output
    // (2 C^2 dv), and three products with the state (2 C dk dv each); per-chunk states are written
    // to HBM in fp32 and read back.
    constexpr double kChunk = 64.0, kFp32 = 4.0;
    const double dk = static_cast<double>(m.linear_key_head_dim), dv = static_cast<double>(m.linear_value_head_dim);
    lin_heads_ = static_cast<double>(m.linear_num_value_heads) / t;
    const double key_heads = static_cast<double>(m.linear_num_key_heads) / t;
    lin_state_bytes_ = m.state_bytes_per_sequence() / (linear_layers_ * t);
    lin_decode_flops_ = lin_heads_ * 6.0 * dk * dv;
    lin_prefill_flops_ =
        lin_heads_ * (kChunk * (6.0 * dk + 4.0 * dv) + 2.0 / 3.0 * kChunk * kChunk + 6.0 * dk * dv);
    // q, k (key heads), v (value heads) and the two gates in; the output out.
    lin_token_bytes_ = (2.0 * key_heads * dk + 2.0 * lin_heads_ * dv + 2.0 * lin_heads_) * a;
    lin_chunk_state_bytes_ = 2.0 * lin_heads_ * dk * dv * kFp32 / kChunk;
  }
  if (profile && use_.attention_compute) attention_prefill_curve_ = profile->attention_prefill;
  // The decode table measured at this model's per-GPU head layout, or the nearest one (the rule
  // is CalibrationProfile::decode_attention_table's).
  if (profile && use_.attention_memory)
    if (const DecodeTableChoice c = profile->decode_attention_table(decode_attention_layout(model_, tp_)); c.table)
      attention_decode_table_ = *c.table;
  // What the memoised decode steps' attention terms multiply by the layers, formed once (the same
  // products decode_attention_term forms left to right).
  for (auto [layers, out] : {std::pair{full_layers_, &full_decode_}, std::pair{window_layers_, &window_decode_}})
    *out = {layers, layers * t, layers * decode_group_flops_per_pair_};
  decode_peak_rate_ = hbm_ * attn_decode_peak_eff_;

  if (tp_ > 1) {
    // Two per layer (after attention's output projection and after the MLP's down projection)
    // and one for the vocab-parallel embedding. Ring all-reduce moves 2(t-1)/t of the message.
    allreduces_ = 2 * layers + 1;
    const double ring = 2.0 * (t - 1.0) / t;
    const double row_bytes = h * a;
    auto line = [&](double max_bytes, const AlphaBeta& ab) {
      allreduce_lines_.push_back({max_bytes / row_bytes, ab.latency_s, ring * row_bytes / ab.bandwidth});
    };
    if (profile && use_.all_reduce && !profile->all_reduce.empty()) {
      // The regimes of the nearest measured GPU count (in log2), then the large-message line,
      // interpolated between the measured counts around this one.
      if (!profile->all_reduce_regimes.empty()) {
        auto nearest = profile->all_reduce_regimes.begin();
        for (auto it = profile->all_reduce_regimes.begin(); it != profile->all_reduce_regimes.end(); ++it)
          if (std::fabs(std::log2(static_cast<double>(it->first) / t)) <
              std::fabs(std::log2(static_cast<double>(nearest->first) / t)))
            nearest = it;
        for (const AllReduceRegime& r : nearest->second) line(r.max_bytes, r.cost);
      }
      line(std::numeric_limits<double>::infinity(), all_reduce_for(profile->all_reduce, tp_));
    } else {
      line(std::numeric_limits<double>::infinity(),
           {params_.allreduce_latency_us * kSecondsPerUs, gpu_.interconnect_bandwidth * params_.interconnect_efficiency});
    }
  }
  if (ep_.enabled()) {
    placement_ = place_experts(model_, ep_);
    ranks_ = static_cast<double>(attention_ranks(ep_.degree, tp_));
    const size_t per_gpu = static_cast<size_t>(placement_.slots_per_gpu);
    const size_t first = static_cast<size_t>(placement_.busiest_gpu) * per_gpu;
    for (size_t i = first; i < first + per_gpu; ++i) busiest_log_miss_.push_back(std::log1p(-placement_.slot_visit[i]));
    // Slots with the same visit probability are summed once (all of them under uniform routing).
    std::vector<double> misses;
    for (double q : placement_.slot_visit) misses.push_back(std::log1p(-q));
    std::sort(misses.begin(), misses.end());
    for (double lm : misses) {
      if (slot_log_miss_.empty() || slot_log_miss_.back().first != lm) slot_log_miss_.push_back({lm, 0.0});
      slot_log_miss_.back().second += 1.0;
    }
    copies_normal_ = ep_copies_per_token(model_, ep_, false);
    copies_low_latency_ = ep_copies_per_token(model_, ep_, true);
    dispatch_copy_bytes_ = ep_dispatch_bytes_per_copy(model_, ep_);
    combine_copy_bytes_ = ep_combine_bytes_per_copy(model_);
    nvlink_rate_ = ep_.nvlink_bytes_per_s > 0 ? ep_.nvlink_bytes_per_s : gpu_.interconnect_bandwidth;
    scaleout_rate_ = ep_.scaleout_bytes_per_s;
    if (ep_.nodes() > 1 && !(scaleout_rate_ > 0))
      throw core::Error("internal: an expert-parallel replica across nodes needs the scale-out bandwidth");
    // One dispatch or combine: the path's latency and a kernel's fixed time.
    a2a_phase_s_ = (ep_.nodes() > 1 ? ep_.scaleout_latency_s : ep_.nvlink_latency_s) + kernel_s_;
  }
  profile_ = nullptr;  // the tables were copied; the profile need not outlive the model
}

RooflineCostModel::EpLoad RooflineCostModel::ep_load(double tokens) const {
  EpLoad l;
  const double k = moe_.top_k;
  l.busiest_visits = tokens * k * placement_.gpu_load[static_cast<size_t>(placement_.busiest_gpu)];
  if (ep_.routing_noise) l.busiest_visits = expected_max_count(l.busiest_visits, ep_.degree);
  // No GPU gets more visits than every token visiting each of its slots (at most k of them).
  l.busiest_visits =
      std::min(l.busiest_visits, tokens * std::min(k, static_cast<double>(placement_.slots_per_gpu)));
  // A slot a token visits with probability q is active in a step of n tokens with 1 - (1 - q)^n.
  for (double lm : busiest_log_miss_) l.busiest_active += -std::expm1(tokens * lm);
  for (const auto& [lm, count] : slot_log_miss_) l.all_active += count * -std::expm1(tokens * lm);
  return l;
}

void RooflineCostModel::precompute() {
  for (auto* list : {&pre_attention_ops_, &post_attention_ops_, &tail_ops_})
    for (LinearOp& op : *list) tabulate(op);
  for (LinearOp* op : {&embedding_, &final_norm_, &lm_head_, &moe_.gate, &moe_.act, &moe_.combine}) tabulate(*op);
}

double RooflineCostModel::curve_seconds(const LinearOp& op, double rows) const {
  double compute = op.compute_s_per_row * rows;
  double memory = op.weight_s + op.memory_s_per_row * rows;
  if (!op.compute_curve.empty()) compute /= op.compute_curve(rows);
  if (!op.memory_curve.empty()) memory /= op.memory_curve(op.weight_bytes + op.bytes_per_row * rows);
  return std::max({compute, memory, rows > 0 ? op.row_floor_s : 0.0}) + op.fixed_s;
}

double RooflineCostModel::linear_seconds(const LinearOp& op, double rows) const {
  if (op.tabulated && rows >= 0 && rows < static_cast<double>(kTabulatedRows)) {
    const size_t i = static_cast<size_t>(rows);
    if (static_cast<double>(i) == rows) {
      if (i >= op.seconds_by_rows.size()) op.seconds_by_rows.resize(std::min(kTabulatedRows, 2 * i + 64), -1.0);
      double& v = op.seconds_by_rows[i];
      if (v < 0) v = curve_seconds(op, rows);
      return v;
    }
  }
  return curve_seconds(op, rows);
}

void RooflineCostModel::tabulate(LinearOp& op) const {
  op.tabulated = !op.compute_curve.empty() || !op.memory_curve.empty();
  // Empty, with room for every tabulated row: linear_seconds() never reallocates it, and a sweep's
  // later points on this thread reuse the pages an earlier model's memo faulted in.
  if (op.tabulated) op.seconds_by_rows.take_storage(kTabulatedRows);
}

double RooflineCostModel::moe_gemm_seconds(const LinearOp& op, double active_experts, double expert_rows) const {
  double compute = op.compute_s_per_row * expert_rows;
  double memory = op.weight_s * active_experts + op.memory_s_per_row * expert_rows;
  // A grouped GEMM's efficiency is that of its per-expert GEMMs: rows per active expert.
  if (!op.compute_curve.empty()) compute /= op.compute_curve(expert_rows / active_experts);
  if (!op.memory_curve.empty())
    memory /= op.memory_curve(op.weight_bytes * active_experts + op.bytes_per_row * expert_rows);
  return std::max(compute, memory) + op.fixed_s;
}

template <class Sink>
StepCost RooflineCostModel::evaluate(const BatchShape& s, Sink&& sink) const {
  StepCost total;
  if (s.empty()) return total;
  const double t = static_cast<double>(tp_);
  // Graphs (the engine's choice): everything but the attention kernels is captured in a piecewise
  // graph, everything in a full one. A replayed graph computes the rows of the size it was captured
  // for; the padding costs time but does no useful work.
  const bool graph = s.launch != LaunchMode::kEager;
  const bool full_graph = s.launch == LaunchMode::kFullGraph;
  // Expert parallelism: the step's time is the busiest attention rank's (its share of the sequences;
  // the engine pads each rank's batch to its graph size), its FLOPs and bytes the whole replica's,
  // every rank reading its own copy of the non-expert weights.
  const bool ep = ep_.enabled();
  const BatchShape rank_shape = ep ? busiest_rank(s, static_cast<int64_t>(ranks_)) : BatchShape{};
  const BatchShape& r = ep ? rank_shape : s;
  const double weight_reads = ep ? ranks_ : 1.0;
  const double rows = static_cast<double>(s.tokens());
  const double rank_rows = static_cast<double>(r.tokens());
  const double time_rows = graph ? static_cast<double>(std::max(r.graph_tokens, r.tokens())) : rank_rows;
  double attention_seconds = 0;

  // `peak`: the per-GPU tensor-core rate its FLOPs run at, at efficiency 1 (0 for terms without
  // useful FLOPs).
  auto add = [&](std::string_view name, int64_t count, double seconds, double flops, double bytes, double peak) {
    const Term term{seconds, flops, bytes, peak > 0 ? flops / peak : 0.0};
    total.seconds += term.seconds;
    total.flops += term.flops;
    total.bytes += term.bytes;
    total.peak_flop_seconds += term.peak_flop_seconds;
    sink(name, count, term);
  };
  // Without a graph, each kernel waits for the host to launch it.
  auto launched = [&](double seconds) { return graph ? seconds : std::max(seconds, eager_launch_s_); };
  auto linear = [&](const LinearOp& op, double time_r, double work_r) {
    const double n = static_cast<double>(op.count);
    add(op.name, op.count, n * launched(linear_seconds(op, time_r)), n * op.group_flops_per_row * work_r,
        n * t * (weight_reads * op.weight_bytes + op.bytes_per_row * work_r), op.peak);
  };
  auto linear_op = [&](const LinearOp& op) {
    const bool context = op.rows_include_prefill_context;
    const double extra = context ? static_cast<double>(r.prefill_context_tokens) : 0.0;
    const double work_extra = context ? static_cast<double>(s.prefill_context_tokens) : 0.0;
    linear(op, time_rows + extra, rows + work_extra);
  };
  // One attention kernel per layer for the prefill chunks and one for the decodes, as engines with
  // separate prefill and decode paths run them. Both read their keys from the cache and write the
  // new tokens' K and V into it.
  // Every attention-like term of shape `b`, in order, to emit(name, layers, term, peak): `peak` > 0
  // for attention kernels (their FLOPs at that rate), 0 for kernels whose term carries its own
  // peak-seconds (the indexer, linear attention).
  auto attention_terms = [&](const BatchShape& b, auto&& emit) {
    auto attention = [&](std::string_view name, double layers, double pairs, double new_tokens, double keys_read,
                         double flops_per_pair, double group_flops_per_pair, double read_bytes_per_token,
                         double compute_rate, double memory_rate) {
      emit(name, layers,
           attention_term(full_graph, layers, pairs, new_tokens, keys_read, flops_per_pair, group_flops_per_pair,
                          read_bytes_per_token, compute_rate, memory_rate),
           attn_peak_);
    };
    auto mixer = [&](std::string_view name, double layers, const Term& term) { emit(name, layers, term, 0.0); };
    if (b.prefill_tokens > 0) {
      const double c = static_cast<double>(b.prefill_tokens);
      const double seqs = static_cast<double>(std::max<int64_t>(1, b.prefill_seqs));
      const double chunk = c / seqs;
      const double rate = attention_prefill_curve_.empty()
                              ? attn_peak_ * attn_prefill_peak_eff_ * prefill_tile_utilisation(chunk)
                              : attn_peak_ * attention_prefill_curve_(chunk);
      // Reading cached keys (a chunk after earlier ones) streams like decode does.
      const double prefill_memory_rate =
          hbm_ * attn_decode_peak_eff_ *
          decode_attention_occupancy(static_cast<double>(b.prefill_seqs),
                                     static_cast<double>(b.prefill_context_tokens) / static_cast<double>(std::max<int64_t>(1, b.prefill_seqs)) + chunk);
      if (full_layers_ > 0)
        attention("attention_prefill", full_layers_, static_cast<double>(b.prefill_attention_pairs), c,
                  static_cast<double>(b.prefill_context_tokens) + c, attn_flops_per_pair_, attn_group_flops_per_pair_,
                  prefill_kv_bytes_per_token_, rate, prefill_memory_rate);
      if (window_layers_ > 0) {
        const double cached = static_cast<double>(b.prefill_window_context_tokens);
        attention("attention_prefill_window", window_layers_, static_cast<double>(b.prefill_window_pairs), c,
                  cached + c, attn_flops_per_pair_, attn_group_flops_per_pair_, prefill_kv_bytes_per_token_, rate,
                  hbm_ * attn_decode_peak_eff_ * decode_attention_occupancy(seqs, cached / seqs + chunk));
      }
      if (sparse_layers_ > 0) {
        // Each query gathers its own top-k keys, so a tile of queries shares no key loads as dense
        // attention's do. A gathered key comes from on-chip memory when an earlier query of the chunk
        // loaded it and it is still there: with the chunk's candidate keys (its context) spread over
        // more bytes than the GPU's SRAM, a gather hits with probability SRAM / those bytes (keys
        // chosen without locality); every cached key is read from HBM at least once.
        const double pairs = static_cast<double>(b.prefill_sparse_pairs);
        const double cached = static_cast<double>(b.prefill_context_tokens);
        const double pool_bytes = (cached / seqs + chunk) * kv_bytes_per_token_;
        const double hit = pool_bytes > 0 ? std::min(1.0, gpu_.sram_bytes / pool_bytes) : 1.0;
        attention("attention_prefill_sparse", sparse_layers_, pairs, c, cached + pairs * (1.0 - hit),
                  sparse_flops_per_pair_, sparse_group_flops_per_pair_, kv_bytes_per_token_,
                  attn_peak_ * attn_prefill_peak_eff_, prefill_memory_rate);
        mixer("indexer_prefill", sparse_layers_,
              indexer_term(full_graph, static_cast<double>(b.prefill_attention_pairs), c,
                           static_cast<double>(b.prefill_context_tokens), prefill_memory_rate));
      }
      if (linear_layers_ > 0)
        mixer("linear_attention_prefill", linear_layers_, linear_attention_term(full_graph, true, seqs, c));
    }
    if (b.decode_seqs > 0) {
      // Linear-attention layers advance each sequence's state once per token, drafts included.
      if (linear_layers_ > 0)
        mixer("linear_attention_decode", linear_layers_,
              linear_attention_term(full_graph, false, static_cast<double>(b.decode_seqs),
                                    static_cast<double>(b.decode_seqs + b.decode_extra_tokens)));
      decode_context_terms(full_graph, b, [&](std::string_view name, double layers, const Term& term) {
        emit(name, layers, term, name == "indexer_decode" ? indexer_peak_ : attn_peak_);
      });
    }
  };
  auto add_attention = [&](std::string_view name, double layers, const Term& term, double peak) {
    attention_seconds += term.seconds;
    if (peak > 0) {
      add(name, static_cast<int64_t>(layers), term.seconds, term.flops, term.bytes, peak);
    } else {
      total.seconds += term.seconds;
      total.flops += term.flops;
      total.bytes += term.bytes;
      total.peak_flop_seconds += term.peak_flop_seconds;
      sink(name, static_cast<int64_t>(layers), term);
    }
  };

  linear(embedding_, time_rows, rows);
  for (const LinearOp& op : pre_attention_ops_) linear_op(op);
  if (!ep) {
    attention_terms(s, add_attention);
  } else {
    // Timed on the busiest rank; the whole replica's FLOPs and bytes (every rank's sequences).
    std::array<Term, 16> work{};
    size_t terms = 0;
    attention_terms(s, [&](std::string_view, double, const Term& term, double) {
      if (terms < work.size()) work[terms++] = term;
    });
    size_t i = 0;
    attention_terms(r, [&](std::string_view name, double layers, Term term, double peak) {
      if (i < terms) {
        term.flops = work[i].flops;
        term.bytes = work[i].bytes;
        term.peak_flop_seconds = work[i].peak_flop_seconds;
      }
      ++i;
      add_attention(name, layers, term, peak);
    });
  }
  for (const LinearOp& op : post_attention_ops_) linear_op(op);
  EpLoad load;
  if (moe_.present && ep) {
    // The routed experts of an expert-parallel replica: every MoE block waits for its busiest GPU,
    // whose experts get `busiest_visits` of the step's token visits (the skew of the placement, and
    // the step's sampling fluctuation) and activate `busiest_active` of its experts' weights. The
    // weighted sum of each token's expert outputs runs on the token's own GPU. Graph padding is not
    // routed.
    load = ep_load(rows);
    const double visits = rows * moe_.top_k;
    const double n = static_cast<double>(moe_.count);
    linear(moe_.gate, time_rows, rows);
    for (const LinearOp* op : {&moe_.up, &moe_.down}) {
      add(op->name, op->count, n * launched(moe_gemm_seconds(*op, load.busiest_active, load.busiest_visits)),
          n * op->group_flops_per_row * visits,
          n * (op->weight_bytes * load.all_active + op->bytes_per_row * visits), op->peak);
      if (op == &moe_.up)
        add(moe_.act.name, moe_.act.count, n * launched(linear_seconds(moe_.act, load.busiest_visits)), 0,
            n * moe_.act.bytes_per_row * visits, 0);
    }
    add(moe_.combine.name, moe_.combine.count, n * launched(linear_seconds(moe_.combine, time_rows / t)), 0,
        n * moe_.combine.bytes_per_row * rows, 0);
  } else if (moe_.present) {
    linear(moe_.gate, time_rows, rows);
    // Expected experts the step's tokens activate in one block, E (1 - (1 - k/E)^tokens).
    const double active = moe_.experts * -std::expm1(time_rows * moe_.log_miss);
    const double expert_rows = time_rows * moe_.top_k, work_rows = rows * moe_.top_k;
    const double n = static_cast<double>(moe_.count);
    for (const LinearOp* op : {&moe_.up, &moe_.down}) {
      const double work_active = moe_.experts * -std::expm1(rows * moe_.log_miss);
      add(op->name, op->count, n * launched(moe_gemm_seconds(*op, active, expert_rows)),
          n * op->group_flops_per_row * work_rows, n * t * (op->weight_bytes * work_active + op->bytes_per_row * work_rows),
          op->peak);
      if (op == &moe_.up) linear(moe_.act, expert_rows, work_rows);
    }
    linear(moe_.combine, time_rows, rows);
  }
  for (const LinearOp& op : tail_ops_) linear_op(op);
  linear(final_norm_, time_rows, rows);
  if (const int64_t logits = s.prefill_logits + s.decode_seqs + (s.decode_extra_logits ? s.decode_extra_tokens : 0);
      logits > 0) {
    const double l = static_cast<double>(logits);
    const int64_t rank_logits = r.prefill_logits + r.decode_seqs + (r.decode_extra_logits ? r.decode_extra_tokens : 0);
    linear(lm_head_, graph ? time_rows : static_cast<double>(rank_logits), l);
  }
  if (allreduces_ > 0) {
    const double n = static_cast<double>(allreduces_);
    add("all_reduce", allreduces_, n * all_reduce_seconds(time_rows), 0, 0, 0);
  }
  if (full_graph) {
    add("cuda_graph_launch", 1, graph_launch_s_, 0, 0, 0);
  } else if (graph) {
    // Piecewise: the host launches one graph piece per layer (plus the head's) between the eager
    // attention kernels. Pieces shorter than a launch leave the GPU waiting for the host.
    const double pieces = static_cast<double>(model_.num_layers + 1);
    const double captured = total.seconds - attention_seconds;
    add("cuda_graph_launch", model_.num_layers + 1, std::max(0.0, pieces * graph_launch_s_ - captured), 0, 0, 0);
  }
  if (moe_.present && ep) {
    // Dispatch and combine, per MoE block. Each GPU sends its tokens' copies (the busiest rank's
    // tokens, split over the rank's GPUs) and the busiest GPU receives its visits' copies; each
    // phase takes its heavier direction (dispatch sends tokens out and receives visits, combine the
    // reverse), one after the other. Copies per token by link class: ep_copies_per_token
    // (low-latency kernels for decode-only steps under "auto").
    const bool low_latency = ep_.kernels == EpKernels::kLowLatency ||
                             (ep_.kernels == EpKernels::kAuto && s.prefill_tokens == 0);
    const EpCopies& copies = low_latency ? copies_low_latency_ : copies_normal_;
    const double n = static_cast<double>(moe_.count);
    const double sent = rank_rows / t;                          // tokens one GPU dispatches
    const double received = load.busiest_visits / moe_.top_k;   // in units of a token's copies
    const double per_copy = std::max(sent, received) * (dispatch_copy_bytes_ + combine_copy_bytes_);
    AllToAllTime& a = total.all_to_all;
    a.compute_s = total.seconds;
    a.fixed_s = n * 2.0 * a2a_phase_s_;
    a.nvlink_s = n * copies.nvlink * per_copy / nvlink_rate_;
    a.scaleout_bytes = n * copies.scaleout * per_copy;
    a.scaleout_s = a.scaleout_bytes > 0 ? a.scaleout_bytes / scaleout_rate_ : 0.0;
    a.overlapped = ep_.two_batch_overlap;
    const double comm = a.fixed_s + std::max(a.nvlink_s, a.scaleout_s);
    add("moe_all_to_all", 2 * moe_.count, comm, 0, 0, 0);
    // Two micro-batches: one's all-to-alls run while the other computes.
    if (a.overlapped) add("two_batch_overlap", 0, all_to_all_step_seconds(a, a.scaleout_s) - (a.compute_s + comm), 0, 0, 0);
  }
  return total;
}

RooflineCostModel::Term RooflineCostModel::attention_term(bool graph, double layers, double pairs, double new_tokens,
                                                          double keys_read, double flops_per_pair,
                                                          double group_flops_per_pair, double read_bytes_per_token,
                                                          double compute_rate, double memory_rate) const {
  const double t = static_cast<double>(tp_);
  const double flops = flops_per_pair * pairs;
  const double bytes = read_bytes_per_token == kv_write_bytes_per_token_
                           ? read_bytes_per_token * (keys_read + new_tokens) + q_o_bytes_per_token_ * new_tokens
                           : read_bytes_per_token * keys_read + kv_write_bytes_per_token_ * new_tokens +
                                 q_o_bytes_per_token_ * new_tokens;
  double seconds = std::max(flops / compute_rate, bytes / memory_rate) + kernel_s_;
  if (!graph) seconds = std::max(seconds, eager_launch_s_);
  const double group_flops = layers * group_flops_per_pair * pairs;
  return {layers * seconds, group_flops, layers * t * bytes, group_flops / attn_peak_};
}

RooflineCostModel::Term RooflineCostModel::decode_attention_term(bool graph, double layers, int64_t decode_seqs,
                                                                 int64_t decode_context_tokens, int64_t extra_tokens,
                                                                 int64_t extra_pairs) const {
  const double ctx = static_cast<double>(decode_context_tokens);
  const double seqs = static_cast<double>(decode_seqs);
  const double rate = attention_decode_table_.empty()
                           ? hbm_ * attn_decode_peak_eff_ * decode_attention_occupancy(seqs, ctx / seqs)
                           : hbm_ * attention_decode_table_(seqs, std::max(1.0, ctx / seqs));
  if (extra_tokens == 0)
    return attention_term(graph, layers, ctx, seqs, ctx, decode_flops_per_pair_, decode_group_flops_per_pair_,
                          kv_bytes_per_token_, attn_compute_rate_, rate);
  // Verification: every query of a sequence attends to its cache, which the kernel streams once
  // (the draft tokens' keys included); more FLOPs, nearly the same bytes.
  const double extra = static_cast<double>(extra_tokens);
  return attention_term(graph, layers, ctx + static_cast<double>(extra_pairs), seqs + extra, ctx + extra,
                        decode_flops_per_pair_, decode_group_flops_per_pair_, kv_bytes_per_token_,
                        attn_compute_rate_, rate);
}

bool RooflineCostModel::is_decode_context_term(std::string_view name) {
  return name == "attention_decode" || name == "attention_decode_window" || name == "attention_decode_sparse" ||
         name == "indexer_decode";
}

template <class Emit>
void RooflineCostModel::decode_context_terms(bool graph, const BatchShape& s, Emit&& emit) const {
  // Speculative decoding's draft tokens are more queries of each sequence (their pairs under each
  // layer type's cap in BatchShape::decode_extra_*); a sequence's cache is still read once.
  if (full_layers_ > 0)
    emit("attention_decode", full_layers_,
         decode_attention_term(graph, full_layers_, s.decode_seqs, s.decode_context_tokens, s.decode_extra_tokens,
                               s.decode_extra_pairs));
  // Window and sparse layers read each sequence's capped context the same way.
  if (window_layers_ > 0)
    emit("attention_decode_window", window_layers_,
         decode_attention_term(graph, window_layers_, s.decode_seqs, s.decode_window_context_tokens,
                               s.decode_extra_tokens, s.decode_extra_window_pairs));
  if (sparse_layers_ > 0) {
    const double seqs = static_cast<double>(s.decode_seqs);
    const double ctx = static_cast<double>(s.decode_sparse_context_tokens);
    const double extra = static_cast<double>(s.decode_extra_tokens);
    const double rate = hbm_ * attn_decode_peak_eff_ * decode_attention_occupancy(seqs, ctx / seqs);
    emit("attention_decode_sparse", sparse_layers_,
         attention_term(graph, sparse_layers_, ctx + static_cast<double>(s.decode_extra_sparse_pairs), seqs + extra,
                        ctx + extra, sparse_flops_per_pair_, sparse_group_flops_per_pair_, kv_bytes_per_token_,
                        attn_compute_rate_, rate));
    const double full_ctx = static_cast<double>(s.decode_context_tokens);
    emit("indexer_decode", sparse_layers_,
         indexer_term(graph, full_ctx + static_cast<double>(s.decode_extra_pairs), seqs + extra, full_ctx + extra,
                      hbm_ * attn_decode_peak_eff_ * decode_attention_occupancy(seqs, full_ctx / seqs)));
  }
}

// Per layer: every query scores each of its pairs' keys (fp8 index keys read once per sequence's
// context, as a tiled kernel does), writes the fp32 scores, and a top-k pass reads them back and
// writes K indices per query, which the attention reads.
RooflineCostModel::Term RooflineCostModel::indexer_term(bool graph, double pairs, double new_tokens, double keys_read,
                                                        double memory_rate) const {
  constexpr double kScoreBytes = 4.0, kIndexBytes = 4.0;
  const double t = static_cast<double>(tp_);
  const double flops = indexer_flops_per_pair_ * pairs;
  const double bytes = indexer_key_bytes_ * (keys_read + new_tokens) + indexer_query_bytes_ * new_tokens +
                       2.0 * kScoreBytes * pairs + 2.0 * kIndexBytes * indexer_topk_ * new_tokens;
  double seconds = std::max(flops / indexer_rate_, bytes / memory_rate) + kernel_s_;
  if (!graph) seconds = std::max(seconds, eager_launch_s_);
  // Replicated on every GPU: its useful FLOPs count once, its bytes on each GPU.
  const double group_flops = sparse_layers_ * flops;
  return {sparse_layers_ * seconds, group_flops, sparse_layers_ * t * bytes, group_flops / indexer_peak_};
}

// Per layer: decode reads and writes each sequence's state once per token; chunked prefill reads
// the state at a chunk's start and writes it at its end, and moves per-chunk states through HBM.
RooflineCostModel::Term RooflineCostModel::linear_attention_term(bool graph, bool prefill, double seqs,
                                                                 double tokens) const {
  const double t = static_cast<double>(tp_);
  const double flops = (prefill ? lin_prefill_flops_ : lin_decode_flops_) * tokens;
  const double bytes = 2.0 * lin_state_bytes_ * seqs + lin_token_bytes_ * tokens +
                       (prefill ? lin_chunk_state_bytes_ * tokens : 0.0);
  // One thread block per (sequence, value head).
  const double rate = hbm_ * attn_decode_peak_eff_ * block_occupancy(seqs * lin_heads_);
  const double compute_rate = attn_peak_ * attn_prefill_peak_eff_;
  double seconds = std::max(flops / compute_rate, bytes / rate) + kernel_s_;
  if (!graph) seconds = std::max(seconds, eager_launch_s_);
  const double group_flops = linear_layers_ * flops * t;
  return {linear_layers_ * seconds, group_flops, linear_layers_ * t * bytes, group_flops / attn_peak_};
}

double RooflineCostModel::block_occupancy(double blocks) const {
  constexpr double kSmShares = 4;
  return std::min(1.0, blocks * kSmShares / sm_count_);
}

double RooflineCostModel::all_reduce_seconds(double rows) const {
  for (const AllReduceLine& l : allreduce_lines_)
    if (rows <= l.max_rows) return l.latency_s + l.s_per_row * rows;
  return allreduce_lines_.back().latency_s + allreduce_lines_.back().s_per_row * rows;
}

// Paged decode attention (FlashAttention / FlashInfer with split-KV, "flash decoding") runs one
// thread block per (sequence, KV head, split of the context); a block streams its pages at a few
// times an SM's fair share of HBM bandwidth. With fewer blocks than that takes to fill the GPU the
// kernel cannot reach the memory system's rate. The constants are the kernels' published shapes,
// not fits: 256-token splits (FlashDecoding), and a block draws up to 4 SMs' shares.
double RooflineCostModel::decode_attention_occupancy(double seqs, double mean_context) const {
  constexpr double kSplitTokens = 256, kSmShares = 4;
  const double splits = std::max(1.0, std::ceil(mean_context / kSplitTokens));
  const double blocks = seqs * attn_kv_heads_ * splits;
  return std::min(1.0, blocks * kSmShares / sm_count_);
}

// FlashAttention computes query tiles of 128 rows; with GQA the query heads that share a KV head
// are packed into the rows, so a chunk of q tokens fills q x group rows of its tiles.
double RooflineCostModel::prefill_tile_utilisation(double mean_chunk_tokens) const {
  constexpr double kTileRows = 128;
  const double rows = std::max(1.0, mean_chunk_tokens * attn_group_);
  return rows / (std::ceil(rows / kTileRows) * kTileRows);
}

namespace {

// An integer in [0, 2^51]: a few of them add up exactly in double, in any order.
bool small_integer(double x) {
  return x >= 0 && x <= 0x1p51 && x == static_cast<double>(static_cast<int64_t>(x));
}

// sum + terms[0] + terms[1] + ..., one after the other, four per pass: the memo pads its lists
// with zeros to a multiple of four (x + 0 = x for every sum the memo forms, none being -0).
double add_in_order(double sum, const std::vector<double>& terms) {
  for (const double *x = terms.data(), *end = x + terms.size(); x != end; x += 4) {
    sum += x[0];
    sum += x[1];
    sum += x[2];
    sum += x[3];
  }
  return sum;
}

void pad_to_four(std::vector<double>& terms) {
  while (terms.size() % 4 != 0) terms.push_back(0.0);
}

}  // namespace

void RooflineCostModel::fill_decode_memo(DecodeTerms& memo, const BatchShape& shape) const {
  memo = DecodeTerms{};
  BatchShape probe;
  probe.decode_seqs = shape.decode_seqs;
  probe.decode_context_tokens = shape.decode_seqs;
  probe.launch = memo.launch = shape.launch;
  probe.graph_tokens = memo.graph_tokens = shape.graph_tokens;
  bool after = false;
  std::vector<Term> later;
  evaluate(probe, [&](std::string_view name, int64_t, const Term& term) {
    if (is_decode_context_term(name)) {
      after = true;
    } else if (after) {
      later.push_back(term);
    } else {  // the running sum up to the attention, as evaluate() forms it
      memo.before.seconds += term.seconds;
      memo.before.flops += term.flops;
      memo.before.bytes += term.bytes;
      memo.before.peak_flop_seconds += term.peak_flop_seconds;
    }
  });
  bool flops_exact = small_integer(memo.before.flops), bytes_exact = small_integer(memo.before.bytes);
  for (const Term& term : later) {
    if (term.seconds != 0) memo.after_seconds.push_back(term.seconds);
    if (term.peak_flop_seconds != 0) memo.after_peak.push_back(term.peak_flop_seconds);
    if (term.flops != 0) memo.after_flops.push_back(term.flops);
    if (term.bytes != 0) memo.after_bytes.push_back(term.bytes);
    flops_exact = flops_exact && small_integer(term.flops);
    bytes_exact = bytes_exact && small_integer(term.bytes);
    memo.after_flops_sum += term.flops;
    memo.after_bytes_sum += term.bytes;
  }
  for (auto* list : {&memo.after_seconds, &memo.after_peak, &memo.after_flops, &memo.after_bytes}) pad_to_four(*list);
  // The partial sums of the later terms are integers too when their total is at most 2^51.
  flops_exact = flops_exact && small_integer(memo.before.flops + memo.after_flops_sum);
  bytes_exact = bytes_exact && small_integer(memo.before.bytes + memo.after_bytes_sum);
  const double seqs = static_cast<double>(shape.decode_seqs);
  memo.seqs = seqs;
  memo.q_o_bytes = q_o_bytes_per_token_ * seqs;
  memo.kv_write_bytes = kv_write_bytes_per_token_ * seqs;
  memo.launch_floor = shape.launch == LaunchMode::kFullGraph ? -std::numeric_limits<double>::infinity() : eager_launch_s_;
  // One split per sequence (the fewest) already fills the GPU: rounding is monotonic, so more
  // splits give a product of at least 1 too and min(1, .) = 1.
  memo.occupancy_full = decode_attention_occupancy(seqs, 1.0) == 1.0;
  if (!attention_decode_table_.empty()) memo.decode_table_column = attention_decode_table_.at_x(seqs);
  // The contexts up to which the attention terms' FLOPs and bytes are exact integers: with integer
  // factors, context c >= 1 and a c + b <= (a + b) c <= 2^50 every product and sum in
  // memo_attention_term is an integer no larger than 2^50, so exact; the two layer kinds' terms and
  // the sums around them then add up to at most 2^51 + 2 x 2^50 < 2^53.
  double group_flops = 0, read = 0, fixed = 0;
  bool integers = small_integer(kv_bytes_per_token_) && small_integer(memo.kv_write_bytes) &&
                  small_integer(memo.q_o_bytes) && small_integer(seqs);
  for (const DecodeLayers* l : {&full_decode_, &window_decode_}) {
    if (l->layers == 0) continue;
    integers = integers && small_integer(l->layers_t) && small_integer(l->layers_group_flops_per_pair);
    group_flops += l->layers_group_flops_per_pair;
    read += l->layers_t * kv_bytes_per_token_;
    fixed += l->layers_t * (kv_bytes_per_token_ * seqs + memo.kv_write_bytes + memo.q_o_bytes);
  }
  auto bound = [](double per_context) {  // the largest c >= 1 with per_context x c <= 2^50, or -1
    const double c = per_context > 0 ? std::floor(std::min(0x1p50 / per_context, 0x1p50)) : 0x1p50;
    return c >= 1 ? static_cast<int64_t>(c) : int64_t{-1};
  };
  if (integers && sparse_layers_ == 0) {
    if (flops_exact) memo.flops_exact_context = bound(group_flops);
    if (bytes_exact) memo.bytes_exact_context = bound(read + fixed);
  }
  memo.ready = true;
}

inline RooflineCostModel::Term RooflineCostModel::memo_attention_term(const DecodeTerms& memo, const DecodeLayers& l,
                                                               int64_t context) const {
  // decode_attention_term and attention_term with pairs = keys read = ctx and new tokens = seqs.
  const double ctx = static_cast<double>(context);
  const double rate = !memo.decode_table_column.empty()
                          ? hbm_ * memo.decode_table_column(std::max(1.0, ctx / memo.seqs))
                      : memo.occupancy_full ? decode_peak_rate_
                                            : decode_peak_rate_ * decode_attention_occupancy(memo.seqs, ctx / memo.seqs);
  const double flops = decode_flops_per_pair_ * ctx;
  const double bytes = kv_bytes_per_token_ == kv_write_bytes_per_token_
                           ? kv_bytes_per_token_ * (ctx + memo.seqs) + memo.q_o_bytes
                           : kv_bytes_per_token_ * ctx + memo.kv_write_bytes + memo.q_o_bytes;
  const double seconds = std::max(std::max(flops / attn_compute_rate_, bytes / rate) + kernel_s_, memo.launch_floor);
  const double group_flops = l.layers_group_flops_per_pair * ctx;
  return {l.layers * seconds, group_flops, l.layers_t * bytes, group_flops / attn_peak_};
}

[[gnu::always_inline]] inline RooflineCostModel::DecodeTerms* RooflineCostModel::decode_memo(const BatchShape& shape) const {
  if (shape.prefill_tokens != 0 || shape.prefill_seqs != 0 || shape.decode_seqs <= 0 ||
      shape.decode_seqs >= kMemoDecodeSeqs || shape.decode_extra_tokens != 0 || ep_.enabled())
    return nullptr;
  const size_t b = static_cast<size_t>(shape.decode_seqs);
  if (decode_memo_.size() <= b) decode_memo_.resize(std::min<size_t>(kMemoDecodeSeqs, 2 * b + 16));
  DecodeTerms& memo = decode_memo_[b];
  // Batches of one size launch the same way under one engine: a launch unlike the memo's (a probe
  // before the run, such as check_iteration_times' eager one-token decode, or a model shared by
  // engines that launch differently) re-primes it for the new launch. (Evaluating afresh instead
  // left every later decode of that size unmemoised once a probe had primed it: S2 evaluated
  // 395k of its 1.8M steps afresh.)
  if (!memo.ready || memo.launch != shape.launch || memo.graph_tokens != shape.graph_tokens)
    fill_decode_memo(memo, shape);
  return &memo;
}

[[gnu::always_inline]] inline void RooflineCostModel::add_term(Term& total, const Term& term) {
  total.seconds += term.seconds;
  total.flops += term.flops;
  total.bytes += term.bytes;
  total.peak_flop_seconds += term.peak_flop_seconds;
}

[[gnu::always_inline]] inline RooflineCostModel::Term RooflineCostModel::memo_through_attention(
    const DecodeTerms& memo, const BatchShape& shape, int64_t context) const {
  if (sparse_layers_ != 0) [[unlikely]] return sparse_through_attention(memo, shape, context);
  // decode_context_terms' full and window layers from the memo's batch-size parts.
  Term total = memo.before;
  if (full_layers_ > 0) add_term(total, memo_attention_term(memo, full_decode_, context));
  if (window_layers_ > 0) add_term(total, memo_attention_term(memo, window_decode_, shape.decode_window_context_tokens));
  return total;
}

// Sparse layers keep the general attention terms (out of line: in line, the shape's copy and the
// callback weigh on every dense step's registers).
[[gnu::noinline]] RooflineCostModel::Term RooflineCostModel::sparse_through_attention(const DecodeTerms& memo,
                                                                                      const BatchShape& shape,
                                                                                      int64_t context) const {
  Term total = memo.before;
  BatchShape at = shape;
  at.decode_context_tokens = context;
  decode_context_terms(at.launch == LaunchMode::kFullGraph, at,
                       [&](std::string_view, double, const Term& attention) { add_term(total, attention); });
  return total;
}

[[gnu::always_inline]] inline void RooflineCostModel::memo_counts(const DecodeTerms& memo, int64_t context, double flops,
                                                                  double bytes, StepCost& out) const {
  out.flops = context <= memo.flops_exact_context ? flops + memo.after_flops_sum : add_in_order(flops, memo.after_flops);
  out.bytes = context <= memo.bytes_exact_context ? bytes + memo.after_bytes_sum : add_in_order(bytes, memo.after_bytes);
}

[[gnu::always_inline]] inline StepCost RooflineCostModel::memo_step(const DecodeTerms& memo, const BatchShape& shape,
                                                                    int64_t context) const {
  const Term t = memo_through_attention(memo, shape, context);
  StepCost total;
  total.seconds = add_in_order(t.seconds, memo.after_seconds);
  total.peak_flop_seconds = add_in_order(t.peak_flop_seconds, memo.after_peak);
  memo_counts(memo, context, t.flops, t.bytes, total);
  return total;
}

StepCost RooflineCostModel::step(const BatchShape& shape) const {
  // Decode-only iterations (most of a run's): every term but the attention's depends on the batch
  // size alone, so the terms of each batch size are kept and summed again in evaluate()'s order,
  // which gives the same bits as evaluating afresh.
  if (const DecodeTerms* memo = decode_memo(shape)) return memo_step(*memo, shape, shape.decode_context_tokens);
  if (PrefillKey key; !ep_.enabled() && prefill_memo_key(shape, key)) {
    if (prefill_memo_.empty()) prefill_memo_.resize(size_t{1} << kPrefillMemoBits);
    // The slot: the top bits of the tokens and cached context, each multiplied by an odd constant.
    const uint64_t h = static_cast<uint64_t>(shape.prefill_tokens) * 0x9E3779B97F4A7C15ULL ^
                       static_cast<uint64_t>(shape.prefill_context_tokens) * 0xC2B2AE3D27D4EB4FULL;
    PrefillEntry& e = prefill_memo_[static_cast<size_t>(h >> (64 - kPrefillMemoBits))];
    StepCost cost;
    if (e.key == key) {
      cost.seconds = e.seconds;
      cost.flops = e.flops;
      cost.bytes = e.bytes;
      cost.peak_flop_seconds = e.peak_flop_seconds;
      return cost;
    }
    cost = evaluate(shape, [](std::string_view, int64_t, const Term&) {});
    e = {key, cost.seconds, cost.flops, cost.bytes, cost.peak_flop_seconds};
    return cost;
  }
  return evaluate(shape, [](std::string_view, int64_t, const Term&) {});
}

bool RooflineCostModel::prefill_memo_key(const BatchShape& s, PrefillKey& key) {
  // A field added to BatchShape must join the key or the test below (or step() would return the
  // cost of a shape that differs in it).
  static_assert(sizeof(BatchShape) == 192, "BatchShape changed: update prefill_memo_key");
  const BatchShape none;
  if (s.prefill_seqs <= 0 || s.decode_seqs != 0 || s.decode_context_tokens != 0 ||
      s.decode_window_context_tokens != 0 || s.decode_sparse_context_tokens != 0 || s.decode_extra_tokens != 0 ||
      s.decode_extra_pairs != 0 || s.decode_extra_window_pairs != 0 || s.decode_extra_sparse_pairs != 0 ||
      s.decode_extra_logits != none.decode_extra_logits || s.draft_passes != 0 || s.draft_seqs != 0 ||
      s.draft_context_tokens != 0 || s.draft_catchup_tokens != 0 || s.draft_catchup_pairs != 0)
    return false;
  key = {s.prefill_seqs,           s.prefill_tokens,
         s.prefill_logits,         s.prefill_context_tokens,
         s.prefill_attention_pairs, static_cast<int64_t>(s.launch),
         s.graph_tokens,           s.prefill_window_pairs,
         s.prefill_window_context_tokens, s.prefill_sparse_pairs};
  return true;
}

void RooflineCostModel::decode_steps(const BatchShape& shape, int64_t stride, int count, StepCost* out) const {
  // step()'s memo path, the memo looked up once for all of them.
  const DecodeTerms* memo = decode_memo(shape);
  if (!memo) return StepCostModel::decode_steps(shape, stride, count, out);
  if (count == 1 || count > kMaxDecodeSteps) {
    int64_t context = shape.decode_context_tokens;
    for (int j = 0; j < count; ++j, context += stride) out[j] = memo_step(*memo, shape, context);
  } else if (count == 2) {
    memo_steps<2>(*memo, shape, stride, count, out);
  } else if (count <= 4) {
    memo_steps<4>(*memo, shape, stride, count, out);
  } else {
    memo_steps<8>(*memo, shape, stride, count, out);
  }
}

template <int kLanes>
void RooflineCostModel::memo_steps(const DecodeTerms& memo, const BatchShape& shape, int64_t stride, int count,
                                   StepCost* out) const {
  // memo_step's operations, iteration j in lane j: each lane's sums take the same terms in the same
  // order, so each lane has step()'s bits; the later seconds are added to every lane at once (the
  // lanes past `count` add them to zeros, unused).
  static_assert(kLanes <= kMaxDecodeSteps);
  double seconds[kLanes], peak[kLanes], flops[kLanes], bytes[kLanes];
  int64_t context[kLanes];
  for (int j = 0; j < kLanes; ++j) {
    context[j] = shape.decode_context_tokens + j * stride;
    seconds[j] = peak[j] = 0;
  }
  for (int j = 0; j < count; ++j) {
    const Term t = memo_through_attention(memo, shape, context[j]);
    seconds[j] = t.seconds;
    peak[j] = t.peak_flop_seconds;
    flops[j] = t.flops;
    bytes[j] = t.bytes;
  }
  for (const double x : memo.after_seconds)
    for (int j = 0; j < kLanes; ++j) seconds[j] += x;
  for (const double x : memo.after_peak)
    for (int j = 0; j < kLanes; ++j) peak[j] += x;
  for (int j = 0; j < count; ++j) {
    StepCost& c = out[j];
    c = StepCost{};
    c.seconds = seconds[j];
    c.peak_flop_seconds = peak[j];
    memo_counts(memo, context[j], flops[j], bytes[j], c);
  }
}

std::vector<OperatorCost> RooflineCostModel::breakdown(const BatchShape& shape) const {
  std::vector<OperatorCost> out;
  evaluate(shape, [&](std::string_view name, int64_t count, const Term& term) {
    out.push_back({name, count, term.seconds, term.flops, term.bytes, term.peak_flop_seconds});
  });
  return out;
}

const RooflineCostModel::LinearOp* RooflineCostModel::find_linear(std::string_view name) const {
  for (const auto* list : {&pre_attention_ops_, &post_attention_ops_, &tail_ops_})
    for (const LinearOp& op : *list)
      if (op.name == name) return &op;
  for (const LinearOp* op : {&embedding_, &final_norm_, &lm_head_})
    if (op->name == name) return op;
  return nullptr;
}

std::vector<OperatorShape> RooflineCostModel::operator_shapes() const {
  std::vector<OperatorShape> out;
  auto push = [&](const LinearOp& op) {
    out.push_back({op.name, op.gemm, op.family, op.weight_elements, op.flops_per_row, op.weight_bytes,
                   op.bytes_per_row, op.peak});
  };
  push(embedding_);
  for (const auto* list : {&pre_attention_ops_, &post_attention_ops_, &tail_ops_})
    for (const LinearOp& op : *list) push(op);
  push(final_norm_);
  push(lm_head_);
  return out;
}

std::optional<double> RooflineCostModel::operator_seconds(std::string_view name, double rows) const {
  const LinearOp* op = find_linear(name);
  if (!op) return std::nullopt;
  return linear_seconds(*op, rows);
}

ProfileUse apply_profile_scalars(const CalibrationProfile& profile, RooflineParams& params,
                                 const std::function<bool(std::string_view key)>& given) {
  // Scalars the profile measured replace the defaults, never a key the user wrote.
  auto take = [&](const char* key, const std::optional<double>& value, double& field) {
    if (value && !given(key)) field = *value;
  };
  take("kernel_overhead_us", profile.kernel_us, params.kernel_overhead_us);
  if (profile.gemm_kernel_us && !given("gemm_kernel_overhead_us")) params.gemm_kernel_overhead_us = profile.gemm_kernel_us;
  take("eager_launch_us", profile.eager_launch_us, params.eager_launch_us);
  take("graph_launch_us", profile.graph_launch_us, params.graph_launch_us);
  ProfileUse use;
  use.gemm_compute = !given("compute_efficiency");
  use.gemm_memory = !given("memory_efficiency");
  use.elementwise = !given("elementwise_efficiency");
  use.attention_compute = !given("attention_compute_efficiency");
  use.attention_memory = !given("attention_memory_efficiency");
  use.all_reduce = !given("allreduce_latency_us") && !given("interconnect_efficiency");
  return use;
}

namespace {

[[maybe_unused]] const bool kRegistered = cost_model_registry().add(
    {"roofline",
     "per-operator roofline: max(FLOPs / effective peak, bytes / effective bandwidth) + kernel "
     "overhead, over every block operator (dense, MoE, MLA), attention, LM head and TP all-reduces; "
     "efficiencies constant or from a calibration profile",
     roofline_param_specs()},
    [](const core::Params& p, const ModelSpec& model, const GpuSpec& gpu, int64_t tp,
       const CalibrationProfile* profile, const ExpertParallelism& ep) {
      RooflineParams params = roofline_params_from(p);
      if (!profile) return std::make_unique<RooflineCostModel>(model, gpu, tp, params, nullptr, ProfileUse{}, ep);
      if (core::to_lower(profile->gpu) != core::to_lower(gpu.name))
        p.fail("calibration", "the profile describes GPU '" + profile->gpu + "' but the run uses '" + gpu.name +
                                  "'; calibrate on (or choose) the same GPU type");
      const ProfileUse use =
          apply_profile_scalars(*profile, params, [&](std::string_view key) { return p.given(key); });
      auto cost = std::make_unique<RooflineCostModel>(model, gpu, tp, params, profile, use, ep);
      cost->precompute();
      return cost;
    });

}  // namespace

}  // namespace servesim::hwmodels
