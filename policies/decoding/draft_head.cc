// draft_head: an EAGLE-style draft head. Each pass fuses [token embedding; the target's hidden state]
// (a 2h x h projection) and runs `layers` decoder layers of the target's width, then the target's
// LM head; k sequential passes propose k tokens. It keeps KV for its own layers, reads the target's
// embedding and LM head (no copy), and its first pass of an iteration re-reads every accepted
// position (it needs the target's hidden states there), as vLLM's and SGLang's EAGLE proposers do.
#include "hwmodels/model_spec.h"
#include "policies/decoding/decoding_method.h"

namespace servesim::policies {
namespace {

class DraftHead final : public DecodingMethod {
 public:
  DraftHead(DraftSchedule schedule, Acceptance acceptance, Drafter drafter)
      : DecodingMethod("draft_head", std::move(schedule), std::move(acceptance)) {
    drafter_ = std::move(drafter);
  }
};

const bool kRegistered = decoding_registry().add(
    {"draft_head",
     "EAGLE-style draft head: a fusion projection and decoder layer(s) on the target's hidden state, k "
     "sequential passes through the target's LM head",
     with_speculation_params({
         core::ParamSpec::integer("layers", 1, "layers", "decoder layers of the head (EAGLE: 1)").range(1, 64),
         core::ParamSpec::integer("intermediate_size", 0, "",
                                  "MLP width of the head's dense layers; unset = the target's intermediate_size")
             .range(1, static_cast<double>(hwmodels::kMaxModelDim))
             .optional(),
     })},
    [](const core::Params& p, const DecodingContext& ctx) -> std::unique_ptr<DecodingMethod> {
      if (!ctx.target) throw core::Error("internal: draft_head needs the target model");
      Drafter d;
      hwmodels::ModelSpec& m = d.spec;
      m = *ctx.target;
      m.name = ctx.target->name + "-eagle-head";
      m.num_layers = p.get_int("layers");
      // A dense head in 16-bit weights, whatever the target's MLP and storage.
      m.num_experts = m.experts_per_token = m.moe_intermediate_size = m.num_shared_experts = m.dense_layers = 0;
      m.expert_weight_dtype.reset();
      m.expert_weight_bytes = 0;
      use_full_attention(m);
      if (p.has("intermediate_size")) m.intermediate_size = p.get_int("intermediate_size");
      m.weight_dtype = hwmodels::DType::kBf16;
      m.weight_bytes = m.activation_bytes;
      m.mtp_layers = 0;
      m.draft_head = true;
      d.shares_vocab_weights = true;
      d.reads_hidden_states = true;
      d.kv_layers = m.num_layers;
      DraftSchedule schedule = schedule_from(p);
      Acceptance acceptance = acceptance_from(p, schedule);
      return std::make_unique<DraftHead>(std::move(schedule), std::move(acceptance), std::move(d));
    });

}  // namespace
}  // namespace servesim::policies
