#include "traces/renewal_generator.h"

namespace servesim::traces {

std::vector<core::ParamSpec> generator_params(std::vector<core::ParamSpec> own) {
  own.push_back(prompt_section_spec());
  own.push_back(output_section_spec());
  return with_common_params(std::move(own));
}

void require_generator_limit(const core::Params& p) {
  if (!p.has("max_requests") && !p.has("window_end_s"))
    p.fail("max_requests", "a generator needs max_requests or window_end_s, otherwise it never ends");
}

}  // namespace servesim::traces
