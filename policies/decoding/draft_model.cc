// draft_model: a separate, smaller model of the same vocabulary drafts k tokens, one decode pass
// each, and keeps its own KV cache beside the target's (vLLM's speculative_config "model", classic
// speculative sampling). Its weights and KV come out of the replica's memory; its passes are costed
// by the run's cost model applied to its architecture ([decoding.model]: a preset, or kind =
// "hf_config" with its config.json), at the target's tensor parallelism.
#include "hwmodels/model_spec.h"
#include "policies/decoding/decoding_method.h"

namespace servesim::policies {
namespace {

class DraftModel final : public DecodingMethod {
 public:
  DraftModel(DraftSchedule schedule, Acceptance acceptance, Drafter drafter)
      : DecodingMethod("draft_model", std::move(schedule), std::move(acceptance)) {
    drafter_ = std::move(drafter);
  }
};

const bool kRegistered = decoding_registry().add(
    {"draft_model",
     "a separate small draft model (its own weights, KV and step cost) proposes k tokens in k decode passes; "
     "the target verifies them in one pass",
     with_speculation_params({core::ParamSpec::section(
         "model", "models", "",
         "the draft model: a preset or kind = \"hf_config\" (any field overridable); it must share the target's "
         "vocabulary")})},
    [](const core::Params& p, const DecodingContext& ctx) -> std::unique_ptr<DecodingMethod> {
      const core::Params& mp = p.section("model");
      Drafter d;
      d.spec = *hwmodels::model_registry().make(mp);
      d.kv_layers = d.spec.num_layers;
      if (!d.spec.uniform_full())
        mp.fail("kind", "a draft model with sliding-window, linear or sparse attention layers is not modelled "
                        "(its passes are costed as full attention); describe it with full attention layers");
      if (ctx.target && d.spec.vocab_size != ctx.target->vocab_size)
        mp.fail("vocab_size", "the draft model's vocabulary (" + std::to_string(d.spec.vocab_size) +
                                  " tokens) differs from the target's (" + std::to_string(ctx.target->vocab_size) +
                                  "): a draft model proposes the target's token ids, so it shares its tokenizer; "
                                  "set vocab_size = " + std::to_string(ctx.target->vocab_size) +
                                  " in [decoding.model] to describe such a draft");
      DraftSchedule schedule = schedule_from(p);
      Acceptance acceptance = acceptance_from(p, schedule);
      return std::make_unique<DraftModel>(std::move(schedule), std::move(acceptance), std::move(d));
    });

}  // namespace
}  // namespace servesim::policies
