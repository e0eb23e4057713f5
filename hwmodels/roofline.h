#pragma once
// The lecture notes' back-of-envelope formulas as small pure functions: KV-cache size, arithmetic
// intensity, the decode speed limit, attention FLOPs, cost per token, utilisation. Tests pin them to
// the notes' worked numbers; the cost model, the metrics and reports reuse them.
//
// Units are SI throughout (bytes, seconds, FLOP, FLOP/s, bytes/s) unless a name says otherwise.

#include <cstdint>
#include <string>

#include "hwmodels/cost_model.h"
#include "hwmodels/gpu_spec.h"
#include "hwmodels/model_spec.h"

namespace servesim::hwmodels {

// ---- KV cache --------------------------------------------------------------------------------

// The cache of `batch` sequences of `tokens` tokens each (kv_bytes_per_token of the whole model).
double kv_cache_bytes(const ModelSpec& model, int64_t tokens, int64_t batch);
// Tokens per sequence that `batch` sequences can hold in `bytes` of cache (fractional).
double kv_tokens_that_fit(double kv_bytes_per_token, double bytes, int64_t batch);
// What one GPU of a TP group has for KV blocks: its memory x utilisation, less the reserve for
// activations and runtime and its share of the weights (negative when the weights do not fit).
// The replicas' KV capacity is this over the per-GPU bytes of a block.
// With expert parallelism (`expert_parallel` > 1) the weights are weight_bytes_per_gpu's EP layout.
double kv_budget_bytes_per_gpu(const GpuSpec& gpu, const ModelSpec& model, int64_t tp, double memory_utilization,
                               double reserve_bytes, int64_t expert_parallel = 1, int64_t redundant_experts = 0);

// ---- Tensor parallelism ------------------------------------------------------------------------

// "" when the model can be split `tp` ways (tp divides the query heads and the MLP and expert widths,
// and the KV heads either split evenly or are replicated whole); otherwise a sentence saying why not.
std::string tp_problem(const ModelSpec& model, int64_t tp);
// KV heads each GPU of a TP group holds: num_kv_heads / tp, or 1 (replicated) when tp exceeds them.
int64_t kv_heads_per_gpu(const ModelSpec& model, int64_t tp);
// KV-cache bytes one token occupies on each GPU of the group (all layers). MLA's latent is shared by
// all heads, so each GPU keeps all of it. With per-layer attention types: the full, sparse and
// window layers' bytes per token (KvGroups has them apart, and the state).
double kv_bytes_per_token_per_gpu(const ModelSpec& model, int64_t tp);

// The cache of one sequence on one GPU of a TP group, by layer group: full and sparse layers keep
// every token (sparse layers also their indexer keys, which every GPU holds whole), sliding-window
// layers the last `window` tokens, linear-attention layers a fixed state (its heads split tp ways).
struct KvGroups {
  double full_bytes_per_token = 0;
  double window_bytes_per_token = 0;
  int64_t window = 0;               // tokens the window layers keep; 0 = none
  double state_bytes = 0;           // per sequence
  bool hybrid() const { return window_bytes_per_token > 0 || state_bytes > 0; }
  // One sequence of `tokens` tokens: full x tokens + window x min(tokens, window) + state.
  double bytes(double tokens) const;
};
KvGroups kv_groups_per_gpu(const ModelSpec& model, int64_t tp);
// Tokens per sequence that `batch` sequences can hold in `bytes` (fractional; the window layers'
// part stops growing at the window; 0 when the states alone do not fit).
double kv_tokens_that_fit(const KvGroups& groups, double bytes, int64_t batch);
// Weight bytes resident on each GPU: column/row-parallel projections split tp ways, replicated KV
// heads, MLA's low-rank down projections, router gates and norms whole, experts split
// tensor-parallel (each expert's MLP width tp ways), embedding and LM head vocab-parallel. Linear
// layers at weight_bytes, the rest at activation_bytes. With expert parallelism over
// `expert_parallel` GPUs, `tp` is the attention TP of each data-parallel rank (every rank holds its
// own copy of the attention, dense MLPs, shared experts, embedding and LM head, split tp ways) and
// each GPU holds (routed experts + redundant_experts) / expert_parallel whole routed experts.
double weight_bytes_per_gpu(const ModelSpec& model, int64_t tp, int64_t expert_parallel = 1,
                            int64_t redundant_experts = 0);

// ---- Roofline and the decode speed limit (servesim estimate) -------------------------------------

double arithmetic_intensity(double flops, double bytes);  // FLOP/byte
// The roofline itself: min(peak, bandwidth x intensity), the FLOP/s a kernel of that intensity can
// reach.
double attainable_flops(double peak_flops, double bandwidth_bytes_per_s, double intensity);
// The notes' batched-decode intensity, B x 2N / (weight bytes + B L kv): B sequences of context L,
// `flops_per_token` (2N) each, the weights read once per step. With 16-bit weights (weight bytes =
// 2P) it is the notes' 2PB / (2P + B L kv).
double decode_intensity(double flops_per_token, double weight_bytes, int64_t batch, int64_t context,
                        double kv_bytes_per_token);
// Its limit as B grows, 2N / (L kv): the ceiling the KV reads set.
double saturated_decode_intensity(double flops_per_token, int64_t context, double kv_bytes_per_token);
// Batch at which KV reads equal weight reads, weight bytes / (L kv).
double decode_crossover_batch(double weight_bytes, int64_t context, double kv_bytes_per_token);
// Time to stream the weights once: the floor under any decode step.
double weight_read_seconds(double weight_bytes, double bandwidth_bytes_per_s);
// One sequence's tokens per second when each token must read all weights: bandwidth / bytes.
double decode_ceiling_tokens_per_s(double weight_bytes, double bandwidth_bytes_per_s);

// ---- FLOP counts ---------------------------------------------------------------------------------

// The notes' matmul estimate for a prompt of `tokens` tokens, 2 P L, of which a prefix-cache hit
// rate skips (1 - hit_rate).
double prefill_flops(double params, int64_t tokens, double prefix_hit_rate = 0.0);

// ---- Cost and utilisation ------------------------------------------------------------------------

// Utilisation of one iteration of a TP group of `tp` GPUs (StepCost totals are group-wide). MFU is
// against the peak of the precision each FLOP ran at (StepCost::peak_flop_seconds).
double step_mfu(const StepCost& cost, int64_t tp);
double step_mbu(const StepCost& cost, const GpuSpec& gpu, int64_t tp);

}  // namespace servesim::hwmodels
