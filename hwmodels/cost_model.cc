#include "hwmodels/cost_model.h"

#include <algorithm>
#include <cmath>

namespace servesim::hwmodels {

CostModelRegistry& cost_model_registry() {
  static CostModelRegistry r("cost_models", "step cost models: iteration shape -> time, FLOPs, bytes");
  return r;
}

void StepCostModel::decode_steps(const BatchShape& shape, int64_t stride, int count, StepCost* out) const {
  BatchShape s = shape;
  for (int j = 0; j < count; ++j, s.decode_context_tokens += stride) out[j] = step(s);
}

BatchShape busiest_rank(const BatchShape& s, int64_t ranks) {
  if (ranks <= 1) return s;
  auto ceil_div = [&](int64_t n) { return (n + ranks - 1) / ranks; };
  // `part` of `total`, scaled by the fraction of the sequences the rank holds, rounded up.
  auto scaled = [](int64_t total, int64_t part_seqs, int64_t seqs) {
    if (seqs == 0) return int64_t{0};
    return static_cast<int64_t>(std::ceil(static_cast<double>(total) * static_cast<double>(part_seqs) /
                                          static_cast<double>(seqs)));
  };
  BatchShape r = s;
  r.prefill_seqs = ceil_div(s.prefill_seqs);
  r.prefill_tokens = scaled(s.prefill_tokens, r.prefill_seqs, s.prefill_seqs);
  r.prefill_logits = std::min(r.prefill_seqs, s.prefill_logits);
  r.prefill_context_tokens = scaled(s.prefill_context_tokens, r.prefill_seqs, s.prefill_seqs);
  r.prefill_attention_pairs = scaled(s.prefill_attention_pairs, r.prefill_seqs, s.prefill_seqs);
  r.prefill_window_pairs = scaled(s.prefill_window_pairs, r.prefill_seqs, s.prefill_seqs);
  r.prefill_window_context_tokens = scaled(s.prefill_window_context_tokens, r.prefill_seqs, s.prefill_seqs);
  r.prefill_sparse_pairs = scaled(s.prefill_sparse_pairs, r.prefill_seqs, s.prefill_seqs);
  r.decode_seqs = ceil_div(s.decode_seqs);
  r.decode_context_tokens = scaled(s.decode_context_tokens, r.decode_seqs, s.decode_seqs);
  r.decode_window_context_tokens = scaled(s.decode_window_context_tokens, r.decode_seqs, s.decode_seqs);
  r.decode_sparse_context_tokens = scaled(s.decode_sparse_context_tokens, r.decode_seqs, s.decode_seqs);
  // Speculative decoding: the drafts verified with those decodes.
  r.decode_extra_tokens = scaled(s.decode_extra_tokens, r.decode_seqs, s.decode_seqs);
  r.decode_extra_pairs = scaled(s.decode_extra_pairs, r.decode_seqs, s.decode_seqs);
  r.decode_extra_window_pairs = scaled(s.decode_extra_window_pairs, r.decode_seqs, s.decode_seqs);
  r.decode_extra_sparse_pairs = scaled(s.decode_extra_sparse_pairs, r.decode_seqs, s.decode_seqs);
  return r;
}

double all_to_all_step_seconds(const AllToAllTime& a, double scaleout_s) {
  const double comm = a.fixed_s + std::max(a.nvlink_s, scaleout_s);
  return a.overlapped ? std::max(a.compute_s, comm) : a.compute_s + comm;
}

}  // namespace servesim::hwmodels

namespace servesim::hwmodels {

namespace {
// Sum of min(x, cap) for x = 1 .. n.
int64_t capped_triangle(int64_t n, int64_t cap) {
  if (n <= cap) return n * (n + 1) / 2;
  return cap * (cap + 1) / 2 + (n - cap) * cap;
}
}  // namespace

int64_t capped_pairs(int64_t prior, int64_t tokens, int64_t cap) {
  return capped_triangle(prior + tokens, cap) - capped_triangle(prior, cap);
}

void add_prefill_chunk(BatchShape& s, const AttentionLimits& limits, int64_t prior, int64_t tokens, bool completes) {
  s.prefill_seqs += 1;
  s.prefill_tokens += tokens;
  s.prefill_context_tokens += prior;
  s.prefill_attention_pairs += tokens * prior + tokens * (tokens + 1) / 2;
  if (completes) s.prefill_logits += 1;
  if (limits.window > 0) {
    s.prefill_window_pairs += capped_pairs(prior, tokens, limits.window);
    s.prefill_window_context_tokens += std::min(prior, limits.window - 1);
  }
  if (limits.topk > 0) s.prefill_sparse_pairs += capped_pairs(prior, tokens, limits.topk);
}

void add_decodes(BatchShape& s, const AttentionLimits& limits, int64_t seqs, int64_t context) {
  s.decode_seqs += seqs;
  s.decode_context_tokens += seqs * context;
  if (limits.window > 0) s.decode_window_context_tokens += seqs * std::min(context, limits.window);
  if (limits.topk > 0) s.decode_sparse_context_tokens += seqs * std::min(context, limits.topk);
}

}  // namespace servesim::hwmodels
