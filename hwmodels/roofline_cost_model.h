#pragma once
// The roofline step cost model: each operator of an iteration takes
//   max(FLOPs / (peak x compute efficiency), bytes / (bandwidth x memory efficiency)) + kernel overhead
// on one GPU of the tensor-parallel group, summed over the operators of every layer, plus attention,
// the LM head, the TP all-reduces and a fixed per-iteration overhead. The operator list mirrors the
// kernels a vLLM-style engine runs for a Llama block; names follow the Vidur operator profiles
// (shared/reference-data/operator-profiles) so a calibration can replace one operator at a time.

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "hwmodels/cost_model.h"

namespace servesim::hwmodels {

// The [cost_model] kind = "roofline" parameters, in the units their names carry. Defaults and the
// evidence behind them: roofline_cost_model.cc.
struct RooflineParams {
  double compute_efficiency = 0.75;            // fraction of peak FLOP/s a GEMM reaches
  double memory_efficiency = 0.85;             // fraction of HBM bandwidth a weight-streaming GEMM reaches
  double elementwise_efficiency = 0.5;         // fraction of HBM bandwidth of norms, RoPE, SiLU, adds
  double attention_compute_efficiency = 0.6;   // fraction of peak a FlashAttention-style kernel reaches
  double attention_memory_efficiency = 0.7;    // fraction of HBM bandwidth reading a paged KV cache
  double kernel_overhead_us = 2.0;             // fixed time every kernel costs, however small
  double iteration_overhead_ms = 0.5;          // CPU time per iteration the GPU waits for
  double allreduce_latency_us = 10.0;          // fixed time of one TP all-reduce
  double interconnect_efficiency = 0.65;       // fraction of NVLink bandwidth an all-reduce reaches
};

std::vector<core::ParamSpec> roofline_param_specs();
RooflineParams roofline_params_from(const core::Params& params);

// One operator's share of an iteration (per GPU seconds; FLOPs and bytes for the whole TP group),
// summed over its `count` executions (num_layers for per-layer operators, twice that for the two
// residual adds).
struct OperatorCost {
  std::string_view name;
  int64_t count = 0;
  double seconds = 0;
  double flops = 0;
  double bytes = 0;
};

class RooflineCostModel final : public StepCostModel {
 public:
  // Throws core::Error when tp_problem(model, tp) is not empty (callers check it first, to report
  // the problem at the config key that set tp).
  RooflineCostModel(ModelSpec model, GpuSpec gpu, int64_t tensor_parallel, RooflineParams params = {});

  StepCost step(const BatchShape& shape) const override;
  const ModelSpec& model() const override { return model_; }
  const GpuSpec& gpu() const override { return gpu_; }
  int64_t tensor_parallel() const override { return tp_; }
  const RooflineParams& params() const { return params_; }

  // The same iteration operator by operator (operators that do not run are left out); the
  // seconds, flops and bytes add up to step(shape). Allocates: for reports and calibration, not
  // for the event loop.
  std::vector<OperatorCost> breakdown(const BatchShape& shape) const;

 private:
  // A GEMM or an elementwise kernel whose work is linear in the rows it processes. Per GPU; the
  // *_s fields are precomputed seconds so step() is a handful of multiply-adds per operator.
  struct LinearOp {
    std::string_view name;
    int64_t count = 0;                 // executions per iteration
    double weight_s = 0;               // streaming the operator's weights once
    double memory_s_per_row = 0;       // activation bytes in and out, per row
    double compute_s_per_row = 0;      // FLOPs per row
    double group_flops_per_row = 0;    // useful FLOPs, whole TP group (replicated work not counted)
    double weight_bytes = 0;           // per GPU
    double bytes_per_row = 0;          // per GPU
  };

  static constexpr size_t kLayerOps = 9;

  template <class Sink>
  StepCost evaluate(const BatchShape& shape, Sink&& sink) const;
  double linear_seconds(const LinearOp& op, double rows) const;

  ModelSpec model_;
  GpuSpec gpu_;
  int64_t tp_;
  RooflineParams params_;

  std::array<LinearOp, kLayerOps> layer_ops_{};
  LinearOp embedding_{};
  LinearOp final_norm_{};
  LinearOp lm_head_{};
  double kernel_s_ = 0;
  double iteration_s_ = 0;
  // Attention, per layer per GPU.
  double kv_bytes_per_token_ = 0;          // one layer's K and V of one token
  double q_o_bytes_per_token_ = 0;         // reading Q, writing O
  double attn_flops_per_pair_ = 0;         // 4 x head_dim x heads on this GPU
  double attn_group_flops_per_pair_ = 0;   // 4 x head_dim x all heads
  double attn_compute_rate_ = 0;           // FLOP/s
  double attn_memory_rate_ = 0;            // bytes/s
  // All-reduce.
  int64_t allreduces_ = 0;                 // per iteration
  double allreduce_latency_s_ = 0;
  double allreduce_s_per_row_ = 0;         // ring factor x one row's activations / link rate
};

}  // namespace servesim::hwmodels
