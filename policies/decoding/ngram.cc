// ngram: prompt-lookup decoding (vLLM's "ngram" method). The last few tokens are looked up in the
// request's context; when they occur earlier, the tokens that followed them there are proposed (k
// of them). No model runs, so drafting costs nothing; whether a step finds a match depends on how
// repetitive the request's output is (summaries, code edits and retrieval answers copy their
// prompt), which the workload says ([workload] repetition, per request), and the matched drafts
// are accepted per `acceptance`. A step without a match decodes one token and verifies nothing.
#include "policies/decoding/decoding_method.h"

#include "sim/core/format.h"

namespace servesim::policies {
namespace {

class Ngram final : public DecodingMethod {
 public:
  Ngram(DraftSchedule schedule, Acceptance acceptance, double match_rate)
      : DecodingMethod("ngram", std::move(schedule), std::move(acceptance)), match_rate_(match_rate) {}
  int64_t propose(const sim::Request& r, int64_t k, core::Rng& rng) const override {
    const double match = r.repetition >= 0 ? r.repetition : match_rate_;
    return rng.uniform() < match ? k : 0;
  }

 private:
  double match_rate_;
};

const bool kRegistered = decoding_registry().add(
    {"ngram",
     "prompt lookup: drafts copied from earlier n-gram matches in the context, no model cost; a step finds a "
     "match with the request's repetition (from the workload)",
     with_speculation_params({
         core::ParamSpec::real("match_rate", 0, "probability",
                               "chance a step finds a match, for requests whose workload gives no repetition")
             .range(0, 1)
             .optional(),
     })},
    [](const core::Params& p, const DecodingContext& ctx) -> std::unique_ptr<DecodingMethod> {
      if (!ctx.workload_repetition && !p.has("match_rate"))
        p.fail("match_rate",
               "missing: prompt lookup finds matches as often as the workload repeats itself; set "
               "workload.repetition (how often a step's next tokens repeat an n-gram of the context) or "
               "decoding.match_rate");
      DraftSchedule schedule = schedule_from(p);
      Acceptance acceptance = acceptance_from(p, schedule);
      return std::make_unique<Ngram>(std::move(schedule), std::move(acceptance),
                                     p.has("match_rate") ? p.get_float("match_rate") : 0.0);
    });

}  // namespace
}  // namespace servesim::policies
