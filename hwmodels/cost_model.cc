#include "hwmodels/cost_model.h"

#include <algorithm>

namespace servesim::hwmodels {

CostModelRegistry& cost_model_registry() {
  static CostModelRegistry r("cost_models", "step cost models: iteration shape -> time, FLOPs, bytes");
  return r;
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
