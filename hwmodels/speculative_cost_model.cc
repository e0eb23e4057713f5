#include "hwmodels/speculative_cost_model.h"

#include "sim/core/error.h"

namespace servesim::hwmodels {

BatchShape draft_pass_shape(const BatchShape& s, int64_t pass) {
  BatchShape p;
  if (pass == 1) {
    p.prefill_seqs = s.prefill_seqs;
    p.prefill_tokens = s.prefill_tokens;
    p.prefill_context_tokens = s.prefill_context_tokens;
    p.prefill_attention_pairs = s.prefill_attention_pairs;
    // Only prompts that are complete propose a draft, and only when the iteration proposes.
    p.prefill_logits = s.draft_seqs > 0 ? s.prefill_logits : 0;
    p.decode_seqs = s.decode_seqs;
    p.decode_context_tokens = s.decode_context_tokens;
    p.decode_extra_tokens = s.draft_catchup_tokens;
    p.decode_extra_pairs = s.draft_catchup_pairs;
    p.decode_extra_logits = false;
    return p;
  }
  p.decode_seqs = s.draft_seqs;
  p.decode_context_tokens = s.draft_context_tokens + (pass - 2) * s.draft_seqs;
  return p;
}

SpeculativeCostModel::SpeculativeCostModel(std::unique_ptr<StepCostModel> target, std::unique_ptr<StepCostModel> drafter,
                                           const EngineModel* engine)
    : target_(std::move(target)), drafter_(std::move(drafter)), engine_(engine) {
  if (!target_) throw core::Error("internal: a speculative cost model needs the target's");
}

StepCost SpeculativeCostModel::draft_cost(const BatchShape& shape) const {
  StepCost total;
  if (!drafter_) return total;
  for (int64_t pass = 1; pass <= shape.draft_passes; ++pass) {
    BatchShape p = draft_pass_shape(shape, pass);
    if (p.empty()) continue;
    if (engine_) engine_->prepare(p);
    const StepCost c = drafter_->step(p);
    total.seconds += c.seconds;
    total.flops += c.flops;
    total.bytes += c.bytes;
    total.peak_flop_seconds += c.peak_flop_seconds;
  }
  return total;
}

StepCost SpeculativeCostModel::step(const BatchShape& shape) const {
  StepCost total = target_->step(shape);
  if (shape.draft_passes > 0 && drafter_) {
    const StepCost d = draft_cost(shape);
    total.seconds += d.seconds;
    total.flops += d.flops;
    total.bytes += d.bytes;
    total.peak_flop_seconds += d.peak_flop_seconds;
  }
  return total;
}

}  // namespace servesim::hwmodels
