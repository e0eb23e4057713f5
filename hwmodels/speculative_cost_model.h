#pragma once
// The step cost of speculative decoding: the target's forward pass (verifying draft tokens, costed by
// the target's own cost model from BatchShape::decode_extra_*) plus the drafter's passes in the same
// iteration (BatchShape::draft_*), each costed by a cost model of the drafter: a draft model, an
// EAGLE-style draft head or the model's multi-token-prediction modules. A decorator, as the
// calibration-residual one is meant to be: both halves stay pure functions of the shape.
//
// The drafter's passes, as engines run them after the rejection sampler (vLLM V1, SGLang):
//   pass 1       the tokens the target has just made final: every prefill chunk (the drafter keeps
//                its own KV of the prompt) and, per decode, its accepted tokens when the drafter
//                reads the target's hidden states (heads, MTP: BatchShape::draft_catchup_*), else
//                the one new token; it proposes each sequence's first draft;
//   passes 2..k  one token per sequence (draft_seqs), each proposing the next draft.
// Each pass is launched as the engine launches a batch of its size (CUDA graphs or eager).

#include <memory>

#include "hwmodels/cost_model.h"
#include "hwmodels/engine/engine_model.h"

namespace servesim::hwmodels {

// The drafter's pass `pass` (1-based) of an iteration of shape `s`, before the engine prepares its
// launch. Exposed for tests.
BatchShape draft_pass_shape(const BatchShape& s, int64_t pass);

class SpeculativeCostModel final : public StepCostModel {
 public:
  // `drafter` may be null (n-gram drafting: no model runs); `engine` may be null (every pass eager).
  SpeculativeCostModel(std::unique_ptr<StepCostModel> target, std::unique_ptr<StepCostModel> drafter,
                       const EngineModel* engine);

  StepCost step(const BatchShape& shape) const override;
  const ModelSpec& model() const override { return target_->model(); }
  const GpuSpec& gpu() const override { return target_->gpu(); }
  int64_t tensor_parallel() const override { return target_->tensor_parallel(); }

  const StepCostModel& target() const { return *target_; }
  const StepCostModel* drafter() const { return drafter_.get(); }
  // The drafter's share of step(shape): its passes alone.
  StepCost draft_cost(const BatchShape& shape) const;

 private:
  std::unique_ptr<StepCostModel> target_;
  std::unique_ptr<StepCostModel> drafter_;
  const EngineModel* engine_;
};

}  // namespace servesim::hwmodels
