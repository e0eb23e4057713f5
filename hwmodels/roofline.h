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

// 2 x layers x kv heads x head dim x bytes x tokens x batch: the cache of `batch` sequences of
// `tokens` tokens each.
double kv_cache_bytes(const ModelSpec& model, int64_t tokens, int64_t batch);
// Tokens per sequence that `batch` sequences can hold in `bytes` of cache (fractional).
double kv_tokens_that_fit(const ModelSpec& model, double bytes, int64_t batch);

// ---- Tensor parallelism ------------------------------------------------------------------------

// "" when the model can be split `tp` ways (tp divides the query heads and the MLP and expert widths,
// and the KV heads either split evenly or are replicated whole); otherwise a sentence saying why not.
std::string tp_problem(const ModelSpec& model, int64_t tp);
// KV heads each GPU of a TP group holds: num_kv_heads / tp, or 1 (replicated) when tp exceeds them.
int64_t kv_heads_per_gpu(const ModelSpec& model, int64_t tp);
// KV-cache bytes one token occupies on each GPU of the group (all layers). MLA's latent is shared by
// all heads, so each GPU keeps all of it.
double kv_bytes_per_token_per_gpu(const ModelSpec& model, int64_t tp);
// Weight bytes resident on each GPU: column/row-parallel projections split tp ways, replicated KV
// heads, MLA's low-rank down projections, router gates and norms whole, experts split
// tensor-parallel (each expert's MLP width tp ways; expert parallelism is not modelled), embedding
// and LM head vocab-parallel. Linear layers at weight_bytes, the rest at activation_bytes.
double weight_bytes_per_gpu(const ModelSpec& model, int64_t tp);

// ---- Roofline and the decode speed limit --------------------------------------------------------

double arithmetic_intensity(double flops, double bytes);  // FLOP/byte
// The roofline itself: min(peak, bandwidth x intensity), the FLOP/s a kernel of that intensity can
// reach.
double attainable_flops(double peak_flops, double bandwidth_bytes_per_s, double intensity);
// The notes' batched-decode intensity 2PB / (2P + B L kv): B sequences of mean context L tokens,
// P parameters in half precision (2P weight bytes), kv bytes per token of cache.
double decode_intensity(double params, int64_t batch, int64_t context, double kv_bytes_per_token);
// Its limit as B grows, 2P / (L kv): the ceiling the KV reads set.
double saturated_decode_intensity(double params, int64_t context, double kv_bytes_per_token);
// Batch at which KV reads equal weight reads, 2P / (L kv).
double decode_crossover_batch(double params, int64_t context, double kv_bytes_per_token);
// Time to stream the weights once: the floor under any decode step.
double weight_read_seconds(double weight_bytes, double bandwidth_bytes_per_s);
// One sequence's tokens per second when each token must read all weights: bandwidth / bytes.
double decode_ceiling_tokens_per_s(double weight_bytes, double bandwidth_bytes_per_s);

// ---- FLOP counts ---------------------------------------------------------------------------------

// The notes' attention count 4 S^2 (heads x head_dim) x layers: QK^T and PV over a full (non-causal)
// S x S score matrix. A causal kernel does about half.
double full_attention_flops(const ModelSpec& model, int64_t seq);
// The notes' matmul estimate for a prompt of `tokens` tokens, 2 P L, of which a prefix-cache hit
// rate skips (1 - hit_rate).
double prefill_flops(double params, int64_t tokens, double prefix_hit_rate = 0.0);

// ---- Cost and utilisation ------------------------------------------------------------------------

// price / (tokens/s x 3600) x 1e6.
double usd_per_million_tokens(double price_usd_per_hour, double tokens_per_s);
// Achieved FLOP/s over peak.
double mfu(double achieved_flops_per_s, double peak_flops);
// The notes' training MFU: tokens/s x 6N / peak.
double training_mfu(double tokens_per_s, double params, double peak_flops);
// Achieved bytes/s over peak bandwidth.
double mbu(double achieved_bytes_per_s, double bandwidth_bytes_per_s);
// Utilisation of one iteration of a TP group of `tp` GPUs (StepCost totals are group-wide).
double step_mfu(const StepCost& cost, const GpuSpec& gpu, int64_t tp);
double step_mbu(const StepCost& cost, const GpuSpec& gpu, int64_t tp);

}  // namespace servesim::hwmodels
