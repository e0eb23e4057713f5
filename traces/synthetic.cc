// Kind "synthetic": requests whose prompt and output lengths come from length distributions (fixed,
// uniform, lognormal, or empirical: the rows of a trace or a length file, sampled or replayed in
// order), sent by any arrival process. With a poisson arrival it draws exactly what the `poisson`
// kind draws for the same seed.

#include <memory>

#include "traces/composed_source.h"
#include "traces/length_distribution.h"
#include "traces/workload_common.h"

namespace servesim::traces {
namespace {

class LengthContent final : public RequestContent {
 public:
  LengthContent(const core::Params& p, uint64_t seed) : lengths_(p, seed) {}
  void fill(uint64_t /*n*/, RequestSpec& out) override {
    lengths_.sample(out.prompt_tokens, out.output_tokens);
    out.block_hashes.clear();
    out.hashed_tokens = 0;
    out.session = 0;
  }

 private:
  LengthPair lengths_;
};

const bool kRegistered = workload_registry().add(
    {"synthetic",
     "requests with prompt and output lengths from length distributions (an empirical one reads a trace or a "
     "JSON/JSONL/CSV length file), sent as [workload.arrival] says",
     composed_params({prompt_section_spec(), output_section_spec()})},
    [](const core::Params& p, uint64_t run_seed) -> std::unique_ptr<ArrivalSource> {
      const uint64_t seed = workload_seed(p, run_seed);
      return std::make_unique<ComposedSource>(p, seed, std::make_unique<LengthContent>(p, seed));
    });

}  // namespace
}  // namespace servesim::traces
