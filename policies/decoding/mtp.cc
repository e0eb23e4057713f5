// mtp: the model's own multi-token-prediction modules (DeepSeek-V3: config.json
// num_nextn_predict_layers = 1) as the drafter. A module is one more block of the model's own
// architecture (MLA attention and a routed-expert MLP for DeepSeek-V3) behind a fusion projection of
// [token embedding; the target's hidden state], with the target's embedding and LM head. k passes
// use the modules in turn (one module reused k times when there is one, as vLLM and SGLang do);
// each module keeps its own KV. Engines load the modules only to speculate with them, so their
// weights count against the KV budget only here.
#include "hwmodels/model_spec.h"
#include "policies/decoding/decoding_method.h"

namespace servesim::policies {
namespace {

class Mtp final : public DecodingMethod {
 public:
  Mtp(DraftSchedule schedule, Acceptance acceptance, Drafter drafter)
      : DecodingMethod("mtp", std::move(schedule), std::move(acceptance)) {
    drafter_ = std::move(drafter);
  }
};

const bool kRegistered = decoding_registry().add(
    {"mtp",
     "the model's multi-token-prediction modules (config.json num_nextn_predict_layers) draft k tokens in k "
     "passes; k defaults to the number of modules",
     with_speculation_params({
         core::ParamSpec::integer("modules", 0, "modules",
                                  "MTP modules loaded; unset = all the model has (num_nextn_predict_layers)")
             .range(1, 64)
             .optional(),
     })},
    [](const core::Params& p, const DecodingContext& ctx) -> std::unique_ptr<DecodingMethod> {
      if (!ctx.target) throw core::Error("internal: mtp needs the target model");
      const hwmodels::ModelSpec& t = *ctx.target;
      if (t.mtp_layers <= 0)
        p.fail(p.has("modules") ? "modules" : "kind",
               "model '" + t.name +
                   "' has no multi-token-prediction modules (its config.json gives no num_nextn_predict_layers); "
                   "use kind = \"draft_head\" (an EAGLE-style head) or kind = \"draft_model\"");
      const int64_t modules = p.has("modules") ? p.get_int("modules") : t.mtp_layers;
      if (modules > t.mtp_layers)
        p.fail("modules", std::to_string(modules) + " modules, but model '" + t.name + "' has " +
                              std::to_string(t.mtp_layers) + " (num_nextn_predict_layers)");
      Drafter d;
      hwmodels::ModelSpec& m = d.spec;
      m = t;
      m.name = t.name + "-mtp";
      m.num_layers = 1;    // one module per pass
      m.dense_layers = 0;  // a module's block has the model's MoE MLP (DeepSeek-V3's layer 61)
      m.mtp_layers = 0;
      m.draft_head = true;
      use_full_attention(m);  // modelled as full attention, whatever the model's layer types
      d.shares_vocab_weights = true;
      d.reads_hidden_states = true;
      d.kv_layers = modules;
      DraftSchedule schedule = schedule_from(p, modules);
      Acceptance acceptance = acceptance_from(p, schedule);
      return std::make_unique<Mtp>(std::move(schedule), std::move(acceptance), std::move(d));
    });

}  // namespace
}  // namespace servesim::policies
